// Generation: the one decode step is exactly the engine's emit step as it was before there was a
// Generation (LegacyEmit below is that code, kept as the oracle), over the same logits, in every
// case — greedy, seeded sampling, stop token, a stop string across token borders, the token limit,
// a cancelling callback — and fak::Generate, the engine and a hand-run Sampler give the same
// tokens for the same prompt and seed.
#include "fak/model/generation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/tokenizer/text_stream.h"
#include "tests/engine/alone.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// Ids the byte tokenizer spells (0..255 bytes, 256 BOS, 257 EOS) and some it cannot (>= 258).
constexpr size_t kVocab = 300;
constexpr int32_t kEos = 257;

// Deterministic logits as a function of the whole history (a stand-in for a model: every result
// below depends on the context, as a model's does). Mass sits on a few letters, a space, the two
// bytes of "é" (so UTF-8 is held back mid-character), EOS and an id without text.
std::vector<float> LogitsAfter(const std::vector<int32_t>& history) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 0x100000001B3ull;
  std::vector<float> logits(kVocab);
  for (size_t i = 0; i < kVocab; ++i) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    logits[i] = static_cast<float>(h % 1000) / 1000.0f - 4.0f;
  }
  for (int32_t favoured : std::initializer_list<int32_t>{'a', 'b', 'c', ' ', 0xC3, 0xA9, kEos, 280}) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    logits[favoured] += 3.0f + static_cast<float>(h % 1000) / 400.0f;
  }
  return logits;
}

struct Case {
  SamplingParams sampling;
  size_t max_tokens = 40;
  std::vector<int32_t> stop_tokens;
  std::vector<std::string> stop_strings;
  size_t cancel_at = 0;  // the callback returns false on this token (1-based); 0: never
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::string> texts;  // what each token released, in order
  std::string text;                // the final text
  FinishReason finish = FinishReason::kLength;
  std::vector<std::vector<float>> logits;  // the logits each token was chosen from
};

// The engine's Emit/Deliver before Generation existed, verbatim in substance: sample with the
// context as history; a stop token ends it with no text; else the stream releases text and may stop
// on a stop string; then the token limit; when it ends, what was held back goes with the last
// token; a callback returning false ends it with the natural reason, if any, else kCancelled.
Outcome LegacyEmit(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt, Case c) {
  Outcome out;
  Sampler sampler(c.sampling);
  TextStream stream(tokenizer, c.stop_strings);
  std::sort(c.stop_tokens.begin(), c.stop_tokens.end());
  std::vector<int32_t> context = prompt;
  for (;;) {
    std::vector<float> logits = LogitsAfter(context);
    const int32_t token = *sampler.Sample(logits, context);
    out.logits.push_back(logits);
    context.push_back(token);
    out.tokens.push_back(token);
    std::optional<FinishReason> end;
    std::string text;
    if (std::binary_search(c.stop_tokens.begin(), c.stop_tokens.end(), token)) {
      end = FinishReason::kStopToken;
    } else {
      Result<std::string> piece = stream.Push(token);
      if (piece.has_value()) text = std::move(*piece);
      if (stream.stopped()) end = FinishReason::kStopString;
    }
    if (!end && out.tokens.size() >= c.max_tokens) end = FinishReason::kLength;
    if (end) text += stream.Finish();
    out.texts.push_back(text);
    if (out.tokens.size() == c.cancel_at) {
      out.finish = end.value_or(FinishReason::kCancelled);
      break;
    }
    if (end) {
      out.finish = *end;
      break;
    }
  }
  out.text = stream.text();
  return out;
}

GenerateParams ParamsOf(const Case& c) {
  GenerateParams p;
  p.max_new_tokens = c.max_tokens;
  p.stop_tokens = c.stop_tokens;
  p.sampling = c.sampling;
  return p;
}

// The Generation, stepped by hand as the engine steps it.
Outcome Stepped(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt, const Case& c) {
  Outcome out;
  Result<Generation> g = Generation::Create(ParamsOf(c), c.stop_strings, &tokenizer);
  EXPECT_TRUE(g.has_value()) << g.error().ToString();
  if (!g.has_value()) return out;
  std::vector<int32_t> context = prompt;
  while (!g->done()) {
    std::vector<float> logits = LogitsAfter(context);
    Result<GenerationStep> stepped = g->Step(logits, context);
    EXPECT_TRUE(stepped.has_value()) << stepped.error().ToString();
    if (!stepped.has_value()) break;
    const GenerationStep& step = *stepped;
    out.logits.push_back(std::move(logits));
    context.push_back(step.token);
    out.texts.push_back(step.text);
    if (context.size() - prompt.size() == c.cancel_at) {
      g->Cancel();
      break;
    }
  }
  out.tokens = g->tokens();
  out.text = g->text();
  out.finish = *g->finish();
  return out;
}

