// Sampler and Generate: greedy is argmax, seeded sampling is reproducible, filters do what they say.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "fak/model/generation.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(*s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}, {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits = testing::RandomVector(50, 3, -2, 2);
  auto draw = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(*s.Sample(logits, {}));
    return out;
  };
  EXPECT_EQ(draw(1), draw(1));
  EXPECT_NE(draw(1), draw(2));
}

TEST(Sampler, TopKAndTopPRestrictTheSupport) {
  std::vector<float> logits = {5.0f, 4.0f, 3.0f, 0.0f, -1.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  Sampler k2(p);
  for (int i = 0; i < 200; ++i) EXPECT_LT(*k2.Sample(logits, {}), 2);
  p.top_k = 0;
  p.top_p = 0.5f;  // the top token alone holds > 50% of the mass
  Sampler nucleus(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(*nucleus.Sample(logits, {}), 0);
  // Control: with no filter, other tokens do appear.
  p.top_p = 1.0f;
  Sampler all(p);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) seen[*all.Sample(logits, {})]++;
  EXPECT_GE(seen.size(), 3u);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> logits = {2.0f, 1.9f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  EXPECT_EQ(*s.Sample(logits, std::vector<int32_t>{0}), 1);
  EXPECT_EQ(*s.Sample(logits, {}), 0);
}

TEST(Sampler, InvalidParamsAreRejected) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_EQ(p.Validate().code(), StatusCode::kInvalidArgument);
  p = {};
  p.temperature = -1;
  EXPECT_FALSE(p.Validate().ok());
}

TEST(Generate, ReproducibleAndStopsAtMaxOrStopToken) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  GenerateParams gp;
  gp.max_new_tokens = 12;
  gp.sampling.temperature = 0.8f;
  gp.sampling.seed = 4;
  auto prompt = testing::TokenSequence(10, 1, 97);
  KVCache c1 = model->NewCache(), c2 = model->NewCache();
  std::vector<int32_t> streamed;
  ASSERT_OK_AND_ASSIGN(auto r1, Generate(*model, &c1, prompt, gp, [&](int32_t t) { streamed.push_back(t); return true; }));
  ASSERT_OK_AND_ASSIGN(auto r2, Generate(*model, &c2, prompt, gp));
  EXPECT_EQ(r1.tokens, r2.tokens);
  EXPECT_EQ(r1.tokens, streamed);
  EXPECT_EQ(r1.tokens.size(), 12u);
  EXPECT_EQ(c1.size(), 10u + 11u);  // the last sampled token is not fed back
  gp.stop_tokens = {r1.tokens[3]};
  KVCache c3 = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto r3, Generate(*model, &c3, prompt, gp));
  EXPECT_LE(r3.tokens.size(), 4u);
  EXPECT_EQ(r3.tokens.back(), gp.stop_tokens[0]);
}

// Logits that mean nothing are an error naming the index, whatever the sampling (greedy would
// otherwise pick id 0 from all-NaN logits); -inf masks a token and is not an error.
TEST(Sampler, NonFiniteLogitsAreRefusedAndMinusInfinityMasks) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float temperature : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    Sampler s(p);
    for (const std::vector<float>& bad : {std::vector<float>{nan, nan, nan}, std::vector<float>{0.5f, nan, 1.0f},
                                          std::vector<float>{0.5f, inf}, std::vector<float>{-inf, -inf},
                                          std::vector<float>{}}) {
      Result<int32_t> t = s.Sample(bad, {});
      ASSERT_FALSE(t.has_value()) << "temperature " << temperature << " sampled " << *t;
      EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
    }
    EXPECT_NE(s.Sample(std::vector<float>{0.5f, nan}, {}).error().message().find("logit 1 is nan"), std::string_view::npos);
    // Control: a masked vocabulary samples only what is left.
    for (int i = 0; i < 50; ++i) EXPECT_EQ(*s.Sample(std::vector<float>{-inf, 0.25f, -inf}, {}), 1);
  }
}

