// fak.Session (one sequence's KV cache as named segments: prefill, decode, clone, prefix, evict
// with a signed certificate), fak.Auditor (journal + signing key) and fak.Certificate.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "bindings.h"
#include "py_session.h"

namespace fak::python {

// ---- Auditor ----

std::shared_ptr<PyAuditor> PyAuditor::Open(const std::string& journal_path,
                                           const std::optional<std::string>& key_path) {
  auto auditor = std::shared_ptr<PyAuditor>(new PyAuditor());
  auditor->journal_ = ValueOrThrow(Journal::Open(journal_path));
  if (!key_path) {
    auditor->key_ = ValueOrThrow(SigningKey::Generate());
  } else {
    std::error_code ec;
    if (std::filesystem::exists(*key_path, ec)) {
      auditor->key_ = ValueOrThrow(SigningKey::LoadPem(*key_path));
    } else {
      auditor->key_ = ValueOrThrow(SigningKey::Generate());
      ThrowIfError(auditor->key_->SavePem(*key_path));
    }
  }
  return auditor;
}

// ---- Certificate ----

bool PyCertificate::Verify(const nb::object& public_key, const std::optional<Text>& journal) const {
  CertificateCheck check = Check(public_key, journal);
  ThrowIfError(check.ToStatus());
  return true;
}

CertificateCheck PyCertificate::Check(const nb::object& public_key, const std::optional<Text>& journal) const {
  const PublicKey key = public_key.is_none() ? cert.issuer_public_key : ParsePublicKey(public_key);
  const std::string path = journal ? journal->str() : journal_path;
  if (path.empty()) {
    throw StatusError(InvalidArgument("Certificate.verify: the certificate names no journal; pass journal=PATH"));
  }
  nb::gil_scoped_release release;
  // Re-read the journal from disk: an edit made since issuing must fail verification.
  Result<std::vector<JournalRow>> rows = ReadJournalRows(path);
  if (!rows.has_value())
    return CertificateCheck{CertificateFault::kJournalBroken, rows.error().ToString(), std::nullopt};
  const PublicKey trusted[1] = {key};
  return VerifyDeletionCertificate(cert, *rows, trusted);
}

// ---- Session ----

PySession::PySession(ModelRef model, std::shared_ptr<PyAuditor> auditor, KVMemory memory)
    : model_(std::move(model)), auditor_(std::move(auditor)) {
  ledger_.emplace(*model_->model, memory);
}

PySession::PySession(ModelRef model, std::shared_ptr<PyAuditor> auditor, SegmentLedger ledger, size_t next_id)
    : model_(std::move(model)), auditor_(std::move(auditor)), next_id_(next_id) {
  ledger_.emplace(std::move(ledger));
}

SegmentLedger& PySession::Ledger() {
  if (!ledger_) throw StatusError(FailedPrecondition("session is closed"));
  return *ledger_;
}

std::vector<SegmentSpec> PySession::Specs(const SegmentLedger& ledger) {
  std::vector<SegmentSpec> specs;
  for (const Segment& s : ledger.segments()) specs.push_back(SegmentSpec{s.id, s.kind, s.tokens, s.source_digest});
  return specs;
}

std::vector<float> PySession::Prefill(std::vector<int32_t> tokens, const Digest& source, std::string id,
                                      SegmentKind kind) {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  if (id.empty()) id = NextId(ledger);
  return ValueOrThrow(ledger.Append(SegmentSpec{std::move(id), kind, std::move(tokens), source}));
}

std::vector<float> PySession::Decode(int32_t token) {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  if (ledger.segments().empty()) {
    const int32_t one[1] = {token};
    return ValueOrThrow(
        ledger.Append(SegmentSpec{NextId(ledger), SegmentKind::kUser, {token}, Digest::Of(one, sizeof(one))}));
  }
  return ValueOrThrow(ledger.ExtendLast(std::span<const int32_t>(&token, 1)));
}

std::string PySession::NextId(const SegmentLedger& ledger) {
  std::string id;
  do id = "s" + std::to_string(next_id_++);
  while (ledger.Find(id) != nullptr);
  return id;
}

std::vector<int32_t> PySession::Generate(const std::vector<int32_t>& prompt, size_t max_tokens,
                                         const SamplingParams& sampling, const std::vector<int32_t>& stop_tokens,
                                         const std::function<bool()>& keep_going) {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  if (prompt.empty()) throw StatusError(InvalidArgument("generate: prompt is empty"));
  // Checked before the prompt is appended, so a refused call leaves the session as it was.
  ThrowIfError(CheckGenerationRoom(model_->model->config().context_length, ledger.cache().size() + prompt.size(),
                                   max_tokens));
  GenerateParams params;
  params.max_new_tokens = max_tokens;
  params.stop_tokens = stop_tokens;
  params.sampling = sampling;
  Generation generation = ValueOrThrow(Generation::Create(std::move(params), /*stop_strings=*/{}, /*tokenizer=*/nullptr));
  std::vector<float> logits = ValueOrThrow(ledger.Append(SegmentSpec{
      NextId(ledger), SegmentKind::kUser, prompt, Digest::Of(prompt.data(), prompt.size() * sizeof(int32_t))}));
  const std::span<const int32_t> context = ledger.cache().tokens();
  const Status run = generation.Run(
      std::move(logits), std::vector<int32_t>(context.begin(), context.end()),
      [&](int32_t token) { return ledger.ExtendLast(std::span<const int32_t>(&token, 1)); },
      [&](const GenerationStep&) { return !keep_going || keep_going(); });
  if (!run.ok())
    throw StatusError(run.WithContext("generate after " + std::to_string(generation.tokens().size()) + " tokens: "));
  return generation.tokens();
}

std::unique_ptr<PySession> PySession::Clone() {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  SegmentLedger copy = ValueOrThrow(SegmentLedger::Adopt(*model_->model, ledger.cache().Clone(), Specs(ledger)));
  return std::unique_ptr<PySession>(new PySession(model_, auditor_, std::move(copy), next_id_));
}

std::unique_ptr<PySession> PySession::Prefix(size_t n) {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  KVCache cache = ValueOrThrow(ledger.cache().Prefix(n));
  std::vector<SegmentSpec> specs;
  for (const Segment& s : ledger.segments()) {
    if (s.from >= n) break;
    SegmentSpec spec{s.id, s.kind, s.tokens, s.source_digest};
    spec.tokens.resize(std::min(s.tokens.size(), n - s.from));  // the segment the cut falls in
    specs.push_back(std::move(spec));
  }
  SegmentLedger cut = ValueOrThrow(SegmentLedger::Adopt(*model_->model, std::move(cache), std::move(specs)));
  return std::unique_ptr<PySession>(new PySession(model_, auditor_, std::move(cut), next_id_));
}

PyCertificate PySession::Evict(const std::string& id, Repair repair, const std::string& reason) {
  std::lock_guard lock(mu_);
  SegmentLedger& ledger = Ledger();
  if (!auditor_) {
    throw StatusError(
        FailedPrecondition("Session.evict issues a signed certificate: create the session with "
                           "auditor=fak.Auditor(journal_path)"));
  }
  const Segment* seg = ledger.Find(id);
  if (seg == nullptr) throw StatusError(NotFound("no segment '" + id + "' in this session"));
  const SegmentSpec evicted{seg->id, seg->kind, seg->tokens, seg->source_digest};
  // Work on a copy so that a refused eviction or a failed certificate leaves the session as it was.
  SegmentLedger work = ValueOrThrow(SegmentLedger::Adopt(*model_->model, ledger.cache().Clone(), Specs(ledger)));
  EvictionReport report = ValueOrThrow(work.Evict(id, repair));
  PyCertificate out;
  {
    std::lock_guard audit(auditor_->mu_);
    IssueOptions options;
    options.reason = reason;
    out.cert = ValueOrThrow(IssueDeletionCertificate(*model_->model, work, evicted, report, auditor_->journal_.get(),
                                                     *auditor_->key_, options));
    out.journal_path = auditor_->journal_->path();
  }
  out.n_rerotated = report.n_rerotated;
  out.n_recomputed = report.n_recomputed;
  ledger_.emplace(std::move(work));
  return out;
}

void PySession::Close() {
  std::lock_guard lock(mu_);
  ledger_.reset();
  lease_ = Lease();
}

void PySession::HoldLease(std::shared_ptr<void> owner, Lease lease) {
  std::lock_guard lock(mu_);
  lease_ = std::move(lease);
  lease_owner_ = std::move(owner);
}

namespace {

// Runs `f(session)` with the GIL released and the session's lock taken inside it (never the other
// way round, so a thread waiting for the lock never holds the GIL).
template <class F>
auto Released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// Ctrl-C during a long generate. Python runs signal handlers only between bytecodes, so the token
// loop (which runs without the GIL) asks for them itself: with the GIL, on the main thread (the only
// one that runs them), at most every kInterval, so that other Python threads do not slow every
// token. A handler that raises (KeyboardInterrupt) stops the generation after the current token.
class SignalCheck {
 public:
  static constexpr std::chrono::milliseconds kInterval{20};

