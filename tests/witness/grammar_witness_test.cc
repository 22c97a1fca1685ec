// Constrained generation changes which tokens may be drawn, never the numbers: through the engine,
// every logit a JSON-schema constraint leaves allowed has exactly the bits the unconstrained model
// computes for the same context (max|Δ| == 0 over the allowed set, compared bit for bit), every
// other logit is -inf, and the reply is a sentence of the grammar. Controls: tokens really are
// masked at every step, the unconstrained model's own choice is masked at some step, and the
// unconstrained request generates something else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "fak/engine/engine.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/json_schema.h"
#include "fak/model/model.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(Witness, GrammarMaskKeepsAllowedLogitsBitExact) {
  ModelConfig config = testing::TinyConfig();
  config.vocab_size = 258;  // the byte tokenizer's ids: every token has a byte
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 33));
  auto tokenizer = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(*tokenizer));
  ASSERT_OK_AND_ASSIGN(std::string gbnf, JsonSchemaToGbnf(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":5},"n":{"type":"integer"},"ok":{"type":"boolean"}},
      "required":["name","n","ok"],"additionalProperties":false})"));
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(gbnf));

  EngineOptions options;
  options.start_thread = false;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, options));
  EngineRequest request;
  request.prompt = testing::TokenSequence(12, 5, 256);
  request.max_tokens = 400;  // whitespace is bounded (20 a gap), so the object always closes before this
  request.stop_tokens = {tokenizer->eos_id()};
  request.record_logits = true;
  EngineRequest free_request = request;
  request.constraint = std::make_shared<GrammarConstraint>(grammar, vocab);
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(RequestId free_id, engine->Submit(free_request));
  while (engine->Step()) {
  }
  ASSERT_OK_AND_ASSIGN(EngineResult constrained, engine->Wait(id));
  ASSERT_OK_AND_ASSIGN(EngineResult free, engine->Wait(free_id));
  ASSERT_EQ(constrained.finish, FinishReason::kStopToken) << ::testing::PrintToString(constrained.text);
  ASSERT_OK_AND_ASSIGN(GrammarMatcher check, GrammarMatcher::Start(grammar));
  ASSERT_TRUE(check.Accept(constrained.text).ok() && check.CanEnd()) << constrained.text;

  // The model's own logits for the same context, every position at once.
  std::vector<int32_t> context = request.prompt;
  context.insert(context.end(), constrained.tokens.begin(), constrained.tokens.end());
  KVCache cache = model->NewCache();
  ASSERT_OK_AND_ASSIGN(std::vector<float> all, model->Prefill(&cache, context, LogitsMode::kAll));
  const size_t v = config.vocab_size;
  size_t own_choice_masked = 0;
  for (size_t i = 0; i < constrained.tokens.size(); ++i) {
    const std::vector<float>& got = constrained.logits[i];
    const float* want = all.data() + (request.prompt.size() - 1 + i) * v;
    size_t masked = 0;
    float max_delta = 0;
    for (size_t t = 0; t < v; ++t) {
      if (got[t] == -std::numeric_limits<float>::infinity()) {
        ++masked;
        continue;
      }
      ASSERT_EQ(std::memcmp(&got[t], &want[t], sizeof(float)), 0) << "step " << i << " token " << t;
      max_delta = std::max(max_delta, std::abs(got[t] - want[t]));
    }
    EXPECT_EQ(max_delta, 0.0f);
    EXPECT_GT(masked, 0u) << "step " << i;  // control: the grammar really masks
    EXPECT_LT(masked, v) << "step " << i;
    const size_t argmax = static_cast<size_t>(std::max_element(want, want + v) - want);
    own_choice_masked += got[argmax] == -std::numeric_limits<float>::infinity() ? 1 : 0;
  }
  EXPECT_GT(own_choice_masked, 0u);               // control: the constraint changed a choice
  EXPECT_NE(free.tokens, constrained.tokens);     // control: unconstrained, the model says something else
}

}  // namespace
}  // namespace fak
