// Model::PrefillBatch: several sequences in one forward pass give, per sequence, the bits a
// separate Prefill gives (logits at max|Δ| == 0 and the cache digest), in the active tier (ctest
// runs this binary once per tier). Controls show the batch really mixes sequences whose answers
// differ, and a rejected batch changes no cache.
#include <gtest/gtest.h>

#include "fak/model/model.h"
#include "src/model/model_impl.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TinyConfig;
using testing::TokenSequence;

// One sequence's state and the tokens it appends.
struct Seq {
  std::vector<int32_t> history;  // prefilled before the batch
  std::vector<int32_t> tokens;
  LogitsMode mode;
};

// Runs `seqs` once through PrefillBatch and once one by one through Prefill, and checks each pair.
void ExpectBatchEqualsSeparate(const Model& model, const std::vector<Seq>& seqs) {
  std::vector<KVCache> batched, separate;
  for (const Seq& s : seqs) {
    for (auto* caches : {&batched, &separate}) {
      caches->push_back(model.NewCache());
      if (!s.history.empty()) ASSERT_OK(model.Prefill(&caches->back(), s.history, LogitsMode::kNone));
    }
  }
  std::vector<BatchItem> items;
  for (size_t i = 0; i < seqs.size(); ++i) items.push_back({&batched[i], seqs[i].tokens, seqs[i].mode});
  ASSERT_OK_AND_ASSIGN(auto got, model.PrefillBatch(items));
  ASSERT_EQ(got.size(), seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_OK_AND_ASSIGN(auto want, model.Prefill(&separate[i], seqs[i].tokens, seqs[i].mode));
    ASSERT_EQ(got[i].size(), want.size()) << "item " << i;
    EXPECT_EQ(MaxAbsDiff(got[i], want), 0.0f) << "item " << i;
    EXPECT_EQ(batched[i].ComputeDigest(), separate[i].ComputeDigest()) << "item " << i;
  }
}

TEST(Witness, BatchedSequencesEqualSeparatePrefills) {
  ModelConfig config = TinyConfig();
  config.context_length = 1024;
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 41));
  const size_t v = config.vocab_size;
  // A fresh prompt, a continuation of a cached history, a one-token decode step, a fill-only item,
  // and one longer than a forward step (512 rows), so the batch spans steps mid-item.
  ExpectBatchEqualsSeparate(*model, {{{}, TokenSequence(37, 1, v), LogitsMode::kAll},
                                     {TokenSequence(50, 2, v), TokenSequence(9, 3, v), LogitsMode::kLast},
                                     {TokenSequence(20, 4, v), {5}, LogitsMode::kLast},
                                     {TokenSequence(3, 5, v), TokenSequence(11, 6, v), LogitsMode::kNone},
                                     {{}, TokenSequence(600, 7, v), LogitsMode::kLast},
                                     {TokenSequence(8, 8, v), TokenSequence(30, 9, v), LogitsMode::kAll}});

  // Non-vacuity: the same token appended to two different histories gives different logits, so a
  // batch that mixed up caches or positions could not pass the comparison above.
  KVCache a = model->NewCache(), b = model->NewCache();
  ASSERT_OK(model->Prefill(&a, TokenSequence(20, 4, v), LogitsMode::kNone));
  ASSERT_OK(model->Prefill(&b, TokenSequence(21, 10, v), LogitsMode::kNone));
  const int32_t token = 5;
  const std::vector<BatchItem> items = {{&a, std::span(&token, 1)}, {&b, std::span(&token, 1)}};
  ASSERT_OK_AND_ASSIGN(auto step, model->PrefillBatch(items));
  EXPECT_GT(MaxAbsDiff(step[0], step[1]), 1e-4f);
}

