// Model-side JSON readers (config.json, tokenizer.json and tokenizer_config.json, the safetensors
// header) refuse documents nested past the JSON depth limit as Corruption naming the limit.
#include <gtest/gtest.h>

#include <cstring>

#include "fak/io/safetensors.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/support/nested_json.h"
#include "tests/test_util.h"

namespace fak {
namespace {

void ExpectDepthRefusal(const Status& s) {
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("JSON nested deeper than the limit of 64 levels"), std::string::npos) << s.ToString();
}

TEST(JsonReaderBounds, HfConfigRefusesDeepNesting) {
  Result<HfConfig> c = ParseHfConfig(R"({"model_type":"llama","rope_scaling":)" + testing::NestedArrays() + "}");
  ASSERT_FALSE(c.has_value());
  ExpectDepthRefusal(c.error());
}

TEST(JsonReaderBounds, HfTokenizerRefusesDeepNesting) {
  const std::string deep = R"({"model":{"type":"BPE","vocab":{},"merges":[]},"added_tokens":)" + testing::NestedArrays() + "}";
  Result<std::unique_ptr<Tokenizer>> t = ParseHfTokenizer(deep);
  ASSERT_FALSE(t.has_value());
  ExpectDepthRefusal(t.error());
  Result<std::unique_ptr<Tokenizer>> c = ParseHfTokenizer(R"({"model":{"type":"BPE","vocab":{},"merges":[]}})",
                                                          R"({"chat_template":)" + testing::NestedArrays() + "}");
  ASSERT_FALSE(c.has_value());
  ExpectDepthRefusal(c.error());
}

TEST(JsonReaderBounds, SafetensorsHeaderRefusesDeepNesting) {
  const std::string header = R"({"__metadata__":)" + testing::NestedArrays() + "}";
  std::vector<uint8_t> bytes(8 + header.size());
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Parse(bytes, "crafted.safetensors");
  ASSERT_FALSE(f.has_value());
  ExpectDepthRefusal(f.error());
}

}  // namespace
}  // namespace fak
