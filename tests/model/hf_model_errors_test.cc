// Malformed and unsupported Hugging Face checkpoints: each is an error Status of the right code
// whose message names the file, key or tensor at fault — never a crash (also run under ASan).
#include <gtest/gtest.h>

#include <functional>

#include "fak/model/model.h"
#include "tests/model/hf_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::HfData;
using testing::ScratchDir;
using testing::StEntry;

// Builds a copy of tests/data/hf/llama in a scratch directory, letting the test change the config
// text and the tensor list first, then loads it.
struct Broken {
  std::string config = testing::ReadText(HfData("llama/config.json"));
  std::vector<StEntry> tensors = testing::ReadEntries(HfData("llama/model.safetensors"));

  StEntry* Find(const std::string& name) {
    for (StEntry& e : tensors)
      if (e.name == name) return &e;
    return nullptr;
  }
  void Replace(const std::string& from, const std::string& to) {
    size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    config.replace(at, from.size(), to);
  }
  Status Load(const ScratchDir& dir) const {
    dir.Write("config.json", config);
    testing::WriteSafetensors(dir.path() + "/model.safetensors", tensors);
    auto m = Model::Load(dir.path());
    return m.has_value() ? Status::Ok() : m.error();
  }
};

void ExpectError(const Status& s, StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string_view::npos) << "'" << needle << "' not in: " << s.ToString();
}

TEST(HfModelErrorsTest, MissingConfigJson) {
  ScratchDir dir("no_config");
  testing::WriteSafetensors(dir.path() + "/model.safetensors", testing::ReadEntries(HfData("llama/model.safetensors")));
  auto m = Model::Load(dir.path());
  ASSERT_FALSE(m.has_value());
  ExpectError(m.error(), StatusCode::kNotFound, "config.json");
  auto file = Model::Load(dir.path() + "/model.safetensors");  // the file form looks beside it
  ASSERT_FALSE(file.has_value());
  ExpectError(file.error(), StatusCode::kNotFound, "config.json");
}

TEST(HfModelErrorsTest, NoWeightsFile) {
  ScratchDir dir("no_weights");
  dir.Write("config.json", testing::ReadText(HfData("llama/config.json")));
  auto m = Model::Load(dir.path());
  ASSERT_FALSE(m.has_value());
  ExpectError(m.error(), StatusCode::kNotFound, "model.safetensors");
}

TEST(HfModelErrorsTest, MissingTensorIsNamed) {
  ScratchDir dir("missing_tensor");
  Broken b;
  std::erase_if(b.tensors, [](const StEntry& e) { return e.name == "model.layers.1.mlp.up_proj.weight"; });
  ExpectError(b.Load(dir), StatusCode::kCorruption, "missing tensor model.layers.1.mlp.up_proj.weight");
}

TEST(HfModelErrorsTest, WrongShapeIsNamed) {
  ScratchDir dir("wrong_shape");
  Broken b;
  b.Find("model.layers.0.self_attn.q_proj.weight")->shape = {16, 64};  // same byte count
  ExpectError(b.Load(dir), StatusCode::kCorruption,
              "tensor model.layers.0.self_attn.q_proj.weight has shape [16, 64], expected [32, 32]");
}

TEST(HfModelErrorsTest, UnsupportedDtypeIsNamed) {
  ScratchDir dir("bad_dtype");
  Broken b;
  b.Find("model.norm.weight")->dtype = "I16";  // F16 bytes read as I16
  ExpectError(b.Load(dir), StatusCode::kUnsupported, "tensor model.norm.weight has dtype I16");
}

TEST(HfModelErrorsTest, TruncatedConfigJson) {
  ScratchDir dir("truncated_config");
  Broken b;
  b.config.resize(b.config.size() / 2);
  ExpectError(b.Load(dir), StatusCode::kCorruption, "config.json");
}

