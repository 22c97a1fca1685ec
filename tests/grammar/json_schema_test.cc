// JsonSchemaToGbnf: the grammar of each supported keyword accepts the documents that validate and
// refuses those that do not; unsupported keywords and bad references are refused by name.
#include "fak/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "fak/grammar/grammar.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// Whether the grammar of `schema` takes `doc` as a whole.
bool Accepts(std::string_view schema, std::string_view doc) {
  Result<std::string> gbnf = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(gbnf.has_value()) << schema << ": " << gbnf.error().ToString();
  if (!gbnf) return false;
  Result<Grammar> g = Grammar::Parse(*gbnf);
  EXPECT_TRUE(g.has_value()) << g.error().ToString() << "\n" << *gbnf;
  if (!g) return false;
  Result<GrammarMatcher> m = GrammarMatcher::Start(*g);
  return m.has_value() && m->Accept(doc).ok() && m->CanEnd();
}

std::string Refusal(std::string_view schema) {
  Result<std::string> gbnf = JsonSchemaToGbnf(schema);
  EXPECT_FALSE(gbnf.has_value()) << schema;
  return gbnf ? "" : std::string(gbnf.error().message());
}

TEST(JsonSchemaTest, Scalars) {
  EXPECT_TRUE(Accepts(R"({"type":"string"})", R"("a \"q\" \u00e9 é")"));
  EXPECT_FALSE(Accepts(R"({"type":"string"})", "\"a\nb\""));  // raw control character
  EXPECT_TRUE(Accepts(R"({"type":"integer"})", "-120"));
  EXPECT_FALSE(Accepts(R"({"type":"integer"})", "1.5"));
  EXPECT_FALSE(Accepts(R"({"type":"integer"})", "012"));
  EXPECT_TRUE(Accepts(R"({"type":"number"})", "-0.25e+3"));
  EXPECT_TRUE(Accepts(R"({"type":"boolean"})", "false"));
  EXPECT_TRUE(Accepts(R"({"type":"null"})", "null"));
  EXPECT_TRUE(Accepts(R"({"type":["integer","null"]})", "null"));
  EXPECT_TRUE(Accepts(R"({"type":"string","minLength":2,"maxLength":3})", R"("abc")"));
  EXPECT_FALSE(Accepts(R"({"type":"string","minLength":2,"maxLength":3})", R"("abcd")"));
  EXPECT_FALSE(Accepts(R"({"type":"string","minLength":2,"maxLength":3})", R"("a")"));
}

TEST(JsonSchemaTest, Formats) {
  EXPECT_TRUE(Accepts(R"({"type":"string","format":"date"})", R"("2026-12-03")"));
  EXPECT_FALSE(Accepts(R"({"type":"string","format":"date"})", R"("2026-13-03")"));
  EXPECT_TRUE(Accepts(R"({"type":"string","format":"time"})", R"("10:30:00Z")"));
  EXPECT_TRUE(Accepts(R"({"type":"string","format":"date-time"})", R"("2026-12-03T10:30:00.5+01:00")"));
  EXPECT_TRUE(Accepts(R"({"type":"string","format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(Accepts(R"({"type":"string","format":"uuid"})", R"("123e4567")"));
}

TEST(JsonSchemaTest, EnumConstAnyOf) {
  EXPECT_TRUE(Accepts(R"({"enum":["red","green",3,null]})", R"("green")"));
  EXPECT_TRUE(Accepts(R"({"enum":["red","green",3,null]})", "3"));
  EXPECT_FALSE(Accepts(R"({"enum":["red","green"]})", R"("blue")"));
  EXPECT_TRUE(Accepts(R"({"const":{"a":[1,2]}})", R"({"a":[1,2]})"));
  // pydantic's Literal: the enum beside its type; a value of another type is never generated.
  EXPECT_TRUE(Accepts(R"({"type":"string","enum":["a",1]})", R"("a")"));
  EXPECT_FALSE(Accepts(R"({"type":"string","enum":["a",1]})", "1"));
  EXPECT_TRUE(Accepts(R"({"type":"string","const":"point","title":"Kind"})", R"("point")"));
  EXPECT_TRUE(Accepts(R"({"anyOf":[{"type":"integer"},{"type":"string"}]})", R"("x")"));
  EXPECT_FALSE(Accepts(R"({"anyOf":[{"type":"integer"},{"type":"string"}]})", "true"));
  EXPECT_TRUE(Accepts(R"({"allOf":[{"type":"boolean"}],"description":"d"})", "true"));
}

TEST(JsonSchemaTest, ObjectsRequiredOptionalAndOrder) {
  const char* s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                      "required":["b"],"additionalProperties":false})";
  EXPECT_TRUE(Accepts(s, R"({"b":"x"})"));
  EXPECT_TRUE(Accepts(s, R"({ "b" : "x" , "a" : 1 })"));
  EXPECT_TRUE(Accepts(s, "{\n  \"b\": \"x\",\n  \"c\": false\n}"));
  EXPECT_FALSE(Accepts(s, R"({"a":1})"));          // b is required
  // Required members come in the order `required` lists them.
  EXPECT_TRUE(Accepts(R"({"type":"object","properties":{"z":{"type":"null"},"a":{"type":"null"}},"required":["z","a"]})",
                      R"({"z":null,"a":null})"));
  EXPECT_FALSE(Accepts(s, R"({"a":1,"b":"x","c":true})"));  // required first, then optional by name
  EXPECT_TRUE(Accepts(s, R"({"b":"x","a":1,"c":true})"));
  EXPECT_FALSE(Accepts(s, R"({"b":"x","c":true,"a":1})"));
  EXPECT_FALSE(Accepts(s, R"({"b":"x","d":1})"));  // not a property
  EXPECT_FALSE(Accepts(s, R"({,"b":"x"})"));
  EXPECT_TRUE(Accepts(R"({"type":"object"})", R"({"any":[1,{"x":null}]})"));
  EXPECT_TRUE(Accepts(R"({"type":"object","additionalProperties":{"type":"integer"}})", R"({"x":1,"y":2})"));
  EXPECT_FALSE(Accepts(R"({"type":"object","additionalProperties":{"type":"integer"}})", R"({"x":"1"})"));
  EXPECT_TRUE(Accepts(R"({"type":"object","additionalProperties":false})", "{}"));
}

TEST(JsonSchemaTest, ArraysWithBounds) {
  const char* s = R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})";
  EXPECT_FALSE(Accepts(s, "[]"));
  EXPECT_TRUE(Accepts(s, "[1]"));
  EXPECT_TRUE(Accepts(s, "[1, 2, 3]"));
  EXPECT_FALSE(Accepts(s, "[1,2,3,4]"));
  EXPECT_TRUE(Accepts(R"({"type":"array"})", R"([1,"a",[]])"));
  EXPECT_TRUE(Accepts(R"({"type":"array","maxItems":0})", "[]"));
}