// The Generation through Run, the loop fak::Generate, `fak run` and Python use.
Outcome Ran(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt, const Case& c) {
  Outcome out;
  Result<Generation> g = Generation::Create(ParamsOf(c), c.stop_strings, &tokenizer);
  EXPECT_TRUE(g.has_value()) << g.error().ToString();
  if (!g.has_value()) return out;
  std::vector<int32_t> context = prompt;
  const Status run = g->Run(
      LogitsAfter(context), prompt,
      [&](int32_t token) -> Result<std::vector<float>> {
        context.push_back(token);
        return LogitsAfter(context);
      },
      [&](const GenerationStep& step) {
        out.texts.push_back(step.text);
        return out.texts.size() != c.cancel_at;
      });
  EXPECT_TRUE(run.ok()) << run.ToString();
  out.tokens = g->tokens();
  out.text = g->text();
  out.finish = *g->finish();
  return out;
}

void ExpectSame(const Outcome& want, const Outcome& got, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.texts, want.texts) << what;
  EXPECT_EQ(got.text, want.text) << what;
  EXPECT_EQ(got.finish, want.finish) << what << ": " << FinishReasonName(got.finish) << " vs "
                                     << FinishReasonName(want.finish);
  if (!got.logits.empty()) {
    // The same logits, bit for bit, at every step: max|Δ| == 0.
    ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
    float max_delta = 0;
    for (size_t i = 0; i < got.logits.size(); ++i)
      for (size_t j = 0; j < kVocab; ++j) max_delta = std::max(max_delta, std::abs(got.logits[i][j] - want.logits[i][j]));
    EXPECT_EQ(max_delta, 0.0f) << what;
  }
}

class GenerationWitness : public ::testing::Test {
 protected:
  void SetUp() override { tokenizer_ = MakeByteTokenizer(); }
  // Checks the three against each other; returns the legacy outcome for the case's own controls.
  Outcome Check(const Case& c, const std::string& what) {
    const Outcome want = LegacyEmit(*tokenizer_, prompt_, c);
    ExpectSame(want, Stepped(*tokenizer_, prompt_, c), what + " (stepped)");
    ExpectSame(want, Ran(*tokenizer_, prompt_, c), what + " (run)");
    return want;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  const std::vector<int32_t> prompt_ = {256, 'h', 'i', ' '};
};

TEST_F(GenerationWitness, GreedyIsTheLegacyStep) {
  Case c;
  const Outcome o = Check(c, "greedy");
  EXPECT_EQ(o.finish, FinishReason::kLength);
  EXPECT_EQ(o.tokens.size(), c.max_tokens);
}

TEST_F(GenerationWitness, SeededSamplingIsTheLegacyStepForEverySeed) {
  std::vector<std::vector<int32_t>> seen;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    Case c;
    c.sampling = {0.9f, seed % 3 == 0 ? size_t{0} : size_t{5}, seed % 2 == 0 ? 0.9f : 1.0f,
                  seed % 4 == 0 ? 1.3f : 1.0f, seed};
    seen.push_back(Check(c, "seed " + std::to_string(seed)).tokens);
  }
  // Control: the seed reaches the draw, so agreeing on every seed is not agreeing on one sequence.
  std::sort(seen.begin(), seen.end());
  EXPECT_GT(std::unique(seen.begin(), seen.end()) - seen.begin(), 6);
}

TEST_F(GenerationWitness, StopTokenEndsWithNoTextAndReleasesWhatWasHeldBack) {
  bool stopped_on_token = false, released_held_back = false;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    Case c;
    c.sampling = {1.0f, 0, 1.0f, 1.0f, seed};
    c.stop_tokens = {kEos, 280};
    const Outcome o = Check(c, "stop token, seed " + std::to_string(seed));
    if (o.finish != FinishReason::kStopToken) continue;
    stopped_on_token = true;
    EXPECT_TRUE(o.tokens.back() == kEos || o.tokens.back() == 280);
    // The stop token is in the tokens; its text is only what the stream held back (half of "é").
    released_held_back |= !o.texts.back().empty();
  }
  EXPECT_TRUE(stopped_on_token) << "control: no seed reached a stop token";
  EXPECT_TRUE(released_held_back) << "control: no stop token released held-back text";
}

