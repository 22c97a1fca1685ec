// Generation: the one object that turns a sequence's logits into its generated tokens and text.
//
// Every decode loop in fak — the engine's emit step, fak::Generate, `fak run`, the Python session —
// chooses its tokens here, so a feature of generation (a constraint, a draft, log-probabilities)
// is written once. A Generation owns the seeded Sampler, the stop tokens, the stop strings (through
// a TextStream), the token limit and the finish reason. One Step is: given these logits, choose the
// next token; say what text it releases and whether the generation is finished, and why. It runs
// no model: the caller computes the logits (the engine in a batched step, Run through a decode
// function), so scheduling stays the caller's and the numbers stay the model's.
//
// It lives in the model layer, which therefore links the tokenizer layer (for TextStream): the
// sampler is here already, and the model layer is where a loaded model's tokenizer is headed
// (docs/architecture.md §11).
//
// Extension point. Step is the only place a token is chosen. A constraint (GenerateParams::
// constraint: a grammar, a JSON schema) masks `logits` there before sampling — a forbidden token's
// logit becomes -inf, every other logit keeps its bits — and advances with the chosen token; when
// it admits nothing more the generation ends as at a stop token. Speculative decoding
// (fak/model/speculation.h) adds no second way to choose: Step runs on each verified position's
// logits in order, and a draft token is kept while Step chose it.
//
// Not thread-safe; one per sequence. Cost per Step: a copy of the logits and, when sampling (not
// greedy), a sort of the vocabulary.
#ifndef FAK_MODEL_GENERATION_H_
#define FAK_MODEL_GENERATION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"
#include "fak/model/sampler.h"
#include "fak/model/speculation.h"
#include "fak/tokenizer/text_stream.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// One generated token and what it did.
struct GenerationStep {
  int32_t token = -1;
  // The text this token releases: its own once it is safe to show (TextStream holds back what could
  // still become a stop string, and half a UTF-8 character), and, when the token ends the
  // generation, everything held back. A stop token and an id the tokenizer cannot spell (a
  // synthetic model wider than its tokenizer) have no text of their own; a stop string and what
  // follows it are never released. Always empty without a tokenizer.
  std::string text;
  // Set when this token ends the generation: kStopToken, kStopString or kLength.
  std::optional<FinishReason> finish;
  // The logits the token was chosen from (a constraint's mask applied); valid during the StepFn
  // callback of Run only.
  std::span<const float> logits;
};

class FAK_EXPORT Generation {
 public:
  // Feeds `token` to the sequence and returns the logits that follow it.
  using DecodeFn = std::function<Result<std::vector<float>>(int32_t token)>;
  // Receives each step; returning false cancels the generation after that token.
  using StepFn = std::function<bool(const GenerationStep& step)>;
  // Speculation for Run: a drafter, and the sequence's batched feed and cut.
  struct Speculator {
    Drafter* drafter = nullptr;  // null: no speculation
    size_t max_draft_tokens = 8;
    // Feeds `tokens` to the sequence and returns the logits after each, [tokens.size()][vocab].
    std::function<Result<std::vector<float>>(std::span<const int32_t> tokens)> verify;
    // Drops the sequence's last `n` tokens (the rejected part of a draft).
    std::function<Status(size_t n)> rollback;
    SpeculationStats* stats = nullptr;  // counts, when set
  };

  // The generation ends when its text contains one of `stop_strings`; a stop string is never
  // released, nor what follows it. `tokenizer` may be null (no text is released); it must outlive
  // the generation. A constraint's matcher starts here (its errors pass through). InvalidArgument
  // for invalid sampling parameters, an empty stop string (it would
  // match everywhere: every surface refuses it, docs/reliability.md §11), or stop strings without a
  // tokenizer. With max_new_tokens == 0 the generation is finished (kLength) before its first step.
  static Result<Generation> Create(GenerateParams params, std::vector<std::string> stop_strings,
                                   const Tokenizer* tokenizer);

  // Chooses the next token from `logits`, given `history`: every token of the sequence before it
  // (the prompt and the tokens generated so far; the repetition penalty reads it). Requires
  // !done(). With a constraint, `logits` are masked in place first (so they hold what was sampled
  // from), and a constraint that no token can satisfy is an error. Logits the sampler refuses
  // (NaN, +inf, all -inf: Sampler::Sample) are InvalidArgument; an error changes nothing else.
  Result<GenerationStep> Step(std::span<float> logits, std::span<const int32_t> history);