// Parameters are checked as the floats the sampler uses: a double that becomes 0, a subnormal or
// an infinity as a float is refused with the value as given.
TEST(Sampler, ParametersAreCheckedAsTheFloatsTheSamplerUses) {
  Result<SamplingParams> top_p = SamplingParams::FromDoubles(1.0, 0, 5e-324, 1.0, 0);
  ASSERT_FALSE(top_p.has_value());
  EXPECT_EQ(top_p.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(top_p.error().message().find("top_p 4.94065646e-324"), std::string_view::npos) << top_p.error().ToString();
  EXPECT_FALSE(SamplingParams::FromDoubles(1e-50, 0, 1.0, 1.0, 0).has_value());   // temperature underflows to 0
  EXPECT_FALSE(SamplingParams::FromDoubles(1e-40, 0, 1.0, 1.0, 0).has_value());   // a subnormal float
  EXPECT_FALSE(SamplingParams::FromDoubles(1.0, 0, 1.0, 1e39, 0).has_value());    // overflows to inf
  EXPECT_FALSE(SamplingParams::FromDoubles(std::nan(""), 0, 1.0, 1.0, 0).has_value());
  SamplingParams subnormal;
  subnormal.temperature = 1e-40f;
  EXPECT_EQ(subnormal.Validate().code(), StatusCode::kInvalidArgument);
  // Control: ordinary values, and 0 for greedy, pass unchanged.
  ASSERT_OK_AND_ASSIGN(SamplingParams ok, SamplingParams::FromDoubles(0.0, 40, 0.9, 1.1, 7));
  EXPECT_EQ(ok.temperature, 0.0f);
  EXPECT_EQ(ok.top_p, 0.9f);
  EXPECT_EQ(ok.top_k, 40u);
  EXPECT_EQ(ok.seed, 7u);
}

// logit_bias -100 bans a token (even the argmax), a positive bias promotes one; the control without
// a bias picks the model's argmax.
TEST(Sampler, LogitBiasBansAndPromotes) {
  const std::vector<float> logits = {1.0f, 3.0f, 0.5f};
  EXPECT_EQ(*Sampler(SamplingParams{}).Sample(logits, {}), 1);
  SamplingParams ban;
  ban.logit_bias = {{1, -100.0f}};
  EXPECT_EQ(*Sampler(ban).Sample(logits, {}), 0);
  ban.temperature = 1.0f;
  Sampler drawn(ban);
  for (int i = 0; i < 200; ++i) EXPECT_NE(*drawn.Sample(logits, {}), 1);
  SamplingParams promote;
  promote.logit_bias = {{2, 2.6f}};
  EXPECT_EQ(*Sampler(promote).Sample(logits, {}), 2);
  SamplingParams all;
  all.logit_bias = {{0, -100.0f}, {1, -100.0f}, {2, -100.0f}};
  EXPECT_EQ(Sampler(all).Sample(logits, {}).error().code(), StatusCode::kInvalidArgument);
}

// OpenAI's penalties count only the generated tokens (the last `generated` of the history), as
// often as they occur (frequency) or once (presence).
TEST(Sampler, PresenceAndFrequencyPenaliseGeneratedTokensOnly) {
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  SamplingParams freq;
  freq.frequency_penalty = 0.3f;
  const std::vector<int32_t> history = {0, 0};
  EXPECT_EQ(*Sampler(freq).Sample(logits, history, /*generated=*/0), 0);  // the prompt is not counted
  EXPECT_EQ(*Sampler(freq).Sample(logits, history, /*generated=*/1), 0);  // 2.0 - 0.3 > 1.5
  EXPECT_EQ(*Sampler(freq).Sample(logits, history, /*generated=*/2), 1);  // 2.0 - 0.6 < 1.5
  SamplingParams presence;
  presence.presence_penalty = 0.4f;
  EXPECT_EQ(*Sampler(presence).Sample(logits, history, 2), 0);  // 2.0 - 0.4 > 1.5: once, not twice
  presence.presence_penalty = 0.6f;
  EXPECT_EQ(*Sampler(presence).Sample(logits, history, 1), 1);
  SamplingParams negative;  // a negative penalty encourages repeats
  negative.frequency_penalty = -2.0f;
  EXPECT_EQ(*Sampler(negative).Sample(logits, std::vector<int32_t>{2, 2}, 2), 2);
}

TEST(Sampler, RepetitionPenaltyReadsItsWindowOfTheHistory) {
  const std::vector<float> logits = {2.0f, 1.9f, 1.8f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  const std::vector<int32_t> history = {0, 1};
  EXPECT_EQ(*Sampler(p).Sample(logits, history), 2);  // both seen: 1.8 wins
  p.repetition_window = 1;                             // only token 1 is in the window
  EXPECT_EQ(*Sampler(p).Sample(logits, history), 0);
}

TEST(Sampler, MinPKeepsTokensNearTheMostLikely) {
  const std::vector<float> logits = {5.0f, 4.0f, 3.0f, 0.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // token 1 has e^-1 = 0.37 of token 0's probability
  Sampler strict(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(*strict.Sample(logits, {}), 0);
  p.min_p = 0.3f;  // control: token 1 is kept and drawn, token 2 (0.14) is not
  Sampler loose(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 400; ++i) seen.insert(*loose.Sample(logits, {}));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
}

TEST(Sampler, LogprobsAreTheModelsLogSoftmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  const TokenLogprobs lp = LogprobsOf(logits, 0, 3);
  double z = 0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  EXPECT_EQ(lp.chosen.token, 0);
  EXPECT_NEAR(lp.chosen.logprob, 1.0 - std::log(z), 1e-12);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);  // ties go to the lowest id
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_EQ(lp.top[2].token, 0);
  EXPECT_EQ(lp.top[0].logprob, lp.top[1].logprob);
  EXPECT_EQ(LogprobsOf(logits, 3, 100).top.size(), logits.size());
  EXPECT_TRUE(LogprobsOf(logits, 1, 0).top.empty());
}

TEST(Sampler, NewParametersAreValidated) {
  const auto invalid = [](auto change) {
    SamplingParams p;
    change(p);
    return p.Validate().code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.min_p = 1.5f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.min_p = 1e-40f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.presence_penalty = 2.5f; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.frequency_penalty = std::nanf(""); }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.logit_bias = {{3, 1.0f}, {3, 2.0f}}; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }));
  EXPECT_TRUE(invalid([](SamplingParams& p) { p.logit_bias = {{1, 101.0f}}; }));
  EXPECT_FALSE(invalid([](SamplingParams& p) {  // control: the edges are allowed
    p.min_p = 1.0f;
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    p.logit_bias = {{1, -100.0f}, {2, 100.0f}};
  }));
}

}  // namespace
}  // namespace fak
