// KV precision regimes (f32, f16, bf16) side by side: half the bytes, different logits (so the
// regime is real), the dtype in the binding's precision axis so a cache or radix node of one regime
// never serves another, slabs of one regime refused by a cache of another, and eviction ≡ never-saw
// inside each 16-bit regime — which holds only because K is rotated from the *rounded* Kraw (the
// control shows rotating the unrounded key gives other bits). The whole witness suite also runs
// per regime (FAK_KV_DTYPE, tests/CMakeLists.txt); these tests pin the regime explicitly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fak/gate/binding_tuple.h"
#include "fak/gate/resident_claim.h"
#include "fak/model/model.h"
#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"
#include "kernels/kv_convert.h"
#include "kernels/rope.h"
#include "src/kv/kv_cache_access.h"
#include "src/kv/rope_binding.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TinyConfig;
using testing::TokenSequence;

std::unique_ptr<Model> ModelIn(KVDtype dtype, const ModelConfig& config = TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 2)) {
  ModelOptions options;
  options.kv_dtype = dtype;
  return std::move(*Model::Synthetic(config, 31, options));
}

TEST(KVRegime, SixteenBitCachesHoldHalfTheBytesAndGiveOtherLogits) {
  const auto tokens = TokenSequence(40, 5, 97);
  std::vector<std::vector<float>> logits;
  std::vector<size_t> kraw_bytes;
  for (KVDtype d : {KVDtype::kF32, KVDtype::kF16, KVDtype::kBF16}) {
    auto model = ModelIn(d);
    EXPECT_EQ(model->kv_dtype(), d);
    KVCache cache = model->NewCache();
    EXPECT_EQ(cache.shape().dtype, d);
    ASSERT_OK_AND_ASSIGN(std::vector<float> l, model->Prefill(&cache, tokens));
    logits.push_back(std::move(l));
    kraw_bytes.push_back(cache.kraw_bytes());
    EXPECT_EQ(cache.size_bytes(), 3 * cache.kraw_bytes() + 40 * 2 * sizeof(int32_t));
  }
  EXPECT_EQ(kraw_bytes[1] * 2, kraw_bytes[0]);
  EXPECT_EQ(kraw_bytes[2], kraw_bytes[1]);
  // Controls: each regime's logits are its own (and close: rounding, not another computation).
  EXPECT_GT(MaxAbsDiff(logits[0], logits[1]), 0.0f);
  EXPECT_GT(MaxAbsDiff(logits[0], logits[2]), 0.0f);
  EXPECT_GT(MaxAbsDiff(logits[1], logits[2]), 0.0f);
  EXPECT_LT(MaxAbsDiff(logits[0], logits[1]), 0.05f);
}

