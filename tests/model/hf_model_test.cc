// Hugging Face checkpoints (tests/data/hf/, made by make_hf_fixtures.py): the same tiny Llama, Qwen2
// and Gemma 3 weights as safetensors (HF names, unpermuted q/k, raw Gemma norms) and as GGUF (permuted
// q/k, norms + 1) must give the same logits, and both must match an independent float64 numpy
// forward pass written from the HF modeling code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fak/io/gguf.h"
#include "fak/model/model.h"
#include "fak/io/safetensors.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/hf_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::HfData;

const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 17, 60, 4, 41, 8, 23};  // make_hf_fixtures.py PROMPT

std::vector<float> AllLogits(const Model& m) {
  KVCache cache = m.NewCache();
  auto logits = m.Prefill(&cache, kPrompt, LogitsMode::kAll);
  EXPECT_TRUE(logits.has_value()) << logits.error().ToString();
  return logits.has_value() ? *logits : std::vector<float>();
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// `config` and `entries` written into `dir` as a checkpoint, then loaded.
Result<std::unique_ptr<Model>> LoadCheckpoint(const testing::ScratchDir& dir, const std::string& config,
                                              const std::vector<testing::StEntry>& entries) {
  dir.Write("config.json", config);
  testing::WriteSafetensors(dir.path() + "/model.safetensors", entries);
  return Model::Load(dir.path());
}

// Argmax equal at every position.
void ExpectSameTop1(const std::vector<float>& a, const std::vector<float>& b, size_t vocab, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t * vocab < a.size(); ++t) {
    auto ra = a.begin() + t * vocab, rb = b.begin() + t * vocab;
    EXPECT_EQ(std::max_element(ra, ra + vocab) - ra, std::max_element(rb, rb + vocab) - rb)
        << what << " position " << t;
  }
}

// fak runs f32 with a different summation order than numpy's float64 pass; on these ~unit-scale
// logits the difference is ~1e-6, so 1e-4 is a loose bound that still catches any mapping error
// (those move logits by ~0.1 or more, see the controls below).
constexpr float kOracleTolerance = 1e-4f;

// An HF checkpoint and its GGUF twin that run the same arithmetic: bit-identical logits, both
// within kOracleTolerance of the float64 numpy pass stored in `oracle_file`.
void ExpectBitTwinsNearOracle(const Model& hf, const Model& gguf, const std::string& oracle_file, const char* label) {
  std::vector<float> a = AllLogits(hf), b = AllLogits(gguf), oracle = ReadFloats(HfData(oracle_file));
  ASSERT_EQ(a.size(), kPrompt.size() * 64);
  EXPECT_EQ(a, b);
  EXPECT_EQ(MaxAbsDiff(a, b), 0.0f);
  ExpectSameTop1(a, oracle, 64, "hf vs oracle");
  const float d_oracle = MaxAbsDiff(a, oracle);
  std::printf("[ %-8s ] max|d| hf-gguf %.3g, hf-oracle %.3g\n", label, MaxAbsDiff(a, b), d_oracle);
  EXPECT_LE(d_oracle, kOracleTolerance);
}

TEST(HfModelTest, LlamaConfigFromConfigJson) {
  ASSERT_OK_AND_ASSIGN(auto m, Model::Load(HfData("llama")));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.rope_pairing, RopePairing::kSplitHalf);  // HF rows are unpermuted
  EXPECT_EQ(c.vocab_size, 64u);
  EXPECT_EQ(c.hidden_size, 32u);
  EXPECT_EQ(c.n_layers, 2u);
  EXPECT_EQ(c.n_heads, 4u);
  EXPECT_EQ(c.n_kv_heads, 2u);
  EXPECT_EQ(c.head_dim, 8u);
  EXPECT_EQ(c.ffn_size, 48u);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.context_length, 128u);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.bos_id, 1);
  EXPECT_EQ(c.eos_id, 2);
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("llama.gguf")));
  EXPECT_EQ(gguf->config().rope_pairing, RopePairing::kAdjacent);  // the converter permuted q/k
  ASSERT_OK_AND_ASSIGN(auto capped, Model::Load(HfData("llama"), ModelOptions{.max_context = 16}));
  EXPECT_EQ(capped->config().context_length, 16u);
}

