// Dispatch: tier names, the FAK_KERNEL_TIER pin, switching tiers, and the tier-support decision
// as a pure function of the CPU's features (tested with made-up CPUs).
#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "fak/kernels/kernel_tier.h"
#include "kernels/cpu_features.h"
#include "kernels/tier_registry.h"
#include "tests/test_util.h"
#include "src/core/str_cat.h"

namespace fak::kernels {
namespace {

// Restores the active tier when a test that switches tiers ends, pass or fail.
class TierRestorer {
 public:
  TierRestorer() : saved_(ActiveTier()) {}
  ~TierRestorer() { (void)SetTier(saved_); }

 private:
  Tier saved_;
};

// The tier a test names (x86-64 or aarch64), or a skip on an architecture that does not register it.
#define FAK_TIER_OR_SKIP(var, name)                                                   \
  Result<Tier> var##_parsed = ParseTier(name);                                        \
  if (!var##_parsed.has_value()) GTEST_SKIP() << name << " is not registered here";   \
  const Tier var = *var##_parsed

TEST(DispatchTest, TierNamesRoundTrip) {
  for (Tier t : RegisteredTierList()) {
    ASSERT_OK_AND_ASSIGN(Tier parsed, ParseTier(TierName(t)));
    EXPECT_EQ(parsed, t);
  }
  EXPECT_EQ(TierName(Tier::kScalar), "scalar");
}

TEST(DispatchTest, RegistryStartsWithScalarAndNamesEachTierOnce) {
  const auto registered = RegisteredTiers();
  ASSERT_FALSE(registered.empty());
  EXPECT_STREQ(registered.front()->name, "scalar");
  EXPECT_EQ(registered.front()->requires_features, CpuFeatures{}) << "scalar runs anywhere";
  for (size_t i = 0; i < registered.size(); ++i) {
    EXPECT_NE(registered[i]->fill, nullptr) << registered[i]->name;
    for (size_t j = 0; j < i; ++j) {
      EXPECT_STRNE(registered[i]->name, registered[j]->name);
      // Slowest first: a tier never comes after one that needs a superset of its features.
      EXPECT_FALSE(registered[j]->requires_features.HasAll(registered[i]->requires_features) &&
                   registered[j]->requires_features != registered[i]->requires_features)
          << registered[j]->name << " needs more than the later " << registered[i]->name;
    }
  }
}

TEST(DispatchTest, X86RegistersTheVectorTiersWithTheirFlagsFeatures) {
  FAK_TIER_OR_SKIP(avx2, "avx2");
  FAK_TIER_OR_SKIP(skx, "avx512_skx");
  FAK_TIER_OR_SKIP(avx512, "avx512");
  using enum CpuFeature;
  const CpuFeatures avx2_set{kAvx2, kFma, kF16c, kOsYmm};
  CpuFeatures skx_set = avx2_set;
  for (CpuFeature f : {kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl, kOsZmm}) skx_set.Add(f);
  CpuFeatures avx512_set = skx_set;
  avx512_set.Add(kAvx512Vnni);
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(avx2)]->requires_features, avx2_set);
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(skx)]->requires_features, skx_set);
  // No BF16: the avx512 tier uses no BF16 instruction, so VNNI-only CPUs (Cascade Lake, Ice Lake) run it.
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(avx512)]->requires_features, avx512_set);
  EXPECT_LT(avx2, skx);
  EXPECT_LT(skx, avx512);
}

TEST(DispatchTest, Arm64RegistersTheNeonTiersWithTheirFlagsFeatures) {
  FAK_TIER_OR_SKIP(neon, "neon");
  FAK_TIER_OR_SKIP(dotprod, "neon_dotprod");
  FAK_TIER_OR_SKIP(i8mm, "neon_i8mm");
  using enum CpuFeature;
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(neon)]->requires_features, CpuFeatures{kAsimd});
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(dotprod)]->requires_features, (CpuFeatures{kAsimd, kAsimdDotprod}));
  EXPECT_EQ(RegisteredTiers()[static_cast<size_t>(i8mm)]->requires_features,
            (CpuFeatures{kAsimd, kAsimdDotprod, kI8mm}));
  EXPECT_LT(Tier::kScalar, neon);
  EXPECT_LT(neon, dotprod);
  EXPECT_LT(dotprod, i8mm);
}

