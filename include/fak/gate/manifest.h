// Manifest gate: decides, for every reuse of resident KV, HIT / MISS{axis} / REFUSE / CORRUPT.
//
// A KV span is a build artifact of (model, tokenizer, adapter, numeric regime, position convention,
// producer, token ids); served under any other binding it is silently wrong. A BindingTuple names
// those nine axes by derivation — digests of weights, vocabulary, token ids and KV bytes, never a
// served name. A KVManifest describes one resident span: its tuple, the digest of the source text,
// its tenant and sharing, its plane and a provenance stamp (a KV hit is performance material, never
// proof). CheckResidentClaim answers HIT only when every axis matches; MISS names the first axis
// that differs in a fixed order; REFUSE is a tenancy or policy denial; CORRUPT means the bytes do
// not match the manifest's checksum. Manifests and transfers serialize to canonical JSON
// (docs/manifest.md). See architecture §6.
#ifndef FAK_GATE_MANIFEST_H_
#define FAK_GATE_MANIFEST_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"
#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// ---- the binding tuple ----

// The nine axes, in the fixed order in which a MISS reports the first difference.
enum class BindingAxis : int {
  kModel = 0,           // digest of the weights and config (Model::WeightsDigest)
  kTokenizer,           // digest of the vocabulary and rules (Tokenizer::id)
  kAdapter,             // digest of the adapter weights; zero = no adapter
  kPrecision,           // weight dtype, KV dtype, kernel tier
  kPositionConvention,  // RoPE pairing, base, scaling
  kProducer,            // library version and kernel build
  kSpanDigest,          // digest of the token ids the span was computed under
  kTokens,              // the span's token range
  kIntegrityChecksum,   // digest of the span's KV bytes
};
inline constexpr int kNumBindingAxes = 9;
// "model_id", "tokenizer_id", "adapter_id", "precision", "position_convention", "producer",
// "span_digest", "tokens", "integrity_checksum" (the JSON field names).
std::string_view BindingAxisName(BindingAxis axis);

struct Precision {
  std::string weight_dtype;  // "f32" (quantized types later: "q8_0", ...)
  std::string kv_dtype;      // "f32"
  std::string kernel_tier;   // "scalar" | "avx2" | "avx512" (ActiveKernelTier)
  friend bool operator==(const Precision&, const Precision&) = default;
};

struct PositionConvention {
  std::string scheme = "rope";
  std::string pairing;           // "adjacent" (2i, 2i+1) | "split_half" (i, i + head_dim/2)
  double base = 0;               // RoPE theta; finite and > 1
  std::string scaling = "none";  // RoPE frequency scaling: ModelConfig::RopeScalingLabel()
  friend bool operator==(const PositionConvention&, const PositionConvention&) = default;
};

struct Producer {
  std::string library = "fak";
  std::string version;       // LibraryVersion()
  std::string kernel_build;  // KernelBuild(): kernel revision and compiler
  friend bool operator==(const Producer&, const Producer&) = default;
};

// Tokens [from, from + count) of the context the span belongs to.
struct TokenRange {
  uint64_t from = 0;
  uint64_t count = 0;
  uint64_t end() const { return from + count; }
  friend bool operator==(const TokenRange&, const TokenRange&) = default;
};

struct BindingTuple {
  Digest model_id;
  Digest tokenizer_id;
  Digest adapter_id;  // zero: no adapter
  Precision precision;
  PositionConvention position;
  Producer producer;
  // SpanDigestOf(context tokens [0, tokens.end())): a span's K/V depend on every earlier token.
  Digest span_digest;
  TokenRange tokens;
  // KVSpanChecksum of the span. In a claim, zero means "any" (a caller rarely knows the bytes).
  Digest integrity_checksum;

  // InvalidArgument naming the first empty or malformed field.
  Status Validate() const;
  friend bool operator==(const BindingTuple&, const BindingTuple&) = default;
};

// The first axis, in BindingAxis order, on which a claim and a resident tuple differ; nullopt when
// they agree on all nine. A claim whose integrity_checksum is zero agrees with any checksum.
std::optional<BindingAxis> FirstDifferingAxis(const BindingTuple& claim, const BindingTuple& resident);
// "claim avx2 vs resident avx512"-style description of how one axis differs (for MISS details).
std::string DescribeAxisDifference(BindingAxis axis, const BindingTuple& claim, const BindingTuple& resident);

// sha256("fak.span.v1" || u64 n || n little-endian int32 ids) over a whole context prefix.
Digest SpanDigestOf(std::span<const int32_t> context_tokens);

// The regime axes of `model` + `tokenizer` running now: model_id, tokenizer_id, adapter (none),
// precision (weight dtype, KV dtype, ActiveKernelTier), position convention and producer. The span
// fields are left empty. Cost: Model::WeightsDigest (one pass over the weights on first call).
BindingTuple RegimeBinding(const Model& model, const Tokenizer& tokenizer);

// `regime` with the span fields set for tokens [from, from + n_tokens) of `context_tokens` (which
// holds the context from token 0; ids past the span's end are ignored). The integrity checksum is
// left as it was. InvalidArgument when the span does not fit the context or is empty.
Result<BindingTuple> BindSpan(BindingTuple regime, std::span<const int32_t> context_tokens, size_t from,
                              size_t n_tokens);

