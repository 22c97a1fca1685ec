// Tool calls: each family's format is found from its real template, the forcing grammar takes the
// family's calls and nothing else, and the parser reads calls (single, parallel, beside text) back
// out of replies — malformed and partial ones included, where an unparsable call stays content.
#include "src/grammar/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fak/grammar/grammar.h"
#include "tests/test_util.h"

namespace fak::internal {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<ChatTemplate> Template(const std::string& file) {
  return ChatTemplate::Recognize(ReadText(std::string(FAK_TEST_DATA_DIR) + "/chat_templates/" + file + ".jinja"), "<s>", "</s>");
}

std::vector<ToolFunction> Functions() {
  std::vector<ToolFunction> f(2);
  f[0].name = "get_weather";
  f[0].parameters = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                     "unit": {"enum": ["c", "f"]}}, "required": ["city"]})");
  f[1].name = "add";
  f[1].parameters = Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/n"}},
                                     "required": ["a", "b"], "$defs": {"n": {"type": "number"}}})");
  return f;
}

TEST(ToolCallsTest, FormatIsReadFromTheTemplate) {
  const std::vector<std::pair<std::string, ToolCallFormat>> cases = {
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B", ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct", ToolCallFormat::kLlama3},
      {"mistralai-Mistral-7B-Instruct-v0.3", ToolCallFormat::kMistral},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistral},
      {"microsoft-Phi-4-mini-instruct", ToolCallFormat::kPhi4},
      {"ibm-granite-granite-3.3-2B-Instruct", ToolCallFormat::kPhi4},
      {"google-gemma-3-1b-it", ToolCallFormat::kJson},  // no tools in the template: described in a system message
      {"meta-llama-Llama-2-7b-chat-hf", ToolCallFormat::kJson},
  };
  for (const auto& [file, want] : cases) {
    SCOPED_TRACE(file);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, Template(file));
    ASSERT_OK_AND_ASSIGN(ToolCallFormat got, ToolCallFormatFor(t));
    EXPECT_EQ(ToolCallFormatName(got), ToolCallFormatName(want));
  }
  // Templates that render tools in a format fak does not read are refused, naming them.
  for (const char* file : {"openai-gpt-oss-120b", "deepseek-ai-DeepSeek-V3.1", "CohereForAI-c4ai-command-r7b-12-2024-tool_use"}) {
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, Template(file));
    Result<ToolCallFormat> f = ToolCallFormatFor(t);
    ASSERT_FALSE(f.has_value()) << file;
    EXPECT_EQ(f.error().code(), StatusCode::kUnsupported);
    EXPECT_NE(f.error().message().find("tool-call format"), std::string::npos);
  }
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(ChatTemplate fak, ChatTemplate::ForFamily("fak", *bytes));
  EXPECT_EQ(*ToolCallFormatFor(fak), ToolCallFormat::kHermes);
  ASSERT_OK_AND_ASSIGN(ChatTemplate gemma, ChatTemplate::ForFamily("gemma", *bytes));  // the real Gemma file's
  EXPECT_EQ(*ToolCallFormatFor(gemma), ToolCallFormat::kJson);
}

// Whether `format`'s forcing grammar (over Functions()) takes `text` as a whole.
bool Forced(ToolCallFormat format, bool parallel, std::string_view text, std::span<const ToolFunction> functions) {
  Result<std::string> gbnf = ToolCallGbnf(format, functions, parallel);
  EXPECT_TRUE(gbnf.has_value()) << gbnf.error().ToString();
  if (!gbnf) return false;
  Result<Grammar> g = Grammar::Parse(*gbnf);
  EXPECT_TRUE(g.has_value()) << g.error().ToString() << "\n" << *gbnf;
  if (!g) return false;
  Result<GrammarMatcher> m = GrammarMatcher::Start(*g);
  return m.has_value() && m->Accept(text).ok() && m->CanEnd();
}