TEST(DispatchTest, ParseTierRejectsUnknownNamingTheValueAndTheRegisteredTiers) {
  for (const char* bad : {"avx3", "AVX2", "", "scalar ", "sse4", "avx512f"}) {
    Result<Tier> r = ParseTier(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find(fak::internal::StrCat("'", bad, "'")), std::string_view::npos) << r.error().ToString();
    EXPECT_NE(r.error().message().find("scalar"), std::string_view::npos) << r.error().ToString();
  }
}

TEST(DispatchTest, SupportedTiersAreOrderedAndIncludeScalar) {
  std::vector<Tier> tiers = SupportedTiers();
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers.front(), Tier::kScalar);
  for (size_t i = 1; i < tiers.size(); ++i) EXPECT_LT(static_cast<int>(tiers[i - 1]), static_cast<int>(tiers[i]));
  for (Tier t : RegisteredTierList()) {
    const bool listed = std::find(tiers.begin(), tiers.end(), t) != tiers.end();
    EXPECT_EQ(listed, TierSupported(t)) << TierName(t);
    EXPECT_EQ(TierSupported(t), TierSupportedOn(t, DetectCpuFeatures())) << TierName(t);
  }
  EXPECT_EQ(tiers.back(), BestTierOn(DetectCpuFeatures()));
}

TEST(DispatchTest, TableForSupportedTiersAndUnsupportedErrorNamesTheMissingFeatures) {
  for (Tier t : RegisteredTierList()) {
    Result<const KernelTable*> table = TableFor(t);
    if (TierSupported(t)) {
      ASSERT_OK(table);
      EXPECT_EQ((*table)->tier, t);
      EXPECT_EQ(std::string_view((*table)->name), TierName(t));
      EXPECT_NE((*table)->matmul, nullptr);
    } else {
      ASSERT_FALSE(table.has_value());
      EXPECT_EQ(table.error().code(), StatusCode::kUnsupported);
      const CpuFeatures missing = DetectCpuFeatures().Missing(RegisteredTiers()[static_cast<size_t>(t)]->requires_features);
      EXPECT_NE(table.error().message().find(missing.Summary()), std::string_view::npos) << table.error().ToString();
      EXPECT_EQ(SetTier(t).code(), StatusCode::kUnsupported);
    }
  }
}

TEST(DispatchTest, SetTierMakesEachSupportedTierActiveAndRestores) {
  const Tier before = ActiveTier();
  {
    TierRestorer restore;
    for (Tier t : SupportedTiers()) {
      ASSERT_OK(SetTier(t));
      EXPECT_EQ(ActiveTier(), t);
      EXPECT_EQ(Active().tier, t);
      EXPECT_EQ(&Active(), *TableFor(t));
      EXPECT_EQ(ActiveKernelTier(), TierName(t));
    }
  }
  EXPECT_EQ(ActiveTier(), before);
}

TEST(DispatchTest, ActiveTierMatchesEnvironment) {
  // ctest runs this binary once per tier with FAK_KERNEL_TIER set; test_main skips a tier the
  // host lacks, so when we get here the pin must have taken effect.
  ASSERT_OK(EnvironmentTierStatus());
  const char* env = std::getenv("FAK_KERNEL_TIER");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(ActiveTier(), SupportedTiers().back()) << "unpinned: the best tier is active";
    return;
  }
  ASSERT_OK_AND_ASSIGN(Tier pinned, ParseTier(env));
  EXPECT_EQ(ActiveTier(), pinned);
  EXPECT_EQ(ActiveKernelTier(), env);
}

// --- the support decision on made-up CPUs ---

CpuFeatures FullAvx512Cpu() {  // Sapphire Rapids
  using enum CpuFeature;
  return {kAvx2, kFma, kF16c, kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl, kAvx512Vnni, kAvx512Bf16, kOsYmm, kOsZmm};
}

TEST(CpuFeaturesTest, FeatureSetOperations) {
  using enum CpuFeature;
  CpuFeatures f{kAvx2, kFma};
  EXPECT_TRUE(f.Has(kAvx2));
  EXPECT_FALSE(f.Has(kF16c));
  EXPECT_TRUE(f.HasAll({kFma}));
  EXPECT_TRUE(f.HasAll({}));
  EXPECT_FALSE(f.HasAll({kFma, kF16c}));
  EXPECT_EQ(f.Missing({kFma, kF16c, kOsYmm}), (CpuFeatures{kF16c, kOsYmm}));
  f.Remove(kAvx2);
  EXPECT_EQ(f, CpuFeatures{kFma});
  EXPECT_EQ(f.Summary(), "fma");
}

