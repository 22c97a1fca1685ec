// Model::Impl: what a loaded model holds — config, weights, RoPE binding, its thread pool.
#ifndef FAK_SRC_MODEL_MODEL_IMPL_H_
#define FAK_SRC_MODEL_MODEL_IMPL_H_

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "fak/model.h"
#include "src/core/thread_pool.h"
#include "src/kv/rope_binding.h"
#include "src/model/weights.h"

namespace fak {

struct Model::Impl {
  ModelConfig config;
  internal::ModelWeights weights;
  std::shared_ptr<const internal::RopeBinding> rope;
  std::unique_ptr<internal::ThreadPool> pool;  // serialises forward passes that share it
  mutable std::once_flag digest_once;
  mutable Digest digest;
};

namespace internal {

// The forward pass over `tokens` appended to `cache` (already validated and reserved).
// Writes logits as `mode` asks into *logits.
void Forward(const Model::Impl& model, KVCache* cache, std::span<const int32_t> tokens, LogitsMode mode,
             std::vector<float>* logits);

// Builds the per-layer RoPE tables of a config.
std::shared_ptr<const RopeBinding> MakeRopeBinding(const ModelConfig& config);

}  // namespace internal
}  // namespace fak

#endif  // FAK_SRC_MODEL_MODEL_IMPL_H_
