// fak.RadixTree: cross-session prefix reuse of one model's KV through the manifest gate, with its
// statistics; a lookup hands out a Session that reads the cached prefix in place.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "py_session.h"

namespace fak::python {

namespace {

// A tree over a model it keeps alive. Thread-safe (RadixTree is).
struct PyRadixTree {
  ModelRef model;
  std::unique_ptr<RadixTree> tree;
};

}  // namespace

void BindRadix(nb::module_& m) {
  nb::class_<PyRadixTree>(m, "RadixTree",
                          "Prefix reuse across sessions of one model: each node holds its own edge's KV once; "
                          "every lookup passes the manifest gate with the tenant. Thread-safe.")
      .def(nb::new_([](ModelRef model, size_t budget_bytes, const Text& policy) {
             if (!model) throw StatusError(InvalidArgument("RadixTree: model is None"));
             RadixTreeOptions o;
             o.budget_bytes = budget_bytes;
             o.policy = ParsePolicy(policy);
             auto t = std::make_shared<PyRadixTree>();
             t->tree = std::make_unique<RadixTree>(*model->model, model->RequireTokenizer(), std::move(o));
             t->model = std::move(model);
             return t;
           }),
           nb::arg("model"), nb::kw_only(), nb::arg("budget_bytes") = 0, nb::arg("policy") = "lru",
           "budget_bytes: resident KV kept after each insert (0: unbounded); policy: lru, lfu or deepest_first.")
      .def(
          "lookup",
          [](const std::shared_ptr<PyRadixTree>& t, const nb::handle& tokens, const Text& tenant,
             const std::shared_ptr<PyAuditor>& auditor) {
            std::vector<int32_t> ids = TokensOf(tokens, "lookup");
            if (ids.empty()) throw StatusError(InvalidArgument("lookup: no tokens: a lookup needs at least one token"));
            nb::gil_scoped_release release;
            LookupResult r = t->tree->Lookup(t->tree->ClaimFor(tenant), ids);
            std::vector<SegmentSpec> specs;
            if (r.matched_tokens > 0) {
              std::vector<int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(r.matched_tokens));
              const Digest source = Digest::Of(prefix.data(), prefix.size() * sizeof(int32_t));
              specs.push_back(SegmentSpec{"prefix", SegmentKind::kUser, std::move(prefix), source});
            }
            SegmentLedger ledger = ValueOrThrow(SegmentLedger::Adopt(*t->model->model, std::move(r.cache), std::move(specs)));
            auto session = std::make_unique<PySession>(t->model, auditor, std::move(ledger), 0);
            session->HoldLease(t, std::move(r.lease));
            return std::make_tuple(std::move(session), r.matched_tokens, r.gate.ToString());
          },
          nb::arg("tokens"), nb::arg("tenant") = "default", nb::arg("auditor") = nb::none(),
          "The longest cached prefix of tokens the gate admits for tenant (one token is always left to prefill): "
          "(session reading it in place, matched_tokens, gate verdict). Prefill tokens[matched_tokens:] next.")
      .def(
          "insert",
          [](PyRadixTree& t, PySession& session, const Text& tenant) {
            nb::gil_scoped_release release;
            ThrowIfError(session.With([&](const SegmentLedger& l) {
              return t.tree->Insert(tenant, l.cache().tokens(), l.cache());
            }));
          },
          nb::arg("session"), nb::arg("tenant") = "default",
          "Adds the session's whole context to tenant's namespace (then trims to the budget).")
      .def(
          "match_length",
          [](const PyRadixTree& t, const nb::handle& tokens, const Text& tenant) {
            return t.tree->MatchLength(TokensOf(tokens, "match_length"), tenant);
          },
          nb::arg("tokens"), nb::arg("tenant") = "default", "Cached prefix length, without touching the tree.")
      .def(
          "evict_to_budget",
          [](PyRadixTree& t, size_t budget_bytes) {
            nb::gil_scoped_release release;
            t.tree->EvictToBudget(budget_bytes);
          },
          nb::arg("budget_bytes"), "Trims unleased, unpinned tokens by the policy to the budget.")
      .def("stats", [](const PyRadixTree& t) { return TreeStatsDict(t.tree->Stats()); })
      .def("gate_stats", [](const PyRadixTree& t) { return GateStatsDict(t.tree->GateStatistics()); })
      .def_prop_ro("bytes_per_token", [](const PyRadixTree& t) { return t.tree->BytesPerToken(); });
}

}  // namespace fak::python
