// Synthetic weights: uniform values from a counter-based generator (splitmix64 of seed, tensor
// and index), so any element is reproducible on its own and the fill parallelises freely.
//
// Scales keep activations near unit RMS and logits spread (std ≈ 3), so the model's outputs are
// context-sensitive rather than collapsed onto one token.
#include <cmath>

#include "src/core/thread_pool.h"
#include "src/model/weights.h"

namespace fak::internal {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Filler {
 public:
  Filler(ModelWeights* w, uint64_t seed, ThreadPool* pool) : w_(w), seed_(seed), pool_(pool) {}

  // A [rows][cols] tensor with values `center + U(-1, 1) * std * sqrt(3)` (so the std is `std`).
  WeightTensor Make(size_t rows, size_t cols, float center, float std) {
    AlignedBuffer buf(rows * cols);
    const uint64_t stream = SplitMix64(seed_ ^ SplitMix64(++n_tensors_));
    const float half_width = std * std::sqrt(3.0f);
    float* data = buf.data();
    pool_->ParallelFor(buf.size(), 4096, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        double u = static_cast<double>(SplitMix64(stream + i) >> 11) * 0x1.0p-53;  // [0, 1)
        data[i] = center + static_cast<float>(2.0 * u - 1.0) * half_width;
      }
    });
    WeightTensor t{DType::kF32, rows, cols, buf.data()};
    w_->storage.push_back(std::move(buf));
    return t;
  }

 private:
  ModelWeights* w_;
  uint64_t seed_;
  ThreadPool* pool_;
  uint64_t n_tensors_ = 0;
};

}  // namespace

std::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ5_K: return "q5_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ5_1: return "q5_1";
    case DType::kQ2_K: return "q2_k";
    case DType::kQ3_K: return "q3_k";
    case DType::kIQ4_NL: return "iq4_nl";
    case DType::kIQ4_XS: return "iq4_xs";
    case DType::kMXFP4: return "mxfp4";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "unknown";
}

size_t ModelWeights::size_bytes() const {
  size_t total = 0;
  ForEach([&](const char*, const WeightTensor& t) { total += t.size_bytes(); });
  return total;
}

ModelWeights SyntheticWeights(const ModelConfig& c, uint64_t seed, ThreadPool* pool) {
  ModelWeights w;
  Filler f(&w, seed, pool);
  const size_t h = c.hidden_size, q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const float in_h = 1.0f / std::sqrt(static_cast<float>(h));
  const float logit_scale = 3.0f * in_h;
  // Gemma stores norm weights as offsets from 1; Llama stores the multiplier itself.
  const bool gemma = c.IsGemma();
  const bool gpt_oss = c.architecture == Architecture::kGptOss;
  const float norm_center = gemma ? 0.0f : 1.0f;
  w.norm_one_plus = gemma;
  w.token_embedding = f.Make(c.vocab_size, h, 0.0f, logit_scale);
  w.output_norm = f.Make(1, h, norm_center, 0.05f);
  w.output = c.tied_embeddings ? w.token_embedding : f.Make(c.vocab_size, h, 0.0f, logit_scale);
  for (size_t l = 0; l < c.n_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = f.Make(1, h, norm_center, 0.05f);
    lw.wq = f.Make(q_dim, h, 0.0f, in_h);
    lw.wk = f.Make(kv_dim, h, 0.0f, in_h);
    lw.wv = f.Make(kv_dim, h, 0.0f, in_h);
    lw.wo = f.Make(h, q_dim, 0.0f, 0.5f / std::sqrt(static_cast<float>(q_dim)));
    lw.ffn_norm = f.Make(1, h, norm_center, 0.05f);
    if (c.n_experts == 0) {
      lw.w_gate = f.Make(c.ffn_size, h, 0.0f, in_h);
      lw.w_up = f.Make(c.ffn_size, h, 0.0f, in_h);
      lw.w_down = f.Make(h, c.ffn_size, 0.0f, 0.5f / std::sqrt(static_cast<float>(c.ffn_size)));
    } else if (!gpt_oss) {  // router logits of std ~2, so tokens spread over the experts
      lw.router = f.Make(c.n_experts, h, 0.0f, 2.0f * in_h);
      const size_t fe = c.expert_ffn_size;
      for (size_t e = 0; e < c.n_experts; ++e) {
        ExpertWeights& ex = lw.experts.emplace_back();
        ex.gate = f.Make(fe, h, 0.0f, in_h);
        ex.up = f.Make(fe, h, 0.0f, in_h);
        ex.down = f.Make(h, fe, 0.0f, 0.5f / std::sqrt(static_cast<float>(fe)));
      }
    } else {  // gpt-oss: biases everywhere; gate/up of std ~3 so the SwiGLU clamp (at 7) bites
      lw.router = f.Make(c.n_experts, h, 0.0f, 2.0f * in_h);
      lw.router_bias = f.Make(1, c.n_experts, 0.0f, 0.5f);
      const size_t fe = c.expert_ffn_size;
      for (size_t e = 0; e < c.n_experts; ++e) {
        ExpertWeights& ex = lw.experts.emplace_back();
        ex.gate = f.Make(fe, h, 0.0f, 3.0f * in_h);
        ex.up = f.Make(fe, h, 0.0f, 3.0f * in_h);
        ex.down = f.Make(h, fe, 0.0f, 0.2f / std::sqrt(static_cast<float>(fe)));
        ex.gate_bias = f.Make(1, fe, 0.0f, 0.5f);
        ex.up_bias = f.Make(1, fe, 0.0f, 0.5f);
        ex.down_bias = f.Make(1, h, 0.0f, 0.1f);
      }
    }
    if (c.HasQkNorm()) {  // Gemma 3, Qwen3
      lw.q_norm = f.Make(1, c.head_dim, norm_center, 0.05f);
      lw.k_norm = f.Make(1, c.head_dim, norm_center, 0.05f);
    }
    if (gemma) {  // the sandwich norms
      lw.post_attn_norm = f.Make(1, h, norm_center, 0.05f);
      lw.post_ffn_norm = f.Make(1, h, norm_center, 0.05f);
    }
    if (c.qkv_bias || gpt_oss) {  // Qwen2; large enough to move the logits (real ones reach tens on k)
      lw.bq = f.Make(1, q_dim, 0.0f, 0.5f);
      lw.bk = f.Make(1, kv_dim, 0.0f, 0.5f);
      lw.bv = f.Make(1, kv_dim, 0.0f, 0.5f);
    }
    if (gpt_oss) {  // sinks of std 2 take a visible share of each softmax
      lw.bo = f.Make(1, h, 0.0f, 0.1f);
      lw.attn_sinks = f.Make(1, c.n_heads, 0.0f, 2.0f);
    }
    w.layers.push_back(lw);
  }
  return w;
}

}  // namespace fak::internal
