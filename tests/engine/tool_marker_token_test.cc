// A family's tool-call marker held by the vocabulary as a special (control) token, which decodes to
// nothing: a model that emits the token still gets a parsed call. The reply spells the marker
// (EngineRequest::spelled_tokens, set by Engine::Prepare) so ToolCallReader finds it, and the lazy
// grammar (tool_choice auto) triggers on the token's id, holding the call that follows to the
// tools' schemas. Controls: without the spelling the same tokens give no call; a text-only trigger
// leaves the reply after the token free.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/tool_calls.h"
#include "fak/tokenizer/text_stream.h"
#include "src/core/json.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// The Qwen2 BPE fixture with <tool_call> and </tool_call> added as special tokens (CONTROL).
std::unique_ptr<Tokenizer> MarkerTokenizer() {
  std::ifstream in(std::string(FAK_TEST_DATA_DIR) + "/hf/bpe_qwen2.json");
  std::stringstream text;
  text << in.rdbuf();
  internal::Json json = internal::Json::parse(text.str());
  int64_t next = static_cast<int64_t>(json["model"]["vocab"].size()) + static_cast<int64_t>(json["added_tokens"].size());
  for (const char* marker : {"<tool_call>", "</tool_call>"}) {
    json["added_tokens"].push_back({{"id", next++}, {"content", marker}, {"single_word", false}, {"lstrip", false},
                                    {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  Result<std::unique_ptr<Tokenizer>> tokenizer = ParseHfTokenizer(json.dump());
  EXPECT_TRUE(tokenizer.has_value()) << tokenizer.error().ToString();
  return tokenizer ? std::move(*tokenizer) : nullptr;
}

constexpr char kTools[] = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
                          R"("properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}])";

// Biases that make a random model open with the marker token, as a real tool-calling model does,
// and prefer text to the whitespace runs a call's grammar allows (a random model takes them).
std::vector<std::pair<int32_t, float>> MarkerFirstBias(const Tokenizer& tokenizer, int32_t marker) {
  std::vector<std::pair<int32_t, float>> bias = {{marker, 100.0f}};
  for (int32_t id = 0; static_cast<size_t>(id) < tokenizer.vocab_size(); ++id) {
    Result<std::string> text = tokenizer.Decode(std::span<const int32_t>(&id, 1));
    if (text && !text->empty() && text->find_first_not_of(" \t\r\n") == std::string::npos) bias.emplace_back(id, -30.0f);
  }
  return bias;
}

TEST(ToolMarkerToken, SpelledInTheTextItDecodesToNothingOtherwise) {
  std::unique_ptr<Tokenizer> tokenizer = MarkerTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int32_t marker = tokenizer->FindToken("<tool_call>");
  ASSERT_GE(marker, 0);
  ASSERT_OK_AND_ASSIGN(std::string decoded, tokenizer->Decode(std::span<const int32_t>(&marker, 1)));
  EXPECT_EQ(decoded, "");  // the premise: a special token shows no text
  TextStream plain(*tokenizer, {});
  ASSERT_OK_AND_ASSIGN(std::string none, plain.Push(marker));
  EXPECT_EQ(none + plain.Finish(), "");
  TextStream spelled(*tokenizer, {}, {marker});
  ASSERT_OK_AND_ASSIGN(std::string shown, spelled.Push(marker));
  EXPECT_EQ(shown + spelled.Finish(), "<tool_call>");
}

TEST(ToolMarkerToken, EmittedTokenGivesAParsedCall) {
  std::unique_ptr<Tokenizer> tokenizer = MarkerTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int32_t marker = tokenizer->FindToken("<tool_call>");
  ModelConfig config = testing::TinyConfig();
  config.vocab_size = tokenizer->vocab_size();
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 33));
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer));  // Hermes calls
  EngineOptions options;
  options.start_thread = false;
  options.chat_template = std::make_shared<const ChatTemplate>(chat);
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, options));
  EngineRequest request;
  request.messages = {{ChatRole::kUser, "What is the weather in Paris?"}};
  request.tools.tools_json = kTools;
  request.max_tokens = 120;
  request.sampling.logit_bias = MarkerFirstBias(*tokenizer, marker);
  EngineRequest prepared = request;
  ASSERT_OK(engine->Prepare(prepared));
  ASSERT_EQ(prepared.spelled_tokens, std::vector<int32_t>({marker, tokenizer->FindToken("</tool_call>")}));
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(EngineResult result, engine->Wait(id));
  ASSERT_FALSE(result.tokens.empty());
  ASSERT_EQ(result.tokens[0], marker);
  ASSERT_OK_AND_ASSIGN(ToolCallReader reader, ToolCallReader::Create(chat, request.tools));
  reader.Finish(result.text, 1);
  ASSERT_TRUE(reader.has_calls()) << result.text;
  EXPECT_EQ(reader.calls()[0].name, "get_weather");
  EXPECT_TRUE(reader.calls()[0].arguments == R"({"city":"Paris"})" || reader.calls()[0].arguments == R"({"city":"Rome"})")
      << reader.calls()[0].arguments;

  // Control: the same request with a text-only trigger (no id) and no spelling — what a real model
  // got before: the token starts no grammar, the text shows no marker, the reader finds no call.
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const TokenVocabulary> vocabulary, engine->Vocabulary());
  ASSERT_OK_AND_ASSIGN(Grammar any, Grammar::Parse("root ::= \"<tool_call>\" [a-z]\n"));
  ASSERT_OK_AND_ASSIGN(auto by_text, TriggeredGrammarConstraint::Create("<tool_call>", any, vocabulary));
  ASSERT_OK_AND_ASSIGN(auto by_id, TriggeredGrammarConstraint::Create("<tool_call>", any, vocabulary, marker));
  for (const auto& [constraint, held] : {std::pair{by_text, false}, std::pair{by_id, true}}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<TokenMatcher> matcher, constraint->NewMatcher());
    ASSERT_OK(matcher->Accept(marker));
    std::vector<float> logits(vocabulary->size(), 0.0f);
    ASSERT_OK(matcher->Mask(logits, {}));
    size_t masked = 0;
    for (float l : logits) masked += l < 0.0f ? 1 : 0;
    EXPECT_EQ(masked > 0, held) << (held ? "by id" : "by text");
  }
  EngineRequest unspelled = prepared;
  unspelled.spelled_tokens.clear();
  ASSERT_OK_AND_ASSIGN(RequestId plain_id, engine->Submit(unspelled));
  ASSERT_OK_AND_ASSIGN(EngineResult plain, engine->Wait(plain_id));
  EXPECT_EQ(plain.tokens, result.tokens);  // the same tokens
  ASSERT_OK_AND_ASSIGN(ToolCallReader plain_reader, ToolCallReader::Create(chat, request.tools));
  plain_reader.Finish(plain.text, 1);
  EXPECT_FALSE(plain_reader.has_calls()) << plain.text;
}

