// Test entry point: refuses to silently run a tier other than the one FAK_KERNEL_TIER asked for.
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "fak/kernels/kernel_tier.h"
#include "fak/kernels/kv_dtype.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  fak::Status env = fak::KernelTierEnvironmentStatus();
  if (!env.ok()) {
    std::fprintf(stderr, "\n*** SKIPPING THIS TIER: %s ***\n\n", env.ToString().c_str());
    return 77;  // ctest SKIP_RETURN_CODE
  }
  const char* kv = std::getenv("FAK_KV_DTYPE");
  if (kv != nullptr && *kv != '\0' && !fak::ParseKVDtype(kv).has_value()) {
    std::fprintf(stderr, "FAK_KV_DTYPE=%s: expected f32, f16 or bf16\n", kv);
    return 2;
  }
  std::printf("fak tests: kernel tier %s, KV dtype %s (cpu: %s)\n", std::string(fak::ActiveKernelTier()).c_str(),
              kv != nullptr && *kv != '\0' ? kv : "f32", fak::CpuFeatureSummary().c_str());
  return RUN_ALL_TESTS();
}
