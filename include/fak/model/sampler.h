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
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/model/token_constraint.h"

namespace fak {

// Applied in this fixed order (docs/engine.md, "Sampling"): logit_bias, repetition_penalty,
// presence and frequency penalties, then (unless greedy) temperature, top_k, top_p, min_p, draw.
struct FAK_EXPORT SamplingParams {
  float temperature = 0.0f;         // 0 = greedy (argmax; ties go to the lowest id). Default: 0.
  size_t top_k = 0;                 // keep the k most likely; 0 = all. Default: 0.
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 = all. Default: 1.
  // > 1 discourages tokens in the last repetition_window tokens of the history, prompt included
  // (CTRL / HF / llama.cpp rule: a positive logit is divided by it, a negative one multiplied).
  // Default: 1.
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;                // Default: 0.
  // The fields below came later; positional initialisers of the five above stay valid.
  size_t repetition_window = 0;     // tokens of history the repetition penalty reads; 0 = all. Default: 0.
  // Keep only tokens whose probability (after temperature) is at least min_p times the most likely
  // one's; in [0, 1], 0 = off. Default: 0.
  float min_p = 0.0f;
  // OpenAI's penalties, in [-2, 2], over the tokens this generation produced (not the prompt):
  // logit -= frequency_penalty * count + presence_penalty * (count > 0). Default: 0.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Token id → value added to its logit, in [-100, 100]; -100 bans the token (its logit becomes
  // -inf). Ids must be distinct; each must be below the vocabulary (the engine checks at Submit).
  std::vector<std::pair<int32_t, float>> logit_bias = {};

  // InvalidArgument naming the field: NaN, infinities, values out of range, and subnormal floats
  // (a temperature, top_p or penalty too small to be a normal float is a mistake, not a setting).
  Status Validate() const;

  // The parameters from double-precision values (JSON, the command line, Python floats), checked
  // as the floats the sampler uses: a value the conversion turns into 0, a subnormal or an
  // infinity is InvalidArgument naming the field and the value given (top_p 5e-324 is not 0),
  // then Validate. Every surface that reads doubles reads them through here.
  static Result<SamplingParams> FromDoubles(double temperature, size_t top_k, double top_p,
                                            double repetition_penalty, uint64_t seed);
};

// One sampling value given as a double, as the float the sampler will use: InvalidArgument naming
// `field` and the value given when the float is 0, subnormal or infinite and the double was not
// (FromDoubles checks each field so; a parser that names fields one by one calls it directly).
FAK_EXPORT Result<float> SamplingFloat(double value, std::string_view field);

class FAK_EXPORT Sampler {
 public:
  // `params` must pass Validate.
  explicit Sampler(const SamplingParams& params);
  // Picks the next token from `logits` given the ids of the sequence so far, of which the last
  // `generated` are this generation's own (the presence and frequency penalties count those; the
  // repetition penalty reads its window of the whole history). -inf masks a token out; NaN, +inf,
  // no logits or every logit -inf is InvalidArgument naming the first bad index, and so is a
  // logit_bias that bans every token left, so no token is ever drawn from numbers that mean
  // nothing. A pure function of (logits, params, the generator's state, history) and, for a draw
  // at a temperature, the kernel tier, whose exp weighs the tokens: a failed call leaves the
  // generator as it was.
  Result<int32_t> Sample(std::span<const float> logits, std::span<const int32_t> history, size_t generated = 0);

 private:
  std::vector<float> Adjusted(std::span<const float> logits, std::span<const int32_t> history, size_t generated) const;
  double NextUniform();  // [0, 1)
  bool AdjustsLogits() const;
  SamplingParams params_;
  uint64_t state_[4];
  std::vector<float> weights_;  // scratch: each token's weight in a draw, kept across draws
};

// A token's log-probability under a distribution.
struct TokenLogprob {
  int32_t token = -1;
  double logprob = 0;  // -inf for a masked (-inf) logit
};
// The chosen token's log-probability and the most likely tokens', as OpenAI's logprobs report them.
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first, ties to the lowest id
};
constexpr size_t kMaxTopLogprobs = 20;  // OpenAI's limit

// log-softmax of the model's `logits` (before any sampling change: bias, penalties, temperature,
// filters), in double, summed in index order: the log-probability of `token` and the `top_n`
// most likely tokens. `logits` must be non-empty and `token` within it.
FAK_EXPORT TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t token, size_t top_n);

// What a generation is asked for (fak::Generate, Generation::Create; stop strings come beside it,
// with a tokenizer to read the text).
struct GenerateParams {
  size_t max_new_tokens = 64;  // Default: 64.
  // Generation ends after emitting any of these (e.g. EOS and the template's end-of-turn tokens;
  // see EndOfGenerationTokens); the id is in the result's tokens, with no text. Default: none.
  std::vector<int32_t> stop_tokens;
  SamplingParams sampling;
  // Which tokens may come next (a grammar, a JSON schema: fak/grammar/grammar_constraint.h); the
  // generation ends where it admits nothing more. Default: none.
  std::shared_ptr<const TokenConstraint> constraint;
  // Special tokens the text shows by their vocabulary text (Tokenizer::TokenText), though special
  // tokens decode to nothing: a tool-call marker a vocabulary holds as one control token
  // ([TOOL_CALLS], <|python_tag|>), so the reply's reader finds the call. Default: none.
  std::vector<int32_t> spelled_tokens;
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
