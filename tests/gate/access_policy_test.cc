// AccessPolicy: tenant isolation by default, per-range sharing of declared public prefixes.
#include <gtest/gtest.h>

#include "fak/gate/resident_claim.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::GateWorld;

// The world's first 8 tokens play the common system prompt.
AccessPolicy SystemPromptPolicy(const GateWorld& w) {
  AccessPolicy p;
  EXPECT_OK(p.DeclarePublicPrefix("system", std::vector<int32_t>(w.tokens.begin(), w.tokens.begin() + 8)));
  return p;
}

TEST(AccessPolicy, CrossTenantIsRefusedByDefault) {
  GateWorld w = GateWorld::Make();
  const AccessPolicy policy;
  const KVManifest m = w.Manifest(0, 12, "acme");
  EXPECT_TRUE(CheckResidentClaim(w.Claim(0, 12, "acme"), m, policy).hit());
  const ClaimVerdict v = CheckResidentClaim(w.Claim(0, 12, "globex"), m, policy);
  EXPECT_EQ(v.outcome, ClaimOutcome::kRefuse);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kCrossTenant);
  EXPECT_EQ(v.ToString().rfind("REFUSE{cross_tenant}", 0), 0u) << v.ToString();
  // Marking a span public_prefix shares nothing until the policy declares that prefix public.
  const KVManifest marked = w.Manifest(0, 8, "acme", Sharing::kPublicPrefix);
  EXPECT_EQ(CheckResidentClaim(w.Claim(0, 8, "globex"), marked, policy).refuse_reason,
            RefuseReason::kOutsidePublicPrefix);
}

TEST(AccessPolicy, DeclaredPublicPrefixIsSharedPerRange) {
  GateWorld w = GateWorld::Make();
  const AccessPolicy policy = SystemPromptPolicy(w);
  // Inside the prefix: the whole of it, or any span of it.
  for (auto [from, n] : {std::pair<size_t, size_t>{0, 8}, {0, 3}, {3, 5}, {7, 1}}) {
    const KVManifest m = w.Manifest(from, n, "acme", Sharing::kPublicPrefix);
    EXPECT_TRUE(CheckResidentClaim(w.Claim(from, n, "globex"), m, policy, w.cache, from, n).hit()) << from << "+" << n;
  }
  // Reaching past the prefix, even by one token: refused for other tenants, fine for the owner.
  const KVManifest past = w.Manifest(4, 5, "acme", Sharing::kPublicPrefix);
  ClaimVerdict v = CheckResidentClaim(w.Claim(4, 5, "globex"), past, policy);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kOutsidePublicPrefix) << v.ToString();
  EXPECT_TRUE(CheckResidentClaim(w.Claim(4, 5, "acme"), past, policy).hit());
  // Inside the prefix but not marked shareable: still private.
  const KVManifest private_span = w.Manifest(0, 8, "acme", Sharing::kTenantOnly);
  EXPECT_EQ(CheckResidentClaim(w.Claim(0, 8, "globex"), private_span, policy).refuse_reason, RefuseReason::kCrossTenant);
}

TEST(AccessPolicy, PublicMarkOnOtherTokensIsNotShared) {
  GateWorld w = GateWorld::Make();
  GateWorld other = GateWorld::Make(/*seed=*/7, /*n_tokens=*/12, /*token_seed=*/99);  // another prompt
  const AccessPolicy policy = SystemPromptPolicy(w);
  const KVManifest m = other.Manifest(0, 8, "acme", Sharing::kPublicPrefix);
  const ClaimVerdict v = CheckResidentClaim(other.Claim(0, 8, "globex"), m, policy);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kOutsidePublicPrefix) << v.ToString();
}

TEST(AccessPolicy, SharedPrefixStillPassesEveryAxis) {
  GateWorld w = GateWorld::Make();
  const AccessPolicy policy = SystemPromptPolicy(w);
  const KVManifest m = w.Manifest(0, 8, "acme", Sharing::kPublicPrefix);
  ResidentClaim claim = w.Claim(0, 8, "globex");
  claim.binding.precision.kernel_tier = "another-tier";
  EXPECT_EQ(CheckResidentClaim(claim, m, policy).axis, BindingAxis::kPrecision);
}

TEST(AccessPolicy, DeniedAndInvalidTenantsAreRefused) {
  GateWorld w = GateWorld::Make();
  AccessPolicy policy;
  policy.DenyTenant("acme");
  const KVManifest m = w.Manifest(0, 12, "acme");
  ClaimVerdict v = CheckResidentClaim(w.Claim(0, 12, "acme"), m, policy);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kTenantDenied) << v.ToString();
  for (std::string bad : {std::string(), std::string("has space"), std::string(200, 'a'), std::string("nul\0x", 5)}) {
    v = CheckResidentClaim(w.Claim(0, 12, bad), m, AccessPolicy());
    EXPECT_EQ(v.refuse_reason, RefuseReason::kTenantDenied) << v.ToString();
  }
}

TEST(AccessPolicy, PublicPrefixLengthAndDeclarationErrors) {
  AccessPolicy p;
  EXPECT_OK(p.DeclarePublicPrefix("short", {1, 2}));
  EXPECT_OK(p.DeclarePublicPrefix("long", {1, 2, 3, 4}));
  EXPECT_EQ(p.PublicPrefixLength(std::vector<int32_t>{1, 2, 3, 4, 5}), 4u);
  EXPECT_EQ(p.PublicPrefixLength(std::vector<int32_t>{1, 2, 3}), 2u);
  EXPECT_EQ(p.PublicPrefixLength(std::vector<int32_t>{2, 2, 3}), 0u);
  EXPECT_EQ(p.PublicPrefixLength({}), 0u);
  EXPECT_EQ(p.DeclarePublicPrefix("long", {9}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.DeclarePublicPrefix("", {9}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.DeclarePublicPrefix("empty", {}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fak
