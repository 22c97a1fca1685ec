// Model: construction, the binding digest, and the validated Prefill/Decode entry points.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_set>

#include "fak/io/gguf.h"
#include "fak/core/env.h"
#include "kernels/dispatch.h"
#include "src/model/gguf_loader.h"
#include "src/model/hf_loader.h"
#include "src/core/exception_boundary.h"
#include "src/kv/kv_cache_access.h"
#include "src/model/model_impl.h"

namespace fak {
namespace {

// Prefill's checks on one sequence; `what` names it in the message ("Prefill", "PrefillBatch: item 2").
Status CheckAppend(const Model& m, const std::string& what, const KVCache* cache, std::span<const int32_t> tokens) {
  const ModelConfig& c = m.config();
  if (cache == nullptr) return InvalidArgument(what + ": cache is null");
  if (!m.Owns(*cache)) {
    return InvalidArgument(what + ": the cache was made by a different model");
  }
  if (tokens.empty()) return InvalidArgument(what + ": empty prompt (need at least one token)");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= c.vocab_size) {
      return InvalidArgument(what + ": token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    }
  }
  if (tokens.size() > c.context_length - cache->size()) {
    return ResourceExhausted(what + ": " + std::to_string(cache->size()) + " cached + " + std::to_string(tokens.size()) +
                             " new tokens exceed the context length " + std::to_string(c.context_length));
  }
  return Status::Ok();
}

// NaN or infinite logits mean the weights (or what they made of the input) are broken: an error
// naming the first bad value, never an answer (Corruption: the fault is the weights', not the
// caller's). `item` names the sequence in the message.
Status CheckFinite(const std::vector<float>& logits, const std::string& item) {
  // A branch-free pass over the exponent bits (all ones: NaN or ±inf) first; the search for the
  // first bad index runs only when there is one.
  uint32_t bad = 0;
  for (float x : logits) bad |= static_cast<uint32_t>((std::bit_cast<uint32_t>(x) & 0x7f800000u) == 0x7f800000u);
  for (size_t i = 0; bad != 0 && i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return Corruption(item + ": the model produced a non-finite logit (" + std::to_string(logits[i]) +
                                " at index " + std::to_string(i) + "); its weights hold NaN or overflow");
    }
  }
  return Status::Ok();
}

// The forward pass's pool: n_threads checked against kMaxModelThreads first; an OS that will not
// start the threads it asked for is ResourceExhausted, not an abort.
Result<std::unique_ptr<internal::ThreadPool>> NewThreadPool(const ModelOptions& options) {
  if (options.n_threads > kMaxModelThreads) {
    return InvalidArgument("ModelOptions.n_threads " + std::to_string(options.n_threads) + " exceeds the limit of " +
                           std::to_string(kMaxModelThreads) + " threads (0 = one per hardware thread)");
  }
  const size_t n = options.n_threads != 0
                       ? options.n_threads
                       : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxModelThreads);
  try {
    return std::make_unique<internal::ThreadPool>(n);
  } catch (const std::system_error& e) {
    return ResourceExhausted("ModelOptions.n_threads: could not start " + std::to_string(n) + " threads (" + e.what() +
                             ")");
  }
}

}  // namespace

