// The text store from Python: fak.BlobStore (content-addressed, memory or directory), fak.TextCorpus
// (source text by digest, token ids per tokenizer), fak.ScreenChain (admitters) and fak.RecallStore
// (transcripts saved as text, re-screened and rebuilt into a Session).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "fak/screen/file_denylist.h"
#include "py_session.h"

namespace fak::python {

nb::dict VerdictDict(const Verdict& v) {
  nb::dict d;
  d["action"] = v.action == Verdict::Action::kAdmit        ? "admit"
                : v.action == Verdict::Action::kQuarantine ? "quarantine"
                                                           : "unavailable";
  d["detector"] = v.detector;
  d["reason"] = v.reason;
  return d;
}

namespace {

Digest ParseDigest(const std::string& hex) { return ValueOrThrow(Digest::FromHex(hex)); }

std::string BytesOf(const nb::handle& data) {
  if (nb::isinstance<nb::bytes>(data)) {
    nb::bytes b = nb::borrow<nb::bytes>(data);
    return std::string(b.c_str(), b.size());
  }
  if (nb::isinstance<nb::str>(data)) return Utf8Of(data, "data");
  throw StatusError(InvalidArgument("expected str or bytes"));
}

nb::bytes ToBytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// A corpus over a store it keeps alive.
struct PyCorpus {
  std::shared_ptr<BlobStore> store;
  std::unique_ptr<TextCorpus> corpus;
};

std::vector<RecallSegment> ParseSegments(const nb::handle& segments) {
  std::vector<RecallSegment> out;
  size_t i = 0;
  for (nb::handle item : segments) {
    const std::string where = "segments[" + std::to_string(i++) + "]";
    if (!nb::isinstance<nb::dict>(item))
      throw StatusError(InvalidArgument(where + ": expected a dict {id, kind, text}"));
    nb::dict d = nb::borrow<nb::dict>(item);
    for (const char* key : {"id", "kind", "text"})
      if (!d.contains(key)) throw StatusError(InvalidArgument(where + ": no '" + key + "'"));
    out.push_back(RecallSegment{Utf8Of(d["id"], where + ".id"), ParseSegmentKind(Utf8Of(d["kind"], where + ".kind")),
                                Utf8Of(d["text"], where + ".text")});
  }
  return out;
}

// A copy of the caller's chain (or the built-in one): the call screens without the GIL, and the
// caller's chain may meanwhile gain admitters from another thread.
std::shared_ptr<const ScreenChain> ChainOr(const std::shared_ptr<ScreenChain>& chain) {
  if (chain) return std::make_shared<const ScreenChain>(*chain);
  return std::make_shared<const ScreenChain>(ScreenChain::Default());
}

}  // namespace

void BindStore(nb::module_& m) {
  nb::class_<BlobStore>(m, "BlobStore",
                        "Content-addressed blobs (sha256 is the identity; every read is verified). Thread-safe.")
      .def_static(
          "memory",
          [](uint64_t capacity_bytes) {
            BlobStoreOptions o;
            o.capacity_bytes = capacity_bytes;
            return std::shared_ptr<BlobStore>(MakeMemoryBlobStore(o));
          },
          nb::arg("capacity_bytes") = uint64_t{1} << 30)
      .def_static(
          "open",
          [](const Text& dir, uint64_t capacity_bytes, bool sync) {
            BlobStoreOptions o;
            o.capacity_bytes = capacity_bytes;
            o.sync = sync;
            nb::gil_scoped_release release;
            return std::shared_ptr<BlobStore>(ValueOrThrow(OpenDirectoryBlobStore(dir, o)));
          },
          nb::arg("dir"), nb::arg("capacity_bytes") = uint64_t{1} << 30, nb::arg("sync") = true,
          "A directory store: atomic, fsync'd writes; survives process death (docs/store.md).")
      .def(
          "put", [](BlobStore& s, const nb::handle& data) { return ValueOrThrow(s.Put(BytesOf(data))).Hex(); },
          nb::arg("data"), "Stores bytes (str: its UTF-8); returns the hex sha256.")
      .def(
          "get",
          [](BlobStore& s, const Text& digest) { return ToBytes(ValueOrThrow(s.Get(ParseDigest(digest)))); },
          nb::arg("digest"))
      .def("__contains__",
           [](BlobStore& s, const Text& digest) { return ValueOrThrow(s.Contains(ParseDigest(digest))); })
      .def("pin", [](BlobStore& s, const Text& digest) { ThrowIfError(s.Pin(ParseDigest(digest))); })
      .def("unpin", [](BlobStore& s, const Text& digest) { ThrowIfError(s.Unpin(ParseDigest(digest))); })
      .def("remove", [](BlobStore& s, const Text& digest) { ThrowIfError(s.Remove(ParseDigest(digest))); })
      .def("list",
           [](BlobStore& s) {
             std::vector<std::string> out;
             for (const Digest& d : ValueOrThrow(s.List())) out.push_back(d.Hex());
             return out;
           })
      .def_prop_ro("backend", [](const BlobStore& s) { return std::string(s.backend()); })
      .def("stats", [](const BlobStore& s) {
        const BlobStoreStats st = s.Stats();
        nb::dict d;
        d["n_blobs"] = st.n_blobs;
        d["n_pinned"] = st.n_pinned;
        d["size_bytes"] = st.size_bytes;
        d["capacity_bytes"] = st.capacity_bytes;
        d["n_puts"] = st.n_puts;
        d["n_dedup_hits"] = st.n_dedup_hits;
        d["n_gets"] = st.n_gets;
        d["n_evicted"] = st.n_evicted;
        d["n_verify_failures"] = st.n_verify_failures;
        return d;
      });

  nb::class_<PyCorpus>(m, "TextCorpus",
                       "Source texts by SourceDigest, with token ids cached per (SourceDigest, TokenizerID). "
                       "Thread-safe.")
      .def(nb::new_([](std::shared_ptr<BlobStore> store) {
             if (!store) throw StatusError(InvalidArgument("TextCorpus: store is None"));
             auto c = std::make_unique<PyCorpus>();
             c->corpus = std::make_unique<TextCorpus>(*store);
             c->store = std::move(store);
             return c;
           }),
           nb::arg("store"))
      .def(
          "put_source",
          [](PyCorpus& c, const nb::handle& text) { return ValueOrThrow(c.corpus->PutSource(BytesOf(text))).Hex(); },
          nb::arg("text"), "Stores a text; returns its SourceDigest (hex sha256 of its bytes).")
      .def(
          "get_source",
          [](PyCorpus& c, const Text& digest) {
            return ToBytes(ValueOrThrow(c.corpus->GetSource(ParseDigest(digest))));
          },
          nb::arg("digest"), "The verified bytes of a source.")
      .def(
          "remove_source",
          [](PyCorpus& c, const Text& digest) { ThrowIfError(c.corpus->RemoveSource(ParseDigest(digest))); },
          nb::arg("digest"), "Erases a text and every token list cached for it.")
      .def(
          "tokens",
          [](PyCorpus& c, const Text& digest, const ModelRef& model) {
            const Digest d = ParseDigest(digest);
            const Tokenizer& tok = model->RequireTokenizer();
            nb::gil_scoped_release release;
            return ValueOrThrow(c.corpus->Tokens(d, tok));
          },
          nb::arg("digest"), nb::arg("model"), "Token ids of a source under the model's tokenizer (cached).")
      .def("stats", [](const PyCorpus& c) {
        nb::dict d;
        d["token_hits"] = c.corpus->stats().token_hits;
        d["token_misses"] = c.corpus->stats().token_misses;
        return d;
      });

  nb::class_<ScreenChain>(m, "ScreenChain",
                          "Admitters that judge text before it enters a context: a digest denylist, then each "
                          "admitter in order. Configure it before handing it to a planner or store (they copy it).")
      .def(nb::new_([]() { return std::make_shared<ScreenChain>(); }), "An empty chain (its own empty denylist).")
      .def_static(
          "default", [] { return std::make_shared<ScreenChain>(ScreenChain::Default()); },
          "The built-in chain: denylist, prompt_injection, secrets.")
      .def(
          "add_phrases",
          [](ScreenChain& c, const Text& name, const std::vector<Text>& phrases) {
            ThrowIfError(c.Add(std::shared_ptr<const Admitter>(MakePhraseAdmitter(name, Strings(phrases)))));
          },
          nb::arg("name"), nb::arg("phrases"), "Adds an admitter quarantining text that contains any phrase.")
      .def(
          "deny",
          [](ScreenChain& c, const Text& digest, const Text& reason) {
            ThrowIfError(c.denylist().Add(ParseDigest(digest), reason));
          },
          nb::arg("digest"), nb::arg("reason"), "Lists a SourceDigest: text with it is quarantined whatever it says.")
      .def(
          "use_denylist_file",
          [](ScreenChain& c, const Text& path) {
            ThrowIfError(c.set_denylist(ValueOrThrow(FileDenylist::Open(path))));
          },
          nb::arg("path"),
          "Keeps the chain's denylist in a file (FileDenylist: created when absent, every seal fsynced), so "
          "what a planner seals stays sealed after a restart. Call before the chain is given to a planner "
          "(which copies it, sharing the list). Replaces the in-memory list and what it held.")
      .def(
          "screen",
          [](const ScreenChain& c, const nb::handle& text, const Text& kind) {
            const std::string bytes = BytesOf(text);
            return VerdictDict(c.Screen(ScreenInput{bytes, ParseSegmentKind(kind), std::nullopt}));
          },
          nb::arg("text"), nb::arg("kind") = "tool_result", "{action: admit|quarantine|unavailable, detector, reason}.")
      .def_prop_ro("id", [](const ScreenChain& c) { return c.id().Hex(); })
      .def("describe", &ScreenChain::Describe);

  nb::class_<RecallStore>(m, "RecallStore",
                          "Transcripts saved as text (blobs + an image per name), verified on load and re-screened "
                          "by the current chain. One opener per directory; thread-safe.")
      .def_static(
          "open",
          [](const Text& dir, bool sync) {
            RecallStoreOptions o;
            o.sync = sync;
            nb::gil_scoped_release release;
            return ValueOrThrow(RecallStore::Open(dir, o));
          },
          nb::arg("dir"), nb::arg("sync") = true)
      .def(
          "save",
          [](RecallStore& r, const Text& name, const nb::handle& segments,
             const std::shared_ptr<ScreenChain>& chain) {
            std::vector<RecallSegment> segs = ParseSegments(segments);
            std::shared_ptr<const ScreenChain> c = ChainOr(chain);
            nb::gil_scoped_release release;
            return ValueOrThrow(r.Save(name, segs, *c)).Hex();
          },
          nb::arg("name"), nb::arg("segments"), nb::arg("chain") = nb::none(),
          "Saves [{id, kind, text}, ...] as image `name` (texts first, all fsync'd); returns the image's sha256.")
      .def(
          "load",
          [](RecallStore& r, const Text& name, const std::shared_ptr<ScreenChain>& chain) {
            std::shared_ptr<const ScreenChain> c = ChainOr(chain);
            RecalledTranscript t = [&] {
              nb::gil_scoped_release release;
              return ValueOrThrow(r.Load(name, *c));
            }();
            nb::dict d;
            d["name"] = t.name;
            d["chain_changed"] = t.chain_changed();
            d["newly_quarantined"] = t.n_newly_quarantined();
            nb::list segs;
            for (const RecalledSegment& s : t.segments) {
              nb::dict sd;
              sd["id"] = s.id;
              sd["kind"] = std::string(SegmentKindName(s.kind));
              sd["text"] = s.text;
              sd["source_digest"] = s.source_digest.Hex();
              sd["recorded"] = VerdictDict(s.recorded);
              sd["current"] = VerdictDict(s.current);
              segs.append(sd);
            }
            d["segments"] = segs;
            return d;
          },
          nb::arg("name"), nb::arg("chain") = nb::none(),
          "Loads and verifies an image; every segment re-screened by `chain` (default: the built-in chain).")
      .def(
          "rebuild",
          [](RecallStore& r, const Text& name, const ModelRef& model, const std::shared_ptr<ScreenChain>& chain,
             const std::shared_ptr<PyAuditor>& auditor) {
            std::shared_ptr<const ScreenChain> c = ChainOr(chain);
            const Tokenizer& tok = model->RequireTokenizer();
            nb::gil_scoped_release release;
            RecalledTranscript t = ValueOrThrow(r.Load(name, *c));
            SegmentLedger ledger = ValueOrThrow(PrefillTranscript(*model->model, tok, t));
            return std::make_unique<PySession>(model, auditor, std::move(ledger), 0);
          },
          nb::arg("name"), nb::arg("model"), nb::arg("chain") = nb::none(), nb::arg("auditor") = nb::none(),
          "A Session rebuilt from a saved transcript's text (quarantined segments left out): KV = prefill(text).")
      .def("list_images", [](RecallStore& r) { return ValueOrThrow(r.ListImages()); })
      .def("remove_image", [](RecallStore& r, const Text& name) { ThrowIfError(r.RemoveImage(name)); })
      .def("collect_garbage", [](RecallStore& r) { return ValueOrThrow(r.CollectGarbage()); });
}

}  // namespace fak::python
