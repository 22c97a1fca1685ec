// The request parser's structured-output fields: response_format text / json_object / json_schema
// and the `grammar` field become the request's parsed grammar (or none), and every refusal names
// its parameter. tests/server/test_structured_output.py drives them over HTTP.
#include <gtest/gtest.h>

#include <string>

#include "src/server/api_request.h"

namespace fak::internal {
namespace {

std::string Body(std::string_view fields) {
  return R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )" + std::string(fields) + "}";
}

TEST(StructuredRequest, ResponseFormatsBecomeGrammars) {
  ApiRequest r;
  ApiRequestError error;
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions, Body(R"("response_format": {"type": "text"})"), &r, &error));
  EXPECT_FALSE(r.grammar.has_value());
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions, Body(R"("response_format": {"type": "json_object"})"), &r, &error));
  EXPECT_TRUE(r.grammar.has_value());
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kChatCompletions,
                              Body(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n",
                                   "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                   "required": ["a"], "additionalProperties": false}}})"),
                              &r, &error))
      << error.message;
  ASSERT_TRUE(r.grammar.has_value());
  Result<GrammarMatcher> m = GrammarMatcher::Start(*r.grammar);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->Accept(R"({"a": 12})").ok() && m->CanEnd());
  ASSERT_TRUE(ParseApiRequest(ApiEndpoint::kCompletions, R"({"model": "m", "prompt": "p", "grammar": "root ::= \"y\""})", &r,
                              &error));
  EXPECT_TRUE(r.grammar.has_value());
}

TEST(StructuredRequest, RefusalsNameTheParameter) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("response_format": {"type": "xml"})", "response_format.type"},
      {R"("response_format": "json")", "response_format"},
      {R"("response_format": {"type": "json_object", "schema": {}})", "response_format.schema"},
      {R"("response_format": {"type": "json_schema"})", "response_format.json_schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})", "response_format.json_schema.name"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "string", "pattern": "a"}}})",
       "response_format.json_schema.schema"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": 1, "schema": {}}})",
       "response_format.json_schema.strict"},
      {R"("grammar": 7)", "grammar"},
      {R"("grammar": "root ::= missing")", "grammar"},
  };
  for (const auto& [fields, param] : cases) {
    ApiRequest r;
    ApiRequestError error;
    EXPECT_FALSE(ParseApiRequest(ApiEndpoint::kChatCompletions, Body(fields), &r, &error)) << fields;
    EXPECT_EQ(error.param, param) << fields << ": " << error.message;
  }
}

}  // namespace
}  // namespace fak::internal
