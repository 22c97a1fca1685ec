// RadixTree: matching, splitting, memory accounting, leases, pinning, policies and concurrency.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

const std::unique_ptr<Tokenizer> testing_tokenizer = MakeByteTokenizer();

using testing::TokenSequence;

class RadixTreeTest : public ::testing::Test {
 protected:
  void SetUp() override { model_ = *Model::Synthetic(testing::TinyConfig(), 3); }
  // Serves `tokens` through `tree` as a request would: lookup, prefill the rest, insert.
  void Serve(RadixTree& tree, const std::vector<int32_t>& tokens) {
    LookupResult r = tree.Lookup(tokens);
    ASSERT_OK(model_->Prefill(&r.cache, std::span(tokens).subspan(r.matched_tokens), LogitsMode::kNone));
    ASSERT_OK(tree.Insert(tokens, r.cache));
  }
  std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  std::unique_ptr<Model> model_;
};

TEST_F(RadixTreeTest, StoresEachTokenOnceAndSplitsEdges) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto base = TokenSequence(20, 1, 97);
  Serve(tree, Concat(base, TokenSequence(10, 2, 97)));
  Serve(tree, Concat(base, TokenSequence(10, 3, 97)));
  RadixTreeStats s = tree.Stats();
  EXPECT_EQ(s.unique_tokens, 40u);
  EXPECT_EQ(s.node_count, 3u);  // shared 20 + two branches of 10
  EXPECT_EQ(s.resident_bytes, 40 * tree.BytesPerToken());
  EXPECT_EQ(s.hit_tokens, 20u);
  EXPECT_EQ(tree.MatchLength(Concat(base, TokenSequence(10, 2, 97))), 30u);
  // A lookup diverging mid-edge splits it: the match ends on a real node boundary.
  LookupResult r = tree.Lookup(Concat(std::vector<int32_t>(base.begin(), base.begin() + 7), TokenSequence(5, 9, 97)));
  EXPECT_EQ(r.matched_tokens, 7u);
  EXPECT_NE(r.node, 0u);
  EXPECT_EQ(tree.Stats().node_count, 4u);
  EXPECT_EQ(tree.Stats().resident_bytes, 40 * tree.BytesPerToken());
}

TEST_F(RadixTreeTest, RepeatedLookupsReturnIdenticalCaches) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto tokens = TokenSequence(30, 4, 97);
  Serve(tree, tokens);
  const Digest first = tree.Lookup(tokens).cache.ComputeDigest();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tree.Lookup(tokens).cache.ComputeDigest(), first);
  EXPECT_EQ(tree.Lookup(tokens).matched_tokens, 29u);  // one token always left to prefill
}

TEST_F(RadixTreeTest, InsertRejectsForeignOrMismatchedCaches) {
  RadixTree tree(*model_, *testing_tokenizer);
  auto other = *Model::Synthetic(testing::TinyConfig(4, 4, 16), 3);
  KVCache foreign = other->NewCache();
  ASSERT_OK(other->Prefill(&foreign, TokenSequence(5, 1, 97), LogitsMode::kNone));
  EXPECT_EQ(tree.Insert(TokenSequence(5, 1, 97), foreign).code(), StatusCode::kInvalidArgument);
  KVCache mine = model_->NewCache();
  ASSERT_OK(model_->Prefill(&mine, TokenSequence(5, 1, 97), LogitsMode::kNone));
  EXPECT_EQ(tree.Insert(TokenSequence(5, 2, 97), mine).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tree.Insert(TokenSequence(6, 1, 97), mine).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tree.Stats().unique_tokens, 0u);
}

