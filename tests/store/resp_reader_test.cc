// RespReader, the parser of every Redis reply fak reads: replies split at any byte parse the same;
// absurd bulk lengths, array counts and nesting are refused from their header alone (nothing is
// allocated for, or waited for, what they announce); a refused stream stays refused.
#include "src/store/resp_reader.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace fak::internal {
namespace {

using Type = RedisReply::Type;

// Every reply in `bytes`, fed `step` bytes at a time; the error's message when the stream fails.
std::vector<RedisReply> ParseAll(std::string_view bytes, size_t step, std::string* error = nullptr,
                                 const RespLimits& limits = {}) {
  RespReader r(limits);
  std::vector<RedisReply> out;
  for (size_t at = 0; at <= bytes.size(); at += step) {
    r.Feed(bytes.substr(at, step));
    for (;;) {
      Result<std::optional<RedisReply>> next = r.Next();
      if (!next.has_value()) {
        if (error != nullptr) *error = next.error().message();
        return out;
      }
      if (!next->has_value()) break;
      out.push_back(std::move(**next));
    }
  }
  return out;
}

TEST(RespReader, ParsesEveryReplyKindAtAnySplit) {
  const std::string bytes =
      "+OK\r\n-ERR wrong\r\n:-42\r\n$5\r\nab\r\nc\r\n$-1\r\n*-1\r\n*0\r\n*3\r\n$1\r\nx\r\n*2\r\n:1\r\n+s\r\n$0\r\n\r\n";
  for (size_t step = 1; step <= bytes.size(); ++step) {
    std::string error;
    const std::vector<RedisReply> r = ParseAll(bytes, step, &error);
    ASSERT_EQ(r.size(), 8u) << "step " << step << ": " << error;
    EXPECT_EQ(r[0].type, Type::kStatus);
    EXPECT_EQ(r[0].str, "OK");
    EXPECT_EQ(r[1].type, Type::kError);
    EXPECT_EQ(r[1].str, "ERR wrong");
    EXPECT_EQ(r[2].integer, -42);
    EXPECT_EQ(r[3].str, std::string("ab\r\nc"));  // binary-safe
    EXPECT_EQ(r[4].type, Type::kNil);
    EXPECT_EQ(r[5].type, Type::kNil);
    EXPECT_EQ(r[6].type, Type::kArray);
    EXPECT_TRUE(r[6].elements.empty());
    ASSERT_EQ(r[7].elements.size(), 3u);
    EXPECT_EQ(r[7].elements[1].elements[1].str, "s");
    EXPECT_EQ(r[7].elements[2].str, "");
  }
}

TEST(RespReader, AbsurdLengthsAreRefusedFromTheHeaderAlone) {
  // Only the header line is fed: a reader that trusted the length would wait for (or allocate)
  // the announced bytes instead of answering.
  const std::pair<std::string, std::string> cases[] = {
      {"$4611686018427387904\r\n", "bulk length 4611686018427387904 exceeds the limit of 536870912 bytes"},
      {"$9223372036854775807\r\n", "bulk length 9223372036854775807 exceeds the limit"},
      {"$99999999999999999999\r\n", "unparsable length"},
      {"$-2\r\n", "bulk length -2"},
      {"*4611686018427387904\r\n", "an array of 4611686018427387904 elements exceeds the limit of 4194304"},
      {"*-7\r\n", "array length -7"},
      {"*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n*2\r\n", "arrays nested deeper than the limit of 8"},
      {"%1\r\n", "unknown reply type byte 37"},
      {"\r\n", "an empty line"},
      {":12x\r\n", "unparsable length or integer"},
      {"$3\r\nabcXY", "not terminated by CRLF"},
  };
  for (const auto& [bytes, why] : cases) {
    std::string error;
    EXPECT_TRUE(ParseAll(bytes, bytes.size(), &error).empty()) << bytes;
    EXPECT_NE(error.find(why), std::string::npos) << bytes << " -> " << error;
  }
  // Element counts add up across nested arrays: two arrays of 3 exceed a limit of 5.
  RespLimits five;
  five.max_elements = 5;
  std::string error;
  EXPECT_TRUE(ParseAll("*2\r\n*3\r\n:1\r\n:2\r\n:3\r\n*3\r\n", 64, &error, five).empty());
  EXPECT_NE(error.find("exceeds the limit of 5 elements"), std::string::npos) << error;
}

TEST(RespReader, LineAndReplyLengthsAreBounded) {
  RespLimits small;
  small.max_line_bytes = 16;
  small.max_reply_bytes = 40;
  std::string error;
  // A line that never ends is refused once it passes the limit, not buffered forever.
  EXPECT_TRUE(ParseAll("+" + std::string(100, 'a'), 100, &error, small).empty());
  EXPECT_NE(error.find("a line longer than the limit of 16 bytes"), std::string::npos) << error;
  // Many small elements of one reply: refused once the reply's bytes pass the limit.
  std::string many = "*100\r\n";
  for (int i = 0; i < 100; ++i) many += ":1\r\n";
  error.clear();
  EXPECT_TRUE(ParseAll(many, 7, &error, small).empty());
  EXPECT_NE(error.find("a reply longer than the limit of 40 bytes"), std::string::npos) << error;
}

TEST(RespReader, ARefusedStreamStaysRefused) {
  RespReader r;
  r.Feed("*-5\r\n+OK\r\n");
  EXPECT_FALSE(r.Next().has_value());
  Result<std::optional<RedisReply>> again = r.Next();
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace fak::internal
