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

// Each construct on its own (jinja_constructs.json, rendered by jinja2 with the generator's
// environment): the text, or a refusal where jinja2 raised.
TEST(JinjaConstructTest, EachConstructRendersAsJinja2) {
  const OJson constructs = OJson::parse(ReadText(kDir + "jinja_constructs.json"));
  size_t refused = 0;
  for (const OJson& c : constructs) {
    SCOPED_TRACE(c["name"].get<std::string>() + ": " + c["source"].get<std::string>());
    Result<Template> t = Template::Parse(c["source"].get<std::string>());
    ASSERT_TRUE(t.has_value()) << t.error().ToString();
    Result<Text> r = t->Render(FromJson(c["variables"], /*content=*/false));
    if (c.contains("error")) {
      ASSERT_FALSE(r.has_value()) << "jinja2 raised " << c["error"].get<std::string>() << "; fak rendered " << r->bytes;
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << r.error().ToString();
      ++refused;
      continue;
    }
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->bytes, c["expected"].get<std::string>());
  }
  EXPECT_GE(constructs.size(), 30u);
  EXPECT_GE(refused, 4u);
}

Result<Text> RenderSource(std::string_view source, const Value& variables = Value::MakeDict(),
                          const RenderOptions& options = {}) {
  FAK_ASSIGN_OR_RETURN(Template t, Template::Parse(source));
  return t.Render(variables, options);
}

TEST(JinjaTest, RaiseExceptionCarriesTheMessage) {
  Result<Text> r = RenderSource("{{ raise_exception('Conversation roles must alternate') }}");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "Conversation roles must alternate");
}

TEST(JinjaTest, StrftimeNowFormatsTheGivenInstant) {
  RenderOptions options;
  options.now = 1767323045;  // 2026-01-02 03:04:05 UTC
  ASSERT_OK_AND_ASSIGN(Text t, RenderSource("{{ strftime_now('%d %b %Y %H:%M') }}", Value::MakeDict(), options));
  EXPECT_EQ(t.bytes, "02 Jan 2026 03:04");
  // Without an instant it is undefined, as in plain jinja2.
  ASSERT_OK_AND_ASSIGN(Text u, RenderSource("{{ strftime_now is defined }}"));
  EXPECT_EQ(u.bytes, "False");
}

TEST(JinjaTest, GenerationBlocksRenderTheirBody) {
  ASSERT_OK_AND_ASSIGN(Text t, RenderSource("{% generation %}x{{ 1 }}{% endgeneration %}y"));
  EXPECT_EQ(t.bytes, "x1y");
}

// Message text keeps its origin through concatenation, trims, slices and splits; rewriting it
// (upper, tojson) makes the whole result content; markup stays markup.
TEST(JinjaTest, ContentRangesFollowTheMessageText) {
  Value vars = Value::MakeDict({{"c", Value(Text::Content("  <b>hi</b> x  "))}, {"m", Value("<|im_start|>")}});
  auto rendered = [&](std::string_view src) { return *RenderSource(src, vars); };
  Text a = rendered("{{ m }}{{ c | trim }}{{ m }}");
  EXPECT_EQ(a.bytes, "<|im_start|><b>hi</b> x<|im_start|>");
  ASSERT_EQ(a.content.size(), 1u);
  EXPECT_EQ(a.content[0].offset, 12u);
  EXPECT_EQ(a.content[0].size, 11u);
  Text b = rendered("{{ (m + c.strip().split(' ')[0] + m)[12:] }}");
  EXPECT_EQ(b.bytes, "<b>hi</b><|im_start|>");
  ASSERT_EQ(b.content.size(), 1u);
  EXPECT_EQ(b.content[0].offset, 0u);
  EXPECT_EQ(b.content[0].size, 9u);
  Text c = rendered("{{ m }}{{ c | tojson }}");
  ASSERT_EQ(c.content.size(), 1u);
  EXPECT_EQ(c.bytes.substr(c.content[0].offset), "\"  <b>hi</b> x  \"");
  Text d = rendered("{{ m | upper }}{{ 'plain' }}");
  EXPECT_TRUE(d.content.empty());
}

