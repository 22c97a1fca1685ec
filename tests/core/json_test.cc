// The one JSON entry point's limits: nesting depth found by a linear scan before nlohmann parses
// (brackets inside strings and after escapes do not count), the size cap, and the errors naming each.
#include "src/core/json.h"

#include <gtest/gtest.h>

#include "tests/support/nested_json.h"
#include "tests/test_util.h"

namespace fak::internal {
namespace {

using testing::NestedArrays;

TEST(JsonLimits, NestingDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth("1", 100), 0);
  EXPECT_EQ(JsonNestingDepth("{}", 100), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}],"c":{}})", 100), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[{{{{"})", 100), 1);
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[[", "\\", [[]]])", 100), 3);  // escaped quote, escaped backslash
  EXPECT_EQ(JsonNestingDepth(NestedArrays(1000), 100), 100);  // stops at stop_at
  EXPECT_EQ(JsonNestingDepth("]]]][", 100), 1);               // not JSON: still bounded, no underflow
}

TEST(JsonLimits, DepthAtTheLimitParsesOneBeyondIsRefused) {
  JsonLimits limits;
  limits.max_depth = 5;
  ASSERT_OK(ParseJson(NestedArrays(5), "doc", StatusCode::kInvalidArgument, limits));
  Result<Json> deep = ParseJson(NestedArrays(6), "doc", StatusCode::kCorruption, limits);
  ASSERT_FALSE(deep.has_value());
  EXPECT_EQ(deep.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(deep.error().message(), "doc: JSON nested deeper than the limit of 5 levels");
}

TEST(JsonLimits, DefaultDepthRefusesAHostileDocumentWithoutRecursing) {
  // 200,000 levels: nlohmann would parse it (iteratively) and crash on the first dump or copy.
  for (const std::string& text : {NestedArrays(), "{\"a\":" + NestedArrays() + "}"}) {
    Result<Json> j = ParseJsonObject(text, "the request body");
    ASSERT_FALSE(j.has_value());
    EXPECT_EQ(j.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(j.error().message(), "the request body: JSON nested deeper than the limit of 64 levels");
  }
  ASSERT_OK(ParseJson(NestedArrays(JsonLimits::kDefaultMaxDepth), "doc"));
  EXPECT_FALSE(ParseJson(NestedArrays(JsonLimits::kDefaultMaxDepth + 1), "doc").has_value());
}

TEST(JsonLimits, SizeCapIsTheCallers) {
  JsonLimits limits;
  limits.max_bytes = 16;
  ASSERT_OK(ParseJson(R"({"a":"0123456"})", "doc", StatusCode::kInvalidArgument, limits));  // 15 bytes
  Result<Json> big = ParseJsonObject(R"({"a":"01234567890"})", "doc", StatusCode::kInvalidArgument, limits);
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().message(), "doc: JSON of 19 bytes is larger than the limit of 16 bytes");
  EXPECT_EQ(JsonLimits{}.max_bytes, size_t{256} << 20);
}

}  // namespace
}  // namespace fak::internal
