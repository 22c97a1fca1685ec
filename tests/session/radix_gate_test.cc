// The manifest gate inside the radix tree: no reuse across a model, regime or tenant boundary;
// declared public prefixes are shared; counters say why a lookup missed.
#include <gtest/gtest.h>

#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "kernels/dispatch.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::TokenSequence;

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class RadixGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *Model::Synthetic(testing::TinyConfig(), 3);
    tok_ = MakeByteTokenizer();
  }
  void Insert(RadixTree& tree, std::string_view tenant, const std::vector<int32_t>& tokens) {
    KVCache c = model_->NewCache();
    ASSERT_OK(model_->Prefill(&c, tokens, LogitsMode::kNone));
    ASSERT_OK(tree.Insert(tenant, tokens, c));
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(RadixGateTest, SameTokensUnderAnotherModelNeverHit) {
  RadixTree tree(*model_, *tok_);
  const auto tokens = TokenSequence(24, 1, 97);
  Insert(tree, kDefaultTenant, tokens);
  ASSERT_EQ(tree.Lookup(tokens).matched_tokens, 23u);  // control: our own claim hits
  // A second model in the same process (same shape, other weights) claims the same tokens.
  auto other = *Model::Synthetic(testing::TinyConfig(), 4);
  ResidentClaim claim{RegimeBinding(*other, *tok_), std::string(kDefaultTenant)};
  LookupResult r = tree.Lookup(claim, tokens);
  EXPECT_EQ(r.matched_tokens, 0u);
  EXPECT_EQ(r.gate.outcome, ClaimOutcome::kMiss);
  EXPECT_EQ(r.gate.axis, BindingAxis::kModel);
  GateStats s = tree.GateStatistics();
  EXPECT_GE(s.misses_by_axis[static_cast<int>(BindingAxis::kModel)], 1u);
}

TEST_F(RadixGateTest, AnotherKernelTierIsAnotherRegime) {
  RadixTree tree(*model_, *tok_);
  const auto tokens = TokenSequence(24, 1, 97);
  Insert(tree, kDefaultTenant, tokens);
  const kernels::Tier original = kernels::ActiveTier();
  const std::vector<kernels::Tier> tiers = kernels::SupportedTiers();
  if (tiers.size() < 2) GTEST_SKIP() << "needs two tiers";
  const kernels::Tier other = original == tiers.front() ? tiers.back() : tiers.front();
  ASSERT_OK(kernels::SetTier(other));
  ResidentClaim claim{RegimeBinding(*model_, *tok_), std::string(kDefaultTenant)};
  ASSERT_OK(kernels::SetTier(original));
  LookupResult r = tree.Lookup(claim, tokens);
  EXPECT_EQ(r.matched_tokens, 0u);
  EXPECT_EQ(r.gate.axis, BindingAxis::kPrecision);
}

TEST_F(RadixGateTest, TenantsAreIsolatedButShareDeclaredPublicPrefixes) {
  RadixTreeOptions opt;
  const auto system = TokenSequence(16, 9, 97);
  ASSERT_OK(opt.access.DeclarePublicPrefix("system", system));
  RadixTree tree(*model_, *tok_, opt);
  const auto secret = Concat(system, TokenSequence(12, 1, 97));
  Insert(tree, "alice", secret);
  // Bob asks for alice's exact tokens: he gets the public system prompt, never her span.
  LookupResult bob = tree.Lookup(tree.ClaimFor("bob"), Concat(secret, {3}));
  EXPECT_EQ(bob.matched_tokens, system.size());
  LookupResult alice = tree.Lookup(tree.ClaimFor("alice"), Concat(secret, {3}));
  EXPECT_EQ(alice.matched_tokens, secret.size());
  // Bob's own copy lives in his namespace; both coexist.
  Insert(tree, "bob", secret);
  EXPECT_EQ(tree.Lookup(tree.ClaimFor("bob"), Concat(secret, {3})).matched_tokens, secret.size());
  EXPECT_EQ(tree.Stats().unique_tokens, system.size() + 2 * 12);
  const KVManifest* m = tree.ManifestOf(*tree.FindNode(system, "bob"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->sharing, Sharing::kPublicPrefix);
  EXPECT_EQ(m->provenance, "performance_material_not_proof");
  EXPECT_TRUE(tree.VerifyIntegrity().empty());
  EXPECT_FALSE(tree.Insert("bad tenant name with spaces\n", secret, model_->NewCache()).ok());
}

TEST_F(RadixGateTest, SplitsRebindBothHalves) {
  RadixTree tree(*model_, *tok_);
  const auto a = TokenSequence(30, 1, 97);
  Insert(tree, kDefaultTenant, a);
  auto b = Concat(std::vector<int32_t>(a.begin(), a.begin() + 11), TokenSequence(9, 2, 97));
  Insert(tree, kDefaultTenant, b);
  EXPECT_TRUE(tree.VerifyIntegrity().empty());
  EXPECT_EQ(tree.Lookup(a).matched_tokens, 29u);
  EXPECT_EQ(tree.Lookup(b).matched_tokens, 19u);
  GateStats s = tree.GateStatistics();
  EXPECT_EQ(s.misses + s.refusals + s.corruptions, 0u);
}

}  // namespace
}  // namespace fak
