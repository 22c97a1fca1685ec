// safetensors reader and HF config.json parsing: layout, zero-copy views, strict header checks.
#include "fak/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/test_util.h"

namespace fak {
namespace {

// 8-byte LE header length + header JSON (space-padded to a multiple of 8) + buffer.
std::vector<uint8_t> Build(std::string header, const std::vector<uint8_t>& buffer) {
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  // Sized once and filled with memcpy: GCC 12 -Warray-bounds misfires on insert after the
  // 8-byte length.
  std::vector<uint8_t> b(8 + header.size() + buffer.size());
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  if (!buffer.empty()) std::memcpy(b.data() + 8 + header.size(), buffer.data(), buffer.size());
  return b;
}

template <class T>
void ExpectError(const Result<T>& r, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), code) << r.error().ToString();
  EXPECT_NE(r.error().message().find(needle), std::string_view::npos) << r.error().ToString();
}

const char* kTwoTensors =
    R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},)"
    R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";

TEST(SafetensorsTest, ReadsTensorsAndMetadata) {
  std::vector<uint8_t> buffer(28);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> bytes = Build(kTwoTensors, buffer);
  ASSERT_OK_AND_ASSIGN(auto f, SafetensorsFile::Parse(bytes, "m.safetensors"));
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafetensorsTensor* b = f->FindTensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->size_bytes, 12u);
  EXPECT_EQ(b->data, bytes.data() + bytes.size() - 12);  // zero-copy
  EXPECT_EQ(b->bytes()[0], 16);
  EXPECT_EQ(f->FindTensor("a")->bytes()[15], 15);
  EXPECT_EQ(f->FindTensor("c"), nullptr);
  EXPECT_EQ(SafetensorsDtypeName(SafetensorsDtype::kF8E4M3), "F8_E4M3");
}

TEST(SafetensorsTest, RejectsMalformedHeaders) {
  std::vector<uint8_t> buf(16);
  ExpectError(SafetensorsFile::Parse(std::vector<uint8_t>(5), "x"), StatusCode::kCorruption, "truncated");
  std::vector<uint8_t> big = Build("{}", {});
  big[7] = 0x7F;  // header length far past the file
  ExpectError(SafetensorsFile::Parse(big, "x"), StatusCode::kCorruption, "header length");
  ExpectError(SafetensorsFile::Parse(Build("{not json", {}), "x"), StatusCode::kCorruption, "JSON");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F4","shape":[4],"data_offsets":[0,16]}})", buf), "x"),
              StatusCode::kUnsupported, "dtype 'F4'");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,16]}})", buf), "x"),
              StatusCode::kCorruption, "tensor 'a': data_offsets span 16 bytes, shape and dtype need 20");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", buf), "x"),
              StatusCode::kCorruption, "past the buffer");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", buf), "x"),
              StatusCode::kCorruption, "gap or overlap");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", buf), "x"),
              StatusCode::kCorruption, "non-negative");
  ExpectError(SafetensorsFile::Parse(Build(R"({"a":{"dtype":"F32","shape":[2],"offsets":[0,8]}})", buf), "x"),
              StatusCode::kCorruption, "data_offsets");
  ExpectError(SafetensorsFile::Open("/nonexistent.safetensors"), StatusCode::kNotFound, "/nonexistent.safetensors");
}

TEST(SafetensorsTest, SurvivesRandomCorruption) {
  std::vector<uint8_t> src = Build(kTwoTensors, std::vector<uint8_t>(28, 1));
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = src;
    if (i % 3 == 0) {
      b.resize(rng() % b.size());
    } else {
      for (int k = 0; k < 3; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    auto f = SafetensorsFile::Parse(b, "fuzz");
    if (!f) continue;
    uint64_t sum = 0;
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      for (uint8_t x : t.bytes()) sum += x;
    }
    EXPECT_GE(sum, 0u);
  }
}

TEST(SafetensorsTest, ParsesHfConfigs) {
  const char* llama = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":49152,
    "hidden_size":576,"intermediate_size":1536,"num_hidden_layers":30,"num_attention_heads":9,
    "num_key_value_heads":3,"rms_norm_eps":1e-05,"rope_theta":100000.0,"tie_word_embeddings":true,
    "bos_token_id":1,"eos_token_id":[2,3],"torch_dtype":"bfloat16","hidden_act":"silu",
    "rope_scaling":{"rope_type":"llama3","factor":8.0}})";
  ASSERT_OK_AND_ASSIGN(HfConfig c, ParseHfConfig(llama));
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(*c.num_key_value_heads, 3);
  EXPECT_FALSE(c.head_dim.has_value());
  EXPECT_DOUBLE_EQ(*c.rope_theta, 100000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.rope_scaling_type, "llama3");
  EXPECT_DOUBLE_EQ(*c.rope_scaling_factor, 8.0);

  const char* gemma = R"({"model_type":"gemma3","architectures":["Gemma3ForConditionalGeneration"],
    "text_config":{"model_type":"gemma3_text","vocab_size":262208,"hidden_size":2560,"intermediate_size":10240,
    "num_hidden_layers":34,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,
    "query_pre_attn_scalar":256,"sliding_window":1024,"rope_local_base_freq":10000.0,
    "hidden_activation":"gelu_pytorch_tanh","rope_scaling":{"rope_type":"linear","factor":8.0}}})";
  ASSERT_OK_AND_ASSIGN(HfConfig g, ParseHfConfig(gemma));
  EXPECT_EQ(g.model_type, "gemma3_text");
  EXPECT_EQ(g.architectures, (std::vector<std::string>{"Gemma3ForConditionalGeneration"}));
  EXPECT_EQ(*g.head_dim, 256);
  EXPECT_EQ(*g.sliding_window, 1024);
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");

  ExpectError(ParseHfConfig(R"({"hidden_size":1})"), StatusCode::kInvalidArgument, "vocab_size");
  ExpectError(ParseHfConfig(R"({"vocab_size":"x"})"), StatusCode::kInvalidArgument, "'vocab_size' is not an integer");
  ExpectError(ParseHfConfig("[1,2"), StatusCode::kCorruption, "JSON");
}

}  // namespace
}  // namespace fak
