// RoPE scaling end to end (docs/models.md "RoPE scaling"): linear (Gemma 3 4B+, global layers only)
// and llama3 (Llama 3.1-3.3; GGUF rope_freqs.weight, HF rope_scaling) against llama.cpp's logits on
// the committed fixtures and against an independent float64 pass; the HF and GGUF paths against each
// other; the per-layer tables; the cache binding label; and refusals that name the key at fault.
// Every comparison has an unscaled control that must fail it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "fak/io/gguf.h"
#include "fak/gate/binding_tuple.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"
#include "kernels/rope.h"
#include "src/model/model_impl.h"
#include "tests/io/gguf_writer.h"
#include "tests/model/hf_test_util.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::HfData;
using testing::MaxAbsDiff;

std::string LlamaCppData(const std::string& name) { return std::string(FAK_TEST_DATA_DIR) + "/llama_cpp/" + name; }

std::vector<float> AllLogits(const Model& m, const std::vector<int32_t>& tokens) {
  KVCache cache = m.NewCache();
  auto logits = m.Prefill(&cache, tokens, LogitsMode::kAll);
  EXPECT_TRUE(logits.has_value()) << logits.error().ToString();
  return logits.has_value() ? *logits : std::vector<float>();
}

// Mean over positions of KL(softmax(ref) || softmax(got)), in double.
double MeanKl(const std::vector<float>& ref, const std::vector<float>& got, size_t vocab) {
  EXPECT_EQ(ref.size(), got.size());
  const size_t n = std::min(ref.size(), got.size()) / vocab;
  auto log_softmax = [&](const float* x) {
    const double m = *std::max_element(x, x + vocab);
    double sum = 0;
    for (size_t i = 0; i < vocab; ++i) sum += std::exp(x[i] - m);
    std::vector<double> out(vocab);
    for (size_t i = 0; i < vocab; ++i) out[i] = x[i] - m - std::log(sum);
    return out;
  };
  double total = 0;
  for (size_t p = 0; p < n; ++p) {
    const std::vector<double> lp = log_softmax(ref.data() + p * vocab), lq = log_softmax(got.data() + p * vocab);
    for (size_t i = 0; i < vocab; ++i) total += std::exp(lp[i]) * (lp[i] - lq[i]);
  }
  return n ? total / n : 0.0;
}

// A copy of a (tokenizer-less) GGUF without the keys and tensors named in `drop`, plus what `add`
// writes: a file a test can give exactly the scaling metadata it needs.
void RewriteGguf(const std::string& src, const std::string& dst, const std::vector<std::string>& drop,
                 const std::function<void(testing::GgufWriter&)>& add) {
  auto f = GgufFile::Open(src);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  auto dropped = [&](std::string_view name) { return std::find(drop.begin(), drop.end(), name) != drop.end(); };
  testing::GgufWriter g;
  for (const GgufKeyValue& kv : (*f)->metadata()) {
    if (dropped(kv.key)) continue;
    const GgufValue& v = kv.value;
    switch (v.type()) {
      case GgufType::kString: g.KvString(kv.key, *v.ToString()); break;
      case GgufType::kUint32: g.Kv<uint32_t>(kv.key, v.type(), static_cast<uint32_t>(*v.ToUint64())); break;
      case GgufType::kUint64: g.Kv<uint64_t>(kv.key, v.type(), *v.ToUint64()); break;
      case GgufType::kInt32: g.Kv<int32_t>(kv.key, v.type(), static_cast<int32_t>(*v.ToInt64())); break;
      case GgufType::kFloat32: g.Kv<float>(kv.key, v.type(), static_cast<float>(*v.ToDouble())); break;
      case GgufType::kBool: g.Kv<uint8_t>(kv.key, v.type(), *v.ToBool() ? 1 : 0); break;
      default: FAIL() << src << ": key " << kv.key << " has a type this helper does not copy";
    }
  }
  if (add) add(g);
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    if (dropped(t.name)) continue;
    g.Tensor(t.name, std::vector<uint64_t>(t.ne.begin(), t.ne.end()), static_cast<uint32_t>(t.type),
             std::vector<uint8_t>(t.data, t.data + t.size_bytes));
  }
  testing::GgufWriter::WriteFile(dst, g.Build());
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void ExpectError(const Result<std::unique_ptr<Model>>& m, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(m.has_value()) << "loaded, expected an error naming " << needle;
  EXPECT_EQ(m.error().code(), code) << m.error().ToString();
  EXPECT_NE(m.error().message().find(needle), std::string_view::npos) << "'" << needle << "' not in "
                                                                      << m.error().ToString();
}

