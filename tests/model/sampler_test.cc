// Sampler and Generate: greedy is argmax, seeded sampling is reproducible, filters do what they say.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "fak/model/generation.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}, {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits = testing::RandomVector(50, 3, -2, 2);
  auto draw = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.Sample(logits, {}));
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
  for (int i = 0; i < 200; ++i) EXPECT_LT(k2.Sample(logits, {}), 2);
  p.top_k = 0;
  p.top_p = 0.5f;  // the top token alone holds > 50% of the mass
  Sampler nucleus(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(nucleus.Sample(logits, {}), 0);
  // Control: with no filter, other tokens do appear.
  p.top_p = 1.0f;
  Sampler all(p);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) seen[all.Sample(logits, {})]++;
  EXPECT_GE(seen.size(), 3u);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  std::vector<float> logits = {2.0f, 1.9f};
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler s(p);
  EXPECT_EQ(s.Sample(logits, std::vector<int32_t>{0}), 1);
  EXPECT_EQ(s.Sample(logits, {}), 0);
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

}  // namespace
}  // namespace fak
