// Test entry point: refuses to silently run a tier other than the one FAK_KERNEL_TIER asked for.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "fak/kernels/kernel_tier.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  fak::Status env = fak::KernelTierEnvironmentStatus();
  if (!env.ok()) {
    std::fprintf(stderr, "\n*** SKIPPING THIS TIER: %s ***\n\n", env.ToString().c_str());
    return 77;  // ctest SKIP_RETURN_CODE
  }
  std::printf("fak tests: kernel tier %s (cpu: %s)\n", std::string(fak::ActiveKernelTier()).c_str(),
              fak::CpuFeatureSummary().c_str());
  return RUN_ALL_TESTS();
}
