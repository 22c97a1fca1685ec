// CpuFeatures: what this CPU and its OS let us run (cpuid bits and XCR0 state via xgetbv).
#ifndef FAK_KERNELS_CPU_FEATURES_H_
#define FAK_KERNELS_CPU_FEATURES_H_

#include <string>

#include "kernels/kernel_table.h"

namespace fak::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512_vnni = false, avx512_bf16 = false;
  bool os_avx = false, os_avx512 = false;  // the OS saves ymm / zmm state (XCR0)

  bool SupportsAvx2Tier() const { return os_avx && avx2 && fma && f16c; }
  bool SupportsAvx512Tier() const {
    return SupportsAvx2Tier() && os_avx512 && avx512f && avx512bw && avx512dq && avx512vl && avx512_vnni &&
           avx512_bf16;
  }
  // "avx2 fma f16c avx512f ..." for reports.
  std::string Summary() const;
};

// Detected once; cheap after the first call.
const CpuFeatures& DetectCpuFeatures();

// Whether a CPU/OS with `features` can run `tier`. A pure function of its arguments, so the
// decision can be tested with a made-up CPU (dispatch.cc applies it to DetectCpuFeatures()).
bool TierSupportedOn(Tier tier, const CpuFeatures& features);
// The fastest tier TierSupportedOn allows (scalar at worst).
Tier BestTierOn(const CpuFeatures& features);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_CPU_FEATURES_H_