TEST(ToolCallsTest, TheGrammarForcesEachFamilysSyntaxAndTheSchema) {
  const std::vector<ToolFunction> f = Functions();
  struct Case {
    ToolCallFormat format;
    std::string one, two;  // a call; two calls
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2.5}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_weather\","
       "\"arguments\":{\"city\":\"Oslo\",\"unit\":\"c\"}}\n</tool_call>"},
      {ToolCallFormat::kLlama3, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", ""},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]",
       "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}]"},
      {ToolCallFormat::kPhi4, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]<|/tool_call|>",
       "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}]<|/tool_call|>"},
      {ToolCallFormat::kJson, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
       "[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}, {\"name\": \"add\", \"parameters\": {\"a\": 0, \"b\": -1}}]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(ToolCallFormatName(c.format)));
    EXPECT_TRUE(Forced(c.format, false, c.one, f));
    // What the grammar takes, the parser reads back as calls and nothing else.
    ParsedReply one = ParseToolCalls(c.format, c.one, f);
    EXPECT_EQ(one.calls.size(), 1u);
    EXPECT_EQ(one.content, "");
    if (!c.two.empty()) {
      EXPECT_TRUE(Forced(c.format, true, c.two, f));
      EXPECT_FALSE(Forced(c.format, false, c.two, f));  // one call unless parallel
      EXPECT_EQ(ParseToolCalls(c.format, c.two, f).calls.size(), 2u);
    }
  }
  // Arguments outside the schema, another function, free text: refused by the grammar.
  EXPECT_FALSE(Forced(ToolCallFormat::kHermes, true, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"x\"}}\n</tool_call>", f));
  EXPECT_FALSE(Forced(ToolCallFormat::kHermes, true, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>", f));
  EXPECT_FALSE(Forced(ToolCallFormat::kHermes, true, "<tool_call>\n{\"name\": \"sub\", \"arguments\": {}}\n</tool_call>", f));
  EXPECT_FALSE(Forced(ToolCallFormat::kHermes, true, "Sure! <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>", f));
  EXPECT_FALSE(Forced(ToolCallFormat::kLlama3, false, "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}", f));  // Llama says parameters
  // A named tool: only that one.
  EXPECT_FALSE(Forced(ToolCallFormat::kJson, false, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}",
                      std::span<const ToolFunction>(f).subspan(0, 1)));
  // A function without parameters takes only {}.
  ToolFunction none;
  none.name = "ping";
  none.parameters = Json{{"type", "object"}, {"properties", Json::object()}};
  EXPECT_TRUE(Forced(ToolCallFormat::kHermes, false, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>",
                     std::span<const ToolFunction>(&none, 1)));
  // A schema the converter refuses is refused naming the functions.
  ToolFunction bad;
  bad.name = "bad";
  bad.parameters = Json{{"type", "string"}, {"pattern", "^a"}};
  Result<std::string> g = ToolCallGbnf(ToolCallFormat::kHermes, std::span<const ToolFunction>(&bad, 1), false);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message().find("bad"), std::string::npos);
  EXPECT_NE(g.error().message().find("pattern"), std::string::npos);
}

TEST(ToolCallsTest, ParsesEachFamilysReplies) {
  const std::vector<ToolFunction> f = Functions();
  // Hermes / Qwen: text around the blocks stays content; arguments as an object or as JSON text.
  ParsedReply h = ParseToolCalls(ToolCallFormat::kHermes,
                                 "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                 "</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}</tool_call>",
                                 f);
  ASSERT_EQ(h.calls.size(), 2u);
  EXPECT_EQ(h.calls[0].name, "get_weather");
  EXPECT_EQ(h.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(h.calls[1].arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(h.content, "Let me check.\n\n");
  // Llama 3.x: after <|python_tag|>, or bare; "parameters".
  ParsedReply l = ParseToolCalls(ToolCallFormat::kLlama3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", f);
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(l.content, "");
  EXPECT_EQ(l.calls[0].arguments, R"({"a":1,"b":2})");
  // Mistral: a list after [TOOL_CALLS].
  ParsedReply m = ParseToolCalls(ToolCallFormat::kMistral,
                                 "[TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}, {\"name\": \"get_weather\", "
                                 "\"arguments\": {\"city\": \"Oslo\"}}]",
                                 f);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[1].name, "get_weather");
  // Phi-4 (and Granite, which has no closing tag).
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kPhi4, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]<|/tool_call|>", f).calls.size(), 1u);
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kPhi4, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]", f).calls.size(), 1u);
  // The JSON convention (Gemma): in a ``` fence, text before it is content; a list is parallel calls.
  ParsedReply j = ParseToolCalls(ToolCallFormat::kJson,
                                 "I'll look.\n```json\n[{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}, "
                                 "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}]\n```",
                                 f);
  ASSERT_EQ(j.calls.size(), 2u);
  EXPECT_EQ(j.content, "I'll look.");
  ParsedReply plain = ParseToolCalls(ToolCallFormat::kJson, "Paris is sunny {today}.", f);
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_EQ(plain.content, "Paris is sunny {today}.");
}

