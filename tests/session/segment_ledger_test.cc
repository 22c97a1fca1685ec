// SegmentLedger: ids, offsets, cost reports and refusals.
#include <gtest/gtest.h>

#include "fak/session/segment_ledger.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

SegmentSpec Spec(std::string id, size_t n, uint32_t seed) {
  return SegmentSpec{std::move(id), SegmentKind::kUser, testing::TokenSequence(n, seed, 97), Digest::Of(std::to_string(seed))};
}

TEST(SegmentLedger, AppendTracksOffsetsAndRejectsBadSegments) {
  auto model = *Model::Synthetic(testing::TinyConfig(), 1);
  SegmentLedger ledger(*model);
  ASSERT_OK(ledger.Append(Spec("a", 5, 1)));
  ASSERT_OK(ledger.Append(Spec("b", 3, 2)));
  EXPECT_EQ(ledger.Find("b")->from, 5u);
  EXPECT_EQ(ledger.cache().size(), 8u);
  const Digest before = ledger.cache().ComputeDigest();
  EXPECT_EQ(ledger.Append(Spec("a", 2, 3)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Append(Spec("", 2, 3)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Append(Spec("c", 0, 3)).status().code(), StatusCode::kInvalidArgument);
  SegmentSpec bad = Spec("d", 2, 3);
  bad.tokens[1] = 1000;
  EXPECT_FALSE(ledger.Append(bad).has_value());
  EXPECT_EQ(ledger.segments().size(), 2u);
  EXPECT_EQ(ledger.cache().ComputeDigest(), before);
  EXPECT_EQ(ledger.Evict("zzz").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ledger.IsCausallyClean("zzz").status().code(), StatusCode::kNotFound);
}

TEST(SegmentLedger, CleanlinessAndCostReports) {
  auto model = *Model::Synthetic(testing::TinyConfig(), 1);
  SegmentLedger ledger(*model);
  ASSERT_OK(ledger.Append(Spec("a", 5, 1)));
  ASSERT_OK(ledger.Append(Spec("b", 4, 2)));
  ASSERT_OK(ledger.Append(Spec("c", 6, 3)));
  EXPECT_FALSE(*ledger.IsCausallyClean("a"));
  EXPECT_TRUE(*ledger.IsCausallyClean("c"));
  const Digest before = ledger.cache().ComputeDigest();
  Status refused = ledger.Evict("b").status();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("kRecomputeTail"), std::string_view::npos);
  EXPECT_EQ(ledger.cache().ComputeDigest(), before);  // refused: nothing changed
  ASSERT_OK_AND_ASSIGN(EvictionReport r, ledger.Evict("b", Repair::kRecomputeTail));
  EXPECT_EQ(r.n_evicted, 4u);
  EXPECT_EQ(r.n_recomputed, 6u);
  EXPECT_EQ(r.cache_digest_before, before);
  EXPECT_EQ(r.cache_digest_after, ledger.cache().ComputeDigest());
  EXPECT_EQ(ledger.Find("c")->from, 5u);
  ASSERT_OK_AND_ASSIGN(EvictionReport approx, ledger.Evict("a", Repair::kApproximate));
  EXPECT_FALSE(approx.exact);
  EXPECT_EQ(approx.n_rerotated, 6u);
  EXPECT_EQ(ledger.Find("c")->from, 0u);
}

TEST(SegmentLedger, OneLayerModelsEvictAnySegmentExactly) {
  auto model = *Model::Synthetic(testing::TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 1), 1);
  SegmentLedger ledger(*model);
  ASSERT_OK(ledger.Append(Spec("a", 5, 1)));
  ASSERT_OK(ledger.Append(Spec("b", 4, 2)));
  ASSERT_OK(ledger.Append(Spec("c", 6, 3)));
  ASSERT_OK_AND_ASSIGN(EvictionReport r, ledger.Evict("b"));
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.n_rerotated, 6u);
  EXPECT_EQ(r.n_recomputed, 0u);
}

TEST(SegmentLedger, AdoptChecksTheCacheMatchesTheSegments) {
  auto model = *Model::Synthetic(testing::TinyConfig(), 1);
  KVCache cache = model->NewCache();
  auto a = Spec("a", 5, 1), b = Spec("b", 4, 2);
  std::vector<int32_t> all = a.tokens;
  all.insert(all.end(), b.tokens.begin(), b.tokens.end());
  ASSERT_OK(model->Prefill(&cache, all, LogitsMode::kNone));
  EXPECT_FALSE(SegmentLedger::Adopt(*model, cache.Clone(), {a}).has_value());     // covers 5 of 9
  EXPECT_FALSE(SegmentLedger::Adopt(*model, cache.Clone(), {b, a}).has_value());  // wrong order
  ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, SegmentLedger::Adopt(*model, std::move(cache), {a, b}));
  EXPECT_EQ(ledger.Find("b")->from, 5u);
}

}  // namespace
}  // namespace fak
