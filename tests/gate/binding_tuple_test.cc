// BindingTuple: each axis is derived from its source (not stored names), and the fixed axis order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "fak/kernels/kernel_tier.h"
#include "fak/gate/binding_tuple.h"
#include "fak/core/version.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"
#include "src/kv/kv_cache_access.h"

namespace fak {
namespace {

using testing::GateWorld;

TEST(BindingTuple, RegimeBindingDerivesEachAxisFromItsSource) {
  GateWorld w = GateWorld::Make();
  const BindingTuple t = RegimeBinding(*w.model, *w.tokenizer);
  EXPECT_EQ(t.model_id, w.model->WeightsDigest());
  EXPECT_EQ(t.tokenizer_id, w.tokenizer->id());
  EXPECT_TRUE(t.adapter_id.IsZero());
  EXPECT_EQ(t.precision, (Precision{"f32", "f32", std::string(ActiveKernelTier())}));
  EXPECT_EQ(t.position, (PositionConvention{"rope", "split_half", 10000.0, "none"}));
  EXPECT_EQ(t.producer.library, "fak");
  EXPECT_EQ(t.producer.version, std::string(LibraryVersion()));
  EXPECT_EQ(t.producer.kernel_build, std::string(KernelBuild()));
  EXPECT_EQ(KernelBuild().rfind("kernels-r" + std::to_string(FAK_KERNELS_REVISION) + " ", 0), 0u) << KernelBuild();
  EXPECT_TRUE(t.span_digest.IsZero());  // the span is bound separately
}

TEST(BindingTuple, DerivedAxesFollowWeightsPairingAndBase) {
  GateWorld a = GateWorld::Make(/*seed=*/7);
  GateWorld b = GateWorld::Make(/*seed=*/8);  // same shape and tokens, other weights
  const BindingTuple ta = RegimeBinding(*a.model, *a.tokenizer), tb = RegimeBinding(*b.model, *b.tokenizer);
  EXPECT_EQ(FirstDifferingAxis(ta, tb), BindingAxis::kModel);
  EXPECT_EQ(ta.tokenizer_id, tb.tokenizer_id);

  auto adjacent = *Model::Synthetic(testing::TinyConfig(4, 2, 16, RopePairing::kAdjacent), 7);
  EXPECT_EQ(RegimeBinding(*adjacent, *a.tokenizer).position.pairing, "adjacent");
  ModelConfig based = testing::TinyConfig();
  based.rope_base = 500000.0;
  auto rebased = *Model::Synthetic(based, 7);
  EXPECT_EQ(RegimeBinding(*rebased, *a.tokenizer).position.base, 500000.0);
  EXPECT_NE(RegimeBinding(*rebased, *a.tokenizer).model_id, ta.model_id);  // the config is in the weights digest
}

TEST(BindingTuple, SpanDigestCoversTheWholeContextUpToTheSpanEnd) {
  const std::vector<int32_t> ctx = {5, 6, 7, 8, 9, 10};
  std::vector<int32_t> other_history = ctx;
  other_history[0] = 42;  // same span tokens [3, 5), different earlier token
  std::vector<int32_t> other_future = ctx;
  other_future[5] = 42;  // past the span's end: irrelevant

  BindingTuple regime = testing::FixedManifest().binding;
  ASSERT_OK_AND_ASSIGN(BindingTuple a, BindSpan(regime, ctx, 3, 2));
  ASSERT_OK_AND_ASSIGN(BindingTuple b, BindSpan(regime, other_history, 3, 2));
  ASSERT_OK_AND_ASSIGN(BindingTuple c, BindSpan(regime, other_future, 3, 2));
  EXPECT_EQ(a.tokens, (TokenRange{3, 2}));
  EXPECT_EQ(a.span_digest, SpanDigestOf(std::span<const int32_t>(ctx).first(5)));
  EXPECT_NE(a.span_digest, b.span_digest);
  EXPECT_EQ(a.span_digest, c.span_digest);
  EXPECT_EQ(a.integrity_checksum, regime.integrity_checksum);  // left as it was

  EXPECT_FALSE(BindSpan(regime, ctx, 3, 0).has_value());
  EXPECT_FALSE(BindSpan(regime, ctx, 5, 2).has_value());
  EXPECT_EQ(BindSpan(regime, ctx, 7, 1).status().code(), StatusCode::kInvalidArgument);
  // Length-prefixed: [] and a context of one zero id differ.
  EXPECT_NE(SpanDigestOf({}), SpanDigestOf(std::vector<int32_t>{0}));
}

TEST(BindingTuple, KVSpanChecksumCoversOnlyItsSpanAndSeesEveryByte) {
  GateWorld w = GateWorld::Make();
  ASSERT_OK_AND_ASSIGN(Digest whole, KVSpanChecksum(w.cache, 0, 12));
  ASSERT_OK_AND_ASSIGN(Digest head, KVSpanChecksum(w.cache, 0, 6));
  ASSERT_OK_AND_ASSIGN(Digest tail, KVSpanChecksum(w.cache, 6, 6));
  EXPECT_NE(whole, head);
  EXPECT_NE(head, tail);
  EXPECT_EQ(KVSpanChecksum(w.cache, 6, 7).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KVSpanChecksum(w.cache, 13, 0).status().code(), StatusCode::kInvalidArgument);

  // A copy of the head has the head's checksum; one flipped V bit in the tail leaves it alone.
  ASSERT_OK_AND_ASSIGN(KVCache prefix, w.cache.Prefix(6));
  EXPECT_EQ(*KVSpanChecksum(prefix, 0, 6), head);
  const size_t elem = w.cache.shape().elem_bytes();
  internal::KVCacheAccess::V(w.cache, 1, 1)[(8 * w.cache.shape().head_dim + 3) * elem] ^= std::byte{1};
  EXPECT_EQ(*KVSpanChecksum(w.cache, 0, 6), head);
  EXPECT_NE(*KVSpanChecksum(w.cache, 6, 6), tail);
  // Kraw is covered too (it is what eviction re-rotates from).
  internal::KVCacheAccess::Kraw(w.cache, 0, 0)[elem] ^= std::byte{1};
  EXPECT_NE(*KVSpanChecksum(w.cache, 0, 6), head);
}

// KVSlabChecksum is "fak.kv_slab.v2" as docs/manifest.md §1 writes it, rebuilt here from the spec with
// one Digester: K, Kraw and V each cut into 32 KiB chunks (the last short), hashed apart. A slab big
// enough to be hashed on several threads gives the same value; a flipped byte in any chunk of any
// tensor, a swapped pair of chunks, another start position or dtype each give another.
TEST(BindingTuple, KVSlabChecksumHashes32KiBChunksOfEachTensor) {
  KVSlab slab;
  slab.shape = KVShape{3, 2, 64, 4096, KVDtype::kF32};
  slab.start_position = 9;
  slab.tokens.assign(1900, 7);  // 2.9 MB per tensor: 90 chunks, the last short, in two tasks; 8.8 MB in all
  const size_t bytes = 3 * 2 * 64 * 1900 * sizeof(float);
  for (auto [t, seed] : {std::pair{&slab.k, 1}, std::pair{&slab.kraw, 2}, std::pair{&slab.v, 3}}) {
    const std::vector<float> r = testing::RandomVector(bytes / sizeof(float), seed);
    t->resize(bytes);
    std::memcpy(t->data(), r.data(), bytes);
  }
  const auto by_spec = [](const KVSlab& s) {
    Digester d;
    d.Update("fak.kv_slab.v2");
    for (size_t v : {s.shape.n_layers, s.shape.n_kv_heads, s.shape.head_dim, s.start_position}) d.UpdatePod(uint64_t{v});
    d.Update(KVDtypeName(s.shape.dtype));
    d.UpdatePod(uint64_t{s.tokens.size()}).Update(s.tokens.data(), s.tokens.size() * sizeof(int32_t));
    constexpr size_t kChunk = size_t{32} << 10;
    d.UpdatePod(uint64_t{kChunk});
    for (const auto* t : {&s.k, &s.kraw, &s.v}) {
      for (size_t at = 0; at < t->size(); at += kChunk) {
        const Digest c = Digest::Of(t->data() + at, std::min(kChunk, t->size() - at));
        d.Update(c.bytes.data(), c.bytes.size());
      }
    }
    return d.Finish();
  };
  const Digest want = by_spec(slab);
  EXPECT_EQ(KVSlabChecksum(slab), want);
  for (KVBytes* t : {&slab.k, &slab.kraw, &slab.v}) {
    for (size_t at : {size_t{0}, (size_t{32} << 10) + 5, bytes - 1}) {  // the first, second and last chunk
      (*t)[at] ^= std::byte{1};
      EXPECT_NE(KVSlabChecksum(slab), want) << at;
      EXPECT_EQ(KVSlabChecksum(slab), by_spec(slab)) << at;
      (*t)[at] ^= std::byte{1};
    }
  }
  KVSlab swapped = slab;  // the first two chunks of K trade places: same chunk digests, other order
  std::swap_ranges(swapped.k.begin(), swapped.k.begin() + (32 << 10), swapped.k.begin() + (32 << 10));
  EXPECT_NE(KVSlabChecksum(swapped), want);
  KVSlab moved = slab;
  moved.start_position = 10;
  EXPECT_NE(KVSlabChecksum(moved), want);
  KVSlab relabelled = slab;  // the same bytes read as another element type
  relabelled.shape.dtype = KVDtype::kF16;
  EXPECT_NE(KVSlabChecksum(relabelled), want);
  EXPECT_EQ(KVSlabChecksum(slab), want);  // nothing above changed the original
}

TEST(BindingTuple, BindCacheSpanSetsAllNineAxesAndRejectsAForeignCache) {
  GateWorld w = GateWorld::Make();
  ASSERT_OK_AND_ASSIGN(BindingTuple t, BindCacheSpan(*w.model, *w.tokenizer, w.cache, 4, 8));
  EXPECT_OK(t.Validate());
  EXPECT_EQ(t.span_digest, SpanDigestOf(w.tokens));
  EXPECT_EQ(t.tokens, (TokenRange{4, 8}));
  EXPECT_EQ(t.integrity_checksum, *KVSpanChecksum(w.cache, 4, 8));
  BindingTuple claim = *BindSpan(RegimeBinding(*w.model, *w.tokenizer), w.tokens, 4, 8);
  EXPECT_EQ(FirstDifferingAxis(claim, t), std::nullopt);  // zero checksum in a claim = any

  GateWorld other = GateWorld::Make(/*seed=*/9);
  EXPECT_EQ(BindCacheSpan(*other.model, *w.tokenizer, w.cache, 0, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BindCacheSpan(*w.model, *w.tokenizer, w.cache, 10, 3).status().code(), StatusCode::kInvalidArgument);
}

TEST(BindingTuple, FirstDifferingAxisFollowsTheFixedOrder) {
  const BindingTuple base = testing::FixedManifest().binding;
  for (int a = 0; a < kNumBindingAxes; ++a) {
    for (int later = a; later < kNumBindingAxes; ++later) {
      BindingTuple t = base;
      if (later != a) testing::FlipAxis(&t, static_cast<BindingAxis>(later));
      testing::FlipAxis(&t, static_cast<BindingAxis>(a));
      EXPECT_EQ(FirstDifferingAxis(t, base), static_cast<BindingAxis>(a)) << a << " " << later;
    }
  }
  EXPECT_EQ(FirstDifferingAxis(base, base), std::nullopt);
  EXPECT_EQ(BindingAxisName(BindingAxis::kPositionConvention), "position_convention");
}

TEST(BindingTuple, ValidateNamesTheField) {
  BindingTuple t = testing::FixedManifest().binding;
  EXPECT_OK(t.Validate());
  BindingTuple bad = t;
  bad.model_id = Digest();
  EXPECT_NE(bad.Validate().message().find("model_id"), std::string_view::npos);
  bad = t;
  bad.precision.kernel_tier = "";
  EXPECT_NE(bad.Validate().message().find("precision.kernel_tier"), std::string_view::npos);
  bad = t;
  bad.position.base = std::numeric_limits<double>::infinity();
  EXPECT_NE(bad.Validate().message().find("position_convention.base"), std::string_view::npos);
  bad = t;
  bad.tokens.count = 0;
  EXPECT_NE(bad.Validate().message().find("tokens.count"), std::string_view::npos);
  bad = t;
  bad.producer.kernel_build = "tab\there";
  EXPECT_NE(bad.Validate().message().find("producer.kernel_build"), std::string_view::npos);
}

TEST(BindingTuple, VersionHeaderMatchesTheProjectVersion) {
  // FAK_PROJECT_VERSION comes from project(fak VERSION ...) through tests/CMakeLists.txt.
  EXPECT_STREQ(FAK_PROJECT_VERSION, FAK_VERSION_STRING);
  EXPECT_EQ(LibraryVersion(), FAK_VERSION_STRING);
}

}  // namespace
}  // namespace fak
