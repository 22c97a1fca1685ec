// Drafters for speculative decoding: prompt lookup over the context, and a greedy draft model.
#include "fak/model/speculation.h"

#include <algorithm>
#include <charconv>
#include <string>

namespace fak {
namespace {

int32_t Argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(size_t ngram_min, size_t ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}
  Result<std::vector<int32_t>> Propose(std::span<const int32_t> context, size_t max_tokens) override {
    return NgramDraft(context, ngram_min_, ngram_max_, max_tokens);
  }

 private:
  size_t ngram_min_, ngram_max_;
};

// Keeps the draft model's cache in step with the sequence: each Propose reuses the longest prefix
// the cache shares with the context (the accepted part of the last draft included), prefills the
// rest and decodes greedily.
class ModelDrafter final : public Drafter {
 public:
  explicit ModelDrafter(std::shared_ptr<const Model> model) : model_(std::move(model)), cache_(model_->NewCache()) {}

  Result<std::vector<int32_t>> Propose(std::span<const int32_t> context, size_t max_tokens) override {
    std::vector<int32_t> draft;
    if (context.empty() || max_tokens == 0 || context.size() + max_tokens > model_->config().context_length) return draft;
    const std::span<const int32_t> held = cache_.tokens();
    const size_t shared =
        static_cast<size_t>(std::mismatch(held.begin(), held.end(), context.begin(), context.end()).first - held.begin());
    // At least the last context token is fed again: its logits are the first guess.
    FAK_RETURN_IF_ERROR(cache_.Truncate(std::min(shared, context.size() - 1)));
    FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model_->Prefill(&cache_, context.subspan(cache_.size())));
    for (;;) {
      draft.push_back(Argmax(logits));
      if (draft.size() == max_tokens) return draft;
      FAK_ASSIGN_OR_RETURN(logits, model_->Decode(&cache_, draft.back()));
    }
  }

 private:
  std::shared_ptr<const Model> model_;
  KVCache cache_;
};

}  // namespace

Status SpeculationOptions::Validate(const Model& target) const {
  if (max_draft_tokens == 0 || max_draft_tokens > kMaxDraftTokens)
    return InvalidArgument("SpeculationOptions.max_draft_tokens " + std::to_string(max_draft_tokens) + " not in [1, " +
                           std::to_string(kMaxDraftTokens) + "]");
  if (ngram_min == 0 || ngram_min > ngram_max || ngram_max > kMaxNgram)
    return InvalidArgument("SpeculationOptions: ngram_min " + std::to_string(ngram_min) + " and ngram_max " +
                           std::to_string(ngram_max) + " must satisfy 1 <= ngram_min <= ngram_max <= " +
                           std::to_string(kMaxNgram));
  if (source == DraftSource::kModel) {
    if (draft_model == nullptr) return InvalidArgument("SpeculationOptions: a draft-model source without a draft_model");
    if (draft_model->config().vocab_size != target.config().vocab_size)
      return InvalidArgument("SpeculationOptions.draft_model: its vocabulary of " +
                             std::to_string(draft_model->config().vocab_size) + " tokens differs from the model's " +
                             std::to_string(target.config().vocab_size) + " (a draft model shares the tokenizer)");
  }
  return Status::Ok();
}

Result<SpeculationOptions> ParseSpeculation(std::string_view text) {
  SpeculationOptions o;
  if (text == "off") return o;
  const std::string_view kNgram = "ngram";
  if (text.substr(0, kNgram.size()) == kNgram) {
    o.source = DraftSource::kNgram;
    std::string_view rest = text.substr(kNgram.size());
    if (rest.empty()) return o;
    if (rest.front() == ':') {
      rest.remove_prefix(1);
      size_t k = 0;
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), k);
      if (ec == std::errc() && end == rest.data() + rest.size() && k >= 1 && k <= kMaxDraftTokens) {
        o.max_draft_tokens = k;
        return o;
      }
    }
  }
  return InvalidArgument("speculation '" + std::string(text) + "': expected off, ngram or ngram:K with K in 1.." +
                         std::to_string(kMaxDraftTokens));
}

std::vector<int32_t> NgramDraft(std::span<const int32_t> context, size_t ngram_min, size_t ngram_max,
                                size_t max_tokens) {
  const size_t len = context.size();
  for (size_t n = std::min(ngram_max, len > 0 ? len - 1 : 0); n >= ngram_min && n > 0; --n) {
    const std::span<const int32_t> suffix = context.last(n);
    // The latest earlier occurrence that some token follows: starts from len - n - 1 down.
    for (size_t start = len - n; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + static_cast<ptrdiff_t>(start))) continue;
      // What followed it, copied on past the context's end from the draft itself (as LZ77 copies
      // an overlapping match): a sequence caught in a loop gets the whole loop, not one token.
      std::vector<int32_t> draft;
      for (size_t i = start + n; draft.size() < max_tokens; ++i) draft.push_back(i < len ? context[i] : draft[i - len]);
      return draft;
    }
  }
  return {};
}

Result<std::unique_ptr<Drafter>> NewDrafter(const SpeculationOptions& options, const Model& target) {
  FAK_RETURN_IF_ERROR(options.Validate(target));
  switch (options.source) {
    case DraftSource::kNone: return std::unique_ptr<Drafter>();
    case DraftSource::kNgram: return std::unique_ptr<Drafter>(new NgramDrafter(options.ngram_min, options.ngram_max));
    case DraftSource::kModel: return std::unique_ptr<Drafter>(new ModelDrafter(options.draft_model));
  }
  return InvalidArgument("SpeculationOptions.source: unknown value");
}

}  // namespace fak
