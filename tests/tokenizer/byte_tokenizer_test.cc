// ByteTokenizer: any byte string round-trips; special ids decode to nothing; bad ids are errors.
#include <gtest/gtest.h>

#include "fak/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  auto tok = MakeByteTokenizer();
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  ASSERT_OK_AND_ASSIGN(auto ids, tok->Encode(text));
  ASSERT_EQ(ids.size(), 256u);
  ids.push_back(tok->eos_id());
  ASSERT_OK_AND_ASSIGN(auto back, tok->Decode(ids));
  EXPECT_EQ(back, text);
  EXPECT_EQ(tok->vocab_size(), 258u);
  EXPECT_FALSE(tok->Decode(std::vector<int32_t>{258}).has_value());
  EXPECT_FALSE(tok->Decode(std::vector<int32_t>{-1}).has_value());
  EXPECT_FALSE(tok->id().IsZero());
}

}  // namespace
}  // namespace fak
