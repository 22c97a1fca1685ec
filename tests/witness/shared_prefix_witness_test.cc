// Zero-copy sessions: a cache that reads its prefix in place from shared slabs (KVCache::AppendShared,
// what a radix-tree lookup hands out) gives the logits, digest and span surgery of the same cache
// holding copies, bit for bit; and it really reads the slabs (changing one changes the logits).
#include <gtest/gtest.h>

#include "fak/model/model.h"
#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"
#include "src/kv/kv_cache_access.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TokenSequence;

struct SharedPrefixCase {
  std::unique_ptr<Model> model;
  std::vector<int32_t> tokens = TokenSequence(40, 7, 97);  // 26 prefix tokens, then a 14-token suffix
  std::vector<std::shared_ptr<KVSlab>> slabs;              // the prefix as three slabs: [0,9) [9,10) [10,26)
  KVCache copied = internal::KVCacheAccess::Make(KVShape{}, nullptr);  // the prefix as own rows

  explicit SharedPrefixCase(ModelConfig config) {
    model = *Model::Synthetic(config, 21);
    KVCache full = model->NewCache();
    EXPECT_OK(model->Prefill(&full, std::span(tokens).first(26), LogitsMode::kNone));
    for (auto [from, n] : {std::pair<size_t, size_t>{0, 9}, {9, 1}, {10, 16}})
      slabs.push_back(std::make_shared<KVSlab>(*full.CopySpan(from, n)));
    copied = *full.Prefix(26);
  }
  KVCache Shared() const {
    KVCache c = model->NewCache();
    for (const auto& slab : slabs) EXPECT_OK(internal::KVCacheAccess::AppendShared(c, slab));
    return c;
  }
};

// Gemma 3 with a sliding window shorter than a slab: windows start inside shared slabs.
ModelConfig SlidingGemma() {
  ModelConfig c = testing::TinyConfig(4, 1, 16, RopePairing::kSplitHalf, 7);
  c.architecture = Architecture::kGemma3;
  c.hidden_size = 96;
  c.sliding_window = 5;
  return c;
}

TEST(Witness, SharedPrefixSessionMatchesCopy) {
  for (const ModelConfig& config : {testing::TinyConfig(4, 2, 16), SlidingGemma()}) {
    SharedPrefixCase w(config);
    KVCache shared = w.Shared();
    ASSERT_EQ(shared.shared_tokens(), 26u);
    EXPECT_EQ(w.slabs[0].use_count(), 2);  // held, not copied
    EXPECT_EQ(shared.ComputeDigest(), w.copied.ComputeDigest());

    const auto suffix = std::span(w.tokens).subspan(26);
    ASSERT_OK_AND_ASSIGN(auto want, w.model->Prefill(&w.copied, suffix, LogitsMode::kAll));
    ASSERT_OK_AND_ASSIGN(auto got, w.model->Prefill(&shared, suffix, LogitsMode::kAll));
    EXPECT_EQ(MaxAbsDiff(got, want), 0.0f) << config.Describe();
    EXPECT_EQ(shared.ComputeDigest(), w.copied.ComputeDigest());
    EXPECT_EQ(shared.shared_tokens(), 26u);  // the suffix went to own rows

    // Non-vacuity: the shared session reads the slab in place, so changing one value (layer 0,
    // token 25: inside every window) changes the logits (the copy, made before, does not see it).
    KVCache again = w.Shared();
    const size_t elem = w.slabs[2]->shape.elem_bytes();  // the top byte's low bit: a visible change in any dtype
    w.slabs[2]->v[(15 * config.head_dim + 5) * elem + elem - 1] ^= std::byte{1};
    ASSERT_OK_AND_ASSIGN(auto changed, w.model->Prefill(&again, suffix, LogitsMode::kAll));
    EXPECT_GT(MaxAbsDiff(changed, want), 0.0f) << config.Describe();
  }
}

