// The published radix-bench hit rates are a property of the workloads: an unbounded tree must
// reproduce them exactly. Also checks the budgeted agents trace against its targets, in
// first-come order (through a better policy) and in cache-aware order.
#include <gtest/gtest.h>

#include "bench/radix_traces.h"
#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

const std::unique_ptr<Tokenizer> testing_tokenizer = MakeByteTokenizer();

std::unique_ptr<Model> TraceModel() {
  ModelConfig c;  // the smallest model with the traces' vocabulary: hit counting, not quality
  c.vocab_size = bench::kTraceVocab;
  c.hidden_size = 8;
  c.n_layers = 1;
  c.n_heads = c.n_kv_heads = 1;
  c.head_dim = 8;
  c.ffn_size = 8;
  c.context_length = 1024;
  return *Model::Synthetic(c, 1);
}

struct Replay {
  size_t reused = 0, total = 0;
};

Replay ReplayTrace(const Model& model, const bench::Trace& trace, RadixTreeOptions opt, bool cache_aware) {
  RadixTree tree(model, *testing_tokenizer, opt);
  std::vector<std::span<const int32_t>> waiting(trace.requests.begin(), trace.requests.end());
  Replay out;
  while (!waiting.empty()) {
    const size_t pick = cache_aware ? NextCacheAware(tree, waiting) : 0;
    std::span<const int32_t> req = waiting[pick];
    waiting.erase(waiting.begin() + pick);
    out.reused += tree.MatchLength(req);  // looked up before the request is inserted
    out.total += req.size();
    LookupResult r = tree.Lookup(req);
    EXPECT_OK(model.Prefill(&r.cache, req.subspan(r.matched_tokens), LogitsMode::kNone));
    EXPECT_OK(tree.Insert(req, r.cache));
  }
  return out;
}

TEST(RadixTraces, UnboundedHitRatesEqualThePublishedFigures) {
  auto model = TraceModel();
  for (const bench::Trace& t : bench::AllTraces()) {
    Replay r = ReplayTrace(*model, t, {}, false);
    EXPECT_EQ(r.reused, t.published_reused) << t.name;
    EXPECT_EQ(r.total, t.published_total) << t.name;
  }
}

TEST(RadixTraces, AgentsUnderBudgetMeetTargets) {
  auto model = TraceModel();
  const bench::Trace agents = bench::Agents();
  RadixTreeOptions opt;
  opt.budget_bytes = bench::LongestRequest(agents) * 3 / 2 * RadixTree(*model, *testing_tokenizer).BytesPerToken();
  opt.policy = EvictionPolicy::kLru;
  Replay lru = ReplayTrace(*model, agents, opt, false);
  opt.policy = EvictionPolicy::kDeepestFirst;
  Replay deepest = ReplayTrace(*model, agents, opt, false);
  opt.policy = EvictionPolicy::kLru;
  Replay aware = ReplayTrace(*model, agents, opt, true);
  std::printf("[agents @1.5x budget] lru first-come %.1f%%, deepest-first first-come %.1f%%, lru cache-aware %.1f%%\n",
              100.0 * lru.reused / lru.total, 100.0 * deepest.reused / deepest.total, 100.0 * aware.reused / aware.total);
  EXPECT_GE(100.0 * deepest.reused / deepest.total, 75.0);
  EXPECT_EQ(aware.reused, agents.published_reused);  // 86.7%: every reusable token
}

}  // namespace
}  // namespace fak