TEST(HfModelErrorsTest, TruncatedSafetensors) {
  ScratchDir dir("truncated_weights");
  std::string bytes = testing::ReadText(HfData("llama/model.safetensors"));
  for (size_t keep : {size_t{0}, size_t{5}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    dir.Write("config.json", testing::ReadText(HfData("llama/config.json")));
    dir.Write("model.safetensors", bytes.substr(0, keep));
    auto m = Model::Load(dir.path());
    ASSERT_FALSE(m.has_value()) << keep;
    EXPECT_EQ(m.error().code(), StatusCode::kCorruption) << m.error().ToString();
  }
}

TEST(HfModelErrorsTest, UnsupportedArchitectureAndFeatures) {
  ScratchDir dir("unsupported");
  struct Case {
    std::string from, to, needle;
  };
  const Case cases[] = {
      {"\"model_type\": \"llama\"", "\"model_type\": \"mistral\"", "model_type 'mistral'"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 4.0}",
       "rope_scaling.rope_type 'longrope'"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"mscale\": 1.0}",
       "mscale"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"truncate\": false}",
       "truncate false"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"relu\"", "hidden_act 'relu'"},
  };
  for (const Case& c : cases) {
    Broken b;
    b.Replace(c.from, c.to);
    ExpectError(b.Load(dir), StatusCode::kUnsupported, c.needle);
  }
}

// rope_scaling: linear and llama3 load (tests/model/rope_scaling_test.cc checks their logits);
// another type, a bad factor or a missing llama3 parameter is refused naming the key.
TEST(HfModelErrorsTest, RopeScalingIsReadOrRefusedByName) {
  ScratchDir dir("rope_scaling");
  const std::string llama3_all = R"({"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0, )"
                                 R"("original_max_position_embeddings": 64, "factor": 8.0})";
  const std::string llama3_no_factor = R"({"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0, )"
                                       R"("original_max_position_embeddings": 64})";
  struct Case {
    std::string scaling;
    StatusCode code;  // kOk: loads
    std::string needle;
  };
  const Case cases[] = {
      {R"({"rope_type": "linear", "factor": 4.0})", StatusCode::kOk, ""},
      {R"({"type": "linear", "factor": 1.0})", StatusCode::kOk, ""},
      {llama3_all, StatusCode::kOk, ""},
      {R"({"rope_type": "default"})", StatusCode::kOk, ""},
      {R"({"rope_type": "dynamic", "factor": 2.0})", StatusCode::kUnsupported, "rope_scaling.rope_type 'dynamic'"},
      {R"({"rope_type": "longrope", "factor": 2.0})", StatusCode::kUnsupported, "rope_scaling.rope_type 'longrope'"},
      {R"({"type": "su", "factor": 2.0})", StatusCode::kUnsupported, "rope_scaling.rope_type 'su'"},
      {R"({"rope_type": "linear", "factor": 0.0})", StatusCode::kCorruption, "rope_scaling.factor = 0"},
      {R"({"rope_type": "linear", "factor": -4.0})", StatusCode::kCorruption, "rope_scaling.factor = -4"},
      {R"({"rope_type": "linear"})", StatusCode::kCorruption, "rope_scaling.factor is required"},
      {R"({"rope_type": "linear", "factor": "8"})", StatusCode::kInvalidArgument, "rope_scaling: key 'factor'"},
      {llama3_no_factor, StatusCode::kCorruption, "rope_scaling.factor is required"},
      {R"({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64})",
       StatusCode::kCorruption, "rope_scaling.low_freq_factor is required"},
      {R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0, )"
       R"("original_max_position_embeddings": 64})",
       StatusCode::kCorruption, "rope_scaling.high_freq_factor"},
      {R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0})",
       StatusCode::kCorruption, "rope_scaling.original_max_position_embeddings"},
  };
  for (const Case& c : cases) {
    Broken b;
    b.Replace("\"rope_scaling\": null", std::string("\"rope_scaling\": ").append(c.scaling));
    const Status s = b.Load(dir);
    if (c.code == StatusCode::kOk) {
      EXPECT_TRUE(s.ok()) << c.scaling << ": " << s.ToString();
    } else {
      ExpectError(s, c.code, c.needle);
    }
  }
}

TEST(HfModelErrorsTest, BadSizesInConfig) {
  ScratchDir dir("bad_sizes");
  Broken zero;
  zero.Replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 0");
  ExpectError(zero.Load(dir), StatusCode::kCorruption, "num_attention_heads = 0");
  Broken negative;
  negative.Replace("\"hidden_size\": 32", "\"hidden_size\": -32");
  ExpectError(negative.Load(dir), StatusCode::kCorruption, "hidden_size = -32");
  Broken missing;
  missing.Replace("\"intermediate_size\": 48,", "");
  ExpectError(missing.Load(dir), StatusCode::kInvalidArgument, "intermediate_size");
  Broken heads;  // 3 heads do not divide the hidden size 32 into a head dim the tensors have
  heads.Replace("\"num_attention_heads\": 4", "\"num_attention_heads\": 3");
  EXPECT_FALSE(heads.Load(dir).ok());
}

