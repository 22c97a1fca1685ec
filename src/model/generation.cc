// Generation: sample, then stop token → stop string → token limit, in the order the engine always
// applied them; Run is the loop over it, one token at a time or verifying drafts.
#include "fak/model/generation.h"

#include <algorithm>
#include <utility>

namespace fak {

Result<Generation> Generation::Create(GenerateParams params, std::vector<std::string> stop_strings,
                                      const Tokenizer* tokenizer) {
  FAK_RETURN_IF_ERROR(params.sampling.Validate());
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    if (stop_strings[i].empty()) return InvalidArgument("stop string " + std::to_string(i) + " is empty");
  }
  if (tokenizer == nullptr && !stop_strings.empty()) {
    return InvalidArgument("Generation: stop strings need a tokenizer to read the text");
  }
  std::unique_ptr<TokenMatcher> matcher;
  if (params.constraint != nullptr) {
    FAK_ASSIGN_OR_RETURN(matcher, params.constraint->NewMatcher());
  }
  return Generation(std::move(params), std::move(stop_strings), tokenizer, std::move(matcher));
}

Generation::Generation(GenerateParams params, std::vector<std::string> stop_strings, const Tokenizer* tokenizer,
                       std::unique_ptr<TokenMatcher> matcher)
    : params_(std::move(params)), sampler_(params_.sampling), matcher_(std::move(matcher)) {
  std::sort(params_.stop_tokens.begin(), params_.stop_tokens.end());
  if (tokenizer != nullptr) stream_.emplace(*tokenizer, std::move(stop_strings), params_.spelled_tokens);
  if (params_.max_new_tokens == 0) finish_ = FinishReason::kLength;
}

bool Generation::IsStopToken(int32_t token) const {
  return std::binary_search(params_.stop_tokens.begin(), params_.stop_tokens.end(), token);
}

Result<GenerationStep> Generation::Step(std::span<float> logits, std::span<const int32_t> history) {
  GenerationStep step;
  if (matcher_) FAK_RETURN_IF_ERROR(matcher_->Mask(logits, params_.stop_tokens));
  FAK_ASSIGN_OR_RETURN(step.token, sampler_.Sample(logits, history, tokens_.size()));
  if (matcher_ && !IsStopToken(step.token)) FAK_RETURN_IF_ERROR(matcher_->Accept(step.token));
  tokens_.push_back(step.token);
  if (IsStopToken(step.token)) {
    step.finish = FinishReason::kStopToken;
  } else if (stream_) {
    // An id the tokenizer cannot spell has no text: generation goes on, as it always has.
    Result<std::string> piece = stream_->Push(step.token);
    if (piece.has_value()) step.text = std::move(*piece);
    if (stream_->stopped()) step.finish = FinishReason::kStopString;
  }
  // A constraint that admits nothing more ends the generation as a stop token would.
  if (!step.finish && matcher_ && matcher_->Complete()) step.finish = FinishReason::kStopToken;
  if (!step.finish && tokens_.size() >= params_.max_new_tokens) step.finish = FinishReason::kLength;
  if (step.finish) {
    if (stream_) step.text += stream_->Finish();
    finish_ = step.finish;
  }
  return step;
}

FinishReason Generation::Cancel() {
  if (!finish_) finish_ = FinishReason::kCancelled;
  return *finish_;
}

