// Embed and HiddenPooler: final hidden states pooled (mean, last, cls), unit length when asked;
// deterministic, contextual, independent of how the rows were chunked, checked.
#include <gtest/gtest.h>

#include <cmath>

#include "fak/model/embedding.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(Embedding, IsDeterministicContextualAndSized) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  const std::vector<int32_t> text = testing::TokenSequence(40, 1, 97);
  const EmbedParams raw_mean{Pooling::kMean, false};
  ASSERT_OK_AND_ASSIGN(std::vector<float> a, Embed(*model, text, raw_mean));
  ASSERT_OK_AND_ASSIGN(std::vector<float> b, Embed(*model, text, raw_mean));
  ASSERT_EQ(a.size(), model->config().hidden_size);
  EXPECT_EQ(testing::MaxAbsDiff(a, b), 0.0f);  // a pure function of (model, tokens)
  // Control: another text gives another vector.
  std::vector<int32_t> other = text;
  other[5] = (other[5] + 1) % 97;
  ASSERT_OK_AND_ASSIGN(std::vector<float> c, Embed(*model, other, raw_mean));
  EXPECT_GT(testing::MaxAbsDiff(a, c), 1e-6f);
  // Contextual: two tokens together are not the mean of each alone (the second attends to the first).
  const std::vector<int32_t> pair = {text[0], text[1]};
  ASSERT_OK_AND_ASSIGN(std::vector<float> together, Embed(*model, pair, raw_mean));
  ASSERT_OK_AND_ASSIGN(std::vector<float> first, Embed(*model, std::span(pair).first(1), raw_mean));
  ASSERT_OK_AND_ASSIGN(std::vector<float> second, Embed(*model, std::span(pair).last(1), raw_mean));
  std::vector<float> apart(first.size());
  for (size_t i = 0; i < apart.size(); ++i) apart[i] = static_cast<float>((double{first[i]} + second[i]) / 2);
  EXPECT_GT(testing::MaxAbsDiff(together, apart), 1e-6f);
}

TEST(Embedding, PoolingsReadTheRowsTheyName) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  const std::vector<int32_t> text = testing::TokenSequence(12, 3, 97);
  const size_t h = model->config().hidden_size;
  KVCache cache = model->NewCache();
  ASSERT_OK_AND_ASSIGN(std::vector<float> rows, model->Prefill(&cache, text, LogitsMode::kHidden));
  ASSERT_EQ(rows.size(), text.size() * h);
  ASSERT_OK_AND_ASSIGN(std::vector<float> last, Embed(*model, text, {Pooling::kLast, false}));
  ASSERT_OK_AND_ASSIGN(std::vector<float> cls, Embed(*model, text, {Pooling::kCls, false}));
  EXPECT_EQ(testing::MaxAbsDiff(last, std::vector<float>(rows.end() - static_cast<std::ptrdiff_t>(h), rows.end())), 0.0f);
  EXPECT_EQ(testing::MaxAbsDiff(cls, std::vector<float>(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(h))), 0.0f);
  EXPECT_GT(testing::MaxAbsDiff(last, cls), 1e-6f);  // control: they are different rows
  // Chunked as the engine reads a prompt, the pooled bits do not change.
  for (Pooling p : {Pooling::kMean, Pooling::kLast, Pooling::kCls}) {
    SCOPED_TRACE(PoolingName(p));
    ASSERT_OK_AND_ASSIGN(std::vector<float> whole, Embed(*model, text, {p, true}));
    HiddenPooler pooler({p, true}, h);
    pooler.Add(std::span(rows).first(5 * h));
    pooler.Add(std::span(rows).subspan(5 * h, h));
    pooler.Add(std::span(rows).subspan(6 * h));
    ASSERT_OK_AND_ASSIGN(std::vector<float> chunked, pooler.Finish());
    EXPECT_EQ(testing::MaxAbsDiff(whole, chunked), 0.0f);
    double square = 0.0;
    for (float x : whole) square += double{x} * x;
    EXPECT_NEAR(std::sqrt(square), 1.0, 1e-6);  // normalized as OpenAI's are
  }
}

TEST(Embedding, BadInputIsAnErrorNamingIt) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  EXPECT_EQ(Embed(*model, {}).error().code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> outside = {1, static_cast<int32_t>(model->config().vocab_size)};
  Result<std::vector<float>> bad = Embed(*model, outside);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("outside the vocabulary"), std::string_view::npos);
  const std::vector<int32_t> too_long(model->config().context_length + 1, 1);
  EXPECT_EQ(Embed(*model, too_long).error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(HiddenPooler({}, 4).Finish().error().code(), StatusCode::kInvalidArgument);
  Result<Pooling> pooling = ParsePooling("max");
  ASSERT_FALSE(pooling.has_value());
  EXPECT_NE(pooling.error().message().find("mean, last, cls"), std::string_view::npos);
  ASSERT_OK_AND_ASSIGN(Pooling cls, ParsePooling("cls"));
  EXPECT_EQ(cls, Pooling::kCls);
}

}  // namespace
}  // namespace fak
