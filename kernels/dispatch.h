// Dispatch: the active kernel tier — fak's one piece of global mutable state.
//
// The tier is chosen on first use: FAK_KERNEL_TIER=scalar|avx2|avx512|neon if set and supported,
// otherwise the best tier the CPU and OS support. Callers fetch the table once per large call
// (a forward pass) and call through it; changing the tier affects later calls only.
#ifndef FAK_KERNELS_DISPATCH_H_
#define FAK_KERNELS_DISPATCH_H_

#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "kernels/kernel_table.h"

namespace fak::kernels {

const KernelTable& Active();
Tier ActiveTier();
bool TierSupported(Tier tier);
std::vector<Tier> SupportedTiers();
std::string_view TierName(Tier tier);
Result<Tier> ParseTier(std::string_view name);
// The table of a supported tier, for tests and benches that compare tiers side by side.
Result<const KernelTable*> TableFor(Tier tier);
// Makes `tier` active; an error if this CPU or OS cannot run it.
Status SetTier(Tier tier);
// Error when FAK_KERNEL_TIER is set to an unknown or unsupported tier (the best tier is then active).
Status EnvironmentTierStatus();

}  // namespace fak::kernels

#endif  // FAK_KERNELS_DISPATCH_H_