Status Generation::Run(std::vector<float> logits, std::vector<int32_t> history, const DecodeFn& decode,
                       const StepFn& on_step, const Speculator* speculator) {
  const size_t vocab = logits.size();
  std::vector<int32_t> draft;  // fed after the token the first row of `logits` follows
  while (!done()) {
    // Row i of `logits` follows draft[i - 1]: step while the choice is the draft's token.
    size_t row = 0;
    int32_t token = -1;
    bool ended = false;
    Status error = Status::Ok();
    for (;; ++row) {
      const std::span<float> row_logits = std::span<float>(logits).subspan(row * vocab, vocab);
      Result<GenerationStep> step = Step(row_logits, history);
      if (!step) {
        error = step.error();
        break;
      }
      step->logits = row_logits;
      token = step->token;
      history.push_back(token);
      if (on_step && !on_step(*step)) Cancel();
      ended = done();
      if (ended || row == draft.size() || token != draft[row]) break;
    }
    // The sequence holds every draft token fed; those after the last one kept go.
    if (const size_t rejected = draft.size() - row; rejected > 0) {
      FAK_RETURN_IF_ERROR(speculator->rollback(rejected));
    }
    if (speculator != nullptr && speculator->stats != nullptr && !draft.empty()) {
      ++speculator->stats->drafts;
      speculator->stats->draft_tokens += draft.size();
      speculator->stats->accepted_tokens += row;
    }
    FAK_RETURN_IF_ERROR(error);
    if (ended) break;
    draft.clear();
    // Every token a verification returns must still be wanted: at most the tokens left, minus this one.
    const size_t room = params_.max_new_tokens - tokens_.size() - 1;
    if (speculator != nullptr && speculator->drafter != nullptr && room > 0) {
      FAK_ASSIGN_OR_RETURN(draft, speculator->drafter->Propose(history, std::min(speculator->max_draft_tokens, room)));
      draft.resize(std::min(draft.size(), std::min(speculator->max_draft_tokens, room)));
    }
    if (draft.empty()) {
      FAK_ASSIGN_OR_RETURN(logits, decode(token));
    } else {
      std::vector<int32_t> fed = {token};
      fed.insert(fed.end(), draft.begin(), draft.end());
      FAK_ASSIGN_OR_RETURN(logits, speculator->verify(fed));
    }
  }
  return Status::Ok();
}

const std::string& Generation::text() const {
  static const std::string kNone;
  return stream_ ? stream_->text() : kNone;
}

size_t GenerationRoom(size_t context_length, size_t n_context) {
  return n_context > context_length ? 0 : context_length - n_context + 1;
}

Status CheckGenerationRoom(size_t context_length, size_t n_context, size_t max_new_tokens) {
  if (max_new_tokens <= GenerationRoom(context_length, n_context)) return Status::Ok();
  return ResourceExhausted(std::to_string(n_context) + " tokens of context + max_tokens " + std::to_string(max_new_tokens) +
                           " exceed the context length " + std::to_string(context_length) + " (at most " +
                           std::to_string(GenerationRoom(context_length, n_context)) + " more tokens fit)");
}

Result<GenerateResult> Generate(const Model& model, KVCache* cache, std::span<const int32_t> prompt,
                                const GenerateParams& params, const std::function<bool(int32_t)>& on_token,
                                const SpeculationOptions& speculation) {
  FAK_RETURN_IF_ERROR(params.sampling.Validate());
  FAK_RETURN_IF_ERROR(
      CheckGenerationRoom(model.config().context_length, cache->size() + prompt.size(), params.max_new_tokens));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter, NewDrafter(speculation, model));
  if (drafter != nullptr && cache->windowed())
    return FailedPrecondition("Generate: speculation needs a full cache (a sliding-window cache cannot cut a rejected draft)");
  FAK_ASSIGN_OR_RETURN(Generation generation, Generation::Create(params, /*stop_strings=*/{}, /*tokenizer=*/nullptr));
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model.Prefill(cache, prompt, LogitsMode::kLast));
  GenerateResult out;
  const Generation::Speculator speculator{
      .drafter = drafter.get(),
      .max_draft_tokens = speculation.max_draft_tokens,
      .verify = [&](std::span<const int32_t> tokens) { return model.Prefill(cache, tokens, LogitsMode::kAll); },
      .rollback = [&](size_t n) { return cache->Truncate(cache->size() - n); },
      .stats = &out.speculation,
  };
  FAK_RETURN_IF_ERROR(generation.Run(
      std::move(logits), std::vector<int32_t>(cache->tokens().begin(), cache->tokens().end()),
      [&](int32_t token) { return model.Decode(cache, token); },
      [&](const GenerationStep& step) { return !on_token || on_token(step.token); }, &speculator));
  out.tokens = generation.tokens();
  out.n_prompt_tokens = prompt.size();
  out.finish = generation.finish().value_or(FinishReason::kLength);
  return out;
}

}  // namespace fak
