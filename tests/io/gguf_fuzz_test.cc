// Fuzz-style robustness: real and synthetic GGUF files truncated and bit-flipped thousands of
// times with a fixed seed must parse or fail with a Status — never crash or read out of bounds.
// Run under the asan preset to make out-of-bounds reads fatal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "fak/io/gguf.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/io/gguf_writer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One mutation: truncate, flip bytes anywhere, flip bytes in the structural head, or overwrite a
// u64 with an extreme value (counts, lengths, offsets).
std::vector<uint8_t> Mutate(const std::vector<uint8_t>& src, std::mt19937_64& rng) {
  std::vector<uint8_t> b = src;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  switch (pick(4)) {
    case 0:
      b.resize(pick(b.size()));
      break;
    case 1:
      for (size_t k = 1 + pick(8); k > 0; --k) b[pick(b.size())] ^= static_cast<uint8_t>(1 + pick(255));
      break;
    case 2:
      for (size_t k = 1 + pick(4); k > 0; --k) b[pick(std::min<size_t>(b.size(), 4096))] ^= static_cast<uint8_t>(1u << pick(8));
      break;
    default: {
      static constexpr uint64_t kExtremes[] = {0, 1, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, uint64_t{1} << 62, ~uint64_t{0}};
      size_t at = pick(std::min<size_t>(b.size(), 8192));
      uint64_t v = kExtremes[pick(std::size(kExtremes))];
      std::memcpy(b.data() + at, &v, std::min<size_t>(8, b.size() - at));
    }
  }
  return b;
}

// Touches everything a parsed file exposes, so a view pointing outside the buffer is caught.
uint64_t Touch(const GgufFile& f) {
  uint64_t sum = 0;
  for (const GgufKeyValue& kv : f.metadata()) {
    sum += kv.key.size();
    if (auto s = kv.value.ToString(); s) sum += s->empty() ? 0 : static_cast<uint8_t>(s->back());
    if (kv.value.is_array()) {
      for (size_t i = 0; i < kv.value.array_size(); i += 1 + kv.value.array_size() / 64) {
        auto e = kv.value.At(i);
        if (e && e->ToString()) sum += e->ToString()->size();
        if (e && e->ToUint64()) sum += *e->ToUint64();
      }
    }
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    for (uint8_t x : t.bytes()) sum += x;
  }
  return sum;
}

struct FuzzStats {
  int ok = 0, failed = 0, tokenizers = 0;
};

FuzzStats Fuzz(const std::vector<uint8_t>& src, int iterations, uint64_t seed, int tokenizer_every) {
  std::mt19937_64 rng(seed);
  FuzzStats stats;
  for (int i = 0; i < iterations; ++i) {
    std::vector<uint8_t> b = Mutate(src, rng);
    auto f = GgufFile::Parse(b, "fuzz.gguf");
    if (!f) {
      EXPECT_FALSE(f.error().message().empty());
      ++stats.failed;
      continue;
    }
    ++stats.ok;
    volatile uint64_t sink = Touch(**f);
    (void)sink;
    if (tokenizer_every > 0 && stats.ok % tokenizer_every == 1) {  // every k-th file that parses
      auto tok = LoadTokenizerFromGguf(**f);
      if (tok) {
        ++stats.tokenizers;
        auto ids = (*tok)->Encode("Hello world <s> \xE2\x96\x81 \xF0\x9F\xA6\x99 123\n\t");
        if (ids) (void)(*tok)->Decode(*ids);
      }
    }
  }
  return stats;
}

TEST(GgufFuzzTest, SyntheticFileWithTensors) {
  FuzzStats s = Fuzz(testing::MakeRichGguf(), 4000, 0x5EED0001, 0);
  EXPECT_GT(s.failed, 0);
  EXPECT_GT(s.ok, 0);  // some mutations land in tensor data and still parse
}

TEST(GgufFuzzTest, SpmVocabFile) {
  std::vector<uint8_t> src = ReadAll(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_GT(src.size(), 1000u);
  FuzzStats s = Fuzz(src, 1000, 0x5EED0002, 25);
  EXPECT_GT(s.failed, 0);
  EXPECT_GT(s.tokenizers, 0);
}

TEST(GgufFuzzTest, BpeVocabFile) {
  std::vector<uint8_t> src = ReadAll(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_GT(src.size(), 1000u);
  FuzzStats s = Fuzz(src, 400, 0x5EED0003, 20);
  EXPECT_GT(s.failed, 0);
  EXPECT_GT(s.tokenizers, 0);
}

}  // namespace
}  // namespace fak