// Untrusted templates: each bound is a clear error, never a crash or an unbounded allocation.
TEST(JinjaTest, LimitsAreErrorsNamingTheConstruct) {
  RenderOptions small;
  small.limits.max_depth = 16;
  small.limits.max_output_bytes = 1 << 16;
  small.limits.max_iterations = 10000;
  struct Case {
    std::string source, says;
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro 'f' called more than 16 levels deep", StatusCode::kResourceExhausted},
      {"{% for i in range(100000) %}{% endfor %}", "range() of 100000 items", StatusCode::kResourceExhausted},
      {"{% for i in range(5000) %}{% for j in range(5) %}{% endfor %}{% endfor %}", "loop iterations", StatusCode::kResourceExhausted},
      {"{{ 'x' * 1000000 }}", "larger than the limit", StatusCode::kResourceExhausted},
      {"{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "larger than the limit",
       StatusCode::kResourceExhausted},
      {"{% for i in range(4000) %}{{ 'abcdefghijklmnopqrst' }}{% endfor %}", "output larger than the limit", StatusCode::kResourceExhausted},
      {"{% set ns = namespace(x=1) %}{% set ns.self = [ns] %}", "would make the namespace hold itself", StatusCode::kInvalidArgument},
      {"{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}", "hold itself", StatusCode::kInvalidArgument},
      {"{% set ns = namespace(l=[]) %}{% for i in range(40) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | upper }}",
       "nested deeper than 16", StatusCode::kResourceExhausted},
      {"{% set ns = namespace(l=[]) %}{% for i in range(40) %}{% set ns.l = [ns.l] %}{% endfor %}{{ [1].index(ns.l) }}",
       "nested deeper than 16", StatusCode::kResourceExhausted},
      {"{{ x | frobnicate }}", "the filter 'frobnicate' is not supported", StatusCode::kUnsupported},
      {"{{ x is frobnicated }}", "the test 'frobnicated' is not supported", StatusCode::kUnsupported},
      {"{{ 'a'.zfill(3) }}", "the string method 'zfill' is not supported", StatusCode::kUnsupported},
      {"{{ '%s' % 1 }}", "printf-style", StatusCode::kUnsupported},
      {"{{ [1].append(2) }}", "unsafe", StatusCode::kInvalidArgument},
      {"{{ {}.update({}) }}", "unsafe", StatusCode::kInvalidArgument},
      {"{{ 9223372036854775807 + 1 }}", "overflow", StatusCode::kInvalidArgument},
      {"{{ 1 // 0 }}", "by zero", StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    Result<Text> r = RenderSource(c.source, Value::MakeDict(), small);
    ASSERT_FALSE(r.has_value()) << r->bytes.substr(0, 100);
    EXPECT_EQ(r.error().code(), c.code) << r.error().ToString();
    EXPECT_NE(r.error().message().find(c.says), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("line 1"), std::string::npos) << r.error().message();
  }
  // The same templates within the limits render (the limits, not the constructs, refused).
  EXPECT_TRUE(RenderSource("{% macro f(n) %}{% if n < 10 %}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}", Value::MakeDict(), small).has_value());
  EXPECT_TRUE(RenderSource("{{ 'x' * 1000 }}", Value::MakeDict(), small).has_value());
}

// Damaged real templates (bytes deleted, duplicated, replaced by syntax characters) parse or are
// refused, and render or are refused, as Status — never a crash. Deterministic, several hundred
// variants in well under a second.
TEST(JinjaTest, DamagedTemplatesAreErrorsNotCrashes) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&](uint64_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state % n;
  };
  const std::string_view kSyntax = "{}%#-+()[]'\".|~=<>!*/ \n";
  RenderOptions small;
  small.limits.max_output_bytes = 1 << 20;
  small.limits.max_iterations = 1 << 14;
  size_t parsed = 0, rendered = 0, total = 0;
  const OJson& cases = Goldens()["cases"];
  for (auto it = Goldens()["templates"].begin(); it != Goldens()["templates"].end(); ++it) {
    const std::string source = ReadText(kDir + it.value()["file"].get<std::string>());
    const OJson* golden = nullptr;
    for (const OJson& c : cases) {
      if (c["template"] == it.key() && c.contains("tools")) golden = &c;
    }
    ASSERT_NE(golden, nullptr);
    const Value context = Context(*golden);
    for (int k = 0; k < 24; ++k, ++total) {
      std::string s = source;
      for (int edits = 1 + static_cast<int>(next(3)); edits > 0; --edits) {
        const size_t at = next(s.size());
        switch (next(3)) {
          case 0: s.erase(at, 1 + next(8)); break;
          case 1: s.insert(at, s.substr(at, 1 + next(16))); break;
          default: s[at] = kSyntax[next(kSyntax.size())];
        }
      }
      Result<Template> t = Template::Parse(s);
      if (!t.has_value()) {
        EXPECT_FALSE(t.error().message().empty());
        continue;
      }
      ++parsed;
      Result<Text> r = t->Render(context, small);
      if (r.has_value()) {
        ++rendered;
      } else {
        EXPECT_FALSE(r.error().message().empty());
      }
    }
  }
  // Both outcomes are exercised (a damaged template often still parses).
  EXPECT_GT(parsed, total / 10);
  EXPECT_LT(parsed, total);
  EXPECT_GT(rendered, 0u);
}

TEST(JinjaTest, ParseErrorsNameTheConstructAndLine) {
  struct Case {
    std::string source, says;
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"a\n{% include 'x' %}", "'{% include %}' statement (line 2)", StatusCode::kUnsupported},
      {"{% for x in y recursive %}{% endfor %}", "recursive for loops (line 1)", StatusCode::kUnsupported},
      {"{% call m() %}{% endcall %}", "'{% call %}' statement", StatusCode::kUnsupported},
      {"{% filter upper %}x{% endfilter %}", "'{% filter %}' statement", StatusCode::kUnsupported},
      {"{{ f(*args) }}", "*args", StatusCode::kUnsupported},
      {"\n\n{% if x %}", "line 3: unexpected end of template, expected elif or else or endif", StatusCode::kInvalidArgument},
      {"{{ 'abc }}", "string literal not closed", StatusCode::kInvalidArgument},
      {"{{ 1 + }}", "expected an expression", StatusCode::kInvalidArgument},
      {"{% frob %}", "unknown tag 'frob'", StatusCode::kInvalidArgument},
      {"{# never closed", "comment not closed", StatusCode::kInvalidArgument},
      {std::string(200, '(') + "1" + std::string(200, ')'), "", StatusCode::kOk},  // plain text, not a tag
      {"{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}", "nested deeper than", StatusCode::kResourceExhausted},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source.substr(0, 60));
    Result<Template> t = Template::Parse(c.source);
    if (c.code == StatusCode::kOk) {
      EXPECT_TRUE(t.has_value());
      continue;
    }
    ASSERT_FALSE(t.has_value());
    EXPECT_EQ(t.error().code(), c.code) << t.error().ToString();
    EXPECT_NE(t.error().message().find(c.says), std::string::npos) << t.error().message();
  }
}

}  // namespace
}  // namespace fak::jinja
