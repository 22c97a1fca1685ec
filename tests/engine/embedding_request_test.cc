// Embedding requests on the engine (EngineRequest::embed): cancellable mid-prefill, refused like any
// request when they do not fit, counted, and never leaving KV in the tree.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/model/embedding.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer = MakeByteTokenizer();
  std::unique_ptr<Engine> engine;
};

Fixture Make(size_t chunk) {
  Fixture f;
  f.model = std::move(*Model::Synthetic(ModelConfig::EmbeddedDefault(), 5));
  EngineOptions options;
  options.start_thread = false;
  options.prefill_chunk_tokens = chunk;
  f.engine = std::move(*Engine::Create(*f.model, *f.tokenizer, options));
  return f;
}

TEST(EmbeddingRequest, CancelledMidPrefillLeavesNothing) {
  Fixture f = Make(8);
  EngineRequest request;
  request.prompt = testing::TokenSequence(64, 3, 256);
  request.embed = EmbedParams{};
  ASSERT_OK_AND_ASSIGN(RequestId id, f.engine->Submit(request));
  f.engine->Step();  // reads its first chunk
  EXPECT_EQ(f.engine->Stats().running, 1u);
  ASSERT_OK(f.engine->Cancel(id));
  ASSERT_OK_AND_ASSIGN(EngineResult r, f.engine->Wait(id));
  EXPECT_EQ(r.finish, FinishReason::kCancelled);
  EXPECT_TRUE(r.embedding.empty());
  EXPECT_EQ(f.engine->tree().Stats().unique_tokens, 0u);  // its partial KV did not go to the tree
  // Control: the same request to the end gives its embedding, and still nothing in the tree.
  ASSERT_OK_AND_ASSIGN(RequestId again, f.engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(EngineResult done, f.engine->Wait(again));
  ASSERT_EQ(done.finish, FinishReason::kStopToken);
  ASSERT_OK_AND_ASSIGN(std::vector<float> alone, Embed(*f.model, request.prompt));
  EXPECT_EQ(testing::MaxAbsDiff(done.embedding, alone), 0.0f);
  EXPECT_EQ(f.engine->tree().Stats().unique_tokens, 0u);
  EXPECT_EQ(f.engine->Stats().finished, 2u);
}

TEST(EmbeddingRequest, GenerationFieldsAreIgnoredAndLimitsApply) {
  Fixture f = Make(256);
  EngineRequest request;
  request.prompt = testing::TokenSequence(10, 4, 256);
  request.embed = EmbedParams{Pooling::kLast, false};
  request.max_tokens = f.model->config().context_length;  // would not fit a generation; an embedding generates nothing
  request.sampling.temperature = 0.7f;
  ASSERT_OK_AND_ASSIGN(RequestId id, f.engine->Submit(request));
  ASSERT_OK_AND_ASSIGN(EngineResult r, f.engine->Wait(id));
  ASSERT_EQ(r.finish, FinishReason::kStopToken);
  EXPECT_TRUE(r.tokens.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<float> alone, Embed(*f.model, request.prompt, *request.embed));
  EXPECT_EQ(testing::MaxAbsDiff(r.embedding, alone), 0.0f);
  // A prompt past the context, or outside the vocabulary, is refused at Submit as any request's is.
  request.prompt.assign(f.model->config().context_length + 1, 7);
  EXPECT_EQ(f.engine->Submit(request).error().code(), StatusCode::kResourceExhausted);
  request.prompt = {1, 100000};
  EXPECT_EQ(f.engine->Submit(request).error().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fak
