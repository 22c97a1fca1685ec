// The cross-regime oracle: EXACT / EQUIVALENT{tol} / DIVERGENT from logits, and across kernel tiers.
#include <gtest/gtest.h>

#include "fak/kernels/kernel_tier.h"
#include "fak/regen/regime_oracle.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(RegimeOracle, VerdictsFromLogits) {
  const std::vector<float> a = {0.1f, 0.9f, 0.3f, 2.0f, 1.0f, 0.5f};  // 2 positions x vocab 3
  std::vector<float> b = a;
  ASSERT_OK_AND_ASSIGN(OracleVerdict exact, CompareLogits(a, b, 3, 1e-3f));
  EXPECT_EQ(exact.outcome, OracleOutcome::kExact);
  EXPECT_EQ(exact.ToString(), "EXACT");
  b[0] += 1e-4f;
  ASSERT_OK_AND_ASSIGN(OracleVerdict eq, CompareLogits(a, b, 3, 1e-3f));
  EXPECT_EQ(eq.outcome, OracleOutcome::kEquivalent);
  EXPECT_EQ(eq.argmax_agreements, 2u);
  EXPECT_NE(eq.ToString().find("EQUIVALENT{tol=0.001}"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(OracleVerdict too_far, CompareLogits(a, b, 3, 1e-5f));
  EXPECT_EQ(too_far.outcome, OracleOutcome::kDivergent);
  b = a;
  b[4] = 2.5f;  // position 1's argmax flips, within a loose tolerance: still DIVERGENT
  ASSERT_OK_AND_ASSIGN(OracleVerdict flipped, CompareLogits(a, b, 3, 10.0f));
  EXPECT_EQ(flipped.outcome, OracleOutcome::kDivergent);
  EXPECT_EQ(flipped.argmax_agreements, 1u);
  EXPECT_FALSE(CompareLogits(a, std::vector<float>(5), 3, 1.0f).ok());
  EXPECT_FALSE(CompareLogits(a, b, 0, 1.0f).ok());
}

TEST(RegimeOracle, AcrossKernelTiers) {
  ModelConfig c = testing::TinyConfig();
  auto model = *Model::Synthetic(c, 11);
  const auto tokens = testing::TokenSequence(24, 5, c.vocab_size);
  const std::string active(ActiveKernelTier());
  ASSERT_OK_AND_ASSIGN(OracleVerdict self, CompareTiers(*model, tokens, active, active, 1e-3f));
  EXPECT_EQ(self.outcome, OracleOutcome::kExact);  // one regime: bit for bit
  EXPECT_EQ(self.positions, tokens.size());
  const std::vector<std::string> tiers = SupportedKernelTiers();
  if (tiers.size() < 2) GTEST_SKIP() << "needs two kernel tiers";
  ASSERT_OK_AND_ASSIGN(OracleVerdict cross, CompareTiers(*model, tokens, tiers.front(), tiers.back(), 1e-3f));
  EXPECT_NE(cross.outcome, OracleOutcome::kDivergent) << cross.ToString();
  EXPECT_EQ(cross.argmax_agreements, cross.positions);
  EXPECT_EQ(ActiveKernelTier(), active);  // restored
  EXPECT_FALSE(CompareTiers(*model, tokens, "sse9", active, 1e-3f).ok());
  EXPECT_EQ(ActiveKernelTier(), active);
}

}  // namespace
}  // namespace fak