TEST(CpuFeaturesTest, FullCpuSupportsEveryTier) {
  FAK_TIER_OR_SKIP(avx512, "avx512");
  const CpuFeatures f = FullAvx512Cpu();
  for (Tier t : RegisteredTierList()) EXPECT_TRUE(TierSupportedOn(t, f)) << TierName(t);
  EXPECT_EQ(BestTierOn(f), avx512);
}

TEST(CpuFeaturesTest, EmptyCpuSupportsOnlyScalar) {
  const CpuFeatures none;
  EXPECT_TRUE(TierSupportedOn(Tier::kScalar, none));
  for (Tier t : RegisteredTierList())
    if (t != Tier::kScalar) {
      EXPECT_FALSE(TierSupportedOn(t, none)) << TierName(t);
    }
  EXPECT_EQ(BestTierOn(none), Tier::kScalar);
  EXPECT_EQ(none.Summary(), "none");
}

TEST(CpuFeaturesTest, OsWithoutZmmStateRefusesBothAvx512Tiers) {
  // The CPU has every AVX-512 bit but the OS does not save zmm registers (XCR0): AVX-512 code
  // would corrupt state on a context switch, so only AVX2 is allowed.
  FAK_TIER_OR_SKIP(avx2, "avx2");
  FAK_TIER_OR_SKIP(skx, "avx512_skx");
  FAK_TIER_OR_SKIP(avx512, "avx512");
  CpuFeatures f = FullAvx512Cpu();
  f.Remove(CpuFeature::kOsZmm);
  EXPECT_FALSE(TierSupportedOn(avx512, f));
  EXPECT_FALSE(TierSupportedOn(skx, f));
  EXPECT_TRUE(TierSupportedOn(avx2, f));
  EXPECT_EQ(BestTierOn(f), avx2);
}

TEST(CpuFeaturesTest, OsWithoutYmmStateRefusesEveryVectorTier) {
  CpuFeatures f = FullAvx512Cpu();
  f.Remove(CpuFeature::kOsYmm);
  for (Tier t : RegisteredTierList())
    if (t != Tier::kScalar) {
      EXPECT_FALSE(TierSupportedOn(t, f)) << TierName(t);
    }
  EXPECT_EQ(BestTierOn(f), Tier::kScalar);
}

TEST(CpuFeaturesTest, ServerGenerationsGetTheirTier) {
  FAK_TIER_OR_SKIP(avx2, "avx2");
  FAK_TIER_OR_SKIP(skx, "avx512_skx");
  FAK_TIER_OR_SKIP(avx512, "avx512");
  using enum CpuFeature;
  const CpuFeatures haswell{kAvx2, kFma, kF16c, kOsYmm};
  const CpuFeatures skylake_x{kAvx2, kFma, kF16c, kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl, kOsYmm, kOsZmm};
  CpuFeatures cascade_lake = skylake_x;  // and Ice Lake: VNNI without BF16
  cascade_lake.Add(kAvx512Vnni);
  EXPECT_EQ(BestTierOn(haswell), avx2);
  EXPECT_EQ(BestTierOn(skylake_x), skx);
  EXPECT_EQ(BestTierOn(cascade_lake), avx512);
  EXPECT_EQ(BestTierOn(FullAvx512Cpu()), avx512);
}

TEST(CpuFeaturesTest, EachMissingAvx512FeatureFallsBack) {
  FAK_TIER_OR_SKIP(avx2, "avx2");
  FAK_TIER_OR_SKIP(skx, "avx512_skx");
  FAK_TIER_OR_SKIP(avx512, "avx512");
  using enum CpuFeature;
  for (CpuFeature missing : {kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl}) {
    CpuFeatures f = FullAvx512Cpu();
    f.Remove(missing);
    EXPECT_FALSE(TierSupportedOn(avx512, f)) << f.Summary();
    EXPECT_FALSE(TierSupportedOn(skx, f)) << f.Summary();
    EXPECT_TRUE(TierSupportedOn(avx2, f)) << f.Summary();
    EXPECT_EQ(BestTierOn(f), avx2);
  }
  CpuFeatures no_vnni = FullAvx512Cpu();
  no_vnni.Remove(kAvx512Vnni);
  EXPECT_FALSE(TierSupportedOn(avx512, no_vnni));
  EXPECT_EQ(BestTierOn(no_vnni), skx);
  CpuFeatures no_bf16 = FullAvx512Cpu();
  no_bf16.Remove(kAvx512Bf16);
  EXPECT_EQ(BestTierOn(no_bf16), avx512);
}

