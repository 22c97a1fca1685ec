// BindingTuple: the nine axes, how each is derived from a model, tokenizer and cache, and how two
// tuples are compared axis by axis.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "fak/kernels/kernel_tier.h"
#include "fak/gate/binding_tuple.h"
#include "fak/core/version.h"
#include "src/core/chunk_hasher.h"
#include "src/core/dcheck.h"
#include "src/core/run_tasks.h"
#include "src/gate/kv_slab_checksum.h"
#include "src/gate/manifest_json.h"
#include "src/core/str_cat.h"

namespace fak {
namespace {

// Printable ASCII, 1..128 characters: keeps every label valid UTF-8 and readable in messages.
bool IsLabel(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Status CheckLabel(std::string_view field, std::string_view value) {
  if (IsLabel(value)) return Status::Ok();
  return InvalidArgument(std::string(field) + ": must be 1..128 printable ASCII characters, got \"" +
                         std::string(value.substr(0, 64)) + "\"");
}

std::string Short(const Digest& d) { return d.IsZero() ? "none" : d.Hex().substr(0, 16); }

std::string Pair(const std::string& claim, const std::string& resident) {
  return "claim " + claim + " vs resident " + resident;
}

std::string PrecisionText(const Precision& p) { return p.weight_dtype + "/" + p.kv_dtype + "/" + p.kernel_tier; }
std::string PositionText(const PositionConvention& p) {
  return p.scheme + " " + p.pairing + " base " + internal::FormatDouble(p.base) + " scaling " + p.scaling;
}
std::string ProducerText(const Producer& p) { return p.library + " " + p.version + " (" + p.kernel_build + ")"; }
std::string RangeText(const TokenRange& r) {
  return internal::StrCat("[", std::to_string(r.from), ", ", std::to_string(r.from + r.count), ")");
}

}  // namespace

std::string_view BindingAxisName(BindingAxis axis) {
  switch (axis) {
    case BindingAxis::kModel: return "model_id";
    case BindingAxis::kTokenizer: return "tokenizer_id";
    case BindingAxis::kAdapter: return "adapter_id";
    case BindingAxis::kPrecision: return "precision";
    case BindingAxis::kPositionConvention: return "position_convention";
    case BindingAxis::kProducer: return "producer";
    case BindingAxis::kSpanDigest: return "span_digest";
    case BindingAxis::kTokens: return "tokens";
    case BindingAxis::kIntegrityChecksum: return "integrity_checksum";
  }
  return "unknown";
}

Status BindingTuple::Validate() const {
  if (model_id.IsZero()) return InvalidArgument("binding.model_id: must be set (the weights digest)");
  if (tokenizer_id.IsZero()) return InvalidArgument("binding.tokenizer_id: must be set (the tokenizer digest)");
  FAK_RETURN_IF_ERROR(CheckLabel("binding.precision.weight_dtype", precision.weight_dtype));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.precision.kv_dtype", precision.kv_dtype));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.precision.kernel_tier", precision.kernel_tier));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.position_convention.scheme", position.scheme));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.position_convention.pairing", position.pairing));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.position_convention.scaling", position.scaling));
  if (!std::isfinite(position.base) || !(position.base > 1.0)) {
    return InvalidArgument("binding.position_convention.base: must be finite and > 1, got " +
                           internal::FormatDouble(position.base));
  }
  FAK_RETURN_IF_ERROR(CheckLabel("binding.producer.library", producer.library));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.producer.version", producer.version));
  FAK_RETURN_IF_ERROR(CheckLabel("binding.producer.kernel_build", producer.kernel_build));
  if (span_digest.IsZero()) return InvalidArgument("binding.span_digest: must be set (the token-id digest)");
  if (tokens.count == 0) return InvalidArgument("binding.tokens.count: must be > 0");
  if (tokens.count > std::numeric_limits<uint64_t>::max() - tokens.from) {
    return InvalidArgument("binding.tokens: from + count overflows");
  }
  return Status::Ok();
}

std::optional<BindingAxis> FirstDifferingAxis(const BindingTuple& claim, const BindingTuple& resident) {
  if (claim.model_id != resident.model_id) return BindingAxis::kModel;
  if (claim.tokenizer_id != resident.tokenizer_id) return BindingAxis::kTokenizer;
  if (claim.adapter_id != resident.adapter_id) return BindingAxis::kAdapter;
  if (!(claim.precision == resident.precision)) return BindingAxis::kPrecision;
  if (!(claim.position == resident.position)) return BindingAxis::kPositionConvention;
  if (!(claim.producer == resident.producer)) return BindingAxis::kProducer;
  if (claim.span_digest != resident.span_digest) return BindingAxis::kSpanDigest;
  if (!(claim.tokens == resident.tokens)) return BindingAxis::kTokens;
  if (!claim.integrity_checksum.IsZero() && claim.integrity_checksum != resident.integrity_checksum) {
    return BindingAxis::kIntegrityChecksum;
  }
  return std::nullopt;
}

