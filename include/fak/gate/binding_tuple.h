// BindingTuple: the nine axes that say what a KV span was computed under, and how to derive them.
//
// A KV span is a build artifact of (model, tokenizer, adapter, numeric regime, position convention,
// producer, token ids); served under any other binding it is silently wrong. A BindingTuple names
// those nine axes by derivation — digests of weights, vocabulary, token ids and KV bytes, never a
// served name — so the gate (resident_claim.h) can compare a claim with a resident span axis by
// axis. See architecture §6 and docs/manifest.md.
#ifndef FAK_GATE_BINDING_TUPLE_H_
#define FAK_GATE_BINDING_TUPLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

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
FAK_EXPORT std::string_view BindingAxisName(BindingAxis axis);

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

struct FAK_EXPORT BindingTuple {
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
FAK_EXPORT std::optional<BindingAxis> FirstDifferingAxis(const BindingTuple& claim, const BindingTuple& resident);
// "claim avx2 vs resident avx512"-style description of how one axis differs (for MISS details).
FAK_EXPORT std::string DescribeAxisDifference(BindingAxis axis, const BindingTuple& claim, const BindingTuple& resident);

// sha256("fak.span.v1" || u64 n || n little-endian int32 ids) over a whole context prefix.
FAK_EXPORT Digest SpanDigestOf(std::span<const int32_t> context_tokens);

// The regime axes of `model` + `tokenizer` running now: model_id, tokenizer_id, adapter (none),
// precision (weight dtype, KV dtype, ActiveKernelTier), position convention and producer. The span
// fields are left empty. Cost: Model::WeightsDigest (one pass over the weights on first call).
FAK_EXPORT BindingTuple RegimeBinding(const Model& model, const Tokenizer& tokenizer);

// `regime` with the span fields set for tokens [from, from + n_tokens) of `context_tokens` (which
// holds the context from token 0; ids past the span's end are ignored). The integrity checksum is
// left as it was. InvalidArgument when the span does not fit the context or is empty.
FAK_EXPORT Result<BindingTuple> BindSpan(BindingTuple regime, std::span<const int32_t> context_tokens, size_t from,
                              size_t n_tokens);

// sha256 over the bytes of tokens [from, from + n_tokens) of `cache`: shape, token ids, positions,
// and per layer and KV head the K, Kraw and V rows. InvalidArgument when the range does not fit.
// A radix-tree slab that holds only its edge is checksummed as (slab, 0, slab.size()).
FAK_EXPORT Result<Digest> KVSpanChecksum(const KVCache& cache, size_t from, size_t n_tokens);

// sha256 over a detached slab as a radix-tree node holds it ("fak.kv_slab.v2": shape, start position,
// dtype, token ids, then the digests of K's, Kraw's and V's 32 KiB chunks): the integrity checksum
// of a tree node's manifest (docs/manifest.md §1). The chunks hash on several threads, many at once
// per core where libipsec-mb is built in; the value does not depend on how.
FAK_EXPORT Digest KVSlabChecksum(const KVSlab& slab);
// All nine axes for tokens [from, from + n_tokens) of `cache`, a cache of `model` holding its
// context from token 0 (its token ids give the span digest). InvalidArgument for a cache of another
// model or a range that does not fit.
FAK_EXPORT Result<BindingTuple> BindCacheSpan(const Model& model, const Tokenizer& tokenizer, const KVCache& cache,
                                   size_t from, size_t n_tokens);
}  // namespace fak

#endif  // FAK_GATE_BINDING_TUPLE_H_
