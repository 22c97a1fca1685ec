// GGUF reader: every metadata type, tensor sizes per ggml type, alignment, and clear errors for
// malformed files.
#include "fak/io/gguf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/io/gguf_writer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::GgufWriter;

Result<std::unique_ptr<GgufFile>> ParseBytes(const std::vector<uint8_t>& b) { return GgufFile::Parse(b, "mem.gguf"); }

// Expects `r` to fail with `code` and a message containing `needle`.
template <class T>
void ExpectError(const Result<T>& r, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), code) << r.error().ToString();
  EXPECT_NE(r.error().message().find(needle), std::string_view::npos) << r.error().ToString();
}

std::string VocabPath(const char* name) { return std::string(FAK_TEST_DATA_DIR) + "/vocab/" + name; }

TEST(GgufReaderTest, ReadsEveryScalarType) {
  std::vector<uint8_t> bytes = testing::MakeRichGguf();
  ASSERT_OK_AND_ASSIGN(auto f, ParseBytes(bytes));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetUint64("t.u8"), 200u);
  EXPECT_EQ(*f->GetInt64("t.i8"), -100);
  EXPECT_EQ(*f->GetUint64("t.u16"), 60000u);
  EXPECT_EQ(*f->GetInt64("t.i16"), -30000);
  EXPECT_EQ(*f->GetUint64("t.u32"), 4000000000u);
  EXPECT_EQ(*f->GetInt64("t.i32"), -2000000000);
  EXPECT_EQ(*f->GetDouble("t.f32"), 1.5);
  EXPECT_TRUE(*f->GetBool("t.bool"));
  EXPECT_EQ(*f->GetUint64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(*f->GetInt64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(*f->GetDouble("t.f64"), -2.25);
  EXPECT_EQ(*f->GetDouble("t.u32"), 4e9);  // integers widen to double
  EXPECT_EQ(f->Find("t.f64")->type(), GgufType::kFloat64);
}

TEST(GgufReaderTest, ConversionErrorsNameTheKey) {
  std::vector<uint8_t> bytes = testing::MakeRichGguf();
  ASSERT_OK_AND_ASSIGN(auto f, ParseBytes(bytes));
  ExpectError(f->GetUint64("t.i8"), StatusCode::kInvalidArgument, "t.i8");      // negative
  ExpectError(f->GetInt64("t.u64"), StatusCode::kInvalidArgument, "int64");     // too large
  ExpectError(f->GetString("t.u8"), StatusCode::kInvalidArgument, "STRING");
  ExpectError(f->GetBool("t.f32"), StatusCode::kInvalidArgument, "t.f32");
  ExpectError(f->GetUint64("no.such.key"), StatusCode::kNotFound, "no.such.key");
}

TEST(GgufReaderTest, ReadsArraysAndNestedArrays) {
  std::vector<uint8_t> bytes = testing::MakeRichGguf();
  ASSERT_OK_AND_ASSIGN(auto f, ParseBytes(bytes));
  EXPECT_EQ(*f->GetStringArray("t.strs"), (std::vector<std::string_view>{"a", "", "hello world"}));
  EXPECT_EQ(*f->GetInt64Array("t.i32s"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f->GetFloatArray("t.f32s"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(*f->GetFloatArray("t.i32s"), (std::vector<float>{1, -2, 3}));
  const GgufValue* bools = f->Find("t.bools");
  ASSERT_NE(bools, nullptr);
  EXPECT_FALSE(*bools->At(0)->ToBool());
  EXPECT_TRUE(*bools->At(1)->ToBool());
  ExpectError(bools->At(2), StatusCode::kInvalidArgument, "out of range");

  const GgufValue* nested = f->Find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array_type(), GgufType::kArray);
  ASSERT_EQ(nested->array_size(), 3u);
  ASSERT_OK_AND_ASSIGN(GgufValue first, nested->At(0));
  EXPECT_EQ(*first.ToInt64Array(), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(nested->At(1)->array_size(), 0u);
  ASSERT_OK_AND_ASSIGN(GgufValue third, nested->At(2));
  ASSERT_OK_AND_ASSIGN(GgufValue inner, third.At(0));
  EXPECT_EQ(*inner.ToStringArray(), (std::vector<std::string_view>{"x"}));
  ExpectError(f->GetStringArray("t.i32s"), StatusCode::kInvalidArgument, "t.i32s");
}

TEST(GgufReaderTest, TensorInfosSizesAndZeroCopyData) {
  std::vector<uint8_t> bytes = testing::MakeRichGguf();
  ASSERT_OK_AND_ASSIGN(auto f, ParseBytes(bytes));
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  struct Want {
    const char* name;
    GgmlType type;
    int64_t n;
    uint64_t size;
  };
  const Want want[] = {{"f32", GgmlType::kF32, 16, 64},     {"f16", GgmlType::kF16, 4, 8},
                       {"bf16", GgmlType::kBF16, 4, 8},     {"q8_0", GgmlType::kQ8_0, 128, 136},
                       {"q4_0", GgmlType::kQ4_0, 32, 18},   {"q5_0", GgmlType::kQ5_0, 96, 66},
                       {"q4_k", GgmlType::kQ4_K, 256, 144}, {"q5_k", GgmlType::kQ5_K, 512, 352},
                       {"q6_k", GgmlType::kQ6_K, 512, 420}};
  ASSERT_EQ(f->tensors().size(), std::size(want));
  for (const Want& w : want) {
    const GgufTensorInfo* t = f->FindTensor(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->type, w.type) << w.name;
    EXPECT_EQ(t->n_elements(), w.n) << w.name;
    EXPECT_EQ(t->size_bytes, w.size) << w.name;
    EXPECT_EQ(t->offset % 64, 0u) << w.name;
    // Zero-copy: the view points into the parsed buffer and holds the pattern the writer wrote.
    EXPECT_EQ(t->data, bytes.data() + f->data_offset() + t->offset) << w.name;
    std::vector<uint8_t> expect = testing::PatternBytes(static_cast<uint32_t>(w.type), w.n);
    EXPECT_TRUE(std::equal(expect.begin(), expect.end(), t->bytes().begin())) << w.name;
  }
  EXPECT_EQ(f->FindTensor("q5_0")->ne, (std::vector<int64_t>{32, 3}));
  EXPECT_EQ(f->FindTensor("missing"), nullptr);
}

TEST(GgufReaderTest, GgmlTypeTable) {
  EXPECT_EQ(LookupGgmlType(12)->name, "Q4_K");
  EXPECT_EQ(LookupGgmlType(14)->block_bytes, 210);
  EXPECT_EQ(LookupGgmlType(30)->name, "BF16");
  for (uint32_t retired : {4u, 5u, 16u, 31u, 36u, 1000u}) {
    ExpectError(LookupGgmlType(retired), StatusCode::kUnsupported, std::to_string(retired));
  }
}

TEST(GgufReaderTest, OpensRealVocabFilesByMmap) {
  ASSERT_OK_AND_ASSIGN(auto f, GgufFile::Open(VocabPath("ggml-vocab-llama-spm.gguf")));
  EXPECT_EQ(f->tensors().size(), 0u);
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f->GetFloatArray("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(*f->GetUint64("tokenizer.ggml.bos_token_id"), 1u);
  ASSERT_OK_AND_ASSIGN(auto g, GgufFile::Open(VocabPath("ggml-vocab-gpt-2.gguf")));
  EXPECT_EQ(g->GetStringArray("tokenizer.ggml.merges")->size(), 50000u);
  EXPECT_EQ(*g->GetString("tokenizer.ggml.pre"), "gpt-2");
}

TEST(GgufReaderTest, OpenErrors) {
  ExpectError(GgufFile::Open("/nonexistent/x.gguf"), StatusCode::kNotFound, "/nonexistent/x.gguf");
  std::string empty = (std::filesystem::temp_directory_path() / "fak_gguf_empty.gguf").string();
  GgufWriter::WriteFile(empty, {});
  ExpectError(GgufFile::Open(empty), StatusCode::kCorruption, "magic");
  std::remove(empty.c_str());
}

std::vector<uint8_t> Header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  std::vector<uint8_t> b;
  GgufWriter::PutPod<uint32_t>(b, 0x46554747);
  GgufWriter::PutPod(b, version);
  GgufWriter::PutPod(b, n_tensors);
  GgufWriter::PutPod(b, n_kv);
  return b;
}

TEST(GgufReaderTest, HeaderErrors) {
  std::vector<uint8_t> b = Header(3, 0, 0);
  b[0] = 'X';
  ExpectError(ParseBytes(b), StatusCode::kCorruption, "bad magic");
  ExpectError(ParseBytes(Header(1, 0, 0)), StatusCode::kUnsupported, "version 1");
  ExpectError(ParseBytes(Header(0x03000000, 0, 0)), StatusCode::kUnsupported, "big-endian");
  ExpectError(ParseBytes(Header(3, 0, 1000)), StatusCode::kCorruption, "n_kv 1000");
  ExpectError(ParseBytes(Header(3, uint64_t{1} << 62, 0)), StatusCode::kCorruption, "n_tensors");
  std::vector<uint8_t> cut = Header(3, 0, 0);
  cut.resize(20);
  ExpectError(ParseBytes(cut), StatusCode::kCorruption, "offset 16: truncated reading n_kv");
  EXPECT_OK(ParseBytes(Header(2, 0, 0)));  // v2 is accepted
}

TEST(GgufReaderTest, MetadataErrorsNameOffsetAndField) {
  GgufWriter dup;
  dup.Kv<uint32_t>("a.b", GgufType::kUint32, 1);
  dup.Kv<uint32_t>("a.b", GgufType::kUint32, 2);
  ExpectError(ParseBytes(dup.Build()), StatusCode::kCorruption, "duplicate metadata key 'a.b'");

  GgufWriter huge;  // an array claiming 2^40 elements in a tiny file must not allocate them
  std::vector<uint8_t> v;
  GgufWriter::PutPod<uint32_t>(v, static_cast<uint32_t>(GgufType::kUint64));
  GgufWriter::PutPod<uint64_t>(v, uint64_t{1} << 40);
  huge.KvRaw("big", GgufType::kArray, v);
  ExpectError(ParseBytes(huge.Build()), StatusCode::kCorruption, "metadata 'big': element count 1099511627776");

  GgufWriter bad_type;
  bad_type.Kv<uint32_t>("k", static_cast<GgufType>(13), 0);
  ExpectError(ParseBytes(bad_type.Build()), StatusCode::kCorruption, "offset 33: metadata 'k': unknown value type 13");

  std::vector<uint8_t> deep;  // arrays nested 9 deep
  for (int i = 0; i < 9; ++i) {
    GgufWriter::PutPod<uint32_t>(deep, static_cast<uint32_t>(GgufType::kArray));
    GgufWriter::PutPod<uint64_t>(deep, 1);
  }
  GgufWriter::PutPod<uint32_t>(deep, static_cast<uint32_t>(GgufType::kUint8));
  GgufWriter::PutPod<uint64_t>(deep, 0);
  GgufWriter nest;
  nest.KvRaw("deep", GgufType::kArray, deep);
  ExpectError(ParseBytes(nest.Build()), StatusCode::kCorruption, "nested deeper than 8");

  GgufWriter str;
  std::vector<uint8_t> s;
  GgufWriter::PutPod<uint64_t>(s, 1000);  // string length past the end
  str.KvRaw("s", GgufType::kString, s);
  ExpectError(ParseBytes(str.Build()), StatusCode::kCorruption, "truncated reading metadata 's'");
}

TEST(GgufReaderTest, AlignmentRules) {
  GgufWriter wrong_type;
  wrong_type.Kv<uint64_t>("general.alignment", GgufType::kUint64, 32);
  ExpectError(ParseBytes(wrong_type.Build()), StatusCode::kCorruption, "must be UINT32");
  GgufWriter not_pow2;
  not_pow2.Kv<uint32_t>("general.alignment", GgufType::kUint32, 48);
  ExpectError(ParseBytes(not_pow2.Build()), StatusCode::kCorruption, "not a power of two");
  GgufWriter none;  // default 32
  none.Tensor("t", {8}, 0, testing::PatternBytes(0, 8));
  ASSERT_OK_AND_ASSIGN(auto f, ParseBytes(none.Build()));
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
}

TEST(GgufReaderTest, TensorErrors) {
  GgufWriter unknown;
  unknown.Tensor("w", {32}, 16, std::vector<uint8_t>(64));  // IQ2_XXS: no known layout here
  ExpectError(ParseBytes(unknown.Build()), StatusCode::kUnsupported, "tensor 'w'");

  GgufWriter block;
  block.Tensor("w", {33}, static_cast<uint32_t>(GgmlType::kQ8_0), std::vector<uint8_t>(34));
  ExpectError(ParseBytes(block.Build()), StatusCode::kCorruption, "not a multiple of the Q8_0 block size 32");

  GgufWriter dims;
  dims.Tensor("w", {1, 1, 1, 1, 1}, 0, std::vector<uint8_t>(4));
  ExpectError(ParseBytes(dims.Build()), StatusCode::kCorruption, "n_dims 5 > 4");

  GgufWriter overflow;
  overflow.Tensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, {});
  ExpectError(ParseBytes(overflow.Build()), StatusCode::kCorruption, "overflows");

  GgufWriter past_end;
  past_end.Tensor("w", {64}, 0, testing::PatternBytes(0, 64));
  std::vector<uint8_t> b = past_end.Build();
  b.resize(b.size() - 1);
  ExpectError(ParseBytes(b), StatusCode::kCorruption, "tensor 'w': data");

  GgufWriter dup;
  dup.Tensor("w", {8}, 0, testing::PatternBytes(0, 8));
  dup.Tensor("w", {8}, 0, testing::PatternBytes(0, 8));
  ExpectError(ParseBytes(dup.Build()), StatusCode::kCorruption, "duplicate tensor name 'w'");

  GgufWriter misaligned;
  misaligned.Tensor("w", {8}, 0, testing::PatternBytes(0, 8));
  std::vector<uint8_t> m = misaligned.Build();
  // The offset field is the last 8 bytes of the tensor info, just before the padding.
  size_t info_end = 24 + 8 + 1 + 4 + 8 + 4 + 8;
  m[info_end - 8] = 4;
  ExpectError(ParseBytes(m), StatusCode::kCorruption, "not a multiple of alignment 32");
}

}  // namespace
}  // namespace fak