// The tiny HF Llama with Llama 3.1 rope_scaling, its GGUF twin carrying rope_freqs.weight, and a
// float64 numpy pass using transformers' _compute_llama3_parameters (make_hf_fixtures.py), over
// 100 positions. The two formats carry bit-identical factors here, so HF vs GGUF differ only by
// the pairing's summation order, as HfModelTest's unscaled pair does; over 100 positions instead of
// 11 that reaches 1.2e-5 in the scalar tier (5e-6 AVX2/AVX-512), hence 2e-5 rather than its 1e-5.
// The oracle bound is HfModelTest's.
TEST(RopeScalingTest, HfLlama3MatchesItsGgufTwinAndTheOracle) {
  ASSERT_OK_AND_ASSIGN(auto hf, Model::Load(HfData("llama3_rope")));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(HfData("llama3_rope.gguf")));
  const ModelConfig &h = hf->config(), &g = gguf->config();
  ASSERT_EQ(h.rope_freq_factors.size(), 4u);
  ASSERT_EQ(g.rope_freq_factors.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(h.rope_freq_factors[i], g.rope_freq_factors[i], 1e-6f * g.rope_freq_factors[i]) << i;
  }
  EXPECT_EQ(h.rope_freq_factors[0], 1.0f);  // high frequency: unchanged
  EXPECT_EQ(h.rope_freq_factors[3], 8.0f);  // low frequency: divided by factor
  EXPECT_EQ(h.rope_scale_factor, 1.0);
  EXPECT_EQ(h.context_length, 1024u);  // the full trained length, not the original 256
  EXPECT_EQ(g.context_length, 1024u);

  const std::vector<int32_t> tokens = testing::ReadTokenIds(HfData("llama3_rope.tokens"));
  ASSERT_EQ(tokens.size(), 100u);
  const std::vector<float> a = AllLogits(*hf, tokens), b = AllLogits(*gguf, tokens);
  const std::vector<float> oracle = testing::ReadF32s(HfData("llama3_rope.logits"));
  ASSERT_EQ(a.size(), tokens.size() * 64);
  ASSERT_OK_AND_ASSIGN(auto unscaled, Model::Load(HfData("llama")));  // same weights, no rope_scaling
  const std::vector<float> control = AllLogits(*unscaled, tokens);
  const float d_gguf = MaxAbsDiff(a, b), d_oracle = MaxAbsDiff(a, oracle), d_gguf_oracle = MaxAbsDiff(b, oracle);
  const float d_control = MaxAbsDiff(control, oracle);
  std::printf("[ llama3   ] max|d| hf-gguf %.3g, hf-oracle %.3g, gguf-oracle %.3g | unscaled-oracle %.3g\n", d_gguf,
              d_oracle, d_gguf_oracle, d_control);
  EXPECT_LE(d_gguf, 2e-5f);
  EXPECT_LE(d_oracle, 1e-4f);
  EXPECT_LE(d_gguf_oracle, 1e-4f);
  EXPECT_GT(d_control, 100 * 1e-4f) << "the unscaled model should miss the oracle";
}

struct ScaledFixture {
  const char* scaled;
  const char* unscaled;  // the same weights and tokens without the scaling
};

void PrintTo(const ScaledFixture& f, std::ostream* os) { *os << f.scaled << " (control " << f.unscaled << ")"; }

class LlamaCppRopeScalingTest : public ::testing::TestWithParam<ScaledFixture> {};

