// CpuFeatures: cpuid leaf 1 / leaf 7 bits, checked against XCR0 as ggml does, because a CPU may
// report AVX-512 while the OS does not save its registers.
#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>

namespace fak::kernels {
namespace {

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (osxsave) {
    uint64_t xcr0 = ReadXcr0();
    f.os_avx = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
    f.os_avx512 = (xcr0 & 0xe6) == 0xe6;       // + opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1;
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512_vnni = (c >> 11) & 1;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = (a >> 5) & 1;
  return f;
}

}  // namespace

std::string CpuFeatures::Summary() const {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512dq, "avx512dq");
  add(avx512vl, "avx512vl");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(os_avx, "os:ymm");
  add(os_avx512, "os:zmm");
  return s.empty() ? "none" : s;
}

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool TierSupportedOn(Tier tier, const CpuFeatures& features) {
  switch (tier) {
    case Tier::kScalar: return true;
    case Tier::kAvx2: return features.SupportsAvx2Tier();
    case Tier::kAvx512: return features.SupportsAvx512Tier();
  }
  return false;
}

Tier BestTierOn(const CpuFeatures& features) {
  if (TierSupportedOn(Tier::kAvx512, features)) return Tier::kAvx512;
  if (TierSupportedOn(Tier::kAvx2, features)) return Tier::kAvx2;
  return Tier::kScalar;
}

}  // namespace fak::kernels
