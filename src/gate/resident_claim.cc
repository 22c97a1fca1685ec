// CheckResidentClaim: the gate every reuse of resident KV passes, and its counters.
#include <string>

#include "fak/gate/resident_claim.h"

namespace fak {
namespace {

// Everything but the bytes: a verdict that is final, or nullopt when only the checksum remains.
std::optional<ClaimVerdict> CheckBinding(const ResidentClaim& claim, const KVManifest& manifest,
                                         const AccessPolicy& policy) {
  if (manifest.plane != kKVArtifactPlane || manifest.provenance != kProvenanceStamp) {
    return ClaimVerdict::Refuse(RefuseReason::kNotKVArtifact,
                                "manifest plane \"" + manifest.plane.substr(0, 64) + "\" / provenance \"" +
                                    manifest.provenance.substr(0, 64) + "\" is not a KV artifact");
  }
  if (Status s = manifest.Validate(); !s.ok()) {
    return ClaimVerdict::Corrupt("manifest invalid: " + std::string(s.message()));
  }
  if (std::optional<ClaimVerdict> refused = policy.Check(claim, manifest)) return refused;
  if (std::optional<BindingAxis> axis = FirstDifferingAxis(claim.binding, manifest.binding)) {
    return ClaimVerdict::Miss(*axis, DescribeAxisDifference(*axis, claim.binding, manifest.binding));
  }
  return std::nullopt;
}

ClaimVerdict CompareChecksum(const KVManifest& manifest, const Digest& actual) {
  if (actual == manifest.binding.integrity_checksum) return ClaimVerdict::Hit();
  return ClaimVerdict::Corrupt("integrity_checksum: the KV bytes hash to " + actual.Hex() + ", the manifest says " +
                               manifest.binding.integrity_checksum.Hex());
}

double Ratio(uint64_t num, uint64_t den) { return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den); }

}  // namespace

std::string_view RefuseReasonName(RefuseReason reason) {
  switch (reason) {
    case RefuseReason::kNone: return "none";
    case RefuseReason::kNotKVArtifact: return "not_kv_artifact";
    case RefuseReason::kTenantDenied: return "tenant_denied";
    case RefuseReason::kCrossTenant: return "cross_tenant";
    case RefuseReason::kOutsidePublicPrefix: return "outside_public_prefix";
  }
  return "unknown";
}

std::string ClaimVerdict::ToString() const {
  switch (outcome) {
    case ClaimOutcome::kHit: return "HIT";
    case ClaimOutcome::kMiss: return "MISS{" + std::string(BindingAxisName(axis)) + "}: " + detail;
    case ClaimOutcome::kRefuse: return "REFUSE{" + std::string(RefuseReasonName(refuse_reason)) + "}: " + detail;
    case ClaimOutcome::kCorrupt: return "CORRUPT: " + detail;
  }
  return "UNKNOWN";
}

ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy) {
  if (std::optional<ClaimVerdict> v = CheckBinding(claim, manifest, policy)) return *v;
  return ClaimVerdict::Hit();
}

ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const Digest& actual_checksum) {
  if (std::optional<ClaimVerdict> v = CheckBinding(claim, manifest, policy)) return *v;
  return CompareChecksum(manifest, actual_checksum);
}

ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const KVCache& kv, size_t from, size_t n_tokens) {
  if (std::optional<ClaimVerdict> v = CheckBinding(claim, manifest, policy)) return *v;
  // Hash only once the binding matched: the checksum costs a pass over the span's bytes.
  Result<Digest> actual = KVSpanChecksum(kv, from, n_tokens);
  if (!actual) return ClaimVerdict::Corrupt("integrity_checksum: " + std::string(actual.error().message()));
  return CompareChecksum(manifest, *actual);
}

// ---- counters ----

double GateStats::TokenHitRate() const { return Ratio(hit_tokens, claimed_tokens); }
double GateStats::LookupTokenHitRate() const { return Ratio(served_tokens, lookup_tokens); }

