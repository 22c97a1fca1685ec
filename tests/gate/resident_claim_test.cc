// CheckResidentClaim: HIT only when all nine axes match; MISS names the axis; CORRUPT on tampered
// bytes; REFUSE before anything about the binding is revealed.
#include <gtest/gtest.h>

#include "fak/gate/resident_claim.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"
#include "src/kv/kv_cache_access.h"

namespace fak {
namespace {

using testing::GateWorld;

const AccessPolicy kIsolated;

TEST(ResidentClaim, HitWhenEveryAxisMatchesAndTheBytesVerify) {
  GateWorld w = GateWorld::Make();
  const KVManifest m = w.Manifest(0, 12);
  const ResidentClaim claim = w.Claim(0, 12);
  EXPECT_TRUE(CheckResidentClaim(claim, m, kIsolated).hit());
  EXPECT_TRUE(CheckResidentClaim(claim, m, kIsolated, w.cache, 0, 12).hit());
  EXPECT_TRUE(CheckResidentClaim(claim, m, kIsolated, m.binding.integrity_checksum).hit());
  EXPECT_EQ(CheckResidentClaim(claim, m, kIsolated).ToString(), "HIT");

  // A sub-span manifest over a slab that holds only that span verifies against the slab.
  const KVManifest tail = w.Manifest(8, 4);
  KVCache slab = w.model->NewCache();
  ASSERT_OK(internal::KVCacheAccess::AppendFrom(slab, w.cache, 8, 4));
  ResidentClaim tail_claim = w.Claim(8, 4);
  // AppendFrom re-rotates to the slab's own positions, so its bytes differ from the source span:
  // a manifest must be made over the bytes it will vouch for.
  EXPECT_EQ(CheckResidentClaim(tail_claim, tail, kIsolated, slab, 0, 4).outcome, ClaimOutcome::kCorrupt);
  KVManifest slab_manifest = tail;
  slab_manifest.binding.integrity_checksum = *KVSpanChecksum(slab, 0, 4);
  EXPECT_TRUE(CheckResidentClaim(tail_claim, slab_manifest, kIsolated, slab, 0, 4).hit());
}

TEST(ResidentClaim, EveryAxisFlippedAloneMissesThatAxis) {
  GateWorld w = GateWorld::Make();
  const KVManifest m = w.Manifest(2, 10);
  ResidentClaim exact = w.Claim(2, 10);
  exact.binding.integrity_checksum = m.binding.integrity_checksum;  // so that axis can differ too
  ASSERT_TRUE(CheckResidentClaim(exact, m, kIsolated).hit());
  for (int a = 0; a < kNumBindingAxes; ++a) {
    const BindingAxis axis = static_cast<BindingAxis>(a);
    for (int variant = 0; variant < testing::kAxisVariants[a]; ++variant) {
      // Flipped in the claim...
      ResidentClaim claim = exact;
      testing::FlipAxis(&claim.binding, axis, variant);
      ClaimVerdict v = CheckResidentClaim(claim, m, kIsolated, w.cache, 2, 10);
      EXPECT_EQ(v.outcome, ClaimOutcome::kMiss) << v.ToString();
      EXPECT_EQ(v.axis, axis) << v.ToString();
      EXPECT_EQ(v.ToString().rfind("MISS{" + std::string(BindingAxisName(axis)) + "}", 0), 0u) << v.ToString();
      // ...or in the resident manifest.
      KVManifest resident = m;
      testing::FlipAxis(&resident.binding, axis, variant);
      v = CheckResidentClaim(exact, resident, kIsolated);
      EXPECT_EQ(v.outcome, ClaimOutcome::kMiss) << v.ToString();
      EXPECT_EQ(v.axis, axis) << v.ToString();
    }
  }
}

TEST(ResidentClaim, SameTokensUnderAnotherModelNeverHit) {
  // The guard the original design lacked: a same-process model switch with identical tokens.
  GateWorld old_model = GateWorld::Make(/*seed=*/7);
  GateWorld new_model = GateWorld::Make(/*seed=*/70);
  ASSERT_EQ(old_model.tokens, new_model.tokens);
  const KVManifest resident = old_model.Manifest(0, 12);
  const ClaimVerdict v = CheckResidentClaim(new_model.Claim(0, 12), resident, kIsolated);
  EXPECT_EQ(v.outcome, ClaimOutcome::kMiss);
  EXPECT_EQ(v.axis, BindingAxis::kModel);
  EXPECT_NE(v.detail.find("model_id"), std::string::npos);
}

TEST(ResidentClaim, AnotherKernelTierMissesOnPrecision) {
  GateWorld w = GateWorld::Make();
  const KVManifest m = w.Manifest(0, 12);
  ResidentClaim claim = w.Claim(0, 12);
  claim.binding.precision.kernel_tier = m.binding.precision.kernel_tier == "scalar" ? "avx2" : "scalar";
  const ClaimVerdict v = CheckResidentClaim(claim, m, kIsolated);
  EXPECT_EQ(v.axis, BindingAxis::kPrecision);
  EXPECT_NE(v.detail.find(m.binding.precision.kernel_tier), std::string::npos) << v.detail;
}

TEST(ResidentClaim, TamperedBytesAreCorrupt) {
  GateWorld w = GateWorld::Make();
  const KVManifest m = w.Manifest(0, 12);
  const ResidentClaim claim = w.Claim(0, 12);
  internal::KVCacheAccess::K(w.cache, 1, 0)[5 * w.cache.shape().head_dim * w.cache.shape().elem_bytes()] ^= std::byte{1};
  ClaimVerdict v = CheckResidentClaim(claim, m, kIsolated, w.cache, 0, 12);
  EXPECT_EQ(v.outcome, ClaimOutcome::kCorrupt) << v.ToString();
  EXPECT_NE(v.detail.find("integrity_checksum"), std::string::npos);
  EXPECT_EQ(v.ToString().rfind("CORRUPT: ", 0), 0u);

  // A supplied digest of other bytes, and a range the cache does not hold, are corrupt too.
  EXPECT_EQ(CheckResidentClaim(claim, m, kIsolated, Digest::Of("other bytes")).outcome, ClaimOutcome::kCorrupt);
  KVCache short_cache = *w.cache.Prefix(4);
  EXPECT_EQ(CheckResidentClaim(claim, m, kIsolated, short_cache, 0, 12).outcome, ClaimOutcome::kCorrupt);
  // Without the bytes the gate cannot see tampering: a binding-only HIT.
  EXPECT_TRUE(CheckResidentClaim(claim, m, kIsolated).hit());
}

TEST(ResidentClaim, ManifestsThatAreNotKVArtifactsAreRefusedOrCorrupt) {
  GateWorld w = GateWorld::Make();
  const ResidentClaim claim = w.Claim(0, 12);
  KVManifest text_plane = w.Manifest(0, 12);
  text_plane.plane = "text";
  ClaimVerdict v = CheckResidentClaim(claim, text_plane, kIsolated);
  EXPECT_EQ(v.outcome, ClaimOutcome::kRefuse);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kNotKVArtifact);
  KVManifest proof = w.Manifest(0, 12);
  proof.provenance = "proof";
  EXPECT_EQ(CheckResidentClaim(claim, proof, kIsolated).refuse_reason, RefuseReason::kNotKVArtifact);

  KVManifest unchecksummed = w.Manifest(0, 12);
  unchecksummed.binding.integrity_checksum = Digest();
  v = CheckResidentClaim(claim, unchecksummed, kIsolated);
  EXPECT_EQ(v.outcome, ClaimOutcome::kCorrupt);
  EXPECT_NE(v.detail.find("integrity_checksum"), std::string::npos);
}

TEST(ResidentClaim, TenancyIsDecidedBeforeTheBinding) {
  GateWorld w = GateWorld::Make();
  const KVManifest m = w.Manifest(0, 12, "acme");
  ResidentClaim claim = w.Claim(0, 12, "globex");
  testing::FlipAxis(&claim.binding, BindingAxis::kModel);
  // A MISS would tell the other tenant the span exists under another model; it gets REFUSE.
  const ClaimVerdict v = CheckResidentClaim(claim, m, kIsolated);
  EXPECT_EQ(v.outcome, ClaimOutcome::kRefuse);
  EXPECT_EQ(v.refuse_reason, RefuseReason::kCrossTenant);
  EXPECT_EQ(v.detail.find("acme"), std::string::npos) << "the owner must not be named: " << v.detail;
}

}  // namespace
}  // namespace fak
