// RegisteredTiers: the list cmake/kernel_tiers.cmake generated for this architecture, as pointers to
// the entries the tier translation units define (FAK_DEFINE_KERNEL_TIER).
#include "kernels/tier_registry.h"

#include <iterator>

namespace fak::kernels {

// kernel_tier_list.inc holds one FAK_KERNEL_TIER(name) line per registry line, in its order.
#define FAK_KERNEL_TIER(name) extern const KernelTierSpec FAK_KERNEL_TIER_SPEC(name);
#include "kernels/kernel_tier_list.inc"
#undef FAK_KERNEL_TIER

namespace {

constexpr const KernelTierSpec* kRegistered[] = {
#define FAK_KERNEL_TIER(name) &FAK_KERNEL_TIER_SPEC(name),
#include "kernels/kernel_tier_list.inc"
#undef FAK_KERNEL_TIER
};

}  // namespace

std::span<const KernelTierSpec* const> RegisteredTiers() { return kRegistered; }

}  // namespace fak::kernels