// Beyond the generic agreement bound (llama_cpp_agreement_test.cc): these are F32 files, where fak
// and llama.cpp agree to ~1e-9 in KL, so a tight bound separates them from the unscaled twin, whose
// KL against the scaled logits is ~0.1 (Llama) and ~1e-4 (Gemma 3: one global layer in six).
TEST_P(LlamaCppRopeScalingTest, MatchesLlamaCppAndTheUnscaledTwinDoesNot) {
  const ScaledFixture fx = GetParam();
  ASSERT_OK_AND_ASSIGN(auto scaled, Model::Load(LlamaCppData(std::string(fx.scaled) + ".gguf")));
  ASSERT_OK_AND_ASSIGN(auto unscaled, Model::Load(LlamaCppData(std::string(fx.unscaled) + ".gguf")));
  ASSERT_TRUE(scaled->config().HasRopeScaling());
  ASSERT_FALSE(unscaled->config().HasRopeScaling());
  const std::vector<int32_t> tokens = testing::ReadTokenIds(LlamaCppData(std::string(fx.scaled) + ".tokens"));
  ASSERT_EQ(tokens, testing::ReadTokenIds(LlamaCppData(std::string(fx.unscaled) + ".tokens")));
  const std::vector<float> ref = testing::ReadF32s(LlamaCppData(std::string(fx.scaled) + ".logits.bin"));
  const size_t vocab = scaled->config().vocab_size;
  ASSERT_EQ(ref.size(), tokens.size() * vocab);
  const double kl = MeanKl(ref, AllLogits(*scaled, tokens), vocab);
  const double kl_control = MeanKl(ref, AllLogits(*unscaled, tokens), vocab);
  std::printf("[ rope     ] %-16s %s KL mean vs llama.cpp %.2e | unscaled twin %.2e\n", fx.scaled,
              scaled->config().RopeScalingLabel().substr(0, 16).c_str(), kl, kl_control);
  EXPECT_LT(kl, 1e-6);
  EXPECT_GT(kl_control, 1e-5);
  EXPECT_GT(kl_control, 100 * kl);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppRopeScalingTest,
                         ::testing::Values(ScaledFixture{"llama_rope_freqs", "llama_f32"},
                                           ScaledFixture{"gemma3_linear", "gemma3_f32"},
                                           ScaledFixture{"llama_yarn", "llama_f32"}),
                         [](const ::testing::TestParamInfo<ScaledFixture>& info) {
                           return std::string(info.param.scaled);
                         });

ModelConfig GemmaScaled(double local_base) {
  ModelConfig c = testing::TinyConfig(4, 1, 16, RopePairing::kSplitHalf, 6);
  c.architecture = Architecture::kGemma3;
  c.sliding_window = 4;
  c.sliding_window_pattern = 3;  // layers 2 and 5 global
  c.rope_base = 1e6;
  c.rope_local_base = local_base;
  c.rope_scale_factor = 8.0;
  return c;
}

bool SameTable(const kernels::RopeTable& t, const std::vector<double>& inv, size_t n) {
  const kernels::RopeTable want(inv, n);
  if (t.n_positions() != n || t.half_dim() != want.half_dim()) return false;
  for (size_t p = 0; p < n; ++p) {
    if (std::memcmp(t.cos_row(p), want.cos_row(p), want.half_dim() * sizeof(float)) != 0 ||
        std::memcmp(t.sin_row(p), want.sin_row(p), want.half_dim() * sizeof(float)) != 0) return false;
  }
  return true;
}

// llama.cpp (rope_freq_scale_train_swa = 1) and HF (rotary_emb_local) leave Gemma 3's sliding layers
// unscaled, also when their base equals the global one; Llama scales every layer.
TEST(RopeScalingTest, GemmaScalesGlobalLayersOnlyLlamaEveryLayer) {
  for (double local_base : {1e4, 1e6}) {
    const ModelConfig c = GemmaScaled(local_base);
    ASSERT_OK_AND_ASSIGN(auto m, Model::Synthetic(c, 1));
    const auto& tables = internal::ModelAccess::Get(*m).rope->layer_tables;
    const std::vector<double> global = kernels::RopeInverseFrequencies(16, 1e6, 8.0, {});
    const std::vector<double> local = kernels::RopeInverseFrequencies(16, local_base);
    for (size_t l = 0; l < c.n_layers; ++l) {
      EXPECT_EQ(SameTable(*tables[l], c.IsSlidingLayer(l) ? local : global, c.context_length), true)
          << "layer " << l << " local base " << local_base;
    }
    EXPECT_FALSE(SameTable(*tables[0], global, c.context_length));  // non-vacuity
  }
  ModelConfig llama = testing::TinyConfig();
  llama.rope_freq_factors = kernels::Llama3RopeFreqFactors(16, 10000.0, 8.0, 1.0, 4.0, 128.0);
  ASSERT_OK_AND_ASSIGN(auto m, Model::Synthetic(llama, 1));
  const std::vector<double> inv = kernels::RopeInverseFrequencies(16, 10000.0, 1.0, llama.rope_freq_factors);
  for (size_t l = 0; l < llama.n_layers; ++l) EXPECT_TRUE(SameTable(*internal::ModelAccess::Get(*m).rope->layer_tables[l], inv, 512)) << l;
}

