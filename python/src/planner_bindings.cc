// fak.Planner: the agent entry point — continue a conversation with prefix reuse, write-time
// screening of tool results, and a signed certificate for every quarantined one.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include <optional>

#include "bindings.h"
#include "py_session.h"

namespace fak::python {

namespace {

// A planner with what it borrows: the model, its blob store.
struct PyPlanner {
  ModelRef model;
  std::shared_ptr<BlobStore> blobs;
  std::unique_ptr<Planner> planner;
};

SegmentKind KindOfRole(const std::string& role) {
  if (role == "tool") return SegmentKind::kToolResult;
  return ParseSegmentKind(role);
}

Conversation ParseConversation(const nb::handle& messages, const std::string& tenant) {
  Conversation conv{tenant, {}};
  size_t i = 0;
  for (nb::handle item : messages) {
    const std::string where = "messages[" + std::to_string(i++) + "]";
    if (!nb::isinstance<nb::dict>(item))
      throw StatusError(InvalidArgument(where + ": expected a dict {role, content}"));
    nb::dict d = nb::borrow<nb::dict>(item);
    if (!d.contains("role") || !d.contains("content"))
      throw StatusError(InvalidArgument(where + ": needs 'role' and 'content'"));
    conv.messages.push_back(Message{KindOfRole(Utf8Of(d["role"], where + ".role")), Utf8Of(d["content"], where + ".content")});
  }
  return conv;
}

nb::str Utf8(const std::string& bytes) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

}  // namespace

void BindPlanner(nb::module_& m) {
  nb::class_<PyPlanner>(m, "Planner",
                        "Continues conversations: renders them with the model's chat template, reuses cached "
                        "prefixes, screens tool results at write time (a quarantined one is evicted, certified and "
                        "sealed), decodes. complete() may run from several threads at once.")
      .def(nb::new_([](ModelRef model, const Text& journal_path, std::shared_ptr<BlobStore> blobs,
                       const std::optional<Text>& key_path, const std::shared_ptr<ScreenChain>& chain,
                       size_t tree_budget_bytes) {
             if (!model) throw StatusError(InvalidArgument("Planner: model is None"));
             auto p = std::make_unique<PyPlanner>();
             p->model = std::move(model);
             p->blobs = blobs ? std::move(blobs) : std::shared_ptr<BlobStore>(MakeMemoryBlobStore());
             SigningKey key = ValueOrThrow(SigningKey::Generate());
             if (key_path) {
               std::error_code ec;
               if (std::filesystem::exists(key_path->str(), ec)) {
                 key = ValueOrThrow(SigningKey::LoadPem(*key_path));
               } else {
                 ThrowIfError(key.SavePem(*key_path));
               }
             }
             PlannerOptions o;
             o.journal_path = journal_path;
             o.chat_template = p->model->chat_template;
             // A copy: later changes to the caller's chain cannot race with screening.
             if (chain) o.chain = std::make_shared<const ScreenChain>(*chain);
             o.tree.budget_bytes = tree_budget_bytes;
             p->planner = ValueOrThrow(Planner::Create(*p->model->model, p->model->RequireTokenizer(), std::move(key),
                                                       *p->blobs, std::move(o)));
             return p;
           }),
           nb::arg("model"), nb::arg("journal_path"), nb::kw_only(), nb::arg("blobs") = nb::none(),
           nb::arg("key_path") = nb::none(), nb::arg("chain") = nb::none(), nb::arg("tree_budget_bytes") = 0,
           "journal_path: the deletion journal (created). blobs: where message texts live (default: in memory). "
           "key_path: ed25519 PEM key (created when absent; None: a fresh key). chain: default the built-in "
           "ScreenChain.")
      .def_prop_ro("public_key", [](const PyPlanner& p) { return p.planner->public_key().Hex(); })
      .def_prop_ro("journal_path", [](PyPlanner& p) { return p.planner->journal().path(); })
      .def(
          "complete",
          [](PyPlanner& p, const nb::handle& messages, const Text& tenant, size_t max_tokens, double temperature,
             size_t top_k, double top_p, double repeat_penalty, uint64_t seed, const std::vector<Text>& stop,
             const std::optional<nb::callable>& on_text, const Text& session) {
            const Conversation conv = ParseConversation(messages, tenant);
            CompleteParams params;
            params.generate.max_new_tokens = max_tokens;
            params.generate.sampling = ValueOrThrow(SamplingParams::FromDoubles(temperature, top_k, top_p, repeat_penalty, seed));
            params.stop = Strings(stop);
            params.session = session;
            std::optional<nb::python_error> callback_error;
            if (on_text) {
              // Complete waits here with the GIL released while the engine's step thread streams the
              // pieces; take the GIL back for each.
              params.on_text = [&](std::string_view piece) {
                nb::gil_scoped_acquire acquire;
                try {
                  nb::object keep_going = (*on_text)(Utf8(std::string(piece)));
                  return keep_going.is_none() || nb::cast<bool>(keep_going);
                } catch (nb::python_error& e) {
                  callback_error.emplace(std::move(e));
                  return false;
                }
              };
            }
            Result<CompleteResult> done = [&] {
              nb::gil_scoped_release release;
              return p.planner->Complete(conv, params);
            }();
            if (callback_error) throw std::move(*callback_error);
            CompleteResult r = ValueOrThrow(std::move(done));
            nb::dict d;
            d["text"] = Utf8(r.text);
            d["tokens"] = r.generated;
            d["finish_reason"] = std::string(FinishReasonName(r.finish));
            d["context_tokens"] = r.context_tokens;
            d["reused_tokens"] = r.reused_tokens;
            d["prefilled_tokens"] = r.prefilled_tokens;
            d["gate"] = r.gate.ToString();
            d["prefill_ms"] = r.prefill_ms;
            d["decode_ms"] = r.decode_ms;
            nb::list outcomes;
            for (const MessageOutcome& o : r.messages) {
              nb::dict od;
              od["source_digest"] = o.source_digest.Hex();
              od["verdict"] = VerdictDict(o.verdict);
              od["sealed"] = o.sealed;
              od["reused"] = o.reused;
              outcomes.append(od);
            }
            d["messages"] = outcomes;
            nb::list certs;
            for (DeletionCertificate& c : r.certificates) {
              PyCertificate pc;
              pc.cert = std::move(c);
              pc.journal_path = p.planner->journal().path();
              certs.append(nb::cast(std::move(pc)));
            }
            d["certificates"] = certs;
            return d;
          },
          nb::arg("messages"), nb::kw_only(), nb::arg("tenant") = "default", nb::arg("max_tokens") = 64,
          nb::arg("temperature") = 0.0, nb::arg("top_k") = 0, nb::arg("top_p") = 1.0,
          nb::arg("repeat_penalty") = 1.0, nb::arg("seed") = 0, nb::arg("stop") = std::vector<std::string>{},
          nb::arg("on_text") = nb::none(), nb::arg("session") = "",
          "Continues [{'role': system|user|assistant|tool, 'content'}, ...]. on_text(piece) streams the reply (return "
          "False to stop). Returns {text, tokens, finish_reason, reused_tokens, prefilled_tokens, messages: "
          "[{source_digest, verdict, sealed, reused}], certificates: [Certificate], ...}.")
      .def(
          "evict_message",
          [](PyPlanner& p, const nb::handle& messages, size_t index, const Text& reason,
             const Text& tenant, const Text& session) {
            const Conversation conv = ParseConversation(messages, tenant);
            PyCertificate out;
            {
              nb::gil_scoped_release release;
              out.cert = ValueOrThrow(p.planner->EvictMessage(conv, index, reason, session));
            }
            out.journal_path = p.planner->journal().path();
            return out;
          },
          nb::arg("messages"), nb::arg("index"), nb::arg("reason"), nb::kw_only(), nb::arg("tenant") = "default",
          nb::arg("session") = "",
          "User-requested deletion (e.g. right to erasure) of messages[index]: evicted exactly, certified, then "
          "sealed everywhere like a quarantined tool result. Returns the Certificate.")
      .def_static(
          "sealed_stub",
          [](const Text& digest) { return Planner::SealedStub(ValueOrThrow(Digest::FromHex(digest))); },
          nb::arg("digest"), "The text that replaces a quarantined message: names its digest, none of its bytes.")
      .def(
          "release_session",
          [](PyPlanner& p, const Text& tenant, const Text& session) {
            ThrowIfError(p.planner->ReleaseSession(tenant, session));
          },
          nb::arg("tenant"), nb::arg("session"))
      .def("tree_stats", [](PyPlanner& p) { return TreeStatsDict(p.planner->tree().Stats()); })
      .def(
          "gate_stats", [](PyPlanner& p) { return p.planner->tree().GateStatistics().ToString(); },
          "The gate's nonzero counters, one per line.");
}

}  // namespace fak::python
