// The kernel tier registry: the tiers this build has, one entry per kernels/arch/ translation unit.
//
// A tier is a name, the CPU features it needs, a fill function for the kernel table and the
// compile flags of its translation unit. The list is chosen per target architecture at configure
// time (cmake/kernel_tiers.cmake, one `fak_kernel_tier(name flags...)` line per tier), which
// generates the list RegisteredTiers() reads; the translation unit supplies the rest with one
// FAK_DEFINE_KERNEL_TIER(fill) line. docs/kernels.md shows how to add a tier.
#ifndef FAK_KERNELS_TIER_REGISTRY_H_
#define FAK_KERNELS_TIER_REGISTRY_H_

#include <span>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"

namespace fak::kernels {

// One registered tier. Constant data: reading it runs none of the tier's code, so every tier's
// entry can be inspected on any CPU; `fill` may run only where `requires_features` are present.
struct KernelTierSpec {
  const char* name;                 // the registry line's name: FAK_KERNEL_TIER, bindings, reports
  CpuFeatures requires_features;    // what the tier's compile flags let the compiler use
  void (*fill)(KernelTable* table);  // sets every op; dispatch sets table->tier and table->name
};

// The registered tiers, slowest first (the registry's order; scalar, which needs nothing, first).
std::span<const KernelTierSpec* const> RegisteredTiers();

// The features the including translation unit's compile flags enable, read from the compiler's
// predefined macros. A tier requires exactly these, so its CPU predicate cannot fall behind its
// flags. (constexpr implies inline; `static` keeps each translation unit's own answer its own.)
static constexpr CpuFeatures CompiledCpuFeatures() {
  CpuFeatures f;
#if defined(__AVX__)
  f.Add(CpuFeature::kOsYmm);
#endif
#if defined(__AVX2__)
  f.Add(CpuFeature::kAvx2);
#endif
#if defined(__FMA__)
  f.Add(CpuFeature::kFma);
#endif
#if defined(__F16C__)
  f.Add(CpuFeature::kF16c);
#endif
#if defined(__AVX512F__)
  f.Add(CpuFeature::kAvx512f);
  f.Add(CpuFeature::kOsZmm);
#endif
#if defined(__AVX512BW__)
  f.Add(CpuFeature::kAvx512bw);
#endif
#if defined(__AVX512DQ__)
  f.Add(CpuFeature::kAvx512dq);
#endif
#if defined(__AVX512VL__)
  f.Add(CpuFeature::kAvx512vl);
#endif
#if defined(__AVX512VNNI__)
  f.Add(CpuFeature::kAvx512Vnni);
#endif
#if defined(__AVX512BF16__)
  f.Add(CpuFeature::kAvx512Bf16);
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)  // the scalar tier is built +nosimd, without it
  f.Add(CpuFeature::kAsimd);
#endif
#if defined(__ARM_FEATURE_DOTPROD)
  f.Add(CpuFeature::kAsimdDotprod);
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
  f.Add(CpuFeature::kI8mm);
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
  f.Add(CpuFeature::kFp16);
#endif
#if defined(__ARM_FEATURE_BF16)
  f.Add(CpuFeature::kBf16);
#endif
  return f;
}

#define FAK_KERNEL_TIER_CAT2(a, b) a##b
#define FAK_KERNEL_TIER_CAT(a, b) FAK_KERNEL_TIER_CAT2(a, b)
#define FAK_KERNEL_TIER_STR2(a) #a
#define FAK_KERNEL_TIER_STR(a) FAK_KERNEL_TIER_STR2(a)
// The registry entry of tier `name` (an identifier): kKernelTier_<name>.
#define FAK_KERNEL_TIER_SPEC(name) FAK_KERNEL_TIER_CAT(kKernelTier_, name)

// Defines this translation unit's registry entry, in namespace fak::kernels. The build passes
// -DFAK_KERNEL_TIER_NAME=<name> from the registry line, so the name is stated once, there.
#define FAK_DEFINE_KERNEL_TIER(fill_function)                                                   \
  extern const ::fak::kernels::KernelTierSpec FAK_KERNEL_TIER_SPEC(FAK_KERNEL_TIER_NAME);           \
  constinit const ::fak::kernels::KernelTierSpec FAK_KERNEL_TIER_SPEC(FAK_KERNEL_TIER_NAME) = {    \
      FAK_KERNEL_TIER_STR(FAK_KERNEL_TIER_NAME), ::fak::kernels::CompiledCpuFeatures(), &fill_function}

}  // namespace fak::kernels

#endif  // FAK_KERNELS_TIER_REGISTRY_H_
