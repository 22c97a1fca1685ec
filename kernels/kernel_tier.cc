// The public face of dispatch.h.
#include "fak/kernels/kernel_tier.h"

#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"

namespace fak {

std::string_view ActiveKernelTier() { return kernels::TierName(kernels::ActiveTier()); }

std::vector<std::string> SupportedKernelTiers() {
  std::vector<std::string> names;
  for (kernels::Tier t : kernels::SupportedTiers()) names.emplace_back(kernels::TierName(t));
  return names;
}

Status SetKernelTier(std::string_view name) {
  FAK_ASSIGN_OR_RETURN(kernels::Tier tier, kernels::ParseTier(name));
  return kernels::SetTier(tier);
}

Status KernelTierEnvironmentStatus() { return kernels::EnvironmentTierStatus(); }

std::string CpuFeatureSummary() { return kernels::DetectCpuFeatures().Summary(); }

}  // namespace fak