// Split-half pairing on HF rows and adjacent pairing on permuted GGUF rows rotate the same value
// pairs, but q·k then sums head dimensions in a different order, so logits agree to rounding
// (measured 2.3e-6), not bit for bit; 1e-5 bounds that.
TEST(HfModelTest, LlamaSafetensorsMatchesGgufAndTheOracle) {
  ASSERT_OK_AND_ASSIGN(auto hf, Model::Load(HfData("llama")));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("llama.gguf")));
  std::vector<float> a = AllLogits(*hf), b = AllLogits(*gguf), oracle = ReadFloats(HfData("llama.logits"));
  ASSERT_EQ(a.size(), kPrompt.size() * 64);
  ExpectSameTop1(a, b, 64, "hf vs gguf");
  ExpectSameTop1(a, oracle, 64, "hf vs oracle");
  const float d_gguf = MaxAbsDiff(a, b), d_oracle = MaxAbsDiff(a, oracle), d_gguf_oracle = MaxAbsDiff(b, oracle);
  std::printf("[ llama    ] max|d| hf-gguf %.3g, hf-oracle %.3g, gguf-oracle %.3g\n", d_gguf, d_oracle, d_gguf_oracle);
  EXPECT_LE(d_gguf, 1e-5f);
  EXPECT_LE(d_oracle, kOracleTolerance);
  EXPECT_LE(d_gguf_oracle, kOracleTolerance);
  EXPECT_NE(hf->WeightsDigest(), gguf->WeightsDigest());  // other rows, other pairing
}

// Non-vacuity: the GGUF's permuted q/k rows under HF names (so run with split-half pairing) give a
// different model — the pairing choice is what makes the two paths agree.
TEST(HfModelTest, LlamaPermutedRowsWithSplitHalfPairingDiffer) {
  testing::ScratchDir dir("llama_permuted");
  ASSERT_OK_AND_ASSIGN(auto gguf_file, GgufFile::Open(HfData("llama.gguf")));
  std::vector<testing::StEntry> entries = testing::ReadEntries(HfData("llama/model.safetensors"));
  for (testing::StEntry& e : entries) {
    for (int l = 0; l < 2; ++l) {
      for (const char* qk : {"q", "k"}) {
        if (e.name != "model.layers." + std::to_string(l) + ".self_attn." + qk + "_proj.weight") continue;
        const GgufTensorInfo* t = gguf_file->FindTensor("blk." + std::to_string(l) + ".attn_" + qk + ".weight");
        ASSERT_NE(t, nullptr);
        e.dtype = "F32";
        e.bytes.assign(reinterpret_cast<const char*>(t->data), t->bytes().size());
      }
    }
  }
  ASSERT_OK_AND_ASSIGN(auto wrong, LoadCheckpoint(dir, testing::ReadText(HfData("llama/config.json")), entries));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("llama.gguf")));
  const float d = MaxAbsDiff(AllLogits(*wrong), AllLogits(*gguf));
  std::printf("[ llama    ] permuted rows + split-half pairing: max|d| %.3g\n", d);
  EXPECT_GT(d, 1e-2f);
}

// F16 in one file and the same values as F32 in two shards are the same model, bit for bit.
TEST(HfModelTest, ShardedF32EqualsSingleFileF16BitForBit) {
  ASSERT_OK_AND_ASSIGN(auto single, Model::Load(HfData("llama")));
  ASSERT_OK_AND_ASSIGN(auto sharded, Model::Load(HfData("llama_sharded")));
  ASSERT_OK_AND_ASSIGN(auto file, Model::Load(HfData("llama/model.safetensors")));
  std::vector<float> a = AllLogits(*single);
  EXPECT_EQ(a, AllLogits(*sharded));
  EXPECT_EQ(a, AllLogits(*file));
  EXPECT_EQ(single->WeightsDigest(), sharded->WeightsDigest());
  EXPECT_EQ(single->WeightsDigest(), file->WeightsDigest());
  // The F16 file's matrices stay 16-bit in memory (computed natively); only its vectors are widened.
  EXPECT_LT(single->weights_bytes(), sharded->weights_bytes() * 11 / 20);
}

