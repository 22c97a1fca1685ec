// Small model configs for tests: fast under sanitizers, yet real GQA, RoPE and multiple layers.
#ifndef FAK_TESTS_MODEL_TEST_MODELS_H_
#define FAK_TESTS_MODEL_TEST_MODELS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
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