TEST(Witness, SharedPrefixSurgeryMatchesCopy) {
  SharedPrefixCase w(testing::TinyConfig(4, 2, 16));
  const KVCache first10 = *w.copied.Prefix(10);
  ASSERT_OK(w.model->Prefill(&w.copied, std::span(w.tokens).subspan(26, 6), LogitsMode::kNone));
  auto twin = [&] {
    KVCache c = w.Shared();
    EXPECT_OK(w.model->Prefill(&c, std::span(w.tokens).subspan(26, 6), LogitsMode::kNone));
    return c;
  };
  KVCache shared = twin();
  ASSERT_OK_AND_ASSIGN(KVSlab a, shared.CopySpan(5, 24));  // across every slab and the own rows
  ASSERT_OK_AND_ASSIGN(KVSlab b, w.copied.CopySpan(5, 24));
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.kraw, b.kraw);
  EXPECT_EQ(a.v, b.v);
  KVCache clone = shared.Clone();
  EXPECT_EQ(clone.shared_tokens(), 26u);
  EXPECT_EQ(clone.ComputeDigest(), w.copied.ComputeDigest());

  // Evict inside the second slab: survivors from token 9 on move, so they become own rows.
  KVCache evicted = twin(), evicted_copy = w.copied.Clone();
  ASSERT_OK(evicted.Evict(9, 1));
  ASSERT_OK(evicted_copy.Evict(9, 1));
  EXPECT_EQ(evicted.shared_tokens(), 9u);
  EXPECT_EQ(evicted.ComputeDigest(), evicted_copy.ComputeDigest());
  // Truncate inside the last slab, then past the first: the cut slab's kept tokens become own rows.
  for (size_t n : {size_t{17}, size_t{4}}) {
    ASSERT_OK(shared.Truncate(n));
    ASSERT_OK(w.copied.Truncate(n));
    EXPECT_LE(shared.shared_tokens(), n);
    EXPECT_EQ(shared.ComputeDigest(), w.copied.ComputeDigest()) << n;
  }
  // Appending after own rows, or out of position, copies instead of sharing: same contents.
  KVCache late = w.model->NewCache();
  ASSERT_OK(internal::KVCacheAccess::AppendSlab(late, *w.slabs[0]));
  ASSERT_OK(internal::KVCacheAccess::AppendShared(late, w.slabs[1]));
  EXPECT_EQ(late.shared_tokens(), 0u);
  EXPECT_EQ(late.ComputeDigest(), first10.ComputeDigest());
}

TEST(Witness, RadixSessionOutlivesItsEvictedNode) {
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(testing::TinyConfig(), 5));
  const std::unique_ptr<Tokenizer> tokenizer = MakeByteTokenizer();
  RadixTree tree(*model, *tokenizer);
  const auto tokens = TokenSequence(30, 3, 97);
  KVCache c = model->NewCache();
  ASSERT_OK(model->Prefill(&c, std::span(tokens).first(24), LogitsMode::kNone));
  ASSERT_OK(tree.Insert(std::span(tokens).first(24), c));
  LookupResult r = tree.Lookup(tokens);
  ASSERT_EQ(r.matched_tokens, 24u);
  EXPECT_EQ(r.cache.shared_tokens(), 24u);  // read in place from the tree
  EXPECT_EQ(tree.Stats().resident_bytes, 24 * tree.BytesPerToken());
  ASSERT_OK(tree.EvictNode(r.node).status());  // policy removes it while the session is in flight
  EXPECT_EQ(tree.Stats().unique_tokens, 0u);
  ASSERT_OK_AND_ASSIGN(auto got, model->Prefill(&r.cache, std::span(tokens).subspan(24), LogitsMode::kAll));
  KVCache fresh = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto all, model->Prefill(&fresh, tokens, LogitsMode::kAll));
  EXPECT_EQ(MaxAbsDiff(got, std::vector<float>(all.end() - got.size(), all.end())), 0.0f);
  EXPECT_EQ(r.cache.ComputeDigest(), fresh.ComputeDigest());
}

}  // namespace
}  // namespace fak