  // The caller declined the last step (its callback returned false, or the request was cancelled
  // while the token was delivered). Returns the finish reason: the step's own when it had ended the
  // generation anyway, else kCancelled. Text still held back stays unreleased.
  FinishReason Cancel();

  // The whole loop on one sequence, for callers that decode one token at a time: Step on `logits`,
  // hand the step to `on_step` (if set), and, unless that ended it, `decode` the token for the next
  // logits. The token that ends the generation is not decoded (nothing would read its logits).
  // `history` is the sequence before the first generated token. Stops at the first decode or Step
  // error (returned; tokens() holds what was generated).
  //
  // With a `speculator` that has a drafter, each token fed may bring a draft (at most
  // max_draft_tokens, and never more than the tokens still to generate allow): [token, draft...] is
  // verified in one forward pass, Step runs on each position's logits while it chooses the draft's
  // tokens, and the draft tokens after the first it did not choose are rolled back. The tokens,
  // their logits, the sampler's draws and the sequence left behind (every token but the last) are
  // those of the plain loop.
  Status Run(std::vector<float> logits, std::vector<int32_t> history, const DecodeFn& decode,
             const StepFn& on_step = nullptr, const Speculator* speculator = nullptr);

  bool done() const { return finish_.has_value(); }
  // Why it ended; empty while it runs. Reasons outside generation (a deadline, an error, a
  // cancellation that did not come through Cancel) are the caller's to report.
  std::optional<FinishReason> finish() const { return finish_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // a stop token included
  // Every byte the steps released: the reply as a caller streaming it has shown it.
  const std::string& text() const;

 private:
  Generation(GenerateParams params, std::vector<std::string> stop_strings, const Tokenizer* tokenizer,
             std::unique_ptr<TokenMatcher> matcher);
  bool IsStopToken(int32_t token) const;

  GenerateParams params_;  // stop_tokens sorted
  Sampler sampler_;
  std::unique_ptr<TokenMatcher> matcher_;  // with a constraint
  std::optional<TextStream> stream_;  // with a tokenizer
  std::vector<int32_t> tokens_;
  std::optional<FinishReason> finish_;
};

// The most tokens a sequence holding `n_context` tokens can still generate in a model of
// `context_length`: every generated token but the last is fed back (decoded) into the cache.
FAK_EXPORT size_t GenerationRoom(size_t context_length, size_t n_context);

// OK when `max_new_tokens` fit after `n_context` tokens (GenerationRoom); else ResourceExhausted
// naming both counts and the context length. A count that cannot fit is refused before anything
// runs, on every surface (fak::Generate, the engine, Python's Session.generate, `fak run`), never
// cut short silently.
FAK_EXPORT Status CheckGenerationRoom(size_t context_length, size_t n_context, size_t max_new_tokens);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (the stop token included if one was emitted)
  size_t n_prompt_tokens = 0;
  // kStopToken, kLength (max_new_tokens) or kCancelled (on_token said stop).
  FinishReason finish = FinishReason::kLength;
  SpeculationStats speculation;  // all zero without speculation
};

// Prefills `prompt` onto `cache` (which may already hold a prefix) and decodes up to
// max_new_tokens, calling on_token (if set) after each; on_token returning false stops early. A
// Generation without text (no stop strings). ResourceExhausted, before anything runs, when the
// cache, the prompt and max_new_tokens do not fit the context (CheckGenerationRoom). With
// `speculation` it drafts and verifies (same tokens, same cache afterwards); InvalidArgument for
// options Validate refuses, FailedPrecondition for a sliding-window cache (a rejected draft could
// not be cut from it).
FAK_EXPORT Result<GenerateResult> Generate(const Model& model, KVCache* cache, std::span<const int32_t> prompt,
                                const GenerateParams& params,
                                const std::function<bool(int32_t)>& on_token = nullptr,
                                const SpeculationOptions& speculation = {});

}  // namespace fak

#endif  // FAK_MODEL_GENERATION_H_
