// Speculative decoding changes no bit: with any drafter (prompt lookup, a draft model, a drafter
// that is right or wrong on purpose), the generated tokens, the full logit vector each was chosen
// from (max|Δ| == 0) and the cache left behind equal plain one-token-at-a-time decoding — greedy
// and seeded sampling with penalties, bias and a stop token; and through the engine, several
// requests at once. In the active tier (ctest runs this binary once per tier). Controls: drafts
// were really accepted and really rejected, and a loop that kept a rejected draft in the cache
// would be caught.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/model/generation.h"
#include "fak/model/model.h"
#include "fak/model/speculation.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/engine/alone.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TokenSequence;

struct Decoded {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // logits[i] produced tokens[i]
  std::optional<FinishReason> finish;
  Digest cache;
  SpeculationStats stats;
};

// Prefill, then Generation::Run: plain without a drafter, else speculating. `keep_rejected` breaks
// the rollback (the control).
Decoded Decode(const Model& model, const std::vector<int32_t>& prompt, const GenerateParams& params, Drafter* drafter,
               size_t max_draft, bool keep_rejected = false) {
  Decoded out;
  KVCache cache = model.NewCache();
  Result<std::vector<float>> logits = model.Prefill(&cache, prompt);
  EXPECT_TRUE(logits.has_value());
  Result<Generation> generation = Generation::Create(params, {}, nullptr);
  EXPECT_TRUE(generation.has_value());
  const Generation::Speculator speculator{
      .drafter = drafter,
      .max_draft_tokens = max_draft,
      .verify = [&](std::span<const int32_t> tokens) { return model.Prefill(&cache, tokens, LogitsMode::kAll); },
      .rollback = [&](size_t n) { return keep_rejected ? Status::Ok() : cache.Truncate(cache.size() - n); },
      .stats = &out.stats,
  };
  const Status run = generation->Run(
      std::move(*logits), prompt, [&](int32_t token) { return model.Decode(&cache, token); },
      [&](const GenerationStep& step) {
        out.logits.emplace_back(step.logits.begin(), step.logits.end());
        return true;
      },
      &speculator);
  EXPECT_TRUE(run.ok()) << run.ToString();
  out.tokens = generation->tokens();
  out.finish = generation->finish();
  out.cache = cache.ComputeDigest();
  return out;
}

// Knows the plain run's tokens and proposes them, with every third draft wrong at its second token:
// long runs accepted and rejections at known places, whatever the model.
class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> answer, size_t prompt_size, size_t vocab)
      : answer_(std::move(answer)), prompt_size_(prompt_size), vocab_(vocab) {}
  Result<std::vector<int32_t>> Propose(std::span<const int32_t> context, size_t max_tokens) override {
    const size_t done = context.size() - prompt_size_;
    std::vector<int32_t> draft;
    for (size_t i = done; i < answer_.size() && draft.size() < max_tokens; ++i) draft.push_back(answer_[i]);
    if (++calls_ % 3 == 0 && draft.size() > 1) draft[1] = static_cast<int32_t>((draft[1] + 1) % vocab_);
    return draft;
  }

 private:
  std::vector<int32_t> answer_;
  size_t prompt_size_, vocab_;
  size_t calls_ = 0;
};

// A prompt that repeats itself, so prompt lookup finds n-grams from the first token on.
std::vector<int32_t> RepetitivePrompt(size_t vocab, uint32_t seed) {
  const std::vector<int32_t> phrase = TokenSequence(24, seed, vocab);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  prompt.insert(prompt.end(), phrase.begin(), phrase.begin() + 9);
  return prompt;
}

std::vector<GenerateParams> ParamCases() {
  GenerateParams greedy;
  greedy.max_new_tokens = 40;
  GenerateParams sampled = greedy;
  sampled.sampling = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .repetition_penalty = 1.2f, .seed = 11};
  sampled.sampling.presence_penalty = 0.3f;
  sampled.sampling.frequency_penalty = 0.4f;
  sampled.sampling.repetition_window = 32;
  sampled.sampling.logit_bias = {{5, -100.0f}, {9, 2.0f}};
  GenerateParams min_p = greedy;
  min_p.sampling = {.temperature = 1.1f, .seed = 3};
  min_p.sampling.min_p = 0.05f;
  return {greedy, sampled, min_p};
}