std::string DescribeAxisDifference(BindingAxis axis, const BindingTuple& c, const BindingTuple& r) {
  std::string what;
  switch (axis) {
    case BindingAxis::kModel: what = Pair(Short(c.model_id), Short(r.model_id)); break;
    case BindingAxis::kTokenizer: what = Pair(Short(c.tokenizer_id), Short(r.tokenizer_id)); break;
    case BindingAxis::kAdapter: what = Pair(Short(c.adapter_id), Short(r.adapter_id)); break;
    case BindingAxis::kPrecision: what = Pair(PrecisionText(c.precision), PrecisionText(r.precision)); break;
    case BindingAxis::kPositionConvention: what = Pair(PositionText(c.position), PositionText(r.position)); break;
    case BindingAxis::kProducer: what = Pair(ProducerText(c.producer), ProducerText(r.producer)); break;
    case BindingAxis::kSpanDigest: what = Pair(Short(c.span_digest), Short(r.span_digest)); break;
    case BindingAxis::kTokens: what = Pair(RangeText(c.tokens), RangeText(r.tokens)); break;
    case BindingAxis::kIntegrityChecksum:
      what = Pair(Short(c.integrity_checksum), Short(r.integrity_checksum));
      break;
  }
  return std::string(BindingAxisName(axis)) + ": " + what;
}

Digest SpanDigestOf(std::span<const int32_t> context_tokens) {
  Digester d;
  d.Update("fak.span.v1");
  d.UpdatePod(static_cast<uint64_t>(context_tokens.size()));
  d.Update(context_tokens.data(), context_tokens.size_bytes());
  return d.Finish();
}

BindingTuple RegimeBinding(const Model& model, const Tokenizer& tokenizer) {
  const ModelConfig& config = model.config();
  BindingTuple t;
  t.model_id = model.WeightsDigest();
  t.tokenizer_id = tokenizer.id();
  t.precision = Precision{model.WeightDTypes(), std::string(KVDtypeName(model.kv_dtype())), std::string(ActiveKernelTier())};
  t.position.scheme = "rope";
  t.position.pairing = config.rope_pairing == RopePairing::kAdjacent ? "adjacent" : "split_half";
  t.position.base = config.rope_base;
  t.position.scaling = config.RopeScalingLabel();  // KV rotated under other scaling never HITs
  t.producer = Producer{"fak", std::string(LibraryVersion()), std::string(KernelBuild())};
  return t;
}

Result<BindingTuple> BindSpan(BindingTuple regime, std::span<const int32_t> context_tokens, size_t from,
                              size_t n_tokens) {
  if (n_tokens == 0) return InvalidArgument("BindSpan: n_tokens must be > 0");
  if (from > context_tokens.size() || n_tokens > context_tokens.size() - from) {
    return InvalidArgument("BindSpan: span [" + std::to_string(from) + ", +" + std::to_string(n_tokens) +
                           ") does not fit a context of " + std::to_string(context_tokens.size()) + " tokens");
  }
  regime.span_digest = SpanDigestOf(context_tokens.first(from + n_tokens));
  regime.tokens = TokenRange{from, n_tokens};
  return regime;
}

Result<Digest> KVSpanChecksum(const KVCache& cache, size_t from, size_t n_tokens) {
  if (from > cache.size() || n_tokens > cache.size() - from) {
    return InvalidArgument("KVSpanChecksum: span [" + std::to_string(from) + ", +" + std::to_string(n_tokens) +
                           ") does not fit a cache of " + std::to_string(cache.size()) + " tokens");
  }
  if (n_tokens > 0 && from < cache.held_from()) {
    return FailedPrecondition("KVSpanChecksum: the cache's sliding-window layers no longer hold token " +
                              std::to_string(from) + " (they keep [" + std::to_string(cache.held_from()) + ", " +
                              std::to_string(cache.size()) + "))");
  }
  const KVShape& s = cache.shape();
  Digester d;
  d.Update("fak.kv_span.v1");
  for (size_t v : {s.n_layers, s.n_kv_heads, s.head_dim, n_tokens}) d.UpdatePod(static_cast<uint64_t>(v));
  if (s.dtype != KVDtype::kF32) d.Update(KVDtypeName(s.dtype));  // (f32 checksums stay as they were)
  d.Update(cache.tokens().data() + from, n_tokens * sizeof(int32_t));
  d.Update(cache.positions().data() + from, n_tokens * sizeof(int32_t));
  const size_t row_bytes = s.head_dim * s.elem_bytes();
  for (size_t l = 0; l < s.n_layers; ++l) {
    for (size_t h = 0; h < s.n_kv_heads; ++h) {
      for (const std::byte* KVCache::Rows::*tensor : {&KVCache::Rows::k, &KVCache::Rows::kraw, &KVCache::Rows::v})
        cache.ForEachRun(l, h, from, n_tokens, [&](const KVCache::Rows& r) { d.Update(r.*tensor, r.n * row_bytes); });
    }
  }
  return d.Finish();
}

