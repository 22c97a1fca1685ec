// The manifest gate: for every reuse of resident KV, HIT / MISS{axis} / REFUSE / CORRUPT.
//
// A caller claims a binding for a tenant; CheckResidentClaim answers HIT only when every axis of
// the resident span's manifest matches, MISS naming the first axis that differs in a fixed order,
// REFUSE for a tenancy or policy denial (AccessPolicy), CORRUPT when the bytes do not match the
// manifest's checksum. GateCounters keeps the verdicts for metrics. See architecture §6.
#ifndef FAK_GATE_RESIDENT_CLAIM_H_
#define FAK_GATE_RESIDENT_CLAIM_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/gate/binding_tuple.h"
#include "fak/gate/kv_manifest.h"
#include "fak/kv/kv_cache.h"

namespace fak {

// What a caller asks for: the binding it needs and the tenant it acts for.
struct ResidentClaim {
  BindingTuple binding;
  std::string tenant;
};

enum class ClaimOutcome { kHit, kMiss, kRefuse, kCorrupt };
enum class RefuseReason : int {
  kNone = 0,
  kNotKVArtifact,       // the manifest's plane or provenance is not that of a KV artifact
  kTenantDenied,        // the claim names no valid tenant, or the policy denies it
  kCrossTenant,         // another tenant's span, not shared
  kOutsidePublicPrefix, // shared, but not (wholly) inside a declared public prefix
};
inline constexpr int kNumRefuseReasons = 5;
FAK_EXPORT std::string_view RefuseReasonName(RefuseReason reason);  // "none", "not_kv_artifact", ...

struct FAK_EXPORT ClaimVerdict {
  ClaimOutcome outcome = ClaimOutcome::kMiss;
  BindingAxis axis = BindingAxis::kModel;       // meaningful for kMiss only
  RefuseReason refuse_reason = RefuseReason::kNone;  // meaningful for kRefuse only
  std::string detail;                           // which field, and the values that disagree

  bool hit() const { return outcome == ClaimOutcome::kHit; }
  // "HIT", "MISS{precision}: ...", "REFUSE{cross_tenant}: ...", "CORRUPT: ...".
  std::string ToString() const;

  static ClaimVerdict Hit() { return {ClaimOutcome::kHit, BindingAxis::kModel, RefuseReason::kNone, {}}; }
  static ClaimVerdict Miss(BindingAxis axis, std::string detail) {
    return {ClaimOutcome::kMiss, axis, RefuseReason::kNone, std::move(detail)};
  }
  static ClaimVerdict Refuse(RefuseReason reason, std::string detail) {
    return {ClaimOutcome::kRefuse, BindingAxis::kModel, reason, std::move(detail)};
  }
  static ClaimVerdict Corrupt(std::string detail) {
    return {ClaimOutcome::kCorrupt, BindingAxis::kModel, RefuseReason::kNone, std::move(detail)};
  }
};

// Tenancy rules. Default: every span is visible to its own tenant only. Configure before serving:
// const methods are safe to call concurrently; mutations need exclusive access.
class FAK_EXPORT AccessPolicy {
 public:
  // Declares tokens [0, n) of a context as public: spans marked kPublicPrefix that lie inside it
  // are reusable by every tenant. InvalidArgument for an empty name or token list, or a name
  // declared twice.
  Status DeclarePublicPrefix(std::string name, std::vector<int32_t> tokens);
  // Refuses every claim made for `tenant` (e.g. a tenant being offboarded).
  void DenyTenant(std::string tenant);

  // The length of the longest declared public prefix that `context_tokens` starts with, 0 if none:
  // where a radix tree splits an edge so the public part can be marked kPublicPrefix.
  size_t PublicPrefixLength(std::span<const int32_t> context_tokens) const;
  // A REFUSE verdict when `claim.tenant` may not reuse `manifest`'s span; nullopt when it may.
  // Cost for a cross-tenant shared span: one digest over the public prefix up to the span's end.
  std::optional<ClaimVerdict> Check(const ResidentClaim& claim, const KVManifest& manifest) const;

 private:
  struct PublicPrefix {
    std::string name;
    std::vector<int32_t> tokens;
  };
  std::vector<PublicPrefix> public_prefixes_;
  std::vector<std::string> denied_tenants_;
};

// The gate. Order: the manifest's plane (REFUSE), its validity (CORRUPT), tenancy (REFUSE, before
// anything about the binding is revealed), the nine axes (MISS on the first difference), then —
// when the span's actual bytes are supplied — the checksum (CORRUPT). HIT otherwise.
FAK_EXPORT ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy);
// As above, comparing `actual_checksum` (of the bytes about to be served) with the manifest's.
FAK_EXPORT ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const Digest& actual_checksum);
// As above, checksumming tokens [from, from + n_tokens) of `kv` (CORRUPT when the range does not fit).
FAK_EXPORT ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const KVCache& kv, size_t from, size_t n_tokens);

// ---- counters ----

// A snapshot of gate counters. Token-level rates carry their denominators.
struct FAK_EXPORT GateStats {
  uint64_t claims = 0, hits = 0, misses = 0, refusals = 0, corruptions = 0;
  uint64_t claimed_tokens = 0;  // denominator: tokens of every claim checked
  uint64_t hit_tokens = 0;      // tokens of claims answered HIT
  std::array<uint64_t, kNumBindingAxes> misses_by_axis{};
  std::array<uint64_t, kNumBindingAxes> miss_tokens_by_axis{};
  std::array<uint64_t, kNumRefuseReasons> refusals_by_reason{};
  uint64_t lookups = 0;        // whole lookups (e.g. one radix-tree lookup per prompt)
  uint64_t lookup_tokens = 0;  // denominator: prompt tokens looked up
  uint64_t served_tokens = 0;  // tokens served from cache across those lookups

  // hit_tokens / claimed_tokens; 0 when nothing was claimed.
  double TokenHitRate() const;
  // served_tokens / lookup_tokens; 0 when nothing was looked up.
  double LookupTokenHitRate() const;
  // One line per nonzero counter, e.g. "miss.precision 3 (48 tokens)".
  std::string ToString() const;
};

// Verdict counters by outcome, axis and refusal reason. Thread-safe (relaxed atomics): a snapshot
// taken while others record may mix counts from just before and just after a record.
class FAK_EXPORT GateCounters {
 public:
  // Counts one verdict for a claim over `n_tokens` tokens.
  void Record(const ClaimVerdict& verdict, uint64_t n_tokens);
  // Counts one lookup of `requested_tokens` of which `served_tokens` came from cache.
  void RecordLookup(uint64_t requested_tokens, uint64_t served_tokens);
  GateStats Snapshot() const;
  void Reset();

 private:
  std::atomic<uint64_t> claims_{0}, hits_{0}, misses_{0}, refusals_{0}, corruptions_{0};
  std::atomic<uint64_t> claimed_tokens_{0}, hit_tokens_{0};
  std::array<std::atomic<uint64_t>, kNumBindingAxes> misses_by_axis_{};
  std::array<std::atomic<uint64_t>, kNumBindingAxes> miss_tokens_by_axis_{};
  std::array<std::atomic<uint64_t>, kNumRefuseReasons> refusals_by_reason_{};
  std::atomic<uint64_t> lookups_{0}, lookup_tokens_{0}, served_tokens_{0};
};
}  // namespace fak

#endif  // FAK_GATE_RESIDENT_CLAIM_H_