TEST(HfModelTest, PrefillEqualsTokenByTokenDecode) {
  for (const char* name : {"llama", "gemma", "qwen2"}) {
    ASSERT_OK_AND_ASSIGN(auto m, Model::Load(HfData(name)));
    std::vector<float> all = AllLogits(*m);
    KVCache cache = m->NewCache();
    const size_t v = m->config().vocab_size;
    for (size_t t = 0; t < kPrompt.size(); ++t) {
      ASSERT_OK_AND_ASSIGN(std::vector<float> step, m->Decode(&cache, kPrompt[t]));
      EXPECT_TRUE(std::equal(step.begin(), step.end(), all.begin() + t * v)) << name << " position " << t;
    }
  }
}

// Qwen2: the llama weights plus q/k/v biases, rope_theta 1e6. llama.cpp's qwen2 rotates NEOX-style,
// so the GGUF twin keeps HF's rows and both files run split-half on the same values: bit for bit.
TEST(HfModelTest, Qwen2SafetensorsMatchesGgufBitForBitAndTheOracle) {
  ASSERT_OK_AND_ASSIGN(auto hf, Model::Load(HfData("qwen2")));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("qwen2.gguf")));
  for (const Model* m : {hf.get(), gguf.get()}) {
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.architecture, Architecture::kLlama);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_EQ(c.rope_pairing, RopePairing::kSplitHalf);
    EXPECT_DOUBLE_EQ(c.rope_base, 1e6);
    EXPECT_NE(c.Describe().find("qkv-bias"), std::string::npos);
  }
  ExpectBitTwinsNearOracle(*hf, *gguf, "qwen2.logits", "qwen2");
}

// Non-vacuity: the same checkpoint without its biases (as a Llama with Qwen's rope_theta) is a
// different model, far from the oracle.
TEST(HfModelTest, Qwen2WithoutBiasesDiffers) {
  testing::ScratchDir dir("qwen2_no_bias");
  std::vector<testing::StEntry> entries;
  for (testing::StEntry& e : testing::ReadEntries(HfData("qwen2/model.safetensors")))
    if (!e.name.ends_with(".bias")) entries.push_back(std::move(e));
  std::string config = testing::ReadText(HfData("qwen2/config.json"));
  const std::string from = "\"model_type\": \"qwen2\"";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"model_type\": \"llama\"");
  ASSERT_OK_AND_ASSIGN(auto no_bias, LoadCheckpoint(dir, config, entries));
  EXPECT_FALSE(no_bias->config().qkv_bias);
  const float d = MaxAbsDiff(AllLogits(*no_bias), ReadFloats(HfData("qwen2.logits")));
  std::printf("[ qwen2    ] biases dropped: max|d| from the oracle %.3g\n", d);
  EXPECT_GT(d, 1e-2f);
}

// Transformers v5 writes `rope_parameters` (theta and scaling together; per layer type for Gemma 3)
// instead of rope_theta / rope_scaling / rope_local_base_freq. A fixture's config rewritten that way
// must give the same model, bit for bit, and a changed theta in it must change the logits.
class RopeParametersTest : public ::testing::Test {
 protected:
  // `fixture`'s weights under its config.json after `edit`, loaded from a scratch directory.
  template <class Edit>
  Result<std::unique_ptr<Model>> LoadEdited(const std::string& fixture, Edit edit) {
    nlohmann::json config = nlohmann::json::parse(testing::ReadText(HfData(fixture + "/config.json")));
    edit(config);
    dir_.Write("config.json", config.dump(1));
    std::filesystem::copy_file(HfData(fixture + "/model.safetensors"), dir_.path() + "/model.safetensors",
                               std::filesystem::copy_options::overwrite_existing);
    return Model::Load(dir_.path());
  }
  testing::ScratchDir dir_{"rope_parameters"};
};

