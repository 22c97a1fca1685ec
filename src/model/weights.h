// Model weights: named tensors per layer, each tagged with its storage type.
//
// The forward pass reaches weights only through WeightTensor and MatMulWeights (forward.cc), which
// dispatches on the dtype: F32 rows go to the f32 matmul, F16/BF16 rows to the matmul that widens
// each 16-bit element as it loads it (the f32 matmul's bits on the widened values, at half the bytes),
// quantized rows (every kernels::QuantType: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS,
// MXFP4) to the quantized matmul, which first quantizes the activation rows. A loaded GGUF's
// matrices point straight into the memory-mapped file (kept open by `backing`), whatever their type;
// only F16/BF16 norm and bias vectors are widened to F32 at load (a few KiB).
#ifndef FAK_SRC_MODEL_WEIGHTS_H_
#define FAK_SRC_MODEL_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/model/model.h"
#include "kernels/quant_format.h"
#include "src/core/aligned_buffer.h"

namespace fak::internal {

class ThreadPool;

// Storage type of a weight tensor. The quantized values mirror kernels::QuantType (in order).
// F16 and BF16 (16-bit floats) come after them.
enum class DType {
  kF32, kQ8_0, kQ4_0, kQ5_0, kQ4_K, kQ5_K, kQ6_K, kQ4_1, kQ5_1, kQ2_K, kQ3_K, kIQ4_NL, kIQ4_XS, kMXFP4,
  kF16, kBF16
};

inline bool IsFloat16(DType d) { return d == DType::kF16 || d == DType::kBF16; }
inline bool IsQuantized(DType d) { return d != DType::kF32 && !IsFloat16(d); }
inline kernels::QuantType QuantOf(DType d) { return static_cast<kernels::QuantType>(static_cast<int>(d) - 1); }
inline DType DTypeOf(kernels::QuantType q) { return static_cast<DType>(static_cast<int>(q) + 1); }
// "f32", "q8_0", "q4_k", ...
std::string_view DTypeName(DType d);

struct WeightTensor {
  DType dtype = DType::kF32;
  size_t rows = 0, cols = 0;  // row-major [rows][cols]; matmul weights are [out][in]
  const void* data = nullptr;  // owned by ModelWeights::storage or inside ModelWeights::backing
  // The same values packed for the matmul (every quantized type: kernels/quant_pack.h), owned by
  // ModelWeights::packed_storage;
  // null when the matmul reads `data`. `data` stays what was loaded (the digest hashes it).
  const void* packed = nullptr;
  size_t packed_row_bytes = 0;  // kernels::PackedRowBytes when packed

