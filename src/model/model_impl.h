// ModelImpl: what a loaded model holds — config, weights, RoPE binding, its thread pool.
#ifndef FAK_SRC_MODEL_MODEL_IMPL_H_
#define FAK_SRC_MODEL_MODEL_IMPL_H_

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "fak/model/model.h"
#include "src/core/thread_pool.h"
#include "src/kv/rope_binding.h"
#include "src/model/weights.h"

namespace fak::internal {

struct ModelImpl {
  ModelConfig config;
  internal::ModelWeights weights;
  std::shared_ptr<const internal::RopeBinding> rope;
  KVDtype kv_dtype = KVDtype::kF32;  // of every cache NewCache makes
  std::unique_ptr<internal::ThreadPool> pool;  // serialises forward passes that share it
  mutable std::once_flag digest_once;
  mutable Digest digest;
};

// The model's insides, for the forward pass and for tests that check them.
class ModelAccess {
 public:
  static const ModelImpl& Get(const Model& model) { return *model.impl_; }
  static Model Make(std::unique_ptr<ModelImpl> impl) { return Model(std::move(impl)); }
};

// Rows one forward step runs at most (long prompts run in chunks of it): bounds scratch memory,
// and a windowed cache's slack.
inline constexpr size_t kForwardStepRows = 512;

// The forward pass over each item's tokens appended to its cache (validated, reserved, caches
// distinct), all items' rows batched together. Writes item i's logits (or hidden states), as its
// mode asks, into out[i].
void Forward(const ModelImpl& model, std::span<const BatchItem> items, std::span<std::vector<float>> out);

// Builds the per-layer RoPE tables of a config.
std::shared_ptr<const RopeBinding> MakeRopeBinding(const ModelConfig& config);

}  // namespace fak::internal

#endif  // FAK_SRC_MODEL_MODEL_IMPL_H_