TEST_F(RadixTreeTest, LeasedAndPinnedPathsSurviveBudgetPressure) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto a = TokenSequence(16, 1, 97), b = TokenSequence(16, 2, 97), c = TokenSequence(16, 3, 97);
  Serve(tree, a);
  Serve(tree, b);
  Serve(tree, c);
  LookupResult leased = tree.Lookup(a);  // oldest, but in flight
  ASSERT_OK(tree.SetPinned(*tree.FindNode(b), true));
  tree.EvictToBudget(0);
  // The lease covers the 15 tokens the session took (the lookup keeps one to prefill).
  EXPECT_EQ(tree.MatchLength(a), 15u);
  EXPECT_EQ(tree.MatchLength(b), 16u);
  EXPECT_EQ(tree.MatchLength(c), 0u);  // the only unprotected one went
  leased.lease = Lease();              // request done
  tree.EvictToBudget(0);
  EXPECT_EQ(tree.MatchLength(a), 0u);
  EXPECT_EQ(tree.MatchLength(b), 16u);
}

TEST_F(RadixTreeTest, LruEvictsTheOldestLeafAndCollapsesUpward) {
  RadixTreeOptions opt;
  opt.budget_bytes = 0;
  RadixTree tree(*model_, *testing_tokenizer, opt);
  const auto base = TokenSequence(8, 1, 97);
  Serve(tree, Concat(base, TokenSequence(8, 2, 97)));
  Serve(tree, Concat(base, TokenSequence(8, 3, 97)));
  (void)tree.Lookup(Concat(base, TokenSequence(9, 2, 97)));  // touch branch 2
  tree.EvictToBudget(16 * tree.BytesPerToken());
  EXPECT_EQ(tree.MatchLength(Concat(base, TokenSequence(8, 2, 97))), 16u);
  EXPECT_EQ(tree.MatchLength(Concat(base, TokenSequence(8, 3, 97))), 8u);
  tree.EvictToBudget(0);
  EXPECT_EQ(tree.Stats().unique_tokens, 0u);
  EXPECT_EQ(tree.Stats().resident_bytes, 0u);
}

TEST_F(RadixTreeTest, DeepestFirstTrimsTailsAndKeepsSharedPrefixes) {
  RadixTreeOptions opt;
  opt.policy = EvictionPolicy::kDeepestFirst;
  RadixTree tree(*model_, *testing_tokenizer, opt);
  const auto base = TokenSequence(8, 1, 97);
  Serve(tree, Concat(base, TokenSequence(12, 2, 97)));
  Serve(tree, Concat(base, TokenSequence(6, 3, 97)));
  tree.EvictToBudget(22 * tree.BytesPerToken());  // 26 resident: trim 4 from the deepest tail
  EXPECT_EQ(tree.MatchLength(Concat(base, TokenSequence(12, 2, 97))), 16u);
  EXPECT_EQ(tree.MatchLength(Concat(base, TokenSequence(6, 3, 97))), 14u);
  EXPECT_EQ(tree.Stats().resident_bytes, 22 * tree.BytesPerToken());
  // The trimmed node is bound anew: the gate serves what MatchLength reports, its bytes verify, and
  // the served prefix equals a fresh prefill of it.
  const auto request = Concat(base, TokenSequence(12, 2, 97));
  LookupResult r = tree.Lookup(request);
  EXPECT_TRUE(r.gate.hit()) << r.gate.ToString();
  EXPECT_EQ(r.matched_tokens, 16u);
  EXPECT_TRUE(tree.VerifyIntegrity().empty());
  KVCache fresh = model_->NewCache();
  ASSERT_OK(model_->Prefill(&fresh, std::span(request).first(16), LogitsMode::kNone));
  EXPECT_EQ(r.cache.ComputeDigest(), fresh.ComputeDigest());
}