TEST(CpuFeaturesTest, EachMissingAvx2FeatureRefusesEveryVectorTier) {
  // The AVX-512 tiers also run AVX2/FMA/F16C code, so they need them too.
  using enum CpuFeature;
  for (CpuFeature missing : {kAvx2, kFma, kF16c}) {
    CpuFeatures f = FullAvx512Cpu();
    f.Remove(missing);
    for (Tier t : RegisteredTierList())
      if (t != Tier::kScalar) {
        EXPECT_FALSE(TierSupportedOn(t, f)) << TierName(t) << " on " << f.Summary();
      }
    EXPECT_EQ(BestTierOn(f), Tier::kScalar);
  }
}

TEST(CpuFeaturesTest, Arm64CoresGetTheirTier) {
  FAK_TIER_OR_SKIP(neon, "neon");
  FAK_TIER_OR_SKIP(dotprod, "neon_dotprod");
  FAK_TIER_OR_SKIP(i8mm, "neon_i8mm");
  using enum CpuFeature;
  const CpuFeatures cortex_a53{kAsimd};                            // Raspberry Pi 3
  const CpuFeatures neoverse_n1{kAsimd, kAsimdDotprod, kFp16};      // Graviton 2, Ampere Altra
  const CpuFeatures neoverse_v1{kAsimd, kAsimdDotprod, kFp16, kI8mm, kBf16};  // Graviton 3
  EXPECT_EQ(BestTierOn(cortex_a53), neon);
  EXPECT_FALSE(TierSupportedOn(dotprod, cortex_a53));
  EXPECT_EQ(BestTierOn(neoverse_n1), dotprod);
  EXPECT_FALSE(TierSupportedOn(i8mm, neoverse_n1));
  EXPECT_EQ(BestTierOn(neoverse_v1), i8mm);
  EXPECT_EQ(BestTierOn(CpuFeatures{kAsimdDotprod}), Tier::kScalar) << "no tier runs without Advanced SIMD";
  EXPECT_EQ(BestTierOn(FullAvx512Cpu()), Tier::kScalar) << "x86 features run no aarch64 tier";
}

TEST(CpuFeaturesTest, SummaryNamesArm64Features) {
  using enum CpuFeature;
  EXPECT_EQ((CpuFeatures{kAsimd, kAsimdDotprod, kI8mm, kFp16, kBf16}).Summary(), "asimd asimddp i8mm fp16 bf16");
}

TEST(CpuFeaturesTest, SummaryNamesFeatures) {
  const std::string s = FullAvx512Cpu().Summary();
  for (const char* name : {"avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "os:ymm", "os:zmm"})
    EXPECT_NE(s.find(name), std::string::npos) << name << " missing from " << s;
  EXPECT_FALSE(CpuFeatureSummary().empty());
}

// --- the public API (fak/kernel_tier.h) ---

TEST(KernelTierApiTest, SetKernelTierRejectsUnknownName) {
  Status s = SetKernelTier("avx3");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("avx3"), std::string_view::npos) << s.ToString();
}

TEST(KernelTierApiTest, SetKernelTierByNameAndSupportedList) {
  TierRestorer restore;
  std::vector<std::string> names = SupportedKernelTiers();
  ASSERT_EQ(names.size(), SupportedTiers().size());
  EXPECT_EQ(names.front(), "scalar");
  for (const std::string& name : names) {
    ASSERT_OK(SetKernelTier(name));
    EXPECT_EQ(ActiveKernelTier(), name);
  }
  for (Tier t : RegisteredTierList()) {
    if (!TierSupported(t)) {
      EXPECT_EQ(SetKernelTier(TierName(t)).code(), StatusCode::kUnsupported);
    }
  }
}

}  // namespace
}  // namespace fak::kernels