std::string GateStats::ToString() const {
  std::string out = "claims " + std::to_string(claims) + " (" + std::to_string(claimed_tokens) + " tokens)\n";
  out += "hit " + std::to_string(hits) + " (" + std::to_string(hit_tokens) + "/" + std::to_string(claimed_tokens) +
         " tokens, rate " + std::to_string(TokenHitRate()) + ")\n";
  for (int a = 0; a < kNumBindingAxes; ++a) {
    if (misses_by_axis[a] == 0) continue;
    out += "miss." + std::string(BindingAxisName(static_cast<BindingAxis>(a))) + " " + std::to_string(misses_by_axis[a]) +
           " (" + std::to_string(miss_tokens_by_axis[a]) + " tokens)\n";
  }
  for (int r = 1; r < kNumRefuseReasons; ++r) {
    if (refusals_by_reason[r] == 0) continue;
    out += "refuse." + std::string(RefuseReasonName(static_cast<RefuseReason>(r))) + " " +
           std::to_string(refusals_by_reason[r]) + "\n";
  }
  if (corruptions != 0) out += "corrupt " + std::to_string(corruptions) + "\n";
  out += "lookups " + std::to_string(lookups) + " (served " + std::to_string(served_tokens) + "/" +
         std::to_string(lookup_tokens) + " tokens, rate " + std::to_string(LookupTokenHitRate()) + ")\n";
  return out;
}

void GateCounters::Record(const ClaimVerdict& verdict, uint64_t n_tokens) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  claims_.fetch_add(1, kRelaxed);
  claimed_tokens_.fetch_add(n_tokens, kRelaxed);
  switch (verdict.outcome) {
    case ClaimOutcome::kHit:
      hits_.fetch_add(1, kRelaxed);
      hit_tokens_.fetch_add(n_tokens, kRelaxed);
      break;
    case ClaimOutcome::kMiss:
      misses_.fetch_add(1, kRelaxed);
      misses_by_axis_[static_cast<int>(verdict.axis)].fetch_add(1, kRelaxed);
      miss_tokens_by_axis_[static_cast<int>(verdict.axis)].fetch_add(n_tokens, kRelaxed);
      break;
    case ClaimOutcome::kRefuse:
      refusals_.fetch_add(1, kRelaxed);
      refusals_by_reason_[static_cast<int>(verdict.refuse_reason)].fetch_add(1, kRelaxed);
      break;
    case ClaimOutcome::kCorrupt:
      corruptions_.fetch_add(1, kRelaxed);
      break;
  }
}

void GateCounters::RecordLookup(uint64_t requested_tokens, uint64_t served_tokens) {
  lookups_.fetch_add(1, std::memory_order_relaxed);
  lookup_tokens_.fetch_add(requested_tokens, std::memory_order_relaxed);
  served_tokens_.fetch_add(served_tokens, std::memory_order_relaxed);
}

GateStats GateCounters::Snapshot() const {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  GateStats s;
  s.claims = claims_.load(kRelaxed);
  s.hits = hits_.load(kRelaxed);
  s.misses = misses_.load(kRelaxed);
  s.refusals = refusals_.load(kRelaxed);
  s.corruptions = corruptions_.load(kRelaxed);
  s.claimed_tokens = claimed_tokens_.load(kRelaxed);
  s.hit_tokens = hit_tokens_.load(kRelaxed);
  for (int a = 0; a < kNumBindingAxes; ++a) {
    s.misses_by_axis[a] = misses_by_axis_[a].load(kRelaxed);
    s.miss_tokens_by_axis[a] = miss_tokens_by_axis_[a].load(kRelaxed);
  }
  for (int r = 0; r < kNumRefuseReasons; ++r) s.refusals_by_reason[r] = refusals_by_reason_[r].load(kRelaxed);
  s.lookups = lookups_.load(kRelaxed);
  s.lookup_tokens = lookup_tokens_.load(kRelaxed);
  s.served_tokens = served_tokens_.load(kRelaxed);
  return s;
}

void GateCounters::Reset() {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  for (auto* c : {&claims_, &hits_, &misses_, &refusals_, &corruptions_, &claimed_tokens_, &hit_tokens_, &lookups_,
                  &lookup_tokens_, &served_tokens_}) {
    c->store(0, kRelaxed);
  }
  for (auto& c : misses_by_axis_) c.store(0, kRelaxed);
  for (auto& c : miss_tokens_by_axis_) c.store(0, kRelaxed);
  for (auto& c : refusals_by_reason_) c.store(0, kRelaxed);
}

}  // namespace fak