// ProbeGate names the axis a claim would miss on, or the tenancy refusal, for a context the
// holder has resident, and changes nothing (no split, no statistics).
TEST_F(RadixTreeTest, ProbeGateNamesTheAxisAndChangesNothing) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto base = TokenSequence(20, 1, 97);
  const auto ctx = Concat(base, TokenSequence(10, 2, 97));
  LookupResult r = tree.Lookup(tree.ClaimFor("alice"), ctx);
  ASSERT_OK(model_->Prefill(&r.cache, ctx, LogitsMode::kNone));
  ASSERT_OK(tree.Insert("alice", ctx, r.cache));
  const RadixTreeStats before = tree.Stats();
  const GateStats gate_before = tree.GateStatistics();

  const GateProbe own = tree.ProbeGate(tree.ClaimFor("alice"), ctx, "alice");
  EXPECT_TRUE(own.verdict.hit()) << own.verdict.ToString();
  EXPECT_EQ(own.resident_tokens, 30u);
  EXPECT_EQ(own.admitted_tokens, 30u);
  // Another tenant's claim on alice's context: refused for tenancy before any axis is compared.
  const GateProbe foreign = tree.ProbeGate(tree.ClaimFor("bob"), ctx, "alice");
  EXPECT_EQ(foreign.verdict.outcome, ClaimOutcome::kRefuse);
  EXPECT_EQ(foreign.verdict.refuse_reason, RefuseReason::kCrossTenant);
  EXPECT_EQ(foreign.admitted_tokens, 0u);
  // Another model's claim: a miss on the model axis; another kernel tier: on precision.
  ResidentClaim other_model = tree.ClaimFor("alice");
  other_model.binding.model_id = Digest::Of("other weights");
  const GateProbe model_miss = tree.ProbeGate(other_model, ctx, "alice");
  EXPECT_EQ(model_miss.verdict.outcome, ClaimOutcome::kMiss);
  EXPECT_EQ(model_miss.verdict.axis, BindingAxis::kModel);
  ResidentClaim other_tier = tree.ClaimFor("alice");
  other_tier.binding.precision.kernel_tier = other_tier.binding.precision.kernel_tier == "scalar" ? "avx2" : "scalar";
  EXPECT_EQ(tree.ProbeGate(other_tier, ctx, "alice").verdict.axis, BindingAxis::kPrecision);
  // A context diverging mid-edge: that edge is judged as resident, and nothing is split.
  const auto diverging = Concat(std::vector<int32_t>(base.begin(), base.begin() + 7), TokenSequence(5, 9, 97));
  const GateProbe partial = tree.ProbeGate(tree.ClaimFor("alice"), diverging, "alice");
  EXPECT_EQ(partial.resident_tokens, 7u);
  EXPECT_EQ(partial.admitted_tokens, 7u);
  EXPECT_TRUE(partial.verdict.hit()) << partial.verdict.ToString();
  EXPECT_EQ(tree.ProbeGate(other_model, diverging, "alice").verdict.axis, BindingAxis::kModel);
  EXPECT_EQ(tree.ProbeGate(tree.ClaimFor("bob"), diverging, "alice").verdict.refuse_reason, RefuseReason::kCrossTenant);
  EXPECT_EQ(tree.MatchLength(diverging, "alice"), 7u);
  // Bob's own view holds nothing.
  EXPECT_EQ(tree.ProbeGate(tree.ClaimFor("bob"), ctx, "bob").resident_tokens, 0u);
  EXPECT_EQ(tree.Stats().node_count, before.node_count);
  EXPECT_EQ(tree.Stats().lookups, before.lookups);
  EXPECT_EQ(tree.GateStatistics().claims, gate_before.claims);
}