TEST(KVRegime, TheBindingNamesTheDtypeAndTheGateMissesAcrossRegimes) {
  auto f32 = ModelIn(KVDtype::kF32), f16 = ModelIn(KVDtype::kF16), bf16 = ModelIn(KVDtype::kBF16);
  auto tok = MakeByteTokenizer();
  EXPECT_EQ(RegimeBinding(*f32, *tok).precision.kv_dtype, "f32");
  EXPECT_EQ(RegimeBinding(*f16, *tok).precision.kv_dtype, "f16");
  EXPECT_EQ(RegimeBinding(*bf16, *tok).precision.kv_dtype, "bf16");
  EXPECT_EQ(f32->WeightsDigest(), f16->WeightsDigest());  // same model: only the precision axis differs

  const auto tokens = TokenSequence(30, 6, 97);
  KVCache cache = f16->NewCache();
  ASSERT_OK(f16->Prefill(&cache, tokens, LogitsMode::kNone));
  RadixTree tree(*f16, *tok);
  ASSERT_OK(tree.Insert(tokens, cache));
  // Control: the tree's own regime hits.
  LookupResult own = tree.Lookup(tokens);
  EXPECT_EQ(own.matched_tokens, tokens.size() - 1);
  EXPECT_EQ(own.gate.outcome, ClaimOutcome::kHit) << own.gate.ToString();
  for (const Model* other : {f32.get(), bf16.get()}) {
    LookupResult r = tree.Lookup(ResidentClaim{RegimeBinding(*other, *tok), std::string(kDefaultTenant)}, tokens);
    EXPECT_EQ(r.matched_tokens, 0u);
    EXPECT_EQ(r.gate.outcome, ClaimOutcome::kMiss) << r.gate.ToString();
    EXPECT_EQ(r.gate.axis, BindingAxis::kPrecision) << r.gate.ToString();
  }
  // Nor does a cache of one regime take another's slab (shapes name the dtype).
  ASSERT_OK_AND_ASSIGN(KVSlab slab, cache.CopySpan(0, 10));
  KVCache other = bf16->NewCache();
  const Status s = internal::KVCacheAccess::AppendSlab(other, slab);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.ToString().find("dtype (f16, the cache holds bf16)"), std::string::npos) << s.ToString();
  EXPECT_TRUE(other.empty());
  // Same bytes read as another dtype are another slab.
  KVSlab relabelled = slab;
  relabelled.shape.dtype = KVDtype::kBF16;
  EXPECT_NE(KVSlabChecksum(relabelled), KVSlabChecksum(slab));
}

TEST(KVRegime, AnUnknownDtypeIsRefused) {
  ModelOptions options;
  options.kv_dtype = static_cast<KVDtype>(7);
  EXPECT_EQ(Model::Synthetic(TinyConfig(), 1, options).status().code(), StatusCode::kInvalidArgument);
  const char* was = std::getenv("FAK_KV_DTYPE");
  const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
  ASSERT_EQ(setenv("FAK_KV_DTYPE", "f8", 1), 0);
  auto bad = Model::Synthetic(TinyConfig(), 1);
  ASSERT_EQ(setenv("FAK_KV_DTYPE", "bf16", 1), 0);
  auto good = Model::Synthetic(TinyConfig(), 1);
  if (saved) setenv("FAK_KV_DTYPE", saved->c_str(), 1);
  else unsetenv("FAK_KV_DTYPE");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("FAK_KV_DTYPE=f8"), std::string::npos) << bad.status().ToString();
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ((*good)->kv_dtype(), KVDtype::kBF16);
}

// The serving surfaces' default (default_kv_dtype) applies only when neither the caller nor
// FAK_KV_DTYPE names a dtype: an explicit request, f32 included, always wins.
TEST(KVRegime, TheDefaultDtypeYieldsToTheCallerAndTheEnvironment) {
  const char* was = std::getenv("FAK_KV_DTYPE");
  const std::optional<std::string> saved = was ? std::optional<std::string>(was) : std::nullopt;
  ModelOptions serving;
  serving.default_kv_dtype = kServingKVDtype;
  ModelOptions asks_f32 = serving;
  asks_f32.kv_dtype = KVDtype::kF32;
  ModelOptions bad_default;
  bad_default.default_kv_dtype = static_cast<KVDtype>(9);
  ASSERT_EQ(unsetenv("FAK_KV_DTYPE"), 0);
  auto library = Model::Synthetic(TinyConfig(), 1);
  auto served = Model::Synthetic(TinyConfig(), 1, serving);
  auto explicit_f32 = Model::Synthetic(TinyConfig(), 1, asks_f32);
  auto refused = Model::Synthetic(TinyConfig(), 1, bad_default);
  ASSERT_EQ(setenv("FAK_KV_DTYPE", "f32", 1), 0);
  auto env_f32 = Model::Synthetic(TinyConfig(), 1, serving);
  if (saved) setenv("FAK_KV_DTYPE", saved->c_str(), 1);
  else unsetenv("FAK_KV_DTYPE");
  ASSERT_TRUE(library.has_value() && served.has_value() && explicit_f32.has_value() && env_f32.has_value());
  EXPECT_EQ(kServingKVDtype, KVDtype::kF16);
  EXPECT_EQ((*library)->kv_dtype(), KVDtype::kF32);  // the library's own default is unchanged
  EXPECT_EQ((*served)->kv_dtype(), KVDtype::kF16);
  EXPECT_EQ((*explicit_f32)->kv_dtype(), KVDtype::kF32);
  EXPECT_EQ((*env_f32)->kv_dtype(), KVDtype::kF32);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().ToString().find("default_kv_dtype"), std::string::npos) << refused.status().ToString();
}