TEST_F(RopeParametersTest, FlatObjectReadsAsRopeThetaAndRopeScaling) {
  ASSERT_OK_AND_ASSIGN(auto old_llama, Model::Load(HfData("llama")));
  ASSERT_OK_AND_ASSIGN(auto v5, LoadEdited("llama", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}};
    c.erase("rope_theta");
    c.erase("rope_scaling");
  }));
  EXPECT_EQ(AllLogits(*v5), AllLogits(*old_llama));
  EXPECT_EQ(v5->WeightsDigest(), old_llama->WeightsDigest());
  ASSERT_OK_AND_ASSIGN(auto other_theta, LoadEdited("llama", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  }));
  EXPECT_DOUBLE_EQ(other_theta->config().rope_base, 500000.0);  // rope_parameters wins over rope_theta
  EXPECT_GT(MaxAbsDiff(AllLogits(*other_theta), AllLogits(*old_llama)), 1e-3f);

  ASSERT_OK_AND_ASSIGN(auto old_llama3, Model::Load(HfData("llama3_rope")));
  ASSERT_OK_AND_ASSIGN(auto v5_llama3, LoadEdited("llama3_rope", [](nlohmann::json& c) {
    c["rope_parameters"] = c["rope_scaling"];
    c["rope_parameters"]["rope_theta"] = c["rope_theta"];
    c.erase("rope_theta");
    c.erase("rope_scaling");
  }));
  EXPECT_EQ(v5_llama3->config().RopeScalingLabel(), old_llama3->config().RopeScalingLabel());
  EXPECT_EQ(AllLogits(*v5_llama3), AllLogits(*old_llama3));

  // YaRN as HF reads it: the original context from the object, else max_position_embeddings; the
  // attention factor 1 + 0.1 ln factor unless given — the values llama.cpp's GGUF of it carries.
  ASSERT_OK_AND_ASSIGN(auto yarn, LoadEdited("llama", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0},
                            {"original_max_position_embeddings", 32}};
  }));
  const ModelConfig::RopeYarn& y = yarn->config().rope_yarn;
  EXPECT_EQ(y.factor, 4.0);
  EXPECT_EQ(y.original_context, 32u);
  EXPECT_EQ(y.magnitude, 1.0 + 0.1 * std::log(4.0));
  EXPECT_GT(MaxAbsDiff(AllLogits(*yarn), AllLogits(*old_llama)), 1e-3f);
  ASSERT_OK_AND_ASSIGN(auto yarn_default, LoadEdited("llama", [](nlohmann::json& c) {
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"attention_factor", 1.5}, {"beta_fast", 16.0}};
  }));
  EXPECT_EQ(yarn_default->config().rope_yarn.original_context, 128u);  // max_position_embeddings
  EXPECT_EQ(yarn_default->config().rope_yarn.magnitude, 1.5);
  EXPECT_EQ(yarn_default->config().rope_yarn.beta_fast, 16.0);
  auto longrope = LoadEdited("llama", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"factor", 4.0}};
  });
  ASSERT_FALSE(longrope.has_value());
  EXPECT_EQ(longrope.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(longrope.error().message().find("'longrope'"), std::string::npos) << longrope.error().ToString();
  auto not_object = LoadEdited("llama", [](nlohmann::json& c) { c["rope_parameters"] = 10000.0; });
  ASSERT_FALSE(not_object.has_value());
  EXPECT_NE(not_object.error().message().find("rope_parameters is not an object"), std::string::npos);
}

