// Exactness witnesses for the forward pass (architecture §2): prefill ≡ cached decode and
// batched ≡ serial prefill, compared on full logit vectors at max|Δ| == 0 in the active tier
// (ctest runs this binary once per tier). Each witness has a non-vacuity control.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fak/model/model.h"
#include "kernels/dispatch.h"
#include "src/model/model_impl.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TinyConfig;
using testing::TokenSequence;

// In every architecture (test_models.h): Qwen2's biases, Qwen3's QK-norm, Phi-3's partial rotary,
// SmolLM3's NoPE layers, Gemma 2's soft-capping and Gemma's sliding windows.
class CachedDecodeWitness : public ::testing::TestWithParam<ModelConfig> {};

TEST_P(CachedDecodeWitness, CachedDecodeMatchesPrefill) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(GetParam(), 7));
  const auto tokens = TokenSequence(40, 1, model->config().vocab_size);
  KVCache decode_cache = model->NewCache();
  for (size_t step = 0; step < tokens.size(); ++step) {
    ASSERT_OK_AND_ASSIGN(auto decoded, model->Decode(&decode_cache, tokens[step]));
    KVCache fresh = model->NewCache();
    std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + step + 1);
    ASSERT_OK_AND_ASSIGN(auto prefilled, model->Prefill(&fresh, prefix, LogitsMode::kLast));
    ASSERT_EQ(MaxAbsDiff(decoded, prefilled), 0.0f) << "step " << step;
    ASSERT_EQ(decode_cache.ComputeDigest(), fresh.ComputeDigest()) << "step " << step;
  }
  // Non-vacuity: the compared logits depend on the cached context — change the first token and
  // the last step's logits move.
  auto altered = tokens;
  altered[0] = (altered[0] + 1) % static_cast<int32_t>(model->config().vocab_size);
  KVCache a = model->NewCache(), b = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto la, model->Prefill(&a, tokens));
  ASSERT_OK_AND_ASSIGN(auto lb, model->Prefill(&b, altered));
  EXPECT_GT(MaxAbsDiff(la, lb), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Witness, CachedDecodeWitness, ::testing::ValuesIn(testing::ArchitectureConfigs()),
                         [](const ::testing::TestParamInfo<ModelConfig>& info) {
                           std::string name = ArchitectureName(info.param.architecture);
                           std::replace(name.begin(), name.end(), '-', '_');  // gtest names: [A-Za-z0-9_]
                           return name + (info.param.qkv_bias ? "_qkv_bias" : "");
                         });

// The same on loaded Q8_0 files, whose projections run packed eight rows at a time (kernels
// revision 3): a 40-token prefill against token-by-token decode, Llama, Gemma 3 (sliding layers) and
// gpt-oss (Q8_0 attention, packed MXFP4 experts, sinks, sliding layers).
TEST(Witness, PackedQ8_0DecodeMatchesPrefill) {
  for (const char* name : {"llama_q8_0.gguf", "gemma3_q8_0.gguf", "gptoss_mxfp4.gguf"}) {
    SCOPED_TRACE(name);
    ASSERT_OK_AND_ASSIGN(auto model, Model::Load(std::string(FAK_TEST_DATA_DIR) + "/llama_cpp/" + name));
    ASSERT_NE(internal::ModelAccess::Get(*model).weights.layers[0].wq.packed, nullptr);  // the packed path is the one tested
    // The tied head too: the prefill's 40 rows run it as one packed matmul (AMX on the avx512 tier
    // where the CPU has it), each decode as one packed row (VNNI).
    ASSERT_NE(internal::ModelAccess::Get(*model).weights.output.packed, nullptr);
    const auto tokens = TokenSequence(40, 3, model->config().vocab_size);
    KVCache prefilled = model->NewCache(), decoded = model->NewCache();
    ASSERT_OK_AND_ASSIGN(auto all, model->Prefill(&prefilled, tokens, LogitsMode::kAll));
    const size_t vocab = model->config().vocab_size;
    for (size_t i = 0; i < tokens.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(auto step, model->Decode(&decoded, tokens[i]));
      ASSERT_EQ(MaxAbsDiff(step, std::vector<float>(all.begin() + i * vocab, all.begin() + (i + 1) * vocab)), 0.0f)
          << "position " << i;
    }
    EXPECT_EQ(prefilled.ComputeDigest(), decoded.ComputeDigest());
    // Non-vacuity: the logits depend on the earlier tokens through the packed projections.
    auto altered = tokens;
    altered[0] = (altered[0] + 1) % static_cast<int32_t>(vocab);
    KVCache other = model->NewCache();
    ASSERT_OK_AND_ASSIGN(auto moved, model->Prefill(&other, altered, LogitsMode::kLast));
    EXPECT_GT(MaxAbsDiff(moved, std::vector<float>(all.end() - vocab, all.end())), 0.0f);
  }
}

