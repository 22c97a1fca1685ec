// The reference a scheduled request must equal: the same prompt and sampling run alone, by hand
// (one Prefill, then one Decode per token, one Sampler), with the logits of every step.
#ifndef FAK_TESTS_ENGINE_ALONE_H_
#define FAK_TESTS_ENGINE_ALONE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "fak/model/model.h"
#include "fak/model/sampler.h"

namespace fak::testing {

struct AloneRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // logits[i] produced tokens[i]
};

// Generates exactly `max_tokens` tokens (no stop conditions); empty on a model error.
inline AloneRun RunAlone(const Model& model, std::span<const int32_t> prompt, const SamplingParams& params,
                         size_t max_tokens) {
  AloneRun run;
  KVCache cache = model.NewCache();
  Result<std::vector<float>> logits = model.Prefill(&cache, prompt);
  Sampler sampler(params);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  while (logits.has_value() && run.tokens.size() < max_tokens) {
    const int32_t token = *sampler.Sample(*logits, history, run.tokens.size());
    run.logits.push_back(*logits);
    run.tokens.push_back(token);
    history.push_back(token);
    if (run.tokens.size() < max_tokens) logits = model.Decode(&cache, token);
  }
  return run;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_ENGINE_ALONE_H_
