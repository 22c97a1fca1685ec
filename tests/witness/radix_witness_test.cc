// Radix-tree witnesses: reuse through a split edge equals recompute (max|Δ| == 0), and a policy
// eviction removes a named subtree that recency alone would have kept.
#include <gtest/gtest.h>

#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

const std::unique_ptr<Tokenizer> testing_tokenizer = MakeByteTokenizer();

using testing::MaxAbsDiff;
using testing::TokenSequence;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Witness, ReuseThroughSplitMatchesRecompute) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(6, 2, 16), 13));
  RadixTree tree(*model, *testing_tokenizer);
  const auto first = TokenSequence(40, 1, 97);
  KVCache c1 = model->NewCache();
  ASSERT_OK(model->Prefill(&c1, first, LogitsMode::kNone));
  ASSERT_OK(tree.Insert(first, c1));  // one compressed edge of 40 tokens

  // The second request diverges at token 23, inside that edge.
  auto second = Concat(std::vector<int32_t>(first.begin(), first.begin() + 23), TokenSequence(17, 2, 97));
  LookupResult r = tree.Lookup(second);
  ASSERT_EQ(r.matched_tokens, 23u);
  ASSERT_OK_AND_ASSIGN(auto served, model->Prefill(&r.cache, std::span(second).subspan(23), LogitsMode::kAll));
  KVCache fresh = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto all, model->Prefill(&fresh, second, LogitsMode::kAll));
  std::vector<float> want(all.end() - served.size(), all.end());
  EXPECT_EQ(MaxAbsDiff(served, want), 0.0f);
  EXPECT_EQ(r.cache.ComputeDigest(), fresh.ComputeDigest());

  // Control: serving the same suffix on a wrong 23-token prefix differs.
  auto other = TokenSequence(23, 3, 97);
  KVCache wrong = model->NewCache();
  ASSERT_OK(model->Prefill(&wrong, other, LogitsMode::kNone));
  ASSERT_OK_AND_ASSIGN(auto bad, model->Prefill(&wrong, std::span(second).subspan(23), LogitsMode::kAll));
  EXPECT_GT(MaxAbsDiff(bad, want), 0.0f);
}

TEST(Witness, PolicyEvictNode) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 13));
  RadixTree tree(*model, *testing_tokenizer);
  const auto system = TokenSequence(16, 1, 97), poisoned = TokenSequence(12, 2, 97), clean = TokenSequence(12, 3, 97);
  for (const auto& branch : {clean, poisoned}) {
    auto tokens = Concat(system, branch);
    KVCache c = model->NewCache();
    ASSERT_OK(model->Prefill(&c, tokens, LogitsMode::kNone));
    ASSERT_OK(tree.Insert(tokens, c));
  }
  // The poisoned branch is the most recent and was just hit: LRU would keep it over `clean`.
  (void)tree.Lookup(Concat(Concat(system, poisoned), {5}));
  ASSERT_OK_AND_ASSIGN(NodeId node, tree.FindNode(Concat(system, poisoned)));
  ASSERT_OK_AND_ASSIGN(EvictedSubtree removed, tree.EvictNode(node));
  EXPECT_EQ(removed.n_tokens, 12u);
  EXPECT_EQ(removed.span_digests[0], Digest::Of(poisoned.data(), poisoned.size() * sizeof(int32_t)));
  EXPECT_EQ(tree.Lookup(Concat(Concat(system, poisoned), {5})).matched_tokens, 16u);  // misses there
  EXPECT_EQ(tree.Lookup(Concat(Concat(system, clean), {5})).matched_tokens, 28u);     // hits elsewhere
}

}  // namespace
}  // namespace fak
