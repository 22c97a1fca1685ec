// Model: oracle agreement with the double-precision Eigen reference, config validation and bad
// input that leaves the cache untouched.
#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "fak/model/model.h"
#include "src/model/model_impl.h"
#include "tests/model/reference_forward.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::TinyConfig;
using testing::TokenSequence;

struct OracleCase {
  size_t n_heads, n_kv_heads, head_dim;
  RopePairing pairing;
};

TEST(Model, AgreesWithDoublePrecisionOracle) {
  // GQA ratios 1, 2, 3, 4; odd head counts; both RoPE pairings.
  const OracleCase cases[] = {{4, 4, 16, RopePairing::kSplitHalf}, {4, 2, 16, RopePairing::kAdjacent},
                              {9, 3, 8, RopePairing::kSplitHalf},  {3, 3, 24, RopePairing::kAdjacent},
                              {8, 2, 16, RopePairing::kAdjacent},  {5, 1, 12, RopePairing::kSplitHalf}};
  for (const OracleCase& oc : cases) {
    ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(oc.n_heads, oc.n_kv_heads, oc.head_dim, oc.pairing), 5));
    const auto tokens = TokenSequence(37, 2, model->config().vocab_size);
    KVCache cache = model->NewCache();
    ASSERT_OK_AND_ASSIGN(auto logits, model->Prefill(&cache, tokens, LogitsMode::kAll));
    testing::MatrixD ref = testing::ReferenceLogits(*model, tokens);
    double max_ref = ref.cwiseAbs().maxCoeff(), max_err = 0;
    for (size_t i = 0; i < logits.size(); ++i) max_err = std::max(max_err, std::abs(logits[i] - ref.data()[i]));
    // Target: 1e-4 relative to the largest logit (f32 accumulation over 2 layers).
    EXPECT_LT(max_err / max_ref, 1e-4) << oc.n_heads << "/" << oc.n_kv_heads << " hd" << oc.head_dim;
    // Non-vacuity: the oracle for another prompt is far from these logits.
    testing::MatrixD other = testing::ReferenceLogits(*model, TokenSequence(37, 3, model->config().vocab_size));
    EXPECT_GT((other - ref).cwiseAbs().maxCoeff(), 1e-2);
  }
}

TEST(Model, ConfigValidationNamesTheField) {
  ModelConfig c = TinyConfig();
  c.n_kv_heads = 3;
  Status s = c.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_kv_heads"), std::string_view::npos) << s.ToString();
  c = TinyConfig();
  c.hidden_size += 1;
  s = c.Validate();
  EXPECT_NE(s.message().find("hidden_size"), std::string_view::npos) << s.ToString();
  c = TinyConfig();
  c.head_dim = 15;
  c.hidden_size = 60;
  EXPECT_FALSE(c.Validate().ok());
  EXPECT_FALSE(Model::Synthetic(c, 1).has_value());
  // Products of sizes cannot wrap: each size is bounded before any is multiplied (issue 20 D1).
  c = TinyConfig(4, 2, 16);
  c.head_dim = (size_t{1} << 62) + 16;  // 4 x head_dim wraps to hidden_size 64
  s = c.Validate();
  EXPECT_NE(s.message().find("head_dim"), std::string_view::npos) << s.ToString();
  c = TinyConfig();
  c.rms_eps = std::numeric_limits<float>::infinity();
  EXPECT_NE(c.Validate().message().find("rms_eps"), std::string_view::npos);
  EXPECT_OK(ModelConfig::EmbeddedDefault().Validate());
  EXPECT_OK(ModelConfig::SmolLM2_135M_Shape().Validate());
  EXPECT_OK(ModelConfig::TinyLlama_1_1B_Shape().Validate());
}

// Issue 20: a NaN weight used to give NaN logits, which sampled to an empty answer with success.
// A thread count past kMaxModelThreads is an error naming the limit, checked before anything is
// built or read (before the fix, 100000 threads aborted the process when the OS refused one).
TEST(Model, AThreadCountPastTheLimitIsAnErrorNotAnAbort) {
  ModelOptions options;
  options.n_threads = 100000;
  auto expect_refused = [](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("limit of " + std::to_string(kMaxModelThreads)), std::string_view::npos) << s.ToString();
  };
  expect_refused(Model::Synthetic(testing::TinyConfig(), 1, options).error());
  expect_refused(Model::Load("/nonexistent/model.gguf", options).error());  // the count is checked first
  options.n_threads = kMaxModelThreads + 1;
  expect_refused(Model::Synthetic(testing::TinyConfig(), 1, options).error());
  // Control: an ordinary count builds the model.
  options.n_threads = 3;
  EXPECT_TRUE(Model::Synthetic(testing::TinyConfig(), 1, options).has_value());
}