TEST_F(GenerationWitness, StopStringAcrossTokenBordersIsNeverReleased) {
  size_t stopped = 0;
  bool held_back = false;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    Case c;
    c.sampling = {1.0f, 0, 1.0f, 1.0f, seed};
    c.stop_strings = {"ab", "c a", "\xC3\xA9" "b"};  // every one spans two or three byte tokens
    const Outcome o = Check(c, "stop string, seed " + std::to_string(seed));
    if (o.finish != FinishReason::kStopString) continue;
    ++stopped;
    for (const std::string& stop : c.stop_strings) EXPECT_EQ(o.text.find(stop), std::string::npos) << seed;
    for (size_t i = 0; i + 1 < o.texts.size(); ++i) held_back |= o.texts[i].empty();
  }
  EXPECT_GE(stopped, 4u) << "control: too few seeds reached a stop string";
  EXPECT_TRUE(held_back) << "control: no step held text back";
}

TEST_F(GenerationWitness, TokenLimitEndsWithLength) {
  for (size_t max_tokens : {1, 2, 7}) {
    Case c;
    c.max_tokens = max_tokens;
    c.sampling = {0.7f, 0, 1.0f, 1.0f, 5};
    const Outcome o = Check(c, "max " + std::to_string(max_tokens));
    EXPECT_LE(o.tokens.size(), max_tokens);
  }
  // max_tokens == 0: finished before a step, nothing sampled (the engine's prefill-only request).
  GenerateParams p;
  p.max_new_tokens = 0;
  ASSERT_OK_AND_ASSIGN(Generation g, Generation::Create(p, {}, tokenizer_.get()));
  EXPECT_TRUE(g.done());
  EXPECT_EQ(g.finish(), FinishReason::kLength);
  int decodes = 0;
  ASSERT_OK(g.Run(LogitsAfter(prompt_), prompt_, [&](int32_t) -> Result<std::vector<float>> {
    ++decodes;
    return LogitsAfter(prompt_);
  }));
  EXPECT_TRUE(g.tokens().empty());
  EXPECT_EQ(decodes, 0);
}

TEST_F(GenerationWitness, CancelKeepsTheNaturalReasonOnTheLastToken) {
  // Cancelled mid-way: kCancelled, held-back text stays unreleased.
  Case mid;
  mid.sampling = {0.9f, 0, 1.0f, 1.0f, 3};
  mid.cancel_at = 5;
  const Outcome o = Check(mid, "cancel at 5");
  EXPECT_EQ(o.finish, FinishReason::kCancelled);
  EXPECT_EQ(o.tokens.size(), 5u);
  // Cancelled on the token that ends it anyway: the natural reason.
  Case last = mid;
  last.max_tokens = 5;
  EXPECT_EQ(Check(last, "cancel on the last token").finish, FinishReason::kLength);
}

TEST(Generation, RejectsStopStringsWithoutATokenizerAndBadSampling) {
  GenerateParams p;
  EXPECT_EQ(Generation::Create(p, {"stop"}, nullptr).error().code(), StatusCode::kInvalidArgument);
  p.sampling.top_p = 0;
  EXPECT_EQ(Generation::Create(p, {}, nullptr).error().code(), StatusCode::kInvalidArgument);
}

TEST(Generation, RunStopsAtADecodeErrorKeepingTheTokens) {
  GenerateParams p;
  p.max_new_tokens = 10;
  ASSERT_OK_AND_ASSIGN(Generation g, Generation::Create(p, {}, nullptr));
  int decodes = 0;
  const Status s = g.Run(LogitsAfter({1}), {1}, [&](int32_t) -> Result<std::vector<float>> {
    if (++decodes == 3) return IOError("the disk went away");
    return LogitsAfter({1, decodes});
  });
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_EQ(g.tokens().size(), 3u);
  EXPECT_FALSE(g.done());
}