  SignalCheck() : main_thread_(PyThread_get_thread_ident() == MainThreadId()) {}

  // Without the GIL: false once a handler has raised.
  bool KeepGoing() {
    if (!main_thread_ || raised_) return !raised_;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < kInterval) return true;
    last_ = now;
    nb::gil_scoped_acquire gil;
    raised_ = PyErr_CheckSignals() != 0;
    return !raised_;
  }

  // With the GIL: rethrows what the handler raised, carrying the tokens generated (the session
  // holds all but the last, as after any finish).
  void RaiseIfInterrupted(const std::vector<int32_t>& tokens) {
    if (!raised_) return;
    PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);  // a handler's PyErr_SetNone leaves no instance
    if (value != nullptr && PyErr_GivenExceptionMatches(value, PyExc_KeyboardInterrupt)) {
      nb::setattr(value, "tokens", nb::cast(tokens));
    }
    PyErr_Restore(type, value, traceback);
    throw nb::python_error();
  }

 private:
  static unsigned long MainThreadId() {
    static const unsigned long id =
        nb::cast<unsigned long>(nb::module_::import_("threading").attr("main_thread")().attr("ident"));
    return id;
  }

  const bool main_thread_;
  bool raised_ = false;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

Repair ParseRepair(const std::string& name) {
  if (name == "exact") return Repair::kRequireExact;
  if (name == "recompute_tail") return Repair::kRecomputeTail;
  throw StatusError(InvalidArgument(
      "repair: expected 'exact' or 'recompute_tail' (a certificate needs an exact eviction), got '" + name + "'"));
}

Digest TokensDigest(const std::vector<int32_t>& tokens) {
  return Digest::Of(tokens.data(), tokens.size() * sizeof(int32_t));
}

}  // namespace

