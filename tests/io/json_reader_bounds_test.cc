// Model-side JSON readers (config.json, tokenizer.json and tokenizer_config.json, the safetensors
// header) refuse documents nested past the JSON depth limit as Corruption naming the limit.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "fak/io/safetensors.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/store/store_test_util.h"
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

// A JSON file a model directory names is refused by its size before it is read: a sparse 1 TiB
// tokenizer.json, tokenizer_config.json or config.json costs a stat, not an allocation.
TEST(JsonReaderBounds, ModelJsonFilesPastTheSizeLimitAreNotRead) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("model");
  std::filesystem::create_directories(dir);
  const auto terabyte = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    testing::WriteAll(path, "{}");
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  };
  const auto expect_refused = [](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_NE(s.message().find("JSON of 1099511627776 bytes is larger than the limit of 268435456 bytes"), std::string::npos)
        << s.ToString();
  };
  terabyte("config.json");
  Result<HfConfig> c = LoadHfConfig(dir + "/config.json");
  ASSERT_FALSE(c.has_value());
  expect_refused(c.error());
  testing::WriteAll(dir + "/tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]}})");
  terabyte("tokenizer_config.json");  // optional, but there: refused, not taken as absent
  Result<std::unique_ptr<Tokenizer>> t = LoadTokenizerFromHfJson(dir);
  ASSERT_FALSE(t.has_value());
  expect_refused(t.error());
  terabyte("tokenizer.json");
  t = LoadTokenizerFromHfJson(dir);
  ASSERT_FALSE(t.has_value());
  expect_refused(t.error());
}

}  // namespace
}  // namespace fak