Model::Model(std::unique_ptr<internal::ModelImpl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

const ModelConfig& Model::config() const { return impl_->config; }
size_t Model::weights_bytes() const { return impl_->weights.size_bytes(); }

namespace {

// ModelOptions::kv_dtype, else FAK_KV_DTYPE, else ModelOptions::default_kv_dtype; an unknown value
// is an error, not a default.
Result<KVDtype> ResolveKVDtype(const ModelOptions& options) {
  const auto known = [](KVDtype d) { return d == KVDtype::kF32 || d == KVDtype::kF16 || d == KVDtype::kBF16; };
  if (options.kv_dtype.has_value()) {
    if (!known(*options.kv_dtype))
      return InvalidArgument("ModelOptions::kv_dtype: unknown KV dtype " + std::to_string(static_cast<int>(*options.kv_dtype)));
    return *options.kv_dtype;
  }
  const char* env = std::getenv("FAK_KV_DTYPE");
  if (env != nullptr && *env != '\0') {
    if (std::optional<KVDtype> d = ParseKVDtype(env)) return *d;
    return InvalidArgument(std::string("FAK_KV_DTYPE=") + env + ": expected f32, f16 or bf16");
  }
  if (!known(options.default_kv_dtype))
    return InvalidArgument("ModelOptions::default_kv_dtype: unknown KV dtype " +
                           std::to_string(static_cast<int>(options.default_kv_dtype)));
  return options.default_kv_dtype;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::Synthetic(const ModelConfig& config, uint64_t seed, const ModelOptions& options) {
  return internal::ExceptionBoundary("Model::Synthetic", [&]() -> Result<std::unique_ptr<Model>> {
    FAK_RETURN_IF_ERROR(config.Validate());
    FAK_ASSIGN_OR_RETURN(const KVDtype kv_dtype, ResolveKVDtype(options));
    auto impl = std::make_unique<internal::ModelImpl>();
    FAK_ASSIGN_OR_RETURN(impl->pool, NewThreadPool(options));
    impl->kv_dtype = kv_dtype;
    impl->config = config;
    impl->weights = internal::SyntheticWeights(config, seed, impl->pool.get());
    impl->rope = internal::MakeRopeBinding(config);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
  });
}

namespace {

// A Hugging Face checkpoint directory, or a .safetensors file with config.json beside it.
Result<std::unique_ptr<internal::ModelImpl>> LoadHf(const std::string& path, const ModelOptions& options) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<internal::HfCheckpoint> ckpt, internal::OpenHfCheckpoint(path));
  FAK_ASSIGN_OR_RETURN(ModelConfig config, internal::ConfigFromHf(*ckpt, options));
  auto impl = std::make_unique<internal::ModelImpl>();
  impl->config = config;
  FAK_ASSIGN_OR_RETURN(impl->weights, internal::WeightsFromHf(*ckpt, config));
  impl->weights.backing = std::shared_ptr<const internal::HfCheckpoint>(std::move(ckpt));
  return impl;
}

Result<std::unique_ptr<internal::ModelImpl>> LoadGguf(const std::string& path, const ModelOptions& options) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  FAK_ASSIGN_OR_RETURN(ModelConfig config, internal::ConfigFromGguf(*file, options));
  auto impl = std::make_unique<internal::ModelImpl>();
  impl->config = config;
  FAK_ASSIGN_OR_RETURN(impl->weights, internal::WeightsFromGguf(*file, config));
  impl->weights.backing = std::shared_ptr<const GgufFile>(std::move(file));
  return impl;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, const ModelOptions& options) {
  return internal::ExceptionBoundary("Model::Load", [&]() -> Result<std::unique_ptr<Model>> {
    // The pool first: a bad thread count costs nothing, not a load of the file.
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<internal::ThreadPool> pool, NewThreadPool(options));
    std::unique_ptr<internal::ModelImpl> impl;
    if (internal::LooksLikeHfCheckpoint(path)) {
      FAK_ASSIGN_OR_RETURN(impl, LoadHf(path, options));
    } else {
      FAK_ASSIGN_OR_RETURN(std::string magic, Env::Default()->ReadInputFile(path, 4));
      if (magic != "GGUF") {
        return Unsupported("Model::Load: " + path +
                           " is neither a GGUF file nor a Hugging Face checkpoint (a directory with config.json and "
                           "safetensors, or a .safetensors file with config.json beside it)");
      }
      FAK_ASSIGN_OR_RETURN(impl, LoadGguf(path, options));
    }
    FAK_ASSIGN_OR_RETURN(impl->kv_dtype, ResolveKVDtype(options));
    internal::PackForMatMul(&impl->weights);
    impl->pool = std::move(pool);
    impl->rope = internal::MakeRopeBinding(impl->config);
    return std::unique_ptr<Model>(new Model(std::move(impl)));
  });
}

const Digest& Model::WeightsDigest() const {
  std::call_once(impl_->digest_once, [this] {
    const ModelConfig& c = impl_->config;
    Digester d;
    d.Update("fak.model.v1");
    d.Update(c.Describe());
    d.UpdatePod(c.rope_base).UpdatePod(c.rms_eps).UpdatePod(static_cast<int>(c.rope_pairing));
    if (c.IsGemma()) {  // (Llama digests stay as they were)
      d.UpdatePod(c.rope_local_base).UpdatePod(c.query_pre_attn_scalar).UpdatePod(impl_->weights.norm_one_plus);
    }
    if (c.HasRopeScaling()) d.Update(c.RopeScalingLabel());  // (unscaled digests stay as they were)
    const kernels::KernelTable& k = kernels::Active();
    impl_->weights.ForEach([&](const char*, const internal::WeightTensor& t) {
      if (internal::IsQuantized(t.dtype)) d.UpdatePod(static_cast<int>(t.dtype));
      d.UpdatePod(static_cast<uint64_t>(t.rows)).UpdatePod(static_cast<uint64_t>(t.cols));
      if (!internal::IsFloat16(t.dtype)) {  // the stored bytes: f32 values, or quant blocks as mapped
        d.Update(t.data, t.size_bytes());
        return;
      }
      // 16-bit floats are hashed as the f32 values they widen to, exactly as a widened copy was: the
      // model computes the same bits either way, so it keeps its identity (and its cached KV).
      const auto* bits = static_cast<const uint16_t*>(t.data);
      std::vector<float> chunk(std::min<size_t>(t.rows * t.cols, 1 << 14));
      for (size_t i = 0, n = t.rows * t.cols; i < n; i += chunk.size()) {
        const size_t len = std::min(chunk.size(), n - i);
        (t.dtype == internal::DType::kF16 ? k.f16_to_f32 : k.bf16_to_f32)(bits + i, chunk.data(), len);
        d.Update(chunk.data(), len * sizeof(float));
      }
    });
    impl_->digest = d.Finish();
  });
  return impl_->digest;
}