void BindSession(nb::module_& m) {
  nb::class_<PyAuditor>(m, "Auditor",
                        "The journal deletions are recorded in and the ed25519 key certificates are signed with. "
                        "Thread-safe; one opener per journal file.")
      .def(nb::new_([](const Text& journal_path, const std::optional<Text>& key_path) {
             return PyAuditor::Open(journal_path, Strings(key_path));
           }),
           nb::arg("journal_path"), nb::arg("key_path") = nb::none(),
           "Opens (creating) the journal. key_path: a PKCS#8 PEM ed25519 key, created (mode 0600) when absent; "
           "None: a fresh key for this process only.")
      .def_prop_ro("public_key", [](const PyAuditor& a) { return a.key_->public_key().Hex(); })
      .def_prop_ro("journal_path", [](const PyAuditor& a) { return a.journal_->path(); })
      .def_prop_ro("journal_rows", [](PyAuditor& a) {
        std::lock_guard lock(a.mu_);
        return a.journal_->rows().size();
      });

  nb::class_<PyCertificate>(m, "Certificate",
                            "A signed deletion certificate: an exact eviction bound to a journal row (docs/audit.md).")
      .def_prop_ro(
          "subject", [](const PyCertificate& c) { return c.cert.subject.Hex(); },
          "sha256 of the deleted content (the segment's source digest).")
      .def_prop_ro("segment_id", [](const PyCertificate& c) { return c.cert.segment_id; })
      .def_prop_ro("span", [](const PyCertificate& c) { return std::make_tuple(c.cert.span_from, c.cert.span_len); })
      .def_prop_ro("evicted_count", [](const PyCertificate& c) { return c.cert.evicted_count; })
      .def_prop_ro("max_abs_delta", [](const PyCertificate& c) { return c.cert.max_abs_delta; })
      .def_prop_ro("cache_digest_before", [](const PyCertificate& c) { return c.cert.cache_digest_before.Hex(); })
      .def_prop_ro("cache_digest_after", [](const PyCertificate& c) { return c.cert.cache_digest_after.Hex(); })
      .def_prop_ro("never_saw_digest", [](const PyCertificate& c) { return c.cert.never_saw_digest.Hex(); })
      .def_prop_ro("model_digest", [](const PyCertificate& c) { return c.cert.model_digest.Hex(); })
      .def_prop_ro("journal_seq", [](const PyCertificate& c) { return c.cert.journal_seq; })
      .def_prop_ro("issuer_public_key", [](const PyCertificate& c) { return c.cert.issuer_public_key.Hex(); })
      .def_prop_ro("scope", [](const PyCertificate& c) { return c.cert.scope; })
      .def_prop_ro("journal_path", [](const PyCertificate& c) { return c.journal_path; })
      .def_prop_ro("n_rerotated", [](const PyCertificate& c) { return c.n_rerotated; })
      .def_prop_ro("n_recomputed", [](const PyCertificate& c) { return c.n_recomputed; })
      .def("to_json", [](const PyCertificate& c) { return ValueOrThrow(c.cert.ToJson()); })
      .def_static(
          "from_json",
          [](const Text& json, const Text& journal_path) {
            PyCertificate c;
            c.cert = ValueOrThrow(DeletionCertificate::FromJson(json));
            c.journal_path = journal_path;
            return c;
          },
          nb::arg("json"), nb::arg("journal_path") = "")
      .def("verify", &PyCertificate::Verify, nb::arg("public_key") = nb::none(), nb::arg("journal") = nb::none(),
           "Re-reads the journal and checks signature (by public_key: hex or 32 bytes; None trusts the issuer key "
           "the certificate names), witness, chain, row and count. True, or raises VerificationFailedError naming "
           "the fault.")
      .def(
          "check",
          [](const PyCertificate& c, const nb::object& key, const std::optional<Text>& journal) {
            CertificateCheck check = c.Check(key, journal);
            return std::make_tuple(std::string(CertificateFaultName(check.fault)), check.detail);
          },
          nb::arg("public_key") = nb::none(), nb::arg("journal") = nb::none(),
          "verify without raising: (fault, detail), fault 'none' when it verifies.");

  nb::class_<PySession>(m, "Session",
                        "One sequence's KV cache, laid out as named segments. Calls from several threads are "
                        "serialised; compute runs without the GIL.")
      .def(nb::new_([](ModelRef model, std::shared_ptr<PyAuditor> auditor, bool sliding_window) {
             if (!model) throw StatusError(InvalidArgument("Session: model is None"));
             return std::make_unique<PySession>(std::move(model), std::move(auditor),
                                                sliding_window ? KVMemory::kSlidingWindow : KVMemory::kFull);
           }),
           nb::arg("model"), nb::arg("auditor") = nb::none(), nb::arg("sliding_window") = false,
           "sliding_window=True: the model's sliding-window layers (Gemma 3) keep only their window of KV — "
           "same logits, memory that stops growing with the context; a prefix or eviction reaching back past "
           "the window raises (evict rebuilds from the segments' tokens instead).")
      .def(
          "prefill",
          [](PySession& s, const nb::handle& input, const std::optional<Text>& segment,
             const Text& kind) {
            std::vector<int32_t> tokens;
            Digest source;
            if (nb::isinstance<nb::str>(input)) {
              const std::string text = Utf8Of(input, "prefill: text");
              tokens = ValueOrThrow(s.model()->RequireTokenizer().Encode(text));
              source = Digest::Of(text);
            } else {
              tokens = TokensOf(input, "prefill");
              source = TokensDigest(tokens);
            }
            const SegmentKind k = ParseSegmentKind(kind);
            std::vector<float> logits =
                Released([&] { return s.Prefill(std::move(tokens), source, segment ? segment->str() : std::string(), k); });
            return LogitsArray(std::move(logits));
          },
          nb::arg("tokens"), nb::arg("segment") = nb::none(), nb::arg("kind") = "user",
          "Appends text (str, tokenized; its sha256 is the segment's source digest) or token ids as one new segment "
          "(named `segment`, default s0, s1, ...) in one batch; returns the next-token logits, float32 [vocab].")
      .def(
          "decode",
          [](PySession& s, int32_t token) {
            std::vector<float> logits = Released([&] { return s.Decode(token); });
            return LogitsArray(std::move(logits));
          },
          nb::arg("token"), "Appends one token to the last segment; returns the next-token logits, float32 [vocab].")
      .def(
          "generate",
          [](PySession& s, const std::vector<int32_t>& prompt, size_t max_tokens, double temperature, size_t top_k,
             double top_p, double repeat_penalty, uint64_t seed, const std::optional<std::vector<int32_t>>& stop_tokens) {
            const SamplingParams sp = ValueOrThrow(SamplingParams::FromDoubles(temperature, top_k, top_p, repeat_penalty, seed));
            std::vector<int32_t> stops =
                stop_tokens ? *stop_tokens
                            : (s.model()->tokenizer
                                   ? EndOfGenerationTokens(*s.model()->tokenizer, s.model()->chat_template.get())
                                   : std::vector<int32_t>{});
            SignalCheck signals;
            std::vector<int32_t> tokens;
            try {
              tokens = Released([&] { return s.Generate(prompt, max_tokens, sp, stops, [&] { return signals.KeepGoing(); }); });
            } catch (const StatusError&) {
              signals.RaiseIfInterrupted({});  // a Ctrl-C seen before the error wins
              throw;
            }
            signals.RaiseIfInterrupted(tokens);
            return tokens;
          },
          nb::arg("prompt"), nb::arg("max_tokens") = 64, nb::arg("temperature") = 0.0, nb::arg("top_k") = 0,
          nb::arg("top_p") = 1.0, nb::arg("repeat_penalty") = 1.0, nb::arg("seed") = 0,
          nb::arg("stop_tokens") = nb::none(),
          "Prefills prompt as a new segment and samples up to max_tokens (appended to it), as the engine's "
          "requests do; returns the generated ids (a stop token included). stop_tokens default: EOS and the "
          "template's end-of-turn ids. A max_tokens past the context raises ResourceExhaustedError before "
          "anything runs. Ctrl-C (SIGINT) stops it after the current token and raises KeyboardInterrupt, whose "
          "`tokens` holds the ids generated; the session keeps the prompt and every generated token but the last, "
          "as after any finish.")
      .def(
          "clone", [](PySession& s) { return Released([&] { return s.Clone(); }); },
          "A deep copy (cost: the whole cache).")
      .def(
          "prefix", [](PySession& s, size_t n) { return Released([&] { return s.Prefix(n); }); }, nb::arg("n"),
          "A copy of the first n tokens (the segment the cut falls in is shortened).")
      .def(
          "evict",
          [](PySession& s, const Text& segment, const Text& repair, const Text& reason) {
            const Repair r = ParseRepair(repair);
            return Released([&] { return s.Evict(segment, r, reason); });
          },
          nb::arg("segment"), nb::arg("repair") = "exact", nb::arg("reason") = "",
          "Removes a segment exactly and returns its signed Certificate. repair='exact' refuses unless nothing "
          "after it attended to it (it is the tail); 'recompute_tail' re-prefills the later segments. On any "
          "failure the session is unchanged.")
      .def(
          "close", [](PySession& s) { Released([&] { s.Close(); }); }, "Frees the cache; later calls raise.")
      .def_prop_ro("closed", &PySession::closed)
      .def("__len__", [](PySession& s) { return s.With([](const SegmentLedger& l) { return l.cache().size(); }); })
      .def_prop_ro("tokens",
                   [](PySession& s) {
                     return s.With([](const SegmentLedger& l) {
                       return std::vector<int32_t>(l.cache().tokens().begin(), l.cache().tokens().end());
                     });
                   })
      .def_prop_ro("size_bytes",
                   [](PySession& s) { return s.With([](const SegmentLedger& l) { return l.cache().size_bytes(); }); })
      .def_prop_ro("allocated_bytes",
                   [](PySession& s) { return s.With([](const SegmentLedger& l) { return l.cache().allocated_bytes(); }); })
      .def(
          "digest",
          [](PySession& s) {
            return Released(
                [&] { return s.With([](const SegmentLedger& l) { return l.cache().ComputeDigest().Hex(); }); });
          },
          "sha256 over the cache's positions and K, Kraw, V.")
      .def_prop_ro("segments",
                   [](PySession& s) {
                     nb::list out;
                     s.With([&](const SegmentLedger& l) {
                       for (const Segment& seg : l.segments()) {
                         nb::dict d;
                         d["id"] = seg.id;
                         d["kind"] = std::string(SegmentKindName(seg.kind));
                         d["start"] = seg.from;
                         d["n_tokens"] = seg.tokens.size();
                         d["source_digest"] = seg.source_digest.Hex();
                         out.append(d);
                       }
                       return 0;
                     });
                     return out;
                   })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PySession& s, nb::args) { Released([&] { s.Close(); }); });
}

}  // namespace fak::python