// The exactness contract is unchanged: the scaled table is one pinned table, so prefill and
// token-by-token decode give the same bits.
TEST(RopeScalingTest, PrefillEqualsDecodeUnderScaling) {
  ModelConfig c = testing::TinyConfig();
  c.rope_scale_factor = 4.0;
  c.rope_freq_factors = kernels::Llama3RopeFreqFactors(16, 10000.0, 8.0, 1.0, 4.0, 64.0);
  ModelConfig yarn = testing::TinyConfig();
  yarn.rope_yarn = {.factor = 4.0, .original_context = 16, .beta_fast = 32.0, .beta_slow = 1.0, .magnitude = 1.1386};
  for (const ModelConfig& config : {c, GemmaScaled(1e4), yarn}) {
    ASSERT_OK_AND_ASSIGN(auto m, Model::Synthetic(config, 3));
    const std::vector<int32_t> tokens = testing::TokenSequence(40, 5, config.vocab_size);
    const std::vector<float> all = AllLogits(*m, tokens);
    KVCache cache = m->NewCache();
    for (size_t i = 0; i < tokens.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(std::vector<float> step, m->Decode(&cache, tokens[i]));
      ASSERT_EQ(0, std::memcmp(step.data(), all.data() + i * config.vocab_size, step.size() * sizeof(float))) << i;
    }
  }
}

// position_convention.scaling names the scaling and its parameters, so KV rotated under another
// scaling is a MISS on the position axis (docs/manifest.md).
TEST(RopeScalingTest, BindingLabelNamesTheScaling) {
  ASSERT_OK_AND_ASSIGN(auto freqs, Model::Load(LlamaCppData("llama_rope_freqs.gguf")));
  ASSERT_OK_AND_ASSIGN(auto plain, Model::Load(LlamaCppData("llama_f32.gguf")));
  ASSERT_OK_AND_ASSIGN(auto linear, Model::Load(LlamaCppData("gemma3_linear.gguf")));
  auto tokenizer = MakeByteTokenizer();
  const BindingTuple a = RegimeBinding(*freqs, *tokenizer), b = RegimeBinding(*plain, *tokenizer);
  const BindingTuple g = RegimeBinding(*linear, *tokenizer);
  EXPECT_EQ(b.position.scaling, "none");
  EXPECT_EQ(g.position.scaling, "linear 8");
  ASSERT_EQ(a.position.scaling.size(), 7u + 64u) << a.position.scaling;  // "llama3 " + sha256 hex
  EXPECT_EQ(a.position.scaling.rfind("llama3 ", 0), 0u);
  EXPECT_NE(freqs->WeightsDigest(), plain->WeightsDigest());  // same tensors, other rotation
  BindingTuple other = b;  // as if the same model had been run under the other scaling
  other.position.scaling = a.position.scaling;
  EXPECT_EQ(FirstDifferingAxis(other, b), BindingAxis::kPositionConvention);
  const std::vector<int32_t> context = {1, 2, 3};
  ASSERT_OK_AND_ASSIGN(BindingTuple span, BindSpan(a, context, 0, 3));
  EXPECT_OK(span.Validate());  // the label is a valid manifest string

  ModelConfig c = testing::TinyConfig();
  c.rope_scale_factor = 0.5;
  c.rope_freq_factors = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f};
  EXPECT_EQ(c.RopeScalingLabel().rfind("linear 0.5 + llama3 ", 0), 0u) << c.RopeScalingLabel();
  ModelConfig d = c;
  d.rope_freq_factors[7] = 8.000001f;
  EXPECT_NE(c.RopeScalingLabel(), d.RopeScalingLabel());
  ASSERT_OK_AND_ASSIGN(auto yarn, Model::Load(LlamaCppData("llama_yarn.gguf")));
  EXPECT_EQ(RegimeBinding(*yarn, *tokenizer).position.scaling, "yarn 4 orig 32 beta 32/1 mag 1.138629436111989");
}