// tool_choice required: the forcing grammar allows the marker as the special token the model was
// trained to write (the vocabulary it runs on spells the token), not only as ordinary text tokens.
// Control: over the plain vocabulary the same grammar masks the marker token.
TEST(ToolMarkerToken, AForcedCallMayOpenWithTheMarkerToken) {
  std::unique_ptr<Tokenizer> tokenizer = MarkerTokenizer();
  ASSERT_NE(tokenizer, nullptr);
  const int32_t marker = tokenizer->FindToken("<tool_call>");
  const int32_t closing = tokenizer->FindToken("</tool_call>");
  ModelConfig config = testing::TinyConfig();
  config.vocab_size = tokenizer->vocab_size();
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 33));
  ASSERT_OK_AND_ASSIGN(ChatTemplate chat, ChatTemplate::ForFamily("fak", *tokenizer));
  EngineOptions options;
  options.start_thread = false;
  options.chat_template = std::make_shared<const ChatTemplate>(chat);
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Create(*model, *tokenizer, options));
  EngineRequest request;
  request.messages = {{ChatRole::kUser, "What is the weather in Paris?"}};
  request.tools.tools_json = kTools;
  request.tools.choice = ToolChoice::kRequired;
  request.tools.parallel = false;
  request.max_tokens = 120;
  request.sampling.logit_bias = MarkerFirstBias(*tokenizer, marker);
  request.sampling.logit_bias.emplace_back(closing, 100.0f);  // closes with the token too, where allowed
  ASSERT_OK_AND_ASSIGN(RequestId id, engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(EngineResult result, engine->Wait(id));
  ASSERT_FALSE(result.tokens.empty());
  EXPECT_EQ(result.tokens[0], marker);
  EXPECT_NE(std::find(result.tokens.begin(), result.tokens.end(), closing), result.tokens.end()) << result.text;
  ASSERT_OK_AND_ASSIGN(ToolCallReader reader, ToolCallReader::Create(chat, request.tools));
  reader.Finish(result.text, 1);
  ASSERT_TRUE(reader.has_calls()) << result.text;
  EXPECT_EQ(reader.calls()[0].name, "get_weather");

  // Control: the plain vocabulary (the marker token has no bytes) refuses the marker token.
  EngineRequest prepared = request;
  ASSERT_OK(engine->Prepare(prepared));
  ASSERT_NE(prepared.constraint, nullptr);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TokenMatcher> spelled_matcher, prepared.constraint->NewMatcher());
  std::vector<float> logits(tokenizer->vocab_size(), 0.0f);
  ASSERT_OK(spelled_matcher->Mask(logits, {}));
  EXPECT_EQ(logits[static_cast<size_t>(marker)], 0.0f);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const TokenVocabulary> plain, engine->Vocabulary());
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse("root ::= \"<tool_call>\" [a-z]\n"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TokenMatcher> plain_matcher, GrammarConstraint(grammar, plain).NewMatcher());
  std::vector<float> plain_logits(tokenizer->vocab_size(), 0.0f);
  ASSERT_OK(plain_matcher->Mask(plain_logits, {}));
  EXPECT_LT(plain_logits[static_cast<size_t>(marker)], 0.0f);
}

}  // namespace
}  // namespace fak