TEST(JsonSchemaTest, RefsDefsAndRecursion) {
  const char* s = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"]}},"$ref":"#/$defs/node"})";
  EXPECT_TRUE(Accepts(s, R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(Accepts(s, R"({"v":1,"kids":[{"v":2}]})"));
  EXPECT_TRUE(Accepts(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]})",
                      R"({"next":{"next":null}})"));
  EXPECT_TRUE(Accepts(R"({"definitions":{"a/b":{"type":"null"}},"$ref":"#/definitions/a~1b"})", "null"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreRefusedByName) {
  EXPECT_NE(Refusal(R"({"type":"string","pattern":"^a$"})").find("keyword 'pattern' is not supported"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"integer","minimum":0})").find("'minimum'"), std::string::npos);
  EXPECT_NE(Refusal(R"({"oneOf":[{"type":"integer"}]})").find("'oneOf'"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"object","properties":{"a":{"type":"string","format":"email"}}})").find("#/properties/a"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"$ref":"https://example.com/s.json"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"object","properties":{},"required":["x"]})").find("'x' is not among"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"integer","enum":["a"]})").find("no value of the enum"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"strung"})").find("unknown type 'strung'"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"string","items":{}})").find("'items' does not apply to type string"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type":"array","maxItems":100000})").find("above the supported"), std::string::npos);
  EXPECT_NE(Refusal("[1]").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(Refusal("{").find("malformed JSON"), std::string::npos);
  EXPECT_NE(Refusal("false").find("admits nothing"), std::string::npos);
  std::string deep = "true";
  for (int i = 0; i < 70; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_NE(Refusal(deep).find("nested deeper"), std::string::npos);
}

TEST(JsonSchemaTest, JsonObjectGrammarTakesAnyObjectOnly) {
  ASSERT_OK_AND_ASSIGN(Grammar g, Grammar::Parse(JsonObjectGbnf()));
  for (auto [doc, ok] : {std::pair{R"({"a": [1, 2.5, "x", null, true, {"b": {}}]})", true}, {"{}", true},
                         {"[]", false}, {"\"x\"", false}, {R"({"a": 1,})", false}}) {
    ASSERT_OK_AND_ASSIGN(GrammarMatcher m, GrammarMatcher::Start(g));
    EXPECT_EQ(m.Accept(doc).ok() && m.CanEnd(), ok) << doc;
  }
}

}  // namespace
}  // namespace fak
