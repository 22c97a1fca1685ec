// An embedding computed by the engine among other work — generating requests and other embeddings
// in the same batches, its prompt read in chunks, preempted for memory — equals (max|Δ| == 0) the
// same text embedded alone (Embed), for every pooling. In the active tier (ctest runs this binary
// once per tier). Controls: the batches really were shared and chunked, a preemption really
// happened, and the compared vectors depend on the text and on the pooling.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/model/embedding.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TokenSequence;

EngineOptions Stepped(size_t max_running, size_t chunk, size_t step_budget, size_t kv_budget) {
  EngineOptions o;
  o.max_running = max_running;
  o.prefill_chunk_tokens = chunk;
  o.step_token_budget = step_budget;
  o.kv_budget_bytes = kv_budget;
  o.start_thread = false;
  return o;
}

TEST(Witness, EmbeddingInBatchEqualsAlone) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(ModelConfig::EmbeddedDefault(), 5));
  const auto tokenizer = MakeByteTokenizer();
  const size_t vocab = model->config().vocab_size;
  const Pooling poolings[] = {Pooling::kMean, Pooling::kLast, Pooling::kCls};
  struct Text {
    std::vector<int32_t> tokens;
    EmbedParams params;
    std::vector<float> alone;
  };
  std::vector<Text> texts;
  for (uint32_t i = 0; i < 9; ++i) {
    Text t{TokenSequence(5 + 23 * (i % 4), 40 + i, vocab), {poolings[i % 3], i % 2 == 0}, {}};
    ASSERT_OK_AND_ASSIGN(t.alone, Embed(*model, t.tokens, t.params));
    texts.push_back(std::move(t));
  }
  // Controls: the vectors compared depend on the text and on the pooling.
  ASSERT_OK_AND_ASSIGN(std::vector<float> other_text, Embed(*model, TokenSequence(5, 41, vocab), texts[0].params));
  EXPECT_GT(MaxAbsDiff(texts[0].alone, other_text), 1e-6f);
  for (Pooling p : {Pooling::kLast, Pooling::kCls}) {
    ASSERT_OK_AND_ASSIGN(std::vector<float> other_pooling, Embed(*model, texts[0].tokens, {p, texts[0].params.normalize}));
    EXPECT_GT(MaxAbsDiff(texts[0].alone, other_pooling), 1e-6f) << PoolingName(p);
  }

  const size_t per_token = RadixTree(*model, *tokenizer).BytesPerToken();
  struct Scenario {
    const char* name;
    EngineOptions options;
  };
  const Scenario scenarios[] = {
      {"one at a time, whole prompts", Stepped(1, 4096, 4096, 0)},
      {"batched with generation, chunked", Stepped(12, 7, 40, 0)},
      {"tight budget: preemption", Stepped(8, 16, 64, 160 * per_token)},
  };
  for (const Scenario& s : scenarios) {
    SCOPED_TRACE(s.name);
    ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, s.options));
    std::vector<RequestId> embeds, generations;
    for (size_t i = 0; i < texts.size(); ++i) {
      EngineRequest generate;  // generating work between the embeddings
      generate.prompt = TokenSequence(30 + 11 * i, 200 + static_cast<uint32_t>(i), vocab);
      generate.max_tokens = 6;
      ASSERT_OK_AND_ASSIGN(RequestId g, engine->Submit(std::move(generate)));
      generations.push_back(g);
      EngineRequest embed;
      embed.prompt = texts[i].tokens;
      embed.embed = texts[i].params;
      ASSERT_OK_AND_ASSIGN(RequestId e, engine->Submit(std::move(embed)));
      embeds.push_back(e);
    }
    size_t preemptions = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(EngineResult r, engine->Wait(embeds[i]));
      ASSERT_EQ(r.finish, FinishReason::kStopToken) << r.error.ToString();
      EXPECT_TRUE(r.tokens.empty());
      EXPECT_EQ(r.usage.prompt_tokens, texts[i].tokens.size());
      EXPECT_EQ(r.usage.cached_tokens, 0u);
      preemptions += r.usage.preemptions;
      ASSERT_EQ(r.embedding.size(), model->config().hidden_size);
      EXPECT_EQ(MaxAbsDiff(r.embedding, texts[i].alone), 0.0f) << "text " << i;
    }
    for (RequestId g : generations) {
      ASSERT_OK_AND_ASSIGN(EngineResult r, engine->Wait(g));
      EXPECT_EQ(r.tokens.size(), 6u);
      preemptions += r.usage.preemptions;
    }
    const EngineStats stats = engine->Stats();
    if (s.options.max_running > 1) {
      EXPECT_GT(stats.max_batch_items, 2u);  // control: embeddings shared batches with other work
      EXPECT_GT(stats.prefill_chunks, 0u);
    }
    if (s.options.kv_budget_bytes != 0) {
      EXPECT_GT(preemptions, 0u);  // control: preemption happened
    }
    // No embedding's KV reached the tree (it holds the generations' contexts only).
    for (const Text& t : texts) EXPECT_LT(engine->tree().MatchLength(t.tokens, kDefaultTenant), t.tokens.size());
  }
}

}  // namespace
}  // namespace fak