  bool empty() const { return data == nullptr; }
  const float* f32() const { return static_cast<const float*>(data); }
  // Bytes of one stored row (cols f32 or 16-bit values, or cols / block blocks of the quant type).
  size_t row_bytes() const {
    if (IsQuantized(dtype)) return kernels::QuantRowBytes(QuantOf(dtype), cols);
    return cols * (IsFloat16(dtype) ? sizeof(uint16_t) : sizeof(float));
  }
  size_t size_bytes() const { return rows * row_bytes(); }
};

// One expert of a mixture-of-experts FFN: views of its slice of the 3-D ffn_{gate,up,down}_exps.
struct ExpertWeights {
  WeightTensor gate;  // [expert_ffn][hidden]
  WeightTensor up;    // [expert_ffn][hidden]
  WeightTensor down;  // [hidden][expert_ffn]
  // gpt-oss only (empty otherwise): f32 biases added to each projection's output.
  WeightTensor gate_bias;  // [1][expert_ffn]
  WeightTensor up_bias;    // [1][expert_ffn]
  WeightTensor down_bias;  // [1][hidden]
};

struct LayerWeights {
  WeightTensor attn_norm;  // [1][hidden]
  WeightTensor wq;         // [n_heads * head_dim][hidden]
  WeightTensor wk;         // [n_kv_heads * head_dim][hidden]
  WeightTensor wv;         // [n_kv_heads * head_dim][hidden]
  WeightTensor wo;         // [hidden][n_heads * head_dim]
  WeightTensor ffn_norm;   // [1][hidden]
  WeightTensor w_gate;     // [ffn][hidden] (empty in a mixture-of-experts layer)
  WeightTensor w_up;       // [ffn][hidden] (ditto)
  WeightTensor w_down;     // [hidden][ffn] (ditto)
  // Mixture of experts (ModelConfig::n_experts > 0): the router and the experts.
  WeightTensor router;  // [n_experts][hidden] (ffn_gate_inp)
  WeightTensor router_bias;  // [1][n_experts] (gpt-oss; empty otherwise)
  std::vector<ExpertWeights> experts;
  // Gemma 3 only (empty for Llama): per-head QK-norm and the post-attention / post-FFN norms.
  WeightTensor q_norm;          // [1][head_dim]
  WeightTensor k_norm;          // [1][head_dim]
  WeightTensor post_attn_norm;  // [1][hidden]
  WeightTensor post_ffn_norm;   // [1][hidden]
  // Qwen2 (ModelConfig::qkv_bias) and gpt-oss; empty otherwise: added to the q/k/v projections.
  WeightTensor bq;  // [1][n_heads * head_dim]
  WeightTensor bk;  // [1][n_kv_heads * head_dim]
  WeightTensor bv;  // [1][n_kv_heads * head_dim]
  // gpt-oss only (empty otherwise): the output projection's bias and each head's attention sink logit.
  WeightTensor bo;          // [1][hidden]
  WeightTensor attn_sinks;  // [1][n_heads]
};

struct ModelWeights {
  WeightTensor token_embedding;  // [vocab][hidden]
  WeightTensor output_norm;      // [1][hidden]
  WeightTensor output;           // [vocab][hidden]; the embedding itself when tied
  std::vector<LayerWeights> layers;
  std::vector<AlignedBuffer> storage;  // owns the f32 data the tensors point at (synthetic, widened)
  std::vector<AlignedArray<uint8_t>> packed_storage;  // owns what WeightTensor::packed points at
  std::shared_ptr<const void> backing;  // keeps a mapped file alive (loaded models)
  // RMSNorm multiplies by (1 + w) (Gemma as HF stores it) rather than by w (Llama, and Gemma GGUF,
  // whose converter already added the 1).
  bool norm_one_plus = false;

  size_t size_bytes() const;
  // Calls fn(name, tensor) for every distinct tensor in a fixed order (the digest order).
  template <class F>
  void ForEach(F fn) const {
    fn("token_embedding", token_embedding);
    fn("output_norm", output_norm);
    if (output.data != token_embedding.data) fn("output", output);
    for (const LayerWeights& l : layers) {
      for (const WeightTensor* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
        if (!t->empty()) fn("layer", *t);
      for (const WeightTensor* t : {&l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm, &l.bq, &l.bk, &l.bv, &l.router})
        if (!t->empty()) fn("layer", *t);
      for (const WeightTensor* t : {&l.bo, &l.attn_sinks, &l.router_bias})
        if (!t->empty()) fn("layer", *t);
      for (const ExpertWeights& e : l.experts) {
        for (const WeightTensor* t : {&e.gate, &e.up, &e.down}) fn("layer", *t);
        for (const WeightTensor* t : {&e.gate_bias, &e.up_bias, &e.down_bias})
          if (!t->empty()) fn("layer", *t);
      }
    }
  }
};

// Packs the matmul weights the kernels read faster packed: projections and the output head of a
// quantized type whose row count is a multiple of 8, each into 2 MiB pages where the OS
// gives them. The embedding lookup reads the loaded rows (`data`), so a head tied to the embedding
// is packed into a copy of its own: a batched decode step's head is then one packed matmul (AMX on
// the avx512 tier), and one row's streams as fast as the plain rows did (Gemma 3's 262k × 640 head
// costs as much as the rest of the model per row; docs/engine.md, Measurements).
void PackForMatMul(ModelWeights* weights);

// Deterministic, machine-independent random weights (counter-based generator, parallel fill).
ModelWeights SyntheticWeights(const ModelConfig& config, uint64_t seed, ThreadPool* pool);

// "[a, b, …]": a tensor's shape as the loaders' error messages name it.
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace fak::internal

#endif  // FAK_SRC_MODEL_WEIGHTS_H_