Digest internal::SlabChecksumOfChunks(const KVShape& shape, size_t start_position, std::span<const int32_t> tokens,
                                      std::span<const Digest> chunk_digests) {
  Digester d;
  d.Update("fak.kv_slab.v2");
  d.UpdatePod(static_cast<uint64_t>(shape.n_layers)).UpdatePod(static_cast<uint64_t>(shape.n_kv_heads));
  d.UpdatePod(static_cast<uint64_t>(shape.head_dim)).UpdatePod(static_cast<uint64_t>(start_position));
  d.Update(KVDtypeName(shape.dtype));
  d.UpdatePod(static_cast<uint64_t>(tokens.size())).Update(tokens.data(), tokens.size() * sizeof(int32_t));
  d.UpdatePod(static_cast<uint64_t>(internal::kSlabChecksumChunkBytes));
  for (const Digest& c : chunk_digests) d.Update(c.bytes.data(), c.bytes.size());
  return d.Finish();
}

Result<std::vector<Digest>> internal::SlabChunkDigests(std::array<const std::byte*, 3> tensors, size_t tensor_bytes,
                                                       const std::function<Status(size_t, size_t, size_t)>& fill) {
  const size_t per_tensor = SlabChunksPerTensor(tensor_bytes);
  const size_t tasks_per_tensor = (per_tensor + kSlabChunksPerTask - 1) / kSlabChunksPerTask;
  const size_t threads = ThreadsForBytes(3 * tensor_bytes);
  std::vector<Digest> digests(3 * per_tensor);
  std::vector<ChunkHasher> hashers(threads);  // one per worker; each makes its manager on first use
  FAK_RETURN_IF_ERROR(RunTasks(3 * tasks_per_tensor, threads, [&](size_t task, size_t worker) {
    const size_t t = task / tasks_per_tensor, first = (task % tasks_per_tensor) * kSlabChunksPerTask;
    const size_t n = std::min(kSlabChunksPerTask, per_tensor - first), offset = first * kSlabChecksumChunkBytes;
    const size_t bytes = std::min(n * kSlabChecksumChunkBytes, tensor_bytes - offset);
    if (fill) FAK_RETURN_IF_ERROR(fill(t, offset, bytes));
    std::array<std::span<const std::byte>, kSlabChunksPerTask> chunks;
    for (size_t c = 0; c < n; ++c) {
      const size_t at = c * kSlabChecksumChunkBytes;
      chunks[c] = std::span(tensors[t] + offset + at, std::min(kSlabChecksumChunkBytes, bytes - at));
    }
    hashers[worker].Hash(std::span(chunks).first(n), std::span(digests).subspan(t * per_tensor + first, n));
    return Status::Ok();
  }));
  return digests;
}

Digest KVSlabChecksum(const KVSlab& slab) {
  FAK_DCHECK(slab.kraw.size() == slab.k.size() && slab.v.size() == slab.k.size());
  Result<std::vector<Digest>> chunks = internal::SlabChunkDigests({slab.k.data(), slab.kraw.data(), slab.v.data()}, slab.k.size(), nullptr);
  FAK_DCHECK(chunks.has_value());  // nothing to read, so nothing fails
  return internal::SlabChecksumOfChunks(slab.shape, slab.start_position, slab.tokens, *chunks);
}

Result<BindingTuple> BindCacheSpan(const Model& model, const Tokenizer& tokenizer, const KVCache& cache, size_t from,
                                   size_t n_tokens) {
  if (!model.Owns(cache)) {
    return InvalidArgument("BindCacheSpan: the cache was not made by this model (" + model.config().Describe() + ")");
  }
  FAK_ASSIGN_OR_RETURN(BindingTuple t, BindSpan(RegimeBinding(model, tokenizer), cache.tokens(), from, n_tokens));
  FAK_ASSIGN_OR_RETURN(t.integrity_checksum, KVSpanChecksum(cache, from, n_tokens));
  return t;
}

}  // namespace fak