// End to end on a model: fak::Generate, the engine and a Sampler run by hand give the same tokens
// for the same prompt and seed, stop tokens included.
TEST(GenerateEndToEnd, GenerateEngineAndAloneAgree) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 11));
  auto tokenizer = MakeByteTokenizer();
  const std::vector<int32_t> prompt = testing::TokenSequence(12, 3, 97);
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, [] {
                         EngineOptions o;
                         o.start_thread = false;
                         return o;
                       }()));
  std::vector<std::vector<int32_t>> by_seed;
  for (uint64_t seed : {1, 2, 3}) {
    GenerateParams p;
    p.max_new_tokens = 16;
    p.sampling = {0.8f, 8, 0.95f, 1.1f, seed};
    KVCache cache = model->NewCache();
    ASSERT_OK_AND_ASSIGN(GenerateResult generated, Generate(*model, &cache, prompt, p));
    EXPECT_EQ(generated.finish, FinishReason::kLength);

    EngineRequest request;
    request.prompt = prompt;
    request.max_tokens = p.max_new_tokens;
    request.sampling = p.sampling;
    request.record_logits = true;
    ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(request));
    ASSERT_OK_AND_ASSIGN(EngineResult served, engine->Wait(id));
    EXPECT_EQ(served.tokens, generated.tokens) << "seed " << seed;

    const testing::AloneRun alone = testing::RunAlone(*model, prompt, p.sampling, p.max_new_tokens);
    EXPECT_EQ(alone.tokens, generated.tokens) << "seed " << seed;
    ASSERT_EQ(alone.logits.size(), served.logits.size());
    float max_delta = 0;
    for (size_t i = 0; i < alone.logits.size(); ++i)
      for (size_t j = 0; j < alone.logits[i].size(); ++j)
        max_delta = std::max(max_delta, std::abs(alone.logits[i][j] - served.logits[i][j]));
    EXPECT_EQ(max_delta, 0.0f) << "seed " << seed;

    // A stop token: all three end on it.
    p.stop_tokens = {generated.tokens[5]};
    KVCache again = model->NewCache();
    ASSERT_OK_AND_ASSIGN(GenerateResult stopped, Generate(*model, &again, prompt, p));
    EXPECT_EQ(stopped.finish, FinishReason::kStopToken);
    request.stop_tokens = p.stop_tokens;
    ASSERT_OK_AND_ASSIGN(RequestId id2, engine->Submit(request));
    ASSERT_OK_AND_ASSIGN(EngineResult served_stop, engine->Wait(id2));
    EXPECT_EQ(served_stop.tokens, stopped.tokens);
    EXPECT_EQ(served_stop.finish, FinishReason::kStopToken);
    by_seed.push_back(generated.tokens);
  }
  // Control: the seeds give different continuations, so agreement is not about one fixed answer.
  EXPECT_NE(by_seed[0], by_seed[1]);
  EXPECT_NE(by_seed[1], by_seed[2]);
}

// fak::Generate takes as many tokens as the engine allows (the context filled exactly) and refuses
// one more before anything runs, as the engine does (docs/reliability.md §11).
TEST(GenerateEndToEnd, ACountPastTheContextIsRefusedBeforeAnythingRuns) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 11));
  const size_t ctx = model->config().context_length;
  const std::vector<int32_t> prompt = testing::TokenSequence(ctx - 3, 3, 97);
  GenerateParams p;
  p.max_new_tokens = 5;
  KVCache cache = model->NewCache();
  Result<GenerateResult> refused = Generate(*model, &cache, prompt, p);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.error().message().find("context length " + std::to_string(ctx)), std::string_view::npos)
      << refused.error().ToString();
  EXPECT_TRUE(cache.empty());
  // Control: the count that fills the context exactly runs to its length.
  p.max_new_tokens = 4;
  ASSERT_OK_AND_ASSIGN(GenerateResult r, Generate(*model, &cache, prompt, p));
  EXPECT_EQ(r.tokens.size(), 4u);  // three fed back fill the context; the fourth is not fed back
  EXPECT_EQ(cache.size(), ctx);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(GenerationRoom(ctx, ctx - 3), 4u);
  EXPECT_EQ(CheckGenerationRoom(ctx, ctx - 3, SIZE_MAX).code(), StatusCode::kResourceExhausted);
}

// An empty stop string would match everywhere; it is refused, naming which one, as every surface
// refuses it (docs/reliability.md §11).
TEST(Generation, AnEmptyStopStringIsRefused) {
  auto tokenizer = MakeByteTokenizer();
  GenerateParams p;
  Result<Generation> g = Generation::Create(p, {"stop", ""}, tokenizer.get());
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.error().message().find("stop string 1 is empty"), std::string_view::npos) << g.error().ToString();
  EXPECT_TRUE(Generation::Create(p, {"stop"}, tokenizer.get()).has_value());  // control
}

// Logits the sampler refuses end Run with the error and no token drawn from them.
TEST(Generation, NonFiniteLogitsAreAnErrorNotAToken) {
  GenerateParams p;
  p.max_new_tokens = 4;
  ASSERT_OK_AND_ASSIGN(Generation g, Generation::Create(p, {}, nullptr));
  std::vector<float> nan(8, std::numeric_limits<float>::quiet_NaN());
  const Status s = g.Run(nan, {1}, [](int32_t) -> Result<std::vector<float>> { return std::vector<float>(8, 0.0f); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(g.tokens().empty());
  EXPECT_FALSE(g.done());
}

}  // namespace
}  // namespace fak