KVCache Model::NewCache(KVMemory memory) const {
  const ModelConfig& c = impl_->config;
  const KVShape shape{c.n_layers, c.n_kv_heads, c.head_dim, c.context_length, impl_->kv_dtype};
  std::vector<size_t> windows(c.n_layers, 0);
  for (size_t l = 0; l < c.n_layers; ++l) windows[l] = c.IsSlidingLayer(l) ? c.sliding_window : 0;
  if (memory == KVMemory::kFull || std::ranges::count(windows, 0) == static_cast<std::ptrdiff_t>(c.n_layers)) {
    return internal::KVCacheAccess::Make(shape, impl_->rope);
  }
  return internal::KVCacheAccess::MakeWindowed(shape, impl_->rope, std::move(windows), internal::kForwardStepRows);
}

KVDtype Model::kv_dtype() const { return impl_->kv_dtype; }

bool Model::Owns(const KVCache& cache) const {
  return &internal::KVCacheAccess::Rope(cache) == impl_->rope.get() && cache.shape() == NewCache().shape();
}

std::string Model::WeightDTypes() const {
  std::set<std::string_view> names;
  impl_->weights.ForEach([&](const char*, const internal::WeightTensor& t) { names.insert(internal::DTypeName(t.dtype)); });
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += '+';
    out += n;
  }
  return out;
}

Result<std::vector<float>> Model::Prefill(KVCache* cache, std::span<const int32_t> tokens, LogitsMode mode) const {
  const BatchItem item{cache, tokens, mode};
  FAK_RETURN_IF_ERROR(CheckAppend(*this, "Prefill", cache, tokens));
  FAK_RETURN_IF_ERROR(cache->Reserve(cache->size() + tokens.size()));
  const size_t before = cache->size();
  return internal::ExceptionBoundary("Prefill", [&]() -> Result<std::vector<float>> {
    std::vector<std::vector<float>> logits(1);
    internal::Forward(*impl_, std::span(&item, 1), logits);
    if (Status finite = CheckFinite(logits[0], "Prefill"); !finite.ok()) {
      (void)cache->Truncate(before);  // the cache is as it was
      return finite;
    }
    return std::move(logits[0]);
  });
}

Result<std::vector<std::vector<float>>> Model::PrefillBatch(std::span<const BatchItem> items) const {
  if (items.empty()) return InvalidArgument("PrefillBatch: no items");
  std::unordered_set<const KVCache*> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string what = "PrefillBatch: item " + std::to_string(i);
    FAK_RETURN_IF_ERROR(CheckAppend(*this, what, items[i].cache, items[i].tokens));
    if (!seen.insert(items[i].cache).second) return InvalidArgument(what + ": its cache is also an earlier item's");
  }
  std::vector<size_t> before;
  for (const BatchItem& item : items) {
    FAK_RETURN_IF_ERROR(item.cache->Reserve(item.cache->size() + item.tokens.size()));
    before.push_back(item.cache->size());
  }
  return internal::ExceptionBoundary("PrefillBatch", [&]() -> Result<std::vector<std::vector<float>>> {
    std::vector<std::vector<float>> logits(items.size());
    internal::Forward(*impl_, items, logits);
    for (size_t i = 0; i < items.size(); ++i) {
      if (Status finite = CheckFinite(logits[i], "PrefillBatch: item " + std::to_string(i)); !finite.ok()) {
        for (size_t j = 0; j < items.size(); ++j) (void)items[j].cache->Truncate(before[j]);  // none changes
        return finite;
      }
    }
    return logits;
  });
}

Result<std::vector<float>> Model::Decode(KVCache* cache, int32_t token) const {
  return Prefill(cache, std::span<const int32_t>(&token, 1), LogitsMode::kLast);
}

}  // namespace fak
