// CpuFeatures: on x86, cpuid leaf 1 / leaf 7 bits checked against XCR0 as ggml does, because a CPU
// may report AVX-512 while the OS does not save its registers; on aarch64, the HWCAP bits the kernel
// reports (it sets them only for what it supports, so no OS check is needed).
#include "kernels/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace fak::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
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
#elif defined(__aarch64__) && defined(__linux__)
CpuFeatures Detect() {
  CpuFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.neon = hw & HWCAP_ASIMD;
  f.neon_dotprod = hw & HWCAP_ASIMDDP;
  f.neon_fp16 = (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP);
  f.neon_i8mm = hw2 & HWCAP2_I8MM;
  f.neon_bf16 = hw2 & HWCAP2_BF16;
  return f;
}
#else
CpuFeatures Detect() { return {}; }  // an architecture without a SIMD tier: scalar only
#endif

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
  add(neon, "asimd");
  add(neon_dotprod, "asimddp");
  add(neon_i8mm, "i8mm");
  add(neon_fp16, "fp16");
  add(neon_bf16, "bf16");
  return s.empty() ? "none" : s;
}

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

bool TierSupportedOn(Tier tier, const CpuFeatures& features) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr bool kX86 = true, kArm64 = false;
#elif defined(__aarch64__)
  constexpr bool kX86 = false, kArm64 = true;
#else
  constexpr bool kX86 = false, kArm64 = false;
#endif
  switch (tier) {
    case Tier::kScalar: return true;
    case Tier::kAvx2: return kX86 && features.SupportsAvx2Tier();
    case Tier::kAvx512: return kX86 && features.SupportsAvx512Tier();
    case Tier::kNeon: return kArm64 && features.SupportsNeonTier();
  }
  return false;
}

Tier BestTierOn(const CpuFeatures& features) {
  for (Tier t : {Tier::kAvx512, Tier::kAvx2, Tier::kNeon})
    if (TierSupportedOn(t, features)) return t;
  return Tier::kScalar;
}

}  // namespace fak::kernels