// A Llama has no biases; a Qwen2 has exactly the q/k/v ones, each required.
TEST(HfModelErrorsTest, BiasTensorsAreRefused) {
  ScratchDir dir("bias");
  Broken b;
  b.tensors.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {32}, std::string(32 * 4, '\0')});
  ExpectError(b.Load(dir), StatusCode::kUnsupported, "model.layers.0.self_attn.q_proj.bias");

  Broken qwen;
  qwen.Replace("\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"");
  ExpectError(qwen.Load(dir), StatusCode::kCorruption, "model.layers.0.self_attn.q_proj.bias");  // missing
  for (const char* x : {"q", "k", "v"}) {
    const size_t n = std::string(x) == "q" ? 32 : 16;
    for (int l = 0; l < 2; ++l)
      qwen.tensors.push_back({"model.layers." + std::to_string(l) + ".self_attn." + x + "_proj.bias", "F32", {int64_t(n)},
                              std::string(n * 4, '\0')});
  }
  EXPECT_OK(qwen.Load(dir));
  qwen.tensors.push_back({"model.layers.0.self_attn.o_proj.bias", "F32", {32}, std::string(32 * 4, '\0')});
  ExpectError(qwen.Load(dir), StatusCode::kUnsupported, "model.layers.0.self_attn.o_proj.bias");
  qwen.tensors.pop_back();
  qwen.Replace("\"model_type\": \"qwen2\"", "\"model_type\": \"qwen2\", \"use_sliding_window\": true");
  ExpectError(qwen.Load(dir), StatusCode::kUnsupported, "use_sliding_window");
}

TEST(HfModelErrorsTest, LayerBeyondNumHiddenLayers) {
  ScratchDir dir("extra_layer");
  Broken b;
  b.tensors.push_back({"model.layers.2.input_layernorm.weight", "F32", {32}, std::string(32 * 4, '\0')});
  ExpectError(b.Load(dir), StatusCode::kCorruption, "model.layers.2.input_layernorm.weight beyond num_hidden_layers");
}

TEST(HfModelErrorsTest, LmHeadAndTying) {
  ScratchDir dir("tying");
  Broken untied;
  std::erase_if(untied.tensors, [](const StEntry& e) { return e.name == "lm_head.weight"; });
  ExpectError(untied.Load(dir), StatusCode::kCorruption, "missing tensor lm_head.weight");
  Broken tied = untied;
  tied.Replace("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
  EXPECT_OK(tied.Load(dir));
}

TEST(HfModelErrorsTest, ShardIndexProblems) {
  ScratchDir dir("index");
  const std::string shard1 = "model-00001-of-00002.safetensors";
  dir.Write("config.json", testing::ReadText(HfData("llama_sharded/config.json")));
  dir.Write(shard1, testing::ReadText(HfData("llama_sharded/" + shard1)));
  const std::string index = testing::ReadText(HfData("llama_sharded/model.safetensors.index.json"));
  struct Case {
    std::string text;
    StatusCode code;
    std::string needle;
  };
  const Case cases[] = {
      {index, StatusCode::kNotFound, "model-00002-of-00002.safetensors"},  // the second shard is absent
      {index.substr(0, index.size() / 2), StatusCode::kCorruption, "model.safetensors.index.json"},
      {"{\"weight_map\": {\"model.norm.weight\": \"../etc/passwd\"}}", StatusCode::kCorruption, "is not a file name"},
      {"{\"weight_map\": {}}", StatusCode::kCorruption, "weight_map is empty"},
      {"{\"weight_map\": {\"model.nope.weight\": \"" + shard1 + "\"}}", StatusCode::kCorruption,
       "tensor model.nope.weight is listed"},
  };
  for (const Case& c : cases) {
    dir.Write("model.safetensors.index.json", c.text);
    auto m = Model::Load(dir.path());
    ASSERT_FALSE(m.has_value());
    ExpectError(m.error(), c.code, c.needle);
  }
}

TEST(HfModelErrorsTest, NeitherGgufNorCheckpoint) {
  ScratchDir dir("neither");
  dir.Write("weights.bin", "not a model at all");
  auto m = Model::Load(dir.path() + "/weights.bin");
  ASSERT_FALSE(m.has_value());
  ExpectError(m.error(), StatusCode::kUnsupported, "neither a GGUF file nor a Hugging Face checkpoint");
  auto missing = Model::Load(dir.path() + "/absent.safetensors");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fak