TEST_F(RopeParametersTest, PerLayerTypeObjectsReadAsGemma3Keys) {
  ASSERT_OK_AND_ASSIGN(auto old_gemma, Model::Load(HfData("gemma")));
  ASSERT_OK_AND_ASSIGN(auto v5, LoadEdited("gemma", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", c["rope_local_base_freq"]}}}};
    c.erase("rope_theta");
    c.erase("rope_local_base_freq");
    c.erase("rope_scaling");
  }));
  EXPECT_EQ(AllLogits(*v5), AllLogits(*old_gemma));
  // The sliding layers' theta is read from its own object: changing it changes the model.
  ASSERT_OK_AND_ASSIGN(auto local, LoadEdited("gemma", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 500.0}}}};
  }));
  EXPECT_DOUBLE_EQ(local->config().rope_local_base, 500.0);
  EXPECT_DOUBLE_EQ(local->config().rope_base, old_gemma->config().rope_base);
  EXPECT_GT(MaxAbsDiff(AllLogits(*local), AllLogits(*old_gemma)), 1e-3f);
  auto scaled_local = LoadEdited("gemma", [](nlohmann::json& c) {
    c["rope_parameters"] = {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  });
  ASSERT_FALSE(scaled_local.has_value());
  EXPECT_EQ(scaled_local.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(scaled_local.error().message().find("sliding_attention.rope_type 'linear'"), std::string::npos)
      << scaled_local.error().ToString();
}

TEST(HfModelTest, Gemma3ConfigFromConfigJson) {
  ASSERT_OK_AND_ASSIGN(auto m, Model::Load(HfData("gemma")));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.architecture, Architecture::kGemma3);
  EXPECT_EQ(c.rope_pairing, RopePairing::kSplitHalf);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.n_kv_heads, 1u);
  EXPECT_EQ(c.sliding_window, 4u);
  EXPECT_EQ(c.sliding_window_pattern, 2u);  // from layer_types [sliding, full, sliding]
  EXPECT_DOUBLE_EQ(c.rope_base, 1e6);
  EXPECT_DOUBLE_EQ(c.rope_local_base, 10000.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 0.0f);  // = head_dim, spelled as ModelConfig spells it
  EXPECT_TRUE(c.tied_embeddings);            // no lm_head.weight: Gemma 3 ties
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(c.eos_id, 1);
}

// Gemma 3: same rows and pairing in both files, and the kernel's (1 + w) on HF's raw norms equals
// the GGUF's stored w + 1 exactly, so the logits are bit-identical (the prompt is longer than the
// window, so sliding layers matter).
TEST(HfModelTest, Gemma3SafetensorsMatchesGgufBitForBitAndTheOracle) {
  ASSERT_OK_AND_ASSIGN(auto hf, Model::Load(HfData("gemma")));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("gemma.gguf")));
  ExpectBitTwinsNearOracle(*hf, *gguf, "gemma.logits", "gemma3");
}

// Non-vacuity for the norm convention: HF's raw norm weights read as if they already held the +1
// (as a GGUF's do) give another model.
TEST(HfModelTest, Gemma3NormsWithoutThePlusOneDiffer) {
  testing::ScratchDir dir("gemma_plus_one");
  std::vector<testing::StEntry> entries = testing::ReadEntries(HfData("gemma/model.safetensors"));
  ASSERT_OK_AND_ASSIGN(auto gguf_file, GgufFile::Open(HfData("gemma.gguf")));
  // Replace the raw HF norm w by the GGUF's w + 1: with (1 + w) applied on top, every norm is off by 1.
  for (testing::StEntry& e : entries) {
    if (e.name != "model.norm.weight") continue;
    const GgufTensorInfo* t = gguf_file->FindTensor("output_norm.weight");
    ASSERT_NE(t, nullptr);
    e.dtype = "F32";
    e.bytes.assign(reinterpret_cast<const char*>(t->data), t->bytes().size());
  }
  ASSERT_OK_AND_ASSIGN(auto wrong, LoadCheckpoint(dir, testing::ReadText(HfData("gemma/config.json")), entries));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("gemma.gguf")));
  EXPECT_GT(MaxAbsDiff(AllLogits(*wrong), AllLogits(*gguf)), 1e-3f);
}

TEST(HfModelTest, TokenizerBesideTheCheckpoint) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerForModel(HfData("spm")));
  EXPECT_EQ(tok->kind(), "spm");
  ASSERT_OK_AND_ASSIGN(auto gguf_tok, LoadTokenizerForModel(HfData("spm.gguf")));
  EXPECT_EQ(gguf_tok->kind(), "spm");
  auto none = LoadTokenizerForModel(HfData("llama"));  // a checkpoint without tokenizer.json
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kNotFound);
  EXPECT_NE(none.error().message().find("tokenizer.json"), std::string_view::npos);
}

}  // namespace
}  // namespace fak