TEST_F(RadixTreeTest, EvictNodeReportsWhatItRemoved) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto base = TokenSequence(8, 1, 97);
  Serve(tree, Concat(base, TokenSequence(8, 2, 97)));
  Serve(tree, Concat(base, TokenSequence(8, 3, 97)));
  ASSERT_OK_AND_ASSIGN(NodeId node, tree.FindNode(base));
  ASSERT_OK_AND_ASSIGN(EvictedSubtree removed, tree.EvictNode(node));
  EXPECT_EQ(removed.n_nodes, 3u);
  EXPECT_EQ(removed.n_tokens, 24u);
  EXPECT_EQ(removed.span_digests.size(), 3u);
  EXPECT_EQ(tree.Stats().unique_tokens, 0u);
  EXPECT_EQ(tree.EvictNode(node).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tree.EvictNode(0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RadixTreeTest, ManifestsBindTheSourceDigestOfTheirText) {
  RadixTree tree(*model_, *testing_tokenizer);
  const Digest sys = Digest::Of("system"), a = Digest::Of("user a");
  const auto ctx = Concat(TokenSequence(12, 1, 97), TokenSequence(8, 2, 97));
  const std::vector<SourceSpan> runs = {{0, 12, sys}, {12, 8, a}};
  LookupResult r = tree.Lookup(ctx);
  ASSERT_OK(model_->Prefill(&r.cache, ctx, LogitsMode::kNone));
  ASSERT_OK(tree.Insert(kDefaultTenant, ctx, r.cache, runs));
  ASSERT_OK_AND_ASSIGN(NodeId whole, tree.FindNode(ctx));
  const KVManifest* m = tree.ManifestOf(whole);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->source_digest, SourceSetDigest(runs, 0, 20, m->binding.span_digest));  // the edge crosses two texts
  EXPECT_NE(m->source_digest, m->binding.span_digest);
  // Split at the message boundary: each half binds its own text's SourceDigest.
  ASSERT_OK_AND_ASSIGN(NodeId first, tree.FindNode(std::span(ctx).first(12)));
  EXPECT_EQ(tree.ManifestOf(first)->source_digest, sys);
  EXPECT_EQ(tree.ManifestOf(whole)->source_digest, a);
  EXPECT_TRUE(tree.VerifyIntegrity().empty());
  // Without recorded sources the span digest stands in (the text is unknown).
  RadixTree bare(*model_, *testing_tokenizer);
  ASSERT_OK(bare.Insert(ctx, r.cache));
  const KVManifest* b = bare.ManifestOf(*bare.FindNode(ctx));
  EXPECT_EQ(b->source_digest, b->binding.span_digest);
}

