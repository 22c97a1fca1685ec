// MeanPooledEmbedding: the model's final hidden states, mean-pooled; deterministic, contextual, checked.
#include <gtest/gtest.h>

#include "fak/model/embedding.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(Embedding, IsDeterministicContextualAndSized) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  const std::vector<int32_t> text = testing::TokenSequence(40, 1, 97);
  ASSERT_OK_AND_ASSIGN(std::vector<float> a, MeanPooledEmbedding(*model, text));
  ASSERT_OK_AND_ASSIGN(std::vector<float> b, MeanPooledEmbedding(*model, text));
  ASSERT_EQ(a.size(), model->config().hidden_size);
  EXPECT_EQ(testing::MaxAbsDiff(a, b), 0.0f);  // a pure function of (model, tokens)
  // Control: another text gives another vector.
  std::vector<int32_t> other = text;
  other[5] = (other[5] + 1) % 97;
  ASSERT_OK_AND_ASSIGN(std::vector<float> c, MeanPooledEmbedding(*model, other));
  EXPECT_GT(testing::MaxAbsDiff(a, c), 1e-6f);
  // Contextual: two tokens together are not the mean of each alone (the second attends to the first).
  const std::vector<int32_t> pair = {text[0], text[1]};
  ASSERT_OK_AND_ASSIGN(std::vector<float> together, MeanPooledEmbedding(*model, pair));
  ASSERT_OK_AND_ASSIGN(std::vector<float> first, MeanPooledEmbedding(*model, std::span(pair).first(1)));
  ASSERT_OK_AND_ASSIGN(std::vector<float> second, MeanPooledEmbedding(*model, std::span(pair).last(1)));
  std::vector<float> apart(first.size());
  for (size_t i = 0; i < apart.size(); ++i) apart[i] = static_cast<float>((double{first[i]} + second[i]) / 2);
  EXPECT_GT(testing::MaxAbsDiff(together, apart), 1e-6f);
}

TEST(Embedding, BadInputIsAnErrorNamingIt) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 9));
  EXPECT_EQ(MeanPooledEmbedding(*model, {}).error().code(), StatusCode::kInvalidArgument);
  const std::vector<int32_t> outside = {1, static_cast<int32_t>(model->config().vocab_size)};
  Result<std::vector<float>> bad = MeanPooledEmbedding(*model, outside);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("outside the vocabulary"), std::string_view::npos);
  const std::vector<int32_t> too_long(model->config().context_length + 1, 1);
  EXPECT_EQ(MeanPooledEmbedding(*model, too_long).error().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace fak