std::vector<float> ProbeLogits(const Model& model, const KVCache& cache, std::span<const int32_t> probe) {
  KVCache c = cache.Clone();
  return *model.Prefill(&c, probe, LogitsMode::kAll);
}

TEST(KVRegime, EvictionEqualsNeverSawInEachSixteenBitRegime) {
  for (KVDtype d : {KVDtype::kF16, KVDtype::kBF16}) {
    SCOPED_TRACE(std::string(KVDtypeName(d)));
    auto model = ModelIn(d, TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 1));  // one layer: eviction is exact
    const auto a = TokenSequence(10, 1, 97), span = TokenSequence(6, 2, 97), b = TokenSequence(30, 3, 97);
    std::vector<int32_t> with = a, never = a;
    with.insert(with.end(), span.begin(), span.end());
    with.insert(with.end(), b.begin(), b.end());
    never.insert(never.end(), b.begin(), b.end());
    KVCache cache = model->NewCache(), fresh = model->NewCache();
    ASSERT_OK(model->Prefill(&cache, with, LogitsMode::kNone));
    ASSERT_OK(model->Prefill(&fresh, never, LogitsMode::kNone));
    const auto probe = TokenSequence(3, 4, 97);
    const auto never_logits = ProbeLogits(*model, fresh, probe);
    EXPECT_GT(MaxAbsDiff(ProbeLogits(*model, cache, probe), never_logits), 0.0f);  // control: the span matters
    ASSERT_OK(cache.Evict(a.size(), span.size()));
    EXPECT_EQ(cache.ComputeDigest(), fresh.ComputeDigest());
    EXPECT_EQ(MaxAbsDiff(ProbeLogits(*model, cache, probe), never_logits), 0.0f);

    // Control: rotating the key before rounding Kraw (round(rope(k)) from the f32 model's unrounded
    // raw key, the same in layer 0) gives other K bits for some token — the order is not vacuous.
    auto f32 = ModelIn(KVDtype::kF32, TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 1));
    KVCache unrounded = f32->NewCache();
    ASSERT_OK(f32->Prefill(&unrounded, never, LogitsMode::kNone));
    const size_t hd = 16, n = never.size();
    const internal::RopeBinding& rope = internal::KVCacheAccess::Rope(fresh);
    size_t differ = 0;
    for (size_t h = 0; h < 2; ++h) {
      std::vector<float> raw(n * hd), rounded(n * hd);
      std::memcpy(raw.data(), unrounded.kraw(0, h), n * hd * sizeof(float));
      kernels::KVToF32(fresh.kraw(0, h), rounded.data(), n * hd, d);
      std::vector<uint16_t> k_direct(hd), k_stored(hd);
      for (size_t t = 0; t < n; ++t) {
        kernels::ApplyRope(raw.data() + t * hd, 1, hd, *rope.layer_tables[0], t, rope.pairing);
        kernels::RoundToKV(raw.data() + t * hd, k_direct.data(), hd, d);
        std::memcpy(k_stored.data(), fresh.k(0, h) + t * hd * 2, hd * 2);
        differ += k_direct != k_stored;
      }
    }
    EXPECT_GT(differ, 0u);
  }
}

}  // namespace
}  // namespace fak