TEST(ToolCallsTest, MalformedCallsStayContent) {
  const std::vector<ToolFunction> f = Functions();
  const std::vector<std::pair<ToolCallFormat, std::string>> bad = {
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"},        // cut
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>"},                  // unknown function
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"add\", \"arguments\": [1, 2]}</tool_call>"},              // not an object
      {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"add\", \"arguments\": {}} and more</tool_call>"},         // junk after
      {ToolCallFormat::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>"},                                   // no name
      {ToolCallFormat::kHermes, "<tool_call>}}}]]]</tool_call>"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": 3}]"},    // one bad: none taken
      {ToolCallFormat::kMistral, "[TOOL_CALLS]"},
      {ToolCallFormat::kPhi4, "<|tool_call|>[]<|/tool_call|>"},
      {ToolCallFormat::kLlama3, "{\"name\": \"add\", \"parameters\": {\"a\": 1}} trailing words"},
      {ToolCallFormat::kJson, "{\"name\": \"add\", \"parameters\": \"not json\"}"},
  };
  for (const auto& [format, text] : bad) {
    ParsedReply r = ParseToolCalls(format, text, f);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  // A good block beside a bad one: the good one is a call, the bad one content.
  ParsedReply mixed = ParseToolCalls(ToolCallFormat::kHermes,
                                     "<tool_call>{\"name\": \"nope\"}</tool_call><tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>", f);
  ASSERT_EQ(mixed.calls.size(), 1u);
  EXPECT_EQ(mixed.content, "<tool_call>{\"name\": \"nope\"}</tool_call>");
  // Every prefix and every one-byte corruption of valid replies: never a crash, and a prefix cut
  // inside a call never yields that call.
  const std::vector<std::pair<ToolCallFormat, std::string>> good = {
      {ToolCallFormat::kHermes, "Hi <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": \"\\\"}\"}}\n</tool_call>"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]"},
      {ToolCallFormat::kPhi4, "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]<|/tool_call|>"},
      {ToolCallFormat::kJson, "```json\n{\"name\": \"add\", \"parameters\": {\"a\": [[[{\"b\": 2}]]]}}\n```"},
  };
  for (const auto& [format, text] : good) {
    const size_t call_end = text.rfind('}') + 1;
    for (size_t n = 0; n <= text.size(); ++n) {
      ParsedReply r = ParseToolCalls(format, text.substr(0, n), f);
      if (n < call_end) {
        EXPECT_TRUE(r.calls.empty()) << text.substr(0, n);
      }
      std::string corrupt = text;
      if (n < text.size()) corrupt[n] = "{}[]\"\\,x"[n % 8];
      (void)ParseToolCalls(format, corrupt, f);
    }
  }
}

TEST(ToolCallsTest, StreamingHoldsBackWhatMayBeACall) {
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kHermes, "Sure, let me"), 12u);
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kHermes, "Sure <tool"), 5u);  // may grow into <tool_call>
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kHermes, "Sure <tool_call>{\"na"), 5u);
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kHermes, "a < b"), 5u);
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kMistral, "ok [TOOL"), 3u);
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kLlama3, "x {\"name\""), 2u);
  EXPECT_EQ(ToolCallContentPrefix(ToolCallFormat::kJson, "plain"), 5u);
}