// A decode step for many sessions at once, in every architecture (Gemma's sliding-window layers,
// Qwen2's biases, Qwen3's QK-norm, Phi-3's partial rotary, SmolLM3's NoPE layers, Gemma 2's caps).
TEST(Witness, BatchedDecodeStepEqualsSeparateDecodes) {
  for (const ModelConfig& config : testing::ArchitectureConfigs()) {
    SCOPED_TRACE(config.Describe());
    ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(config, 43));
    std::vector<Seq> seqs;
    for (uint32_t s = 0; s < 8; ++s) {
      seqs.push_back({TokenSequence(3 + 4 * s, 20 + s, config.vocab_size), {static_cast<int32_t>(s)}, LogitsMode::kLast});
    }
    ExpectBatchEqualsSeparate(*model, seqs);
  }
}

// gpt-oss as llama.cpp's quantizer writes it (MXFP4 experts, packed; Q8_0 attention): a decode step
// for eight sessions and a prompt, batched, equal their separate runs. Each token picks 4 of 8
// experts from its own router logits, so batching changes neither its experts nor its bits.
TEST(Witness, GptOssMxfp4BatchedEqualsAlone) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Load(std::string(FAK_TEST_DATA_DIR) + "/llama_cpp/gptoss_mxfp4.gguf"));
  const auto& layer = internal::ModelAccess::Get(*model).weights.layers[0];
  ASSERT_EQ(layer.experts[0].gate.dtype, internal::DType::kMXFP4);
  ASSERT_NE(layer.experts[0].down.packed, nullptr);
  const size_t v = model->config().vocab_size;
  std::vector<Seq> seqs;
  for (uint32_t s = 0; s < 8; ++s) {
    seqs.push_back({TokenSequence(3 + 4 * s, 20 + s, v), {static_cast<int32_t>(s + 3)}, LogitsMode::kLast});
  }
  seqs.push_back({TokenSequence(10, 40, v), TokenSequence(30, 41, v), LogitsMode::kAll});
  ExpectBatchEqualsSeparate(*model, seqs);
}

TEST(PrefillBatch, BadItemsAreRefusedAndNoCacheChanges) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(TinyConfig(), 47));
  ASSERT_OK_AND_ASSIGN(auto other, Model::Synthetic(TinyConfig(2, 1, 16), 47));
  KVCache a = model->NewCache(), b = model->NewCache(), foreign = other->NewCache();
  ASSERT_OK(model->Prefill(&a, TokenSequence(6, 1, 97), LogitsMode::kNone));
  const Digest a_before = a.ComputeDigest(), b_before = b.ComputeDigest();
  const std::vector<int32_t> good = {1, 2, 3}, bad = {1, 97}, empty;
  struct Case {
    std::vector<BatchItem> items;
    StatusCode code;
    std::string needle;
  };
  const Case cases[] = {
      {{}, StatusCode::kInvalidArgument, "no items"},
      {{{&a, good}, {&b, bad}}, StatusCode::kInvalidArgument, "item 1: token id 97 at index 1"},
      {{{&a, good}, {&a, good}}, StatusCode::kInvalidArgument, "item 1: its cache is also an earlier item's"},
      {{{&a, good}, {nullptr, good}}, StatusCode::kInvalidArgument, "item 1: cache is null"},
      {{{&b, empty}}, StatusCode::kInvalidArgument, "item 0: empty prompt"},
      {{{&a, good}, {&foreign, good}}, StatusCode::kInvalidArgument, "item 1: the cache was made by a different model"},
  };
  for (const Case& c : cases) {
    auto r = model->PrefillBatch(c.items);
    ASSERT_FALSE(r.has_value()) << c.needle;
    EXPECT_EQ(r.error().code(), c.code) << r.error().ToString();
    EXPECT_NE(r.error().message().find(c.needle), std::string::npos) << r.error().ToString();
    EXPECT_EQ(a.ComputeDigest(), a_before);
    EXPECT_EQ(b.ComputeDigest(), b_before);
    EXPECT_EQ(a.size(), 6u);
    EXPECT_EQ(b.size(), 0u);
  }
  const std::vector<int32_t> too_long(model->config().context_length, 1);
  auto overflow = model->PrefillBatch(std::vector<BatchItem>{{&b, good}, {&a, too_long}});
  ASSERT_FALSE(overflow.has_value());
  EXPECT_EQ(overflow.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(a.ComputeDigest(), a_before);
}

}  // namespace
}  // namespace fak
