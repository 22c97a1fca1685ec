// fak's Jinja interpreter against jinja2: every real template in tests/data/chat_templates renders
// every committed conversation (with tools, tool calls, system prompts, several turns, with and
// without the generation prompt) byte for byte as jinja2 did (goldens.json), and fails where jinja2
// raised. Then each construct on its own against jinja2's known output, and each refusal.
#include "src/tokenizer/jinja/template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace fak::jinja {
namespace {

using OJson = nlohmann::ordered_json;

const std::string kDir = std::string(FAK_TEST_DATA_DIR) + "/chat_templates/";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const OJson& Goldens() {
  static const OJson goldens = OJson::parse(ReadText(kDir + "goldens.json"));
  return goldens;
}

// A message as transformers passes it: its role markup, everything else the conversation's.
Value Message(const OJson& m) {
  std::vector<std::pair<std::string, Value>> fields;
  for (auto it = m.begin(); it != m.end(); ++it) {
    fields.emplace_back(it.key(), FromJson(it.value(), /*content=*/it.key() != "role"));
  }
  return Value::MakeDict(std::move(fields));
}

// The variables the generator rendered the case with.
Value Context(const OJson& c) {
  const OJson& t = Goldens()["templates"][c["template"].get<std::string>()];
  const std::string conv = c["conversation"].get<std::string>();
  const bool tools = c.contains("tools");
  const OJson& messages = Goldens()[tools ? "tool_conversations" : "conversations"][conv];
  std::vector<Value> list;
  for (const OJson& m : messages) {
    if (t["tool_as_user"].get<bool>() && m["role"] == "tool") {
      list.push_back(Message(OJson{{"role", "user"}, {"content", m["content"]}}));
    } else {
      list.push_back(Message(m));
    }
  }
  std::vector<std::pair<std::string, Value>> vars = {
      {"messages", Value::MakeList(std::move(list))},
      {"tools", tools ? FromJson(Goldens()["tools"][c["tools"].get<std::string>()], true) : Value(None{})},
      {"documents", Value(None{})},
      {"add_generation_prompt", Value(c["add_generation_prompt"].get<bool>())},
  };
  if (!t["bos"].get<std::string>().empty()) vars.emplace_back("bos_token", Value(t["bos"].get<std::string>()));
  vars.emplace_back("eos_token", Value(t["eos"].get<std::string>()));
  return Value::MakeDict(std::move(vars));
}

TEST(JinjaGoldenTest, EveryTemplateRendersWhatJinja2Renders) {
  std::map<std::string, Template> parsed;
  for (auto it = Goldens()["templates"].begin(); it != Goldens()["templates"].end(); ++it) {
    Result<Template> t = Template::Parse(ReadText(kDir + it.value()["file"].get<std::string>()));
    ASSERT_TRUE(t.has_value()) << it.key() << ": " << t.error().ToString();
    parsed.emplace(it.key(), std::move(*t));
  }
  size_t rendered = 0, refused = 0;
  for (const OJson& c : Goldens()["cases"]) {
    const std::string name = c["template"].get<std::string>();
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() +
                 (c["add_generation_prompt"].get<bool>() ? " + generation prompt" : "") + (c.contains("tools") ? " + tools" : ""));
    RenderOptions options;
    if (c.contains("now")) options.now = c["now"].get<int64_t>();
    Result<Text> r = parsed.at(name).Render(Context(c), options);
    if (c.contains("error")) {
      ASSERT_FALSE(r.has_value()) << "jinja2 raised '" << c["error"].get<std::string>() << "', fak rendered:\n" << r->bytes;
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << r.error().ToString();
      ++refused;
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->bytes, c["expected"].get<std::string>());
    ++rendered;
  }
  EXPECT_GT(rendered, 1000u);
  EXPECT_GT(refused, 100u);
}

}  // namespace
}  // namespace fak::jinja