// sha256 over the bytes of tokens [from, from + n_tokens) of `cache`: shape, token ids, positions,
// and per layer and KV head the K, Kraw and V rows. InvalidArgument when the range does not fit.
// A radix-tree slab that holds only its edge is checksummed as (slab, 0, slab.size()).
Result<Digest> KVSpanChecksum(const KVCache& cache, size_t from, size_t n_tokens);

// All nine axes for tokens [from, from + n_tokens) of `cache`, a cache of `model` holding its
// context from token 0 (its token ids give the span digest). InvalidArgument for a cache of another
// model or a range that does not fit.
Result<BindingTuple> BindCacheSpan(const Model& model, const Tokenizer& tokenizer, const KVCache& cache,
                                   size_t from, size_t n_tokens);

// ---- the manifest ----

inline constexpr int kManifestSchemaVersion = 1;
inline constexpr std::string_view kManifestSchema = "fak.kv_manifest";
inline constexpr std::string_view kKVArtifactPlane = "kv_artifact";
inline constexpr std::string_view kProvenanceStamp = "performance_material_not_proof";

// Who may reuse a span. kPublicPrefix lets other tenants reuse it, but only the part of it that
// lies inside a prefix the AccessPolicy declares public (a common system prompt).
enum class Sharing { kTenantOnly, kPublicPrefix };
std::string_view SharingName(Sharing sharing);  // "tenant_only" | "public_prefix"

// Tenant names: 1..128 characters of [A-Za-z0-9._:@/+-].
bool IsValidTenant(std::string_view tenant);

// One resident KV span. Plain value; copy freely.
struct KVManifest {
  BindingTuple binding;
  Digest source_digest;  // sha256 of the source text the span was prefilled from
  std::string tenant;
  Sharing sharing = Sharing::kTenantOnly;
  std::string plane = std::string(kKVArtifactPlane);
  std::string provenance = std::string(kProvenanceStamp);
  int64_t created_unix_ms = 0;

  // InvalidArgument naming the first bad field (the binding's checksum must be set here).
  Status Validate() const;
  // sha256 of the canonical JSON of every field except binding_digest itself (docs/manifest.md).
  Digest BindingDigest() const;
  // Canonical JSON: sorted keys, no whitespace, schema and schema_version, binding_digest. Fails
  // (InvalidArgument) on a manifest that FromJson would reject, so emitted JSON always parses.
  Result<std::string> ToJson() const;
  // Parses JSON of schema_version 1 (canonical or not). InvalidArgument for malformed JSON or a
  // missing, unknown, mistyped or invalid field (the message names it); Unsupported for another
  // schema or version; Corruption when binding_digest does not match the fields. Never throws.
  static Result<KVManifest> FromJson(std::string_view json);

  friend bool operator==(const KVManifest&, const KVManifest&) = default;
};

// A manifest stamped now (created_unix_ms from the system clock), validated.
Result<KVManifest> MakeManifest(BindingTuple binding, const Digest& source_digest, std::string tenant,
                                Sharing sharing = Sharing::kTenantOnly);

// ---- claims, policy and verdicts ----

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
std::string_view RefuseReasonName(RefuseReason reason);  // "none", "not_kv_artifact", ...

struct ClaimVerdict {
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
class AccessPolicy {
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
ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy);
// As above, comparing `actual_checksum` (of the bytes about to be served) with the manifest's.
ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const Digest& actual_checksum);
// As above, checksumming tokens [from, from + n_tokens) of `kv` (CORRUPT when the range does not fit).
ClaimVerdict CheckResidentClaim(const ResidentClaim& claim, const KVManifest& manifest, const AccessPolicy& policy,
                                const KVCache& kv, size_t from, size_t n_tokens);

// ---- counters ----

// A snapshot of gate counters. Token-level rates carry their denominators.
struct GateStats {
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
class GateCounters {
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

// ---- transfers between tiers (a data contract; no engine behind it yet) ----

// Storage tiers, hottest first.
enum class KVTier : int { kResidentMemory = 0, kLocalDisk, kRemoteStore };
std::string_view KVTierName(KVTier tier);  // "resident_memory" | "local_disk" | "remote_store"
enum class TransferDirection { kOffload, kOnload };
std::string_view TransferDirectionName(TransferDirection direction);  // "offload" | "onload"

inline constexpr std::string_view kTransferSchema = "fak.kv_transfer";

// Moving one span between tiers: offload goes to a colder tier, onload to a hotter one. The
// manifest travels with the bytes so the receiving tier gates reuse exactly as the sender did.
struct KVTransfer {
  TransferDirection direction = TransferDirection::kOffload;
  KVTier source = KVTier::kResidentMemory;
  KVTier target = KVTier::kLocalDisk;
  KVManifest manifest;

  // InvalidArgument when the direction disagrees with the tiers or the manifest is invalid.
  Status Validate() const;
  // Canonical JSON (docs/manifest.md); the manifest is embedded as an object.
  Result<std::string> ToJson() const;
  static Result<KVTransfer> FromJson(std::string_view json);

  friend bool operator==(const KVTransfer&, const KVTransfer&) = default;
};

}  // namespace fak

#endif  // FAK_GATE_MANIFEST_H_
