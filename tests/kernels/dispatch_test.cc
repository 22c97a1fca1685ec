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

constexpr Tier kAllTiers[] = {Tier::kScalar, Tier::kAvx2, Tier::kAvx512, Tier::kNeon};

TEST(DispatchTest, TierNamesRoundTrip) {
  for (Tier t : kAllTiers) {
    ASSERT_OK_AND_ASSIGN(Tier parsed, ParseTier(TierName(t)));
    EXPECT_EQ(parsed, t);
  }
  EXPECT_EQ(TierName(Tier::kScalar), "scalar");
  EXPECT_EQ(TierName(Tier::kAvx2), "avx2");
  EXPECT_EQ(TierName(Tier::kAvx512), "avx512");
  EXPECT_EQ(TierName(Tier::kNeon), "neon");
}

TEST(DispatchTest, ParseTierRejectsUnknownNamingTheValue) {
  for (const char* bad : {"avx3", "AVX2", "", "scalar ", "sse4", "avx512f"}) {
    Result<Tier> r = ParseTier(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find(fak::internal::StrCat("'", bad, "'")), std::string_view::npos) << r.error().ToString();
  }
}

TEST(DispatchTest, SupportedTiersAreOrderedAndIncludeScalar) {
  std::vector<Tier> tiers = SupportedTiers();
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers.front(), Tier::kScalar);
  for (size_t i = 1; i < tiers.size(); ++i) EXPECT_LT(static_cast<int>(tiers[i - 1]), static_cast<int>(tiers[i]));
  for (Tier t : kAllTiers) {
    const bool listed = std::find(tiers.begin(), tiers.end(), t) != tiers.end();
    EXPECT_EQ(listed, TierSupported(t)) << TierName(t);
    EXPECT_EQ(TierSupported(t), TierSupportedOn(t, DetectCpuFeatures())) << TierName(t);
  }
  EXPECT_EQ(tiers.back(), BestTierOn(DetectCpuFeatures()));
}

TEST(DispatchTest, TableForSupportedTiersAndUnsupportedError) {
  for (Tier t : kAllTiers) {
    Result<const KernelTable*> table = TableFor(t);
    if (TierSupported(t)) {
      ASSERT_OK(table);
      EXPECT_EQ((*table)->tier, t);
      EXPECT_EQ(std::string_view((*table)->name), TierName(t));
    } else {
      ASSERT_FALSE(table.has_value());
      EXPECT_EQ(table.error().code(), StatusCode::kUnsupported);
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

CpuFeatures FullAvx512Cpu() {
  CpuFeatures f;
  f.avx2 = f.fma = f.f16c = true;
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = f.avx512_vnni = f.avx512_bf16 = true;
  f.os_avx = f.os_avx512 = true;
  return f;
}

CpuFeatures FullNeonCpu() {
  CpuFeatures f;
  f.neon = f.neon_dotprod = f.neon_i8mm = f.neon_fp16 = f.neon_bf16 = true;
  return f;
}

TEST(CpuFeaturesTest, EmptyCpuSupportsOnlyScalar) {
  const CpuFeatures none;
  EXPECT_TRUE(TierSupportedOn(Tier::kScalar, none));
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx2, none));
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx512, none));
  EXPECT_FALSE(TierSupportedOn(Tier::kNeon, none));
  EXPECT_EQ(BestTierOn(none), Tier::kScalar);
  EXPECT_EQ(none.Summary(), "none");
}

TEST(CpuFeaturesTest, SummaryNamesNeonFeatures) {
  const std::string s = FullNeonCpu().Summary();
  for (const char* name : {"asimd", "asimddp", "i8mm", "fp16", "bf16"})
    EXPECT_NE(s.find(name), std::string::npos) << name << " missing from " << s;
}

