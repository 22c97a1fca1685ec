// Constrained generation changes which tokens may be drawn, never the numbers: through the engine,
// every logit a JSON-schema constraint leaves allowed has exactly the bits the unconstrained model
// computes for the same context (max|Δ| == 0 over the allowed set, compared bit for bit), every
// other logit is -inf, and the reply is a sentence of the grammar. Controls: tokens really are
// masked at every step, the unconstrained model's own choice is masked at some step, and the
// unconstrained request generates something else.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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

// The logits `result` was sampled from, checked against the model's own for the same context: every
// logit not masked has the model's bits. Returns, per step, whether the step was masked at all.
std::vector<bool> CheckAgainstModel(const Model& model, const std::vector<int32_t>& prompt, const EngineResult& result) {
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), result.tokens.begin(), result.tokens.end());
  KVCache cache = model.NewCache();
  Result<std::vector<float>> all = model.Prefill(&cache, context, LogitsMode::kAll);
  EXPECT_TRUE(all.has_value());
  const size_t v = model.config().vocab_size;
  std::vector<bool> masked(result.tokens.size(), false);
  for (size_t i = 0; i < result.tokens.size() && all; ++i) {
    const float* want = all->data() + (prompt.size() - 1 + i) * v;
    for (size_t t = 0; t < v; ++t) {
      if (result.logits[i][t] == -std::numeric_limits<float>::infinity()) {
        masked[i] = true;
        continue;
      }
      EXPECT_EQ(std::memcmp(&result.logits[i][t], &want[t], sizeof(float)), 0) << "step " << i << " token " << t;
    }
  }
  return masked;
}

// tool_choice auto: the reply is free text until the model writes the call marker, so until then
// its logits are the unconstrained model's, bit for bit (max|Δ| == 0, no logit masked). Through the
// engine with fak's template (Hermes <tool_call>), whose synthetic model never writes the marker:
// auto's tokens and logits equal those of the same prompt with no constraint at all. Control: a
// trigger the model does write (a letter of its free reply) masks the steps after it, until the
// triggered sentence (the letter and two digits) is whole; then the text is free again.
TEST(Witness, ToolAutoLogitsBeforeTheTriggerAreUnconstrained) {
  ModelConfig config = testing::TinyConfig();
  config.vocab_size = 258;
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 33));
  auto tokenizer = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer));
  EngineOptions options;
  options.start_thread = false;
  options.chat_template = std::make_shared<const ChatTemplate>(chat);
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, options));
  EngineRequest request;
  request.messages = {{ChatRole::kUser, "What is the weather in Paris?"}};
  request.tools.tools_json = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
                             R"("properties":{"city":{"type":"string"}},"required":["city"]}}}])";
  request.max_tokens = 48;
  request.record_logits = true;
  // Sampled: the same seed draws the same tokens from the same logits, so runs agree until a mask.
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 7;
  ASSERT_OK(engine->Prepare(request));
  ASSERT_NE(request.constraint, nullptr);  // auto installs the triggered grammar
  EngineRequest free_request = request;
  free_request.constraint = nullptr;
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(RequestId free_id, engine->Submit(free_request));
  while (engine->Step()) {
  }
  ASSERT_OK_AND_ASSIGN(EngineResult with_tools, engine->Wait(id));
  ASSERT_OK_AND_ASSIGN(EngineResult free, engine->Wait(free_id));
  ASSERT_EQ(free.text.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(with_tools.tokens, free.tokens);
  ASSERT_EQ(with_tools.logits.size(), free.logits.size());
  for (size_t i = 0; i < free.logits.size(); ++i)
    ASSERT_EQ(std::memcmp(with_tools.logits[i].data(), free.logits[i].data(), free.logits[i].size() * sizeof(float)), 0)
        << "step " << i;
  for (bool masked : CheckAgainstModel(*model, request.prompt, with_tools)) EXPECT_FALSE(masked);

  // Control: a trigger the free reply contains — its first ASCII byte (the byte tokenizer: ids
  // 0..255 are the bytes).
  size_t trigger_step = 0;  // the step whose token is the trigger
  while (trigger_step < free.tokens.size() && !(free.tokens[trigger_step] >= 0 && free.tokens[trigger_step] < 0x80))
    ++trigger_step;
  ASSERT_LT(trigger_step + 3, free.tokens.size()) << "the free reply has no ASCII byte to trigger on early enough: " << ::testing::PrintToString(free.tokens);
  const std::string trigger(1, static_cast<char>(free.tokens[trigger_step]));
  char literal[8];
  std::snprintf(literal, sizeof literal, "\\x%02X", free.tokens[trigger_step]);
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(std::string("root ::= \"") + literal + "\" [0-9] [0-9]\n"));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const TokenVocabulary> vocabulary, engine->Vocabulary());
  ASSERT_OK_AND_ASSIGN(request.constraint, TriggeredGrammarConstraint::Create(trigger, grammar, vocabulary));
  ASSERT_OK_AND_ASSIGN(RequestId triggered_id, engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(EngineResult triggered, engine->Wait(triggered_id));
  ASSERT_GT(triggered.tokens.size(), trigger_step + 3);
  const std::vector<bool> masked = CheckAgainstModel(*model, request.prompt, triggered);
  for (size_t i = 0; i <= trigger_step; ++i) {
    EXPECT_FALSE(masked[i]) << "step " << i;
    ASSERT_EQ(std::memcmp(triggered.logits[i].data(), free.logits[i].data(), free.logits[i].size() * sizeof(float)), 0);
  }
  EXPECT_TRUE(masked[trigger_step + 1] && masked[trigger_step + 2]);  // the two digits are held
  EXPECT_FALSE(masked[trigger_step + 3]);                             // whole: free again
  for (size_t i = trigger_step + 1; i <= trigger_step + 2; ++i)
    EXPECT_TRUE(triggered.tokens[i] >= '0' && triggered.tokens[i] <= '9') << "step " << i;
}

}  // namespace
}  // namespace fak
