// KVCache: bounds errors leave the cache unchanged; sizes account for Kraw; sessions from prefixes.
#include <gtest/gtest.h>

#include "fak/model/model.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"
#include "src/kv/kv_cache_access.h"

namespace fak {
namespace {

class KVCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *Model::Synthetic(testing::TinyConfig(), 3);
    cache_ = std::make_unique<KVCache>(model_->NewCache());
    ASSERT_OK(model_->Prefill(cache_.get(), testing::TokenSequence(20, 1, 97), LogitsMode::kNone));
    digest_ = cache_->ComputeDigest();
  }
  void ExpectUnchanged() {
    EXPECT_EQ(cache_->size(), 20u);
    EXPECT_EQ(cache_->ComputeDigest(), digest_);
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<KVCache> cache_;
  Digest digest_;
};

TEST_F(KVCacheTest, OutOfRangeCallsAreErrorsAndChangeNothing) {
  EXPECT_EQ(cache_->Evict(15, 6).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->Evict(21, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->Evict(5, SIZE_MAX).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache_->Truncate(21).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(cache_->Prefix(21).has_value());
  EXPECT_FALSE(internal::KVCacheAccess::AppendFrom(*cache_, *cache_, 0, 1).ok());
  auto other = *Model::Synthetic(testing::TinyConfig(4, 4, 16), 3);
  KVCache foreign = other->NewCache();
  EXPECT_FALSE(internal::KVCacheAccess::AppendFrom(*cache_, foreign, 0, 0).ok());
  ExpectUnchanged();
  EXPECT_OK(cache_->Evict(20, 0));  // an empty span at the end is fine
  ExpectUnchanged();
}

TEST_F(KVCacheTest, CloneIsDeepAndPrefixMatchesTruncate) {
  KVCache clone = cache_->Clone();
  EXPECT_EQ(clone.ComputeDigest(), digest_);
  ASSERT_OK(clone.Evict(3, 4));
  ExpectUnchanged();  // the original did not move
  ASSERT_OK_AND_ASSIGN(KVCache prefix, cache_->Prefix(12));
  KVCache truncated = cache_->Clone();
  ASSERT_OK(truncated.Truncate(12));
  EXPECT_EQ(prefix.ComputeDigest(), truncated.ComputeDigest());
  EXPECT_NE(prefix.ComputeDigest(), digest_);
}

TEST_F(KVCacheTest, SizeBytesCountsKrawAsOneThird) {
  const ModelConfig& c = model_->config();
  const size_t per_tensor = c.n_layers * c.n_kv_heads * 20 * c.head_dim * KVDtypeBytes(model_->kv_dtype());
  EXPECT_EQ(cache_->kraw_bytes(), per_tensor);
  EXPECT_EQ(cache_->size_bytes(), 3 * per_tensor + 20 * 2 * sizeof(int32_t));
}

TEST_F(KVCacheTest, SessionFromPrefixReusesTheCommonPrefixButKeepsOneToken) {
  auto tokens = std::vector<int32_t>(cache_->tokens().begin(), cache_->tokens().end());
  SessionStart same = SessionFromPrefix(*cache_, tokens);
  EXPECT_EQ(same.reused_tokens, 19u);
  tokens[7] = (tokens[7] + 1) % 97;
  SessionStart diverged = SessionFromPrefix(*cache_, tokens);
  EXPECT_EQ(diverged.reused_tokens, 7u);
  EXPECT_EQ(diverged.cache.size(), 7u);
}

TEST_F(KVCacheTest, AppendSharedRefusesBadSlabsAndChangesNothing) {
  KVCache fresh = model_->NewCache();
  EXPECT_EQ(internal::KVCacheAccess::AppendShared(fresh, nullptr).code(), StatusCode::kInvalidArgument);
  auto slab = std::make_shared<KVSlab>(*cache_->CopySpan(0, 4));
  slab->v.pop_back();
  EXPECT_EQ(internal::KVCacheAccess::AppendShared(fresh, slab).code(), StatusCode::kInvalidArgument);
  auto foreign = *Model::Synthetic(testing::TinyConfig(4, 4, 16), 3);
  KVCache other = foreign->NewCache();
  ASSERT_OK(foreign->Prefill(&other, testing::TokenSequence(4, 1, 97), LogitsMode::kNone));
  EXPECT_EQ(internal::KVCacheAccess::AppendShared(fresh, std::make_shared<KVSlab>(*other.CopySpan(0, 4))).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fresh.size(), 0u);
  EXPECT_EQ(fresh.shared_tokens(), 0u);
  // A slab at another position is copied and re-rotated, as AppendSlab does.
  ASSERT_OK(internal::KVCacheAccess::AppendShared(fresh, std::make_shared<KVSlab>(*cache_->CopySpan(4, 3))));
  EXPECT_EQ(fresh.shared_tokens(), 0u);
  EXPECT_EQ(fresh.size(), 3u);
}

TEST_F(KVCacheTest, ReserveRefusesPastTheContext) {
  EXPECT_EQ(cache_->Reserve(model_->config().context_length + 1).code(), StatusCode::kResourceExhausted);
  ExpectUnchanged();
}

// A prompt prefilled at once reserves room past itself, so the decode steps after it do not copy
// the cache (each growth copies every row held; after a 16k prompt that was 0.8 GB at the first
// decoded token).
TEST_F(KVCacheTest, DecodingAfterAPromptDoesNotGrowTheCache) {
  KVCache cache = model_->NewCache();
  ASSERT_OK(model_->Prefill(&cache, testing::TokenSequence(64, 1, 97), LogitsMode::kLast));
  const size_t after_prompt = cache.allocated_bytes();
  for (int32_t t = 0; t < 8; ++t) ASSERT_OK(model_->Decode(&cache, t + 5).status());
  EXPECT_EQ(cache.allocated_bytes(), after_prompt);
  // Past the room it does grow (non-vacuity: allocated_bytes follows the storage).
  ASSERT_OK(cache.Reserve(cache.size() + 64));
  EXPECT_GT(cache.allocated_bytes(), after_prompt);
}

}  // namespace
}  // namespace fak
