// Model weights: named tensors per layer, each tagged with its storage type.
//
// The forward pass reaches weights only through WeightTensor and MatMulWeight, so f16/bf16 and
// quantized blocks slot in later as new DType cases without touching the pass itself.
#ifndef FAK_SRC_MODEL_WEIGHTS_H_
#define FAK_SRC_MODEL_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fak/digest.h"
#include "fak/model.h"
#include "src/core/aligned_buffer.h"

namespace fak::internal {

class ThreadPool;

enum class DType { kF32 };

struct WeightTensor {
  DType dtype = DType::kF32;
  size_t rows = 0, cols = 0;  // row-major [rows][cols]; matmul weights are [out][in]
  const void* data = nullptr;  // owned by ModelWeights::storage (or, later, a mapped file)

  bool empty() const { return data == nullptr; }
  const float* f32() const { return static_cast<const float*>(data); }
  size_t size_bytes() const { return rows * cols * sizeof(float); }
};

struct LayerWeights {
  WeightTensor attn_norm;  // [1][hidden]
  WeightTensor wq;         // [n_heads * head_dim][hidden]
  WeightTensor wk;         // [n_kv_heads * head_dim][hidden]
  WeightTensor wv;         // [n_kv_heads * head_dim][hidden]
  WeightTensor wo;         // [hidden][n_heads * head_dim]
  WeightTensor ffn_norm;   // [1][hidden]
  WeightTensor w_gate;     // [ffn][hidden]
  WeightTensor w_up;       // [ffn][hidden]
  WeightTensor w_down;     // [hidden][ffn]
};

struct ModelWeights {
  WeightTensor token_embedding;  // [vocab][hidden]
  WeightTensor output_norm;      // [1][hidden]
  WeightTensor output;           // [vocab][hidden]; the embedding itself when tied
  std::vector<LayerWeights> layers;
  std::vector<AlignedBuffer> storage;  // owns the f32 data the tensors point at

  size_t size_bytes() const;
  // Calls fn(name, tensor) for every distinct tensor in a fixed order (the digest order).
  template <class F>
  void ForEach(F fn) const {
    fn("token_embedding", token_embedding);
    fn("output_norm", output_norm);
    if (output.data != token_embedding.data) fn("output", output);
    for (const LayerWeights& l : layers) {
      for (const WeightTensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
        fn("layer", *t);
    }
  }
};

// Deterministic, machine-independent random weights (counter-based generator, parallel fill).
ModelWeights SyntheticWeights(const ModelConfig& config, uint64_t seed, ThreadPool* pool);

}  // namespace fak::internal

#endif  // FAK_SRC_MODEL_WEIGHTS_H_
