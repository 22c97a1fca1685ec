// Drafters and speculation options: what prompt lookup proposes, how options are checked and
// parsed, and the refusals (Witness.SpeculativeEqualsPlain proves the tokens unchanged).
#include "fak/model/speculation.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/model/generation.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(NgramDraft, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  // ... 7 8 9 [1 2] 3 4 ... [1 2] 5 6 ... 1 2: the latest "1 2" was followed by 5 6.
  const std::vector<int32_t> context = {7, 8, 9, 1, 2, 3, 4, 0, 1, 2, 5, 6, 0, 1, 2};
  EXPECT_EQ(NgramDraft(context, 2, 3, 2), (std::vector<int32_t>{5, 6}));
  // The longest suffix first: "0 1 2" occurred after 4 (position 7), followed by 5 6 0.
  EXPECT_EQ(NgramDraft(context, 1, 3, 3), (std::vector<int32_t>{5, 6, 0}));
  // No earlier occurrence of the suffix "9 9": nothing; with n = 1 the last 9 matches.
  const std::vector<int32_t> once = {9, 4, 5, 9, 9};
  EXPECT_TRUE(NgramDraft(once, 2, 2, 4).empty());
  EXPECT_EQ(NgramDraft(once, 1, 1, 2), (std::vector<int32_t>{9, 9}));
  // A loop is drafted whole: the match runs into the end and copies on from the draft itself.
  const std::vector<int32_t> loop = {1, 2, 3, 1, 2, 3, 1, 2};
  EXPECT_EQ(NgramDraft(loop, 2, 2, 7), (std::vector<int32_t>{3, 1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(NgramDraft({}, 1, 3, 4).empty());
  EXPECT_TRUE(NgramDraft(std::vector<int32_t>{5}, 1, 3, 4).empty());
}

TEST(Speculation, ParsesTheFlagSpelling) {
  ASSERT_OK_AND_ASSIGN(SpeculationOptions off, ParseSpeculation("off"));
  EXPECT_EQ(off.source, DraftSource::kNone);
  ASSERT_OK_AND_ASSIGN(SpeculationOptions ngram, ParseSpeculation("ngram"));
  EXPECT_EQ(ngram.source, DraftSource::kNgram);
  EXPECT_EQ(ngram.max_draft_tokens, 8u);
  ASSERT_OK_AND_ASSIGN(SpeculationOptions k5, ParseSpeculation("ngram:5"));
  EXPECT_EQ(k5.max_draft_tokens, 5u);
  for (const char* bad : {"", "on", "ngram:", "ngram:0", "ngram:65", "ngram:4x", "ngram4", "model"}) {
    const Result<SpeculationOptions> r = ParseSpeculation(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Speculation, RefusesBadOptionsNamingTheField) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(ModelConfig::EmbeddedDefault(), 5));
  SpeculationOptions o;
  o.source = DraftSource::kNgram;
  o.max_draft_tokens = 0;
  EXPECT_NE(o.Validate(*model).message().find("max_draft_tokens"), std::string::npos);
  o.max_draft_tokens = 4;
  o.ngram_min = 4;
  o.ngram_max = 3;
  EXPECT_NE(o.Validate(*model).message().find("ngram_min"), std::string::npos);
  o = {};
  o.source = DraftSource::kModel;
  EXPECT_NE(o.Validate(*model).message().find("draft_model"), std::string::npos);
  ModelConfig wider = ModelConfig::EmbeddedDefault();
  wider.vocab_size += 1;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Model> other, Model::Synthetic(wider, 5));
  o.draft_model = std::move(other);
  const Status vocab = o.Validate(*model);
  EXPECT_EQ(vocab.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(vocab.message().find("vocabulary"), std::string::npos);
  // Every surface refuses them before anything runs.
  KVCache cache = model->NewCache();
  const std::vector<int32_t> prompt = {1, 2, 3};
  EXPECT_EQ(Generate(*model, &cache, prompt, GenerateParams{}, nullptr, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.size(), 0u);
  const auto tokenizer = MakeByteTokenizer();
  EngineOptions options;
  options.speculation = o;
  EXPECT_EQ(Engine::Create(*model, *tokenizer, options).status().code(), StatusCode::kInvalidArgument);
}

TEST(Speculation, GenerateRefusesASlidingWindowCache) {
  // A rejected draft is cut from the cache; a windowed cache may no longer hold what the cut needs.
  ModelConfig config = testing::TinyConfig(4, 1, 16, RopePairing::kSplitHalf, 7);
  config.architecture = Architecture::kGemma3;
  config.hidden_size = 96;
  config.sliding_window = 5;
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 5));
  KVCache cache = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_TRUE(cache.windowed());
  SpeculationOptions ngram;
  ngram.source = DraftSource::kNgram;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const Result<GenerateResult> r = Generate(*model, &cache, prompt, GenerateParams{}, nullptr, ngram);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace fak