TEST(Model, NonFiniteLogitsAreAnErrorAndLeaveTheCacheUnchanged) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(), 3));
  KVCache cache = model->NewCache();
  ASSERT_OK(model->Prefill(&cache, TokenSequence(4, 1, TinyConfig().vocab_size)));
  const Digest before = cache.ComputeDigest();
  ASSERT_OK(model->Decode(&cache, 7));  // control: the healthy model decodes
  ASSERT_OK(cache.Truncate(4));
  // Poison one output-norm weight (synthetic weights are the model's own writable buffers).
  const internal::WeightTensor& norm = internal::ModelAccess::Get(*model).weights.output_norm;
  const_cast<float*>(norm.f32())[3] = std::numeric_limits<float>::quiet_NaN();
  Result<std::vector<float>> r = model->Decode(&cache, 7);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption);
  EXPECT_NE(r.error().message().find("non-finite"), std::string_view::npos) << r.error().ToString();
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.ComputeDigest(), before);
  const std::vector<int32_t> more = TokenSequence(2, 5, TinyConfig().vocab_size);
  const BatchItem items[] = {{&cache, more, LogitsMode::kLast}};
  EXPECT_FALSE(model->PrefillBatch(items).has_value());
  EXPECT_EQ(cache.ComputeDigest(), before);
}

TEST(Model, BadInputIsAnErrorAndLeavesTheCacheUnchanged) {
  ModelConfig c = TinyConfig();
  c.context_length = 16;
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(c, 1));
  KVCache cache = model->NewCache();
  ASSERT_OK(model->Prefill(&cache, TokenSequence(5, 1, c.vocab_size)));
  const Digest before = cache.ComputeDigest();

  auto expect_rejected = [&](Result<std::vector<float>> r, StatusCode code, const char* needle) {
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), code) << r.error().ToString();
    EXPECT_NE(r.error().message().find(needle), std::string_view::npos) << r.error().ToString();
    EXPECT_EQ(cache.size(), 5u);
    EXPECT_EQ(cache.ComputeDigest(), before);
  };
  expect_rejected(model->Prefill(&cache, std::vector<int32_t>{}), StatusCode::kInvalidArgument, "empty");
  expect_rejected(model->Prefill(&cache, std::vector<int32_t>{1, 97}), StatusCode::kInvalidArgument, "97");
  expect_rejected(model->Decode(&cache, -1), StatusCode::kInvalidArgument, "-1");
  expect_rejected(model->Prefill(&cache, TokenSequence(12, 2, c.vocab_size)), StatusCode::kResourceExhausted, "context");
  ASSERT_OK_AND_ASSIGN(auto other, Model::Synthetic(TinyConfig(), 1));
  KVCache foreign = other->NewCache();
  EXPECT_FALSE(model->Prefill(&foreign, std::vector<int32_t>{1}).has_value());
  EXPECT_FALSE(model->Prefill(nullptr, std::vector<int32_t>{1}).has_value());
  // Filling the context exactly is fine.
  EXPECT_OK(model->Prefill(&cache, TokenSequence(11, 2, c.vocab_size)));
  EXPECT_EQ(cache.size(), 16u);
}

TEST(Model, SyntheticIsDeterministicAndSeedSensitive) {
  ASSERT_OK_AND_ASSIGN(auto a, Model::Synthetic(TinyConfig(), 42));
  ASSERT_OK_AND_ASSIGN(auto b, Model::Synthetic(TinyConfig(), 42));
  ASSERT_OK_AND_ASSIGN(auto c, Model::Synthetic(TinyConfig(), 43));
  EXPECT_EQ(a->WeightsDigest(), b->WeightsDigest());
  EXPECT_NE(a->WeightsDigest(), c->WeightsDigest());
  // Context-sensitive: next-token argmax varies across prompts.
  std::set<size_t> argmaxes;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    KVCache cache = a->NewCache();
    ASSERT_OK_AND_ASSIGN(auto logits, a->Prefill(&cache, TokenSequence(9, seed, 97)));
    argmaxes.insert(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  EXPECT_GE(argmaxes.size(), 4u);
}

}  // namespace
}  // namespace fak