SpeculationOptions Speculation(DraftSource source, size_t k, size_t ngram_min = 2,
                               std::shared_ptr<const Model> draft_model = nullptr) {
  SpeculationOptions o;
  o.source = source;
  o.max_draft_tokens = k;
  o.ngram_min = ngram_min;
  o.draft_model = std::move(draft_model);
  return o;
}

struct DrafterCase {
  const char* name;
  SpeculationOptions options;  // source kNone: the oracle
};

TEST(Witness, SpeculativeEqualsPlain) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> owned, Model::Synthetic(testing::ByteModelConfig(), 5));
  const std::shared_ptr<const Model> model = std::move(owned);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> other, Model::Synthetic(testing::ByteModelConfig(), 6));
  const size_t vocab = model->config().vocab_size;
  const DrafterCase drafters[] = {
      {"ngram k4", Speculation(DraftSource::kNgram, 4)},
      {"ngram k8 n1..3", Speculation(DraftSource::kNgram, 8, 1)},
      {"draft model: the model itself", Speculation(DraftSource::kModel, 5, 2, model)},
      {"draft model: another", Speculation(DraftSource::kModel, 3, 2, std::move(other))},
      {"oracle, wrong every third draft", Speculation(DraftSource::kNone, 6)},
  };
  std::vector<SpeculationStats> totals(std::size(drafters));
  const std::vector<GenerateParams> cases = ParamCases();
  for (size_t c = 0; c < cases.size(); ++c) {
    for (uint32_t seed : {1u, 2u}) {
      const std::vector<int32_t> prompt = RepetitivePrompt(vocab, 40 * seed + c);
      const Decoded plain = Decode(*model, prompt, cases[c], nullptr, 0);
      ASSERT_EQ(plain.tokens.size(), cases[c].max_new_tokens);
      // The same case ended early by a stop token: the one the plain run emits at index 23.
      GenerateParams stopping = cases[c];
      stopping.stop_tokens = {plain.tokens[23]};
      const Decoded plain_stopping = Decode(*model, prompt, stopping, nullptr, 0);
      ASSERT_EQ(plain_stopping.finish, FinishReason::kStopToken);
      for (size_t d = 0; d < std::size(drafters); ++d) {
        for (const bool with_stop : {false, true}) {
          SCOPED_TRACE(std::string(drafters[d].name) + ", case " + std::to_string(c) + ", seed " + std::to_string(seed) +
                       (with_stop ? ", stop token" : ""));
          const Decoded& want = with_stop ? plain_stopping : plain;
          std::unique_ptr<Drafter> drafter;
          if (drafters[d].options.source == DraftSource::kNone) {
            drafter = std::make_unique<OracleDrafter>(want.tokens, prompt.size(), vocab);
          } else {
            ASSERT_OK_AND_ASSIGN(drafter, NewDrafter(drafters[d].options, *model));
          }
          const Decoded got = Decode(*model, prompt, with_stop ? stopping : cases[c], drafter.get(),
                                     drafters[d].options.max_draft_tokens);
          ASSERT_EQ(got.tokens, want.tokens);
          ASSERT_EQ(got.finish, want.finish);
          ASSERT_EQ(got.logits.size(), want.logits.size());
          for (size_t t = 0; t < got.logits.size(); ++t) ASSERT_EQ(MaxAbsDiff(got.logits[t], want.logits[t]), 0.0f) << "token " << t;
          ASSERT_EQ(got.cache, want.cache);  // every token but the last, as plain decoding leaves it
          totals[d].drafts += got.stats.drafts;
          totals[d].draft_tokens += got.stats.draft_tokens;
          totals[d].accepted_tokens += got.stats.accepted_tokens;
        }
      }
    }
  }
  // Non-vacuity: every drafter had drafts accepted and rejected (the same model as its own draft
  // is rejected only where sampling strays from its greedy guess).
  for (size_t d = 0; d < std::size(drafters); ++d) {
    SCOPED_TRACE(drafters[d].name);
    EXPECT_GT(totals[d].drafts, 10u);
    EXPECT_GT(totals[d].accepted_tokens, 10u);
    EXPECT_LT(totals[d].accepted_tokens, totals[d].draft_tokens);
    std::printf("[ speculation ] %-32s drafts %zu, tokens %zu, accepted %zu\n", drafters[d].name, totals[d].drafts,
                totals[d].draft_tokens, totals[d].accepted_tokens);
  }

  // Control: a loop that left a rejected draft in the cache would be caught by the comparison.
  const std::vector<int32_t> prompt = RepetitivePrompt(vocab, 40);
  const Decoded plain = Decode(*model, prompt, cases[0], nullptr, 0);
  OracleDrafter oracle(plain.tokens, prompt.size(), vocab);
  const Decoded broken = Decode(*model, prompt, cases[0], &oracle, 6, /*keep_rejected=*/true);
  ASSERT_GT(broken.stats.draft_tokens, broken.stats.accepted_tokens);
  float worst = 0.0f;
  for (size_t t = 0; t < std::min(broken.logits.size(), plain.logits.size()); ++t)
    worst = std::max(worst, MaxAbsDiff(broken.logits[t], plain.logits[t]));
  EXPECT_GT(worst, 1e-4f);
}

