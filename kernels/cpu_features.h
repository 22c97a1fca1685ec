// CpuFeatures: what this CPU and its OS let us run — on x86 the cpuid bits and XCR0 state (xgetbv),
// on aarch64 the kernel's HWCAP bits (getauxval). The fields of the other architecture stay false.
#ifndef FAK_KERNELS_CPU_FEATURES_H_
#define FAK_KERNELS_CPU_FEATURES_H_

#include <string>

#include "kernels/kernel_table.h"

namespace fak::kernels {

struct CpuFeatures {
  // x86
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false;
  bool os_avx = false, os_avx512 = false;  // the OS saves ymm / zmm state (XCR0)
  // aarch64 (HWCAP_ASIMD, HWCAP_ASIMDDP, HWCAP2_I8MM, HWCAP_FPHP + HWCAP_ASIMDHP, HWCAP2_BF16)
  bool neon = false, neon_dotprod = false, neon_i8mm = false, neon_fp16 = false, neon_bf16 = false;

  bool SupportsAvx2Tier() const { return os_avx && avx2 && fma && f16c; }
  bool SupportsAvx512Tier() const {
    return SupportsAvx2Tier() && os_avx512 && avx512f && avx512bw && avx512dq && avx512vl && avx512_vnni &&
           avx512_bf16;
  }
  bool SupportsNeonTier() const { return neon; }
  // "avx2 fma f16c avx512f ..." (or "asimd asimddp ...") for reports.
  std::string Summary() const;
};

// Detected once; cheap after the first call.
const CpuFeatures& DetectCpuFeatures();

// Whether a CPU/OS with `features` can run `tier`. A pure function of its arguments, so the
// decision can be tested with a made-up CPU (dispatch.cc applies it to DetectCpuFeatures()).
// A tier of another architecture is never supported: its code is not in this build.
bool TierSupportedOn(Tier tier, const CpuFeatures& features);
// The fastest tier TierSupportedOn allows (scalar at worst).
Tier BestTierOn(const CpuFeatures& features);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_CPU_FEATURES_H_