TEST(RopeScalingTest, ConfigValidationNamesTheField) {
  struct Case {
    std::function<void(ModelConfig&)> edit;
    std::string needle;
  };
  const Case cases[] = {
      {[](ModelConfig& c) { c.rope_scale_factor = 0.0; }, "ModelConfig.rope_scale_factor"},
      {[](ModelConfig& c) { c.rope_scale_factor = -8.0; }, "ModelConfig.rope_scale_factor"},
      {[](ModelConfig& c) { c.rope_scale_factor = NAN; }, "ModelConfig.rope_scale_factor"},
      {[](ModelConfig& c) { c.rope_freq_factors.assign(7, 1.0f); }, "ModelConfig.rope_freq_factors: has 7 entries"},
      {[](ModelConfig& c) { c.rope_freq_factors.assign(8, 0.0f); }, "ModelConfig.rope_freq_factors: entry 0"},
      {[](ModelConfig& c) {
         c.architecture = Architecture::kGemma3;
         c.rope_freq_factors.assign(8, 2.0f);
       },
       "ModelConfig.rope_freq_factors: not applied by gemma3"},
      {[](ModelConfig& c) { c.rope_yarn = {.factor = 0.5, .original_context = 32}; }, "ModelConfig.rope_yarn.factor"},
      {[](ModelConfig& c) { c.rope_yarn = {.factor = 4.0, .original_context = 0}; }, "ModelConfig.rope_yarn.original_context"},
      {[](ModelConfig& c) { c.rope_yarn = {.factor = 4.0, .original_context = 32, .beta_fast = 1.0}; },
       "ModelConfig.rope_yarn.beta_fast"},
      {[](ModelConfig& c) { c.rope_yarn = {.factor = 4.0, .original_context = 32, .magnitude = 0.0}; },
       "ModelConfig.rope_yarn.magnitude"},
      {[](ModelConfig& c) {
         c.rope_yarn = {.factor = 4.0, .original_context = 32};
         c.rope_scale_factor = 2.0;
       },
       "ModelConfig.rope_yarn: cannot be combined"},
  };
  for (const Case& k : cases) {
    ModelConfig c = testing::TinyConfig();
    k.edit(c);
    const Status s = c.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(k.needle), std::string_view::npos) << s.ToString();
  }
}

