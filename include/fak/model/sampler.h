// Sampling: turn logits into tokens, reproducibly; and the parameters of a generation.
//
// Sampler is seeded: the same seed, logits and history give the same tokens on every machine (its
// generator is a fixed xoshiro256** stream, not std::random's implementation-defined
// distributions). Not thread-safe; one per sequence. Nothing but the generation object
// (fak/model/generation.h: stops, limits, text) calls it to generate; the C API's fak_sampler_sample
// exposes it as a plain entry point.
#ifndef FAK_MODEL_SAMPLER_H_
#define FAK_MODEL_SAMPLER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

struct FAK_EXPORT SamplingParams {
  float temperature = 0.0f;         // 0 = greedy (argmax; ties go to the lowest id). Default: 0.
  size_t top_k = 0;                 // keep the k most likely; 0 = all. Default: 0.
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 = all. Default: 1.
  float repetition_penalty = 1.0f;  // > 1 discourages tokens in the history (CTRL rule). Default: 1.
  uint64_t seed = 0;                // Default: 0.

  Status Validate() const;
};

class FAK_EXPORT Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Picks the next token from `logits` given the ids seen so far (for the repetition penalty).
  int32_t Sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  double NextUniform();  // [0, 1)
  SamplingParams params_;
  uint64_t state_[4];
};

// What a generation is asked for (fak::Generate, Generation::Create; stop strings come beside it,
// with a tokenizer to read the text).
struct GenerateParams {
  size_t max_new_tokens = 64;  // Default: 64.
  // Generation ends after emitting any of these (e.g. EOS and the template's end-of-turn tokens;
  // see EndOfGenerationTokens); the id is in the result's tokens, with no text. Default: none.
  std::vector<int32_t> stop_tokens;
  SamplingParams sampling;
};

// Why a generation ended (the planner, the engine and the tools report it).
enum class FinishReason {
  kStopToken,   // emitted one of stop_tokens
  kStopString,  // the text reached one of stop_strings
  kLength,      // max_tokens generated
  kCancelled,   // the caller stopped it: a callback returned false, Engine::Cancel, Shutdown
  kDeadline,    // its deadline passed (engine)
  kError,       // a failure ended it (the result carries the Status)
};
FAK_EXPORT std::string_view FinishReasonName(FinishReason reason);  // "stop_token", "stop_string", "length", ...

}  // namespace fak

#endif  // FAK_MODEL_SAMPLER_H_