#if defined(__aarch64__)
TEST(CpuFeaturesTest, NeonCpuSupportsNeonAndNoX86Tier) {
  // The x86 tiers' code is not in an aarch64 build, whatever bits a made-up CPU claims.
  CpuFeatures f = FullNeonCpu();
  f.avx2 = f.fma = f.f16c = f.os_avx = true;
  EXPECT_TRUE(TierSupportedOn(Tier::kNeon, f));
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx2, f));
  EXPECT_EQ(BestTierOn(f), Tier::kNeon);
  f.neon = false;  // Advanced SIMD is what the tier needs; dotprod alone does not make it
  EXPECT_FALSE(TierSupportedOn(Tier::kNeon, f));
  EXPECT_EQ(BestTierOn(f), Tier::kScalar);
}
#endif

#if defined(__x86_64__) || defined(__i386__)
TEST(CpuFeaturesTest, X86CpuNeverSupportsNeon) {
  EXPECT_FALSE(TierSupportedOn(Tier::kNeon, FullNeonCpu()));
  EXPECT_EQ(BestTierOn(FullNeonCpu()), Tier::kScalar);
}

TEST(CpuFeaturesTest, FullCpuSupportsEveryX86Tier) {
  const CpuFeatures f = FullAvx512Cpu();
  for (Tier t : {Tier::kScalar, Tier::kAvx2, Tier::kAvx512}) EXPECT_TRUE(TierSupportedOn(t, f)) << TierName(t);
  EXPECT_EQ(BestTierOn(f), Tier::kAvx512);
}

TEST(CpuFeaturesTest, OsWithoutZmmStateRefusesAvx512) {
  // The CPU has every AVX-512 bit but the OS does not save zmm registers (XCR0): AVX-512 code
  // would corrupt state on a context switch, so only AVX2 is allowed.
  CpuFeatures f = FullAvx512Cpu();
  f.os_avx512 = false;
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx512, f));
  EXPECT_TRUE(TierSupportedOn(Tier::kAvx2, f));
  EXPECT_EQ(BestTierOn(f), Tier::kAvx2);
}

TEST(CpuFeaturesTest, OsWithoutYmmStateRefusesBothVectorTiers) {
  CpuFeatures f = FullAvx512Cpu();
  f.os_avx = false;
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx2, f));
  EXPECT_FALSE(TierSupportedOn(Tier::kAvx512, f));
  EXPECT_EQ(BestTierOn(f), Tier::kScalar);
}

TEST(CpuFeaturesTest, EachMissingAvx512FeatureRefusesAvx512) {
  bool CpuFeatures::*const required[] = {&CpuFeatures::avx512f,  &CpuFeatures::avx512bw,    &CpuFeatures::avx512dq,
                                         &CpuFeatures::avx512vl, &CpuFeatures::avx512_vnni, &CpuFeatures::avx512_bf16};
  for (bool CpuFeatures::*field : required) {
    CpuFeatures f = FullAvx512Cpu();
    f.*field = false;
    EXPECT_FALSE(TierSupportedOn(Tier::kAvx512, f)) << f.Summary();
    EXPECT_TRUE(TierSupportedOn(Tier::kAvx2, f)) << f.Summary();
    EXPECT_EQ(BestTierOn(f), Tier::kAvx2);
  }
}

TEST(CpuFeaturesTest, EachMissingAvx2FeatureRefusesAvx2AndAvx512) {
  // The AVX-512 tier also runs AVX2/FMA/F16C code, so it needs them too.
  for (bool CpuFeatures::*field : {&CpuFeatures::avx2, &CpuFeatures::fma, &CpuFeatures::f16c}) {
    CpuFeatures f = FullAvx512Cpu();
    f.*field = false;
    EXPECT_FALSE(TierSupportedOn(Tier::kAvx2, f)) << f.Summary();
    EXPECT_FALSE(TierSupportedOn(Tier::kAvx512, f)) << f.Summary();
    EXPECT_EQ(BestTierOn(f), Tier::kScalar);
  }
}

#endif  // x86

TEST(CpuFeaturesTest, SummaryNamesFeatures) {
  const std::string s = FullAvx512Cpu().Summary();
  for (const char* name : {"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "os:ymm", "os:zmm"})
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
  for (Tier t : kAllTiers) {
    if (!TierSupported(t)) {
      EXPECT_EQ(SetKernelTier(TierName(t)).code(), StatusCode::kUnsupported);
    }
  }
}

}  // namespace
}  // namespace fak::kernels
