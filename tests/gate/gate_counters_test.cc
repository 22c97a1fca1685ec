// GateCounters: verdicts by outcome, axis and reason, with token-level rates and their denominators.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "fak/gate/resident_claim.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(ManifestGateCounters, CountsVerdictsByAxisWithTokenDenominators) {
  GateCounters counters;
  EXPECT_EQ(counters.Snapshot().TokenHitRate(), 0.0);  // no claims: rate 0 over denominator 0
  EXPECT_EQ(counters.Snapshot().claimed_tokens, 0u);

  counters.Record(ClaimVerdict::Hit(), 30);
  counters.Record(ClaimVerdict::Hit(), 10);
  counters.Record(ClaimVerdict::Miss(BindingAxis::kModel, "model_id: ..."), 40);
  counters.Record(ClaimVerdict::Miss(BindingAxis::kPrecision, "precision: ..."), 15);
  counters.Record(ClaimVerdict::Miss(BindingAxis::kPrecision, "precision: ..."), 5);
  counters.Record(ClaimVerdict::Refuse(RefuseReason::kCrossTenant, "..."), 7);
  counters.Record(ClaimVerdict::Corrupt("..."), 3);
  const GateStats s = counters.Snapshot();
  EXPECT_EQ(s.claims, 7u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.refusals, 1u);
  EXPECT_EQ(s.corruptions, 1u);
  EXPECT_EQ(s.claimed_tokens, 110u);
  EXPECT_EQ(s.hit_tokens, 40u);
  EXPECT_DOUBLE_EQ(s.TokenHitRate(), 40.0 / 110.0);
  EXPECT_EQ(s.misses_by_axis[static_cast<int>(BindingAxis::kModel)], 1u);
  EXPECT_EQ(s.miss_tokens_by_axis[static_cast<int>(BindingAxis::kModel)], 40u);
  EXPECT_EQ(s.misses_by_axis[static_cast<int>(BindingAxis::kPrecision)], 2u);
  EXPECT_EQ(s.miss_tokens_by_axis[static_cast<int>(BindingAxis::kPrecision)], 20u);
  EXPECT_EQ(s.misses_by_axis[static_cast<int>(BindingAxis::kTokenizer)], 0u);
  EXPECT_EQ(s.refusals_by_reason[static_cast<int>(RefuseReason::kCrossTenant)], 1u);

  const std::string text = s.ToString();
  EXPECT_NE(text.find("miss.precision 2 (20 tokens)"), std::string::npos) << text;
  EXPECT_NE(text.find("refuse.cross_tenant 1"), std::string::npos) << text;
  EXPECT_NE(text.find("40/110"), std::string::npos) << text;
  EXPECT_EQ(text.find("miss.tokenizer_id"), std::string::npos) << text;

  counters.Reset();
  EXPECT_EQ(counters.Snapshot().claims, 0u);
  EXPECT_EQ(counters.Snapshot().misses_by_axis[static_cast<int>(BindingAxis::kPrecision)], 0u);
}

TEST(ManifestGateCounters, LookupRateHasItsOwnDenominator) {
  GateCounters counters;
  EXPECT_EQ(counters.Snapshot().LookupTokenHitRate(), 0.0);
  counters.RecordLookup(100, 60);
  counters.RecordLookup(50, 0);
  const GateStats s = counters.Snapshot();
  EXPECT_EQ(s.lookups, 2u);
  EXPECT_EQ(s.lookup_tokens, 150u);
  EXPECT_EQ(s.served_tokens, 60u);
  EXPECT_DOUBLE_EQ(s.LookupTokenHitRate(), 0.4);
  EXPECT_EQ(s.claims, 0u);  // lookups and claims are counted apart
}

TEST(ManifestGateCounters, RecordsGateVerdictsFromManyThreads) {
  testing::GateWorld w = testing::GateWorld::Make();
  const KVManifest m = w.Manifest(0, 12);
  const AccessPolicy policy;
  ResidentClaim hit = w.Claim(0, 12);
  ResidentClaim miss = hit;
  miss.binding.tokenizer_id.bytes[0] ^= 1;
  GateCounters counters;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        counters.Record(CheckResidentClaim(i % 5 == 0 ? miss : hit, m, policy), 12);
        counters.RecordLookup(12, i % 5 == 0 ? 0 : 12);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const GateStats s = counters.Snapshot();
  EXPECT_EQ(s.claims, 1000u);
  EXPECT_EQ(s.hits, 800u);
  EXPECT_EQ(s.misses_by_axis[static_cast<int>(BindingAxis::kTokenizer)], 200u);
  EXPECT_DOUBLE_EQ(s.TokenHitRate(), 0.8);
  EXPECT_DOUBLE_EQ(s.LookupTokenHitRate(), 0.8);
}

}  // namespace
}  // namespace fak
