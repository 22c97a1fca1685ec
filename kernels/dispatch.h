// Dispatch: the active kernel tier — fak's one piece of global mutable state.
//
// The tier is chosen on first use: the registered tier FAK_KERNEL_TIER names if set and supported,
// otherwise the fastest registered tier the CPU and OS support (tier_registry.h). Callers fetch the
// table once per large call (a forward pass) and call through it; changing the tier affects later
// calls only.
#ifndef FAK_KERNELS_DISPATCH_H_
#define FAK_KERNELS_DISPATCH_H_

#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"

namespace fak::kernels {

const KernelTable& Active();
Tier ActiveTier();
bool TierSupported(Tier tier);
// Every registered tier, and those this CPU and OS support, slowest first.
std::vector<Tier> RegisteredTierList();
std::vector<Tier> SupportedTiers();
// The registry's name (a NUL-terminated string with static storage).
std::string_view TierName(Tier tier);
// InvalidArgument naming the value and the registered names for a name the registry lacks.
Result<Tier> ParseTier(std::string_view name);
// The table of a supported tier, for tests and benches that compare tiers side by side.
Result<const KernelTable*> TableFor(Tier tier);
// Makes `tier` active; an error if this CPU or OS cannot run it.
Status SetTier(Tier tier);
// Error when FAK_KERNEL_TIER is set to an unknown or unsupported tier (the best tier is then active).
Status EnvironmentTierStatus();

// Whether a CPU/OS with `features` can run `tier`: it has every feature the tier requires. A pure
// function of its arguments, so the decision can be tested with a made-up CPU.
bool TierSupportedOn(Tier tier, const CpuFeatures& features);
// The fastest (last registered) tier TierSupportedOn allows; scalar when none does.
Tier BestTierOn(const CpuFeatures& features);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_DISPATCH_H_