TEST(ToolCallsTest, JsonConventionDescribesToolsAndRewritesCalls) {
  ToolUse tools;
  tools.functions = Functions();
  tools.tools_json = R"([{"type":"function","function":{"name":"add"}}])";
  std::vector<ChatMessage> messages = {{ChatRole::kUser, "1+2?"}, {ChatRole::kAssistant, ""}, {ChatRole::kTool, "3"}};
  messages[1].tool_calls.push_back({"call_1", "add", R"({"a": 1, "b": 2})"});
  messages[2].tool_call_id = "call_1";
  ToolPrompt p = ToolCallPrompt(ToolCallFormat::kJson, messages, tools);
  ASSERT_EQ(p.messages.size(), 4u);  // a system message describing the tools comes first
  EXPECT_EQ(p.messages[0].role, ChatRole::kSystem);
  EXPECT_NE(p.messages[0].content.find(tools.tools_json), std::string::npos);
  EXPECT_EQ(p.messages[2].content, R"({"name":"add","parameters":{"a":1,"b":2}})");
  EXPECT_TRUE(p.messages[2].tool_calls.empty());
  EXPECT_TRUE(p.messages[3].tool_call_id.empty());
  EXPECT_EQ(p.tools_json, "");
  // The rewritten call is what the parser reads as that call.
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kJson, p.messages[2].content, tools.functions).calls.size(), 1u);
  // Other formats: unchanged, the tools go to the template; tool_choice none offers none.
  ToolPrompt hermes = ToolCallPrompt(ToolCallFormat::kHermes, messages, tools);
  EXPECT_EQ(hermes.messages.size(), 3u);
  EXPECT_EQ(hermes.tools_json, tools.tools_json);
  tools.choice = ToolChoice::kNone;
  EXPECT_EQ(ToolCallPrompt(ToolCallFormat::kHermes, messages, tools).tools_json, "");
}

// tool_choice auto: for each family with a call marker, the marker and a grammar whose sentences
// are the marker and then the family's call (what the engine's TriggeredGrammarConstraint holds);
// none for the JSON convention, whose calls have no marker; nothing for none.
TEST(ToolCallsTest, AutoWaitsForTheFamilysMarker) {
  const std::string tools =
      R"([{"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}])";
  const std::vector<ChatMessage> ask = {{ChatRole::kUser, "1 + 1?"}};
  struct Case {
    std::string file, trigger, call;
  };
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct", "<tool_call>", "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"},
      {"meta-llama-Llama-3.1-8B-Instruct", "<|python_tag|>", "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}"},
      {"mistralai-Mistral-7B-Instruct-v0.3", "[TOOL_CALLS]", "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}}]"},
      {"microsoft-Phi-4-mini-instruct", "<|tool_call|>", "<|tool_call|>[{\"name\": \"add\", \"arguments\": {\"a\": 1}}]<|/tool_call|>"},
      {"google-gemma-3-1b-it", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, Template(c.file));
    ToolRequest request;
    request.tools_json = tools;
    ASSERT_OK_AND_ASSIGN(PreparedToolChat prepared, PrepareToolChat(t, ask, request));
    EXPECT_EQ(prepared.trigger, c.trigger);
    EXPECT_TRUE(prepared.forced_gbnf.empty());
    if (c.trigger.empty()) {
      EXPECT_TRUE(prepared.triggered_gbnf.empty());
      continue;
    }
    ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(prepared.triggered_gbnf));
    ASSERT_OK_AND_ASSIGN(GrammarMatcher m, GrammarMatcher::Start(grammar));
    ASSERT_OK(m.Accept(c.call));
    EXPECT_TRUE(m.CanEnd());
    ASSERT_OK_AND_ASSIGN(GrammarMatcher wrong, GrammarMatcher::Start(grammar));
    EXPECT_FALSE(wrong.Accept(c.trigger + "Sure, ").ok());  // after the marker, only the call
    request.choice = ToolChoice::kNone;
    ASSERT_OK_AND_ASSIGN(PreparedToolChat none, PrepareToolChat(t, ask, request));
    EXPECT_TRUE(none.trigger.empty() && none.forced_gbnf.empty());
  }
}

TEST(ToolCallsTest, IdsAreDistinctAndMistralsHaveNineCharacters) {
  const std::string a = ToolCallId(ToolCallFormat::kHermes, 7), b = ToolCallId(ToolCallFormat::kHermes, 8);
  EXPECT_TRUE(a.starts_with("call_"));
  EXPECT_EQ(a.size(), 29u);
  EXPECT_NE(a.substr(6), b.substr(5, 23));  // not a shifted copy
  EXPECT_NE(a, b);
  EXPECT_EQ(ToolCallId(ToolCallFormat::kMistral, 7).size(), 9u);
}

}  // namespace
}  // namespace fak::internal