TEST(Witness, PrefillBatchedMatchesSerial) {
  for (size_t threads : {1, 2}) {
    ModelOptions options;
    options.n_threads = threads;
    ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(6, 2, 16), 11, options));
    for (size_t n : {1, 7, 64, 300}) {
      const auto tokens = TokenSequence(n, static_cast<uint32_t>(n), model->config().vocab_size);
      KVCache batched = model->NewCache(), serial = model->NewCache();
      ASSERT_OK_AND_ASSIGN(auto all, model->Prefill(&batched, tokens, LogitsMode::kAll));
      ASSERT_EQ(all.size(), n * model->config().vocab_size);
      const size_t vocab = model->config().vocab_size;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_OK_AND_ASSIGN(auto row, model->Prefill(&serial, std::span<const int32_t>(&tokens[i], 1), LogitsMode::kLast));
        std::vector<float> batched_row(all.begin() + i * vocab, all.begin() + (i + 1) * vocab);
        ASSERT_EQ(MaxAbsDiff(row, batched_row), 0.0f) << "threads " << threads << " n " << n << " row " << i;
      }
      EXPECT_EQ(batched.ComputeDigest(), serial.ComputeDigest()) << "threads " << threads << " n " << n;
    }
  }
  // Non-vacuity: rows of one prompt differ from each other (the comparison could tell them apart).
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(), 11));
  KVCache c = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto all, model->Prefill(&c, TokenSequence(3, 3, 97), LogitsMode::kAll));
  std::vector<float> r0(all.begin(), all.begin() + 97), r2(all.begin() + 194, all.end());
  EXPECT_GT(MaxAbsDiff(r0, r2), 1e-4f);
}

TEST(Witness, ThreadCountDoesNotChangeLogits) {
  const auto tokens = TokenSequence(33, 5, 97);
  std::vector<float> reference;
  for (size_t threads : {1, 2, 3}) {
    ModelOptions options;
    options.n_threads = threads;
    ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(), 3, options));
    KVCache c = model->NewCache();
    ASSERT_OK_AND_ASSIGN(auto logits, model->Prefill(&c, tokens, LogitsMode::kAll));
    if (reference.empty()) reference = logits;
    EXPECT_EQ(MaxAbsDiff(reference, logits), 0.0f) << threads << " threads";
  }
}

// Across tiers the contract is argmax-exact within a stated tolerance, never bit-identity.
TEST(Witness, CrossTierArgmaxEqualWithinTolerance) {
  const kernels::Tier original = kernels::ActiveTier();
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(8, 2, 16), 21));
  const auto tokens = TokenSequence(64, 9, 97);
  std::vector<std::pair<kernels::Tier, std::vector<float>>> results;
  for (kernels::Tier tier : kernels::SupportedTiers()) {
    ASSERT_OK(kernels::SetTier(tier));
    KVCache c = model->NewCache();
    ASSERT_OK_AND_ASSIGN(auto logits, model->Prefill(&c, tokens, LogitsMode::kAll));
    results.emplace_back(tier, std::move(logits));
  }
  ASSERT_OK(kernels::SetTier(original));
  const size_t vocab = 97;
  for (size_t r = 1; r < results.size(); ++r) {
    const auto& a = results[0].second;
    const auto& b = results[r].second;
    float diff = MaxAbsDiff(a, b);
    // Tolerance: f32 rounding differences (FMA vs two roundings, lane order) through 2 layers at
    // unit-scale activations stay far below 1e-3; logits here have std ≈ 3.
    EXPECT_LT(diff, 1e-3f) << kernels::TierName(results[r].first);
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto row_a = a.begin() + i * vocab, row_b = b.begin() + i * vocab;
      EXPECT_EQ(std::max_element(row_a, row_a + vocab) - row_a, std::max_element(row_b, row_b + vocab) - row_b)
          << "row " << i << " tier " << kernels::TierName(results[r].first);
    }
    std::printf("[cross-tier] %s vs %s: max|dlogit| = %.3g (%s)\n", kernels::TierName(results[0].first).data(),
                kernels::TierName(results[r].first).data(), diff, diff == 0.0f ? "bit-identical" : "NOT bit-identical");
  }
}

}  // namespace
}  // namespace fak