TEST_F(RadixTreeTest, EvictSourceRemovesEveryNodeHoldingTheTextAndWhatFollows) {
  RadixTree tree(*model_, *testing_tokenizer);
  const Digest sys = Digest::Of("system"), a = Digest::Of("user a"), tool = Digest::Of("tool result"),
               b = Digest::Of("user b");
  const auto prefix = TokenSequence(20, 1, 97);
  const auto ctx1 = Concat(Concat(prefix, TokenSequence(10, 2, 97)), TokenSequence(10, 3, 97));
  const auto ctx2 = Concat(prefix, TokenSequence(10, 4, 97));
  auto serve = [&](const std::vector<int32_t>& tokens, const std::vector<SourceSpan>& sources) {
    LookupResult r = tree.Lookup(tokens);
    ASSERT_OK(model_->Prefill(&r.cache, std::span(tokens).subspan(r.matched_tokens), LogitsMode::kNone));
    ASSERT_OK(tree.Insert(kDefaultTenant, tokens, r.cache, sources));
  };
  serve(ctx1, {{0, 20, sys}, {20, 10, a}, {30, 10, tool}});  // one edge of 40 tokens, three sources
  serve(ctx2, {{0, 20, sys}, {20, 10, b}});                    // splits it after the shared prefix
  ASSERT_EQ(tree.Stats().node_count, 3u);
  std::vector<Digest> want = {sys, a, tool, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(tree.Sources(), want);

  LookupResult in_flight = tree.Lookup(ctx1);  // a lease does not protect denied text
  ASSERT_EQ(in_flight.matched_tokens, 39u);
  const EvictedSubtree gone = tree.EvictSource(tool);
  EXPECT_EQ(gone.n_nodes, 2u);    // [30, 39) and the last token, which the lookup split off
  EXPECT_EQ(gone.n_tokens, 10u);  // user a shared the edge [20, 39); it was split off and kept
  EXPECT_EQ(tree.MatchLength(ctx1), 30u);
  EXPECT_EQ(tree.MatchLength(ctx2), 30u);  // the other branch and the shared prefix stay
  EXPECT_TRUE(tree.VerifyIntegrity().empty());
  want = {sys, a, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(tree.Sources(), want);
  EXPECT_EQ(tree.EvictSource(tool).n_nodes, 0u);  // nothing left to remove is fine

  EXPECT_EQ(tree.EvictSource(sys).n_tokens, 40u);  // the prefix, and both branches that attended to it
  EXPECT_EQ(tree.Stats().unique_tokens, 0u);
  EXPECT_TRUE(tree.Sources().empty());
}

TEST_F(RadixTreeTest, CacheAwareOrderPicksTheLongestCachedPrefix) {
  RadixTree tree(*model_, *testing_tokenizer);
  const auto a = TokenSequence(10, 1, 97), b = TokenSequence(10, 2, 97);
  Serve(tree, b);
  std::vector<int32_t> ra = Concat(a, {1}), rb = Concat(b, {1});
  EXPECT_EQ(NextCacheAware(tree, {ra, rb}), 1u);
  EXPECT_EQ(NextCacheAware(tree, {ra, ra}), 0u);

  // Per tenant: another tenant's prefix is no match (its line keeps arrival order), its own is.
  const auto c = TokenSequence(10, 3, 97);
  LookupResult r = tree.Lookup(tree.ClaimFor("t1"), c);
  ASSERT_OK(model_->Prefill(&r.cache, std::span(c).subspan(r.matched_tokens), LogitsMode::kNone));
  ASSERT_OK(tree.Insert("t1", c, r.cache));
  const std::vector<int32_t> rc = Concat(c, {1});
  EXPECT_EQ(NextCacheAware(tree, {ra, rc}, "t2"), 0u);
  EXPECT_EQ(NextCacheAware(tree, {ra, rc}, "t1"), 1u);
}

// Many threads looking up, inserting and evicting at once (run under the tsan preset too):
// invariants hold and sampled caches equal recompute.
TEST_F(RadixTreeTest, ConcurrentStressKeepsInvariants) {
  for (EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kDeepestFirst}) {  // eviction removes or trims
    SCOPED_TRACE(policy == EvictionPolicy::kLru ? "LRU" : "deepest-first");
    RadixTreeOptions opt;
    opt.budget_bytes = 200 * RadixTree(*model_, *testing_tokenizer).BytesPerToken();
    opt.policy = policy;
    RadixTree tree(*model_, *testing_tokenizer, opt);
    const auto system = TokenSequence(24, 7, 97);
    std::atomic<int> checked{0}, failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(t);
        for (int i = 0; i < 25; ++i) {
          auto tokens = Concat(system, TokenSequence(4 + rng() % 20, rng() % 6, 97));
          if (rng() % 7 == 0) {
            tree.EvictToBudget(opt.budget_bytes / 2);
            continue;
          }
          LookupResult r = tree.Lookup(tokens);
          if (!r.gate.hit()) ++failures;  // one tenant, one model: every node's manifest must hold
          if (!model_->Prefill(&r.cache, std::span(tokens).subspan(r.matched_tokens), LogitsMode::kNone).ok()) ++failures;
          if (i % 5 == 0) {
            KVCache fresh = model_->NewCache();
            if (!model_->Prefill(&fresh, tokens, LogitsMode::kNone).ok()) ++failures;
            if (fresh.ComputeDigest() != r.cache.ComputeDigest()) ++failures;
            ++checked;
          }
          if (!tree.Insert(tokens, r.cache).ok()) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(checked.load(), 30);
    RadixTreeStats s = tree.Stats();
    EXPECT_LE(s.resident_bytes, opt.budget_bytes);
    EXPECT_EQ(s.resident_bytes, s.unique_tokens * tree.BytesPerToken());
    EXPECT_TRUE(tree.VerifyIntegrity().empty());  // splits made from prepared halves vouch for their bytes
  }
}

}  // namespace
}  // namespace fak
