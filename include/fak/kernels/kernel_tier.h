// Kernel tier: which arithmetic regime fak's kernels run in — one of the tiers this build
// registered for its architecture (x86-64: scalar, avx2, avx512_skx, avx512; others: scalar).
//
// Results are bit-exact within one tier and differ in rounding across tiers, so the tier is part
// of every cache binding. It is picked at start from the CPU (the fastest it supports, or the one
// FAK_KERNEL_TIER names) and may be pinned here. Changing it affects calls that start afterwards.
#ifndef FAK_KERNELS_KERNEL_TIER_H_
#define FAK_KERNELS_KERNEL_TIER_H_

#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// The active tier's name, e.g. "avx512" (views a NUL-terminated string with static storage).
FAK_EXPORT std::string_view ActiveKernelTier();
// The tiers this CPU and OS can run, slowest first.
FAK_EXPORT std::vector<std::string> SupportedKernelTiers();
// Pins the tier; InvalidArgument for a name the build did not register, Unsupported (naming the
// missing CPU features) for a tier this CPU lacks.
FAK_EXPORT Status SetKernelTier(std::string_view name);
// An error when FAK_KERNEL_TIER names an unknown or unsupported tier; OK otherwise.
FAK_EXPORT Status KernelTierEnvironmentStatus();
// The CPU features fak looked at, e.g. "avx2 fma f16c avx512f ..." ("none" where it detects none).
FAK_EXPORT std::string CpuFeatureSummary();

}  // namespace fak

#endif  // FAK_KERNELS_KERNEL_TIER_H_