TEST(Witness, SpeculativeEqualsPlainInEngine) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> owned, Model::Synthetic(testing::ByteModelConfig(), 5));
  const std::shared_ptr<const Model> model = std::move(owned);
  const auto tokenizer = MakeByteTokenizer();
  const size_t vocab = model->config().vocab_size;
  const std::vector<GenerateParams> params = ParamCases();
  const SpeculationOptions sources[] = {
      Speculation(DraftSource::kNgram, 6, 1),
      Speculation(DraftSource::kModel, 4, 2, model),
  };
  for (const SpeculationOptions& speculation : sources) {
    SCOPED_TRACE(speculation.source == DraftSource::kNgram ? "ngram" : "draft model");
    EngineOptions options;
    options.max_running = 4;
    options.prefill_chunk_tokens = 32;
    options.step_token_budget = 48;  // drafts compete with prompt chunks for the step's tokens
    options.start_thread = false;
    options.speculation = speculation;
    ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, options));
    std::vector<RequestId> ids;
    std::vector<testing::AloneRun> alone;
    for (uint32_t i = 0; i < 8; ++i) {
      EngineRequest r;
      r.prompt = RepetitivePrompt(vocab, 100 + i);
      r.sampling = params[i % params.size()].sampling;
      r.max_tokens = 12 + 3 * i;
      r.record_logits = true;
      r.logprobs = i % 2 == 0;
      r.top_logprobs = i % 4;
      r.speculate = i != 7;  // one request opts out
      alone.push_back(testing::RunAlone(*model, r.prompt, r.sampling, r.max_tokens));
      ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(std::move(r)));
      ids.push_back(id);
    }
    size_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(EngineResult got, engine->Wait(ids[i]));
      ASSERT_EQ(got.finish, FinishReason::kLength) << "request " << i << ": " << got.error.ToString();
      ASSERT_EQ(got.tokens, alone[i].tokens) << "request " << i;
      ASSERT_EQ(got.logits.size(), alone[i].logits.size()) << "request " << i;
      for (size_t t = 0; t < got.logits.size(); ++t)
        ASSERT_EQ(MaxAbsDiff(got.logits[t], alone[i].logits[t]), 0.0f) << "request " << i << " token " << t;
      if (i % 2 == 0) {
        ASSERT_EQ(got.logprobs.size(), got.tokens.size());
        for (size_t t = 0; t < got.logprobs.size(); ++t)
          ASSERT_EQ(got.logprobs[t].chosen.logprob, LogprobsOf(alone[i].logits[t], alone[i].tokens[t], 0).chosen.logprob);
      }
      if (i == 7) {
        EXPECT_EQ(got.usage.draft_tokens, 0u);
      }
      drafted += got.usage.draft_tokens;
      accepted += got.usage.accepted_draft_tokens;
    }
    // Non-vacuity: drafts were verified in batches alongside other requests, some kept, some cut.
    const EngineStats stats = engine->Stats();
    EXPECT_EQ(stats.draft_tokens, drafted);
    EXPECT_GT(accepted, 10u);
    EXPECT_LT(accepted, drafted);
    EXPECT_GT(stats.max_batch_items, 2u);
    std::printf("[ speculation ] engine %s: drafted %zu, accepted %zu\n",
                speculation.source == DraftSource::kNgram ? "ngram" : "draft model", drafted, accepted);
  }
}

}  // namespace
}  // namespace fak
