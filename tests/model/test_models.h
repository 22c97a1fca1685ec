// Small model configs for tests: fast under sanitizers, yet real GQA, RoPE and multiple layers.
#ifndef FAK_TESTS_MODEL_TEST_MODELS_H_
#define FAK_TESTS_MODEL_TEST_MODELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "fak/model/model.h"

namespace fak::testing {

inline ModelConfig TinyConfig(size_t n_heads = 4, size_t n_kv_heads = 2, size_t head_dim = 16,
                              RopePairing pairing = RopePairing::kSplitHalf, size_t n_layers = 2) {
  ModelConfig c;
  c.vocab_size = 97;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim;
  c.hidden_size = n_heads * head_dim;
  c.n_layers = n_layers;
  c.ffn_size = 96;
  c.rope_pairing = pairing;
  c.context_length = 512;
  return c;
}

// One tiny config of every architecture, each with its distinguishing feature switched on and strong
// enough to move the logits (the witnesses run over all of them): Llama, Qwen2 (biases), Qwen3
// (QK-norm, head_dim != hidden / heads), Phi-3 (partial rotary), SmolLM3 (NoPE layers), Gemma 2
// (window, soft-capping small enough to bite on these activations), Gemma 3 (window, QK-norm),
// Qwen3-MoE (4 experts, 2 per token) and gpt-oss (experts, sinks, biases, window, YaRN).
inline std::vector<ModelConfig> ArchitectureConfigs() {
  std::vector<ModelConfig> out;
  out.push_back(TinyConfig());
  ModelConfig qwen2 = TinyConfig();
  qwen2.qkv_bias = true;
  out.push_back(qwen2);
  ModelConfig qwen3 = TinyConfig(4, 2, 16);
  qwen3.architecture = Architecture::kQwen3;
  qwen3.hidden_size = 48;
  out.push_back(qwen3);
  ModelConfig phi3 = TinyConfig();
  phi3.architecture = Architecture::kPhi3;
  phi3.rope_dim = 8;
  out.push_back(phi3);
  ModelConfig smollm3 = TinyConfig(4, 2, 16, RopePairing::kAdjacent, 4);
  smollm3.architecture = Architecture::kSmolLM3;
  smollm3.nope_layer_interval = 2;
  out.push_back(smollm3);
  ModelConfig gemma2 = TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 4);
  gemma2.architecture = Architecture::kGemma2;
  gemma2.hidden_size = 96;
  gemma2.sliding_window = 5;
  gemma2.sliding_window_pattern = 2;
  gemma2.rope_local_base = gemma2.rope_base;
  gemma2.attn_logit_softcap = 1.5f;
  gemma2.final_logit_softcap = 4.0f;
  out.push_back(gemma2);
  ModelConfig gemma3 = TinyConfig(4, 1, 16, RopePairing::kSplitHalf, 7);
  gemma3.architecture = Architecture::kGemma3;
  gemma3.hidden_size = 96;
  gemma3.sliding_window = 5;
  out.push_back(gemma3);
  ModelConfig moe = qwen3;
  moe.architecture = Architecture::kQwen3Moe;
  moe.n_experts = 4;
  moe.n_experts_used = 2;
  moe.expert_ffn_size = 32;
  out.push_back(moe);
  // gpt-oss: 4 experts (2 per token) with biases and the clamped SwiGLU, attention sinks, q/k/v/o
  // biases, even layers sliding, YaRN on every layer (sliding ones included, as llama.cpp).
  ModelConfig oss = TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 4);
  oss.architecture = Architecture::kGptOss;
  oss.hidden_size = 48;
  oss.sliding_window = 5;
  oss.sliding_window_pattern = 2;
  oss.rope_local_base = oss.rope_base;
  oss.n_experts = 4;
  oss.n_experts_used = 2;
  oss.expert_ffn_size = 32;
  oss.rope_yarn = {4.0, 32, 32.0, 1.0, 1.0 + 0.1 * std::log(4.0)};
  out.push_back(oss);
  return out;
}

// FAK_TEST_SMALL_MODELS=1 (the aarch64 stage under qemu, where arithmetic is emulated) shrinks the
// models that are large for a test; unset, every test runs its usual model.
inline bool SmallTestModels() {
  const char* v = std::getenv("FAK_TEST_SMALL_MODELS");
  return v != nullptr && std::string_view(v) == "1";
}

// The byte-tokenizer model of the engine-level witnesses (speculation, scheduling): the embedded
// default (vocab 258, 4 layers, hidden 256, 8 query heads on 2 KV heads of 32, FFN 768), or, with
// SmallTestModels(), the same vocabulary, tokenizer ids, layers and head size on 4 query heads
// (hidden 128) and FFN 256: a fifth of the arithmetic per token, the same code paths. (With 2
// layers the synthetic logits grew so peaked that the scheduling witness's control, penalties
// change the sampled tokens, no longer held.)
inline ModelConfig ByteModelConfig() {
  ModelConfig c = ModelConfig::EmbeddedDefault();
  if (SmallTestModels()) {
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 32;
    c.hidden_size = c.n_heads * c.head_dim;
    c.ffn_size = 256;
  }
  return c;
}

inline std::vector<int32_t> TokenSequence(size_t n, uint32_t seed, size_t vocab) {
  std::vector<int32_t> t(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % vocab);
  }
  return t;
}

inline float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_MODEL_TEST_MODELS_H_