// GGUF keys read as llama.cpp reads them (type default "linear", factor 0 = 1, type "none" never
// scales, the old rope.scale_linear key) and everything else refused naming the key or tensor.
TEST(RopeScalingTest, GgufScalingKeysAndRefusals) {
  testing::ScratchDir dir("rope_gguf");
  const std::string path = dir.path() + "/m.gguf";
  const std::string llama = HfData("llama.gguf"), gemma = HfData("gemma.gguf");
  auto load = [&](const std::string& src, const std::function<void(testing::GgufWriter&)>& add) {
    RewriteGguf(src, path, {}, add);
    return Model::Load(path);
  };
  auto kv_type = [](const char* t) {
    return [t](testing::GgufWriter& g) { g.KvString("llama.rope.scaling.type", t); };
  };
  auto kv_factor = [](const char* key, float f) {
    return [key, f](testing::GgufWriter& g) { g.Kv<float>(key, GgufType::kFloat32, f); };
  };
  auto both = [](auto x, auto y) { return [x, y](testing::GgufWriter& g) { x(g), y(g); }; };
  struct Ok {
    std::function<void(testing::GgufWriter&)> add;
    double scale;
  };
  const Ok ok[] = {
      {both(kv_type("linear"), kv_factor("llama.rope.scaling.factor", 4.0f)), 4.0},
      {kv_factor("llama.rope.scaling.factor", 4.0f), 4.0},  // no type: llama.cpp's default is linear
      {kv_factor("llama.rope.scale_linear", 2.0f), 2.0},    // the old key
      {both(kv_type("none"), kv_factor("llama.rope.scaling.factor", 4.0f)), 1.0},
      {both(kv_type("linear"), kv_factor("llama.rope.scaling.factor", 0.0f)), 1.0},  // 0 means 1
      {both(kv_type("yarn"), kv_factor("llama.rope.scaling.factor", 1.0f)), 1.0},    // yarn x1 is the identity
  };
  for (const Ok& k : ok) {
    auto m = load(llama, k.add);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    EXPECT_EQ((*m)->config().rope_scale_factor, k.scale);
  }
  {  // yarn: factor, original context (default: the trained one), betas 32 / 1, magnitude 1 + 0.1 ln 4
    auto m = load(llama, both(kv_type("yarn"), kv_factor("llama.rope.scaling.factor", 4.0f)));
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    const ModelConfig::RopeYarn& y = (*m)->config().rope_yarn;
    EXPECT_EQ(y.factor, 4.0);
    EXPECT_EQ(y.original_context, (*m)->config().context_length);
    EXPECT_EQ(y.beta_fast, 32.0);
    EXPECT_EQ(y.beta_slow, 1.0);
    EXPECT_EQ(y.magnitude, 1.0 + 0.1 * std::log(4.0));
  }
  for (const char* key : {"llama.rope.scaling.yarn_log_multiplier", "llama.rope.scaling.attn_factor",
                          "llama.rope.scaling.yarn_attn_factor", "llama.rope.scaling.yarn_ext_factor"}) {
    ExpectError(load(llama, both(both(kv_type("yarn"), kv_factor("llama.rope.scaling.factor", 4.0f)), kv_factor(key, 0.5f))),
                StatusCode::kUnsupported, key);
  }
  ExpectError(load(llama, both(kv_type("longrope"), kv_factor("llama.rope.scaling.factor", 4.0f))),
              StatusCode::kUnsupported, "llama.rope.scaling.type \"longrope\"");
  ExpectError(load(llama, both(kv_type("linear"), kv_factor("llama.rope.scaling.factor", -2.0f))),
              StatusCode::kCorruption, "llama.rope.scaling.factor");
  auto freqs = [](std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> bytes) {
    return [=](testing::GgufWriter& g) { g.Tensor("rope_freqs.weight", ne, type, bytes); };
  };
  ExpectError(load(llama, freqs({3}, 0, F32Bytes({1, 2, 8}))), StatusCode::kCorruption,
              "tensor rope_freqs.weight has shape [3], expected [4] (rotary dims/2)");
  ExpectError(load(llama, freqs({4}, 1, std::vector<uint8_t>(8, 0x3c))), StatusCode::kUnsupported,
              "tensor rope_freqs.weight must be F32");
  ExpectError(load(llama, freqs({4}, 0, F32Bytes({1, 2, 0, 8}))), StatusCode::kCorruption,
              "tensor rope_freqs.weight entry 2");
  ExpectError(load(gemma, freqs({8}, 0, F32Bytes(std::vector<float>(8, 2.0f)))), StatusCode::kUnsupported,
              "tensor rope_freqs.weight");
}

// Gemma 3 with linear x8 as HF config.json and as GGUF keys: one table each side, so the two give
// the same bits (as the unscaled pair does), and the scaling changes the logits.
TEST(RopeScalingTest, GemmaLinearHfMatchesGgufBitForBit) {
  testing::ScratchDir dir("rope_gemma");
  std::string config = testing::ReadText(HfData("gemma/config.json"));
  const std::string from = "\"rope_scaling\": null", to = R"("rope_scaling": {"rope_type": "linear", "factor": 8.0})";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), to);
  dir.Write("config.json", config);
  dir.Write("model.safetensors", testing::ReadText(HfData("gemma/model.safetensors")));
  const std::string gguf_path = dir.path() + "/gemma_linear.gguf";
  RewriteGguf(HfData("gemma.gguf"), gguf_path, {}, [](testing::GgufWriter& g) {
    g.KvString("gemma3.rope.scaling.type", "linear");
    g.Kv<float>("gemma3.rope.scaling.factor", GgufType::kFloat32, 8.0f);
  });
  ASSERT_OK_AND_ASSIGN(auto hf, Model::Load(dir.path()));
  ASSERT_OK_AND_ASSIGN(auto gguf, Model::Load(gguf_path));
  ASSERT_OK_AND_ASSIGN(auto unscaled, Model::Load(HfData("gemma.gguf")));
  EXPECT_EQ(hf->config().rope_scale_factor, 8.0);
  EXPECT_EQ(gguf->config().rope_scale_factor, 8.0);
  const std::vector<int32_t> tokens = testing::ReadTokenIds(HfData("llama3_rope.tokens"));  // 100 ids < 64
  const std::vector<float> a = AllLogits(*hf, tokens), b = AllLogits(*gguf, tokens);
  EXPECT_EQ(MaxAbsDiff(a, b), 0.0f);
  EXPECT_GT(MaxAbsDiff(a, AllLogits(*unscaled, tokens)), 1e-3f);
}

}  // namespace
}  // namespace fak
