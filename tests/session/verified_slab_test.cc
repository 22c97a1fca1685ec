// The radix tree binds a slab the gate verified on page-in with the checksum it was verified with
// (src/session/verified_slab.h) instead of hashing it again — and only that slab, whole.
#include <gtest/gtest.h>

#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/kv/kv_cache_access.h"
#include "src/session/verified_slab.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

class RadixTreeVerifiedSlab : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *Model::Synthetic(testing::TinyConfig(), 3);
    for (int32_t i = 0; i < 24; ++i) tokens_.push_back(3 + (i * 7) % 40);
    KVCache full = model_->NewCache();
    ASSERT_TRUE(model_->Prefill(&full, tokens_, LogitsMode::kNone).has_value());
    slab_ = *full.CopySpan(0, tokens_.size());
    real_ = KVSlabChecksum(slab_);
  }
  // A fresh tree's manifest checksum for tokens_ inserted from a cache that reads `slab` in place.
  Digest InsertedChecksum(std::shared_ptr<const KVSlab> slab, std::vector<NodeId>* damaged = nullptr) {
    RadixTree tree(*model_, *tokenizer_);
    KVCache cache = model_->NewCache();
    EXPECT_OK(internal::KVCacheAccess::AppendShared(cache, std::move(slab)));
    EXPECT_OK(tree.Insert(tokens_, cache));
    Result<NodeId> node = tree.FindNode(tokens_);
    EXPECT_TRUE(node.has_value());
    if (damaged != nullptr) *damaged = tree.VerifyIntegrity();
    return tree.ManifestOf(*node)->binding.integrity_checksum;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_ = MakeByteTokenizer();
  std::vector<int32_t> tokens_;
  KVSlab slab_;
  Digest real_;
};

TEST_F(RadixTreeVerifiedSlab, TakesTheVerifiedChecksumOfAWholeSlabWithoutHashing) {
  // A checksum that does not match the bytes shows which one the tree used: it took the one the
  // slab carries (VerifyIntegrity, which re-hashes, then flags the node). Only the pager can make
  // such a slab, right after the gate compared exactly this checksum with the bytes.
  Digest planted = real_;
  planted.bytes[0] ^= 1;
  std::vector<NodeId> damaged;
  EXPECT_EQ(InsertedChecksum(internal::MakeVerifiedSlab(slab_, planted), &damaged), planted);
  EXPECT_EQ(damaged.size(), 1u);
  // Controls: the verified (true) checksum is kept and verifies; an untagged slab is hashed.
  EXPECT_EQ(InsertedChecksum(internal::MakeVerifiedSlab(slab_, real_), &damaged), real_);
  EXPECT_TRUE(damaged.empty());
  EXPECT_EQ(InsertedChecksum(std::make_shared<const KVSlab>(slab_), &damaged), real_);
  EXPECT_TRUE(damaged.empty());
}

TEST_F(RadixTreeVerifiedSlab, AnAliasOrSliceCarriesNoChecksum) {
  Digest planted = real_;
  planted.bytes[0] ^= 1;
  const std::shared_ptr<const KVSlab> verified = internal::MakeVerifiedSlab(slab_, planted);
  ASSERT_NE(internal::VerifiedChecksumOf(verified), nullptr);
  // Another object sharing the control block is not the verified slab.
  auto other = std::make_shared<const KVSlab>(slab_.Slice(0, 8));
  const std::shared_ptr<const KVSlab> alias(verified, other.get());
  EXPECT_EQ(internal::VerifiedChecksumOf(alias), nullptr);
  EXPECT_EQ(internal::VerifiedChecksumOf(other), nullptr);
}

}  // namespace
}  // namespace fak
