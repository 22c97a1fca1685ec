// CpuFeatures detection, per architecture. x86: cpuid leaf 1 / leaf 7 bits, checked against XCR0
// as ggml does, because a CPU may report AVX-512 while the OS does not save its registers.
// aarch64 Linux: the HWCAP and HWCAP2 words the kernel passes in the auxiliary vector.
#include "kernels/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <cstdint>

namespace fak::kernels {
namespace {

static_assert(static_cast<int>(CpuFeature::kCount) <= 64, "CpuFeatures holds 64 bits");

#if defined(__x86_64__) || defined(__i386__)

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  auto set = [&f](CpuFeature feature, bool on) {
    if (on) f.Add(feature);
  };
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  set(CpuFeature::kFma, (c >> 12) & 1);
  set(CpuFeature::kF16c, (c >> 29) & 1);
  if (osxsave) {
    const uint64_t xcr0 = ReadXcr0();
    set(CpuFeature::kOsYmm, (xcr0 & 0x6) == 0x6);     // SSE + AVX state
    set(CpuFeature::kOsZmm, (xcr0 & 0xe6) == 0xe6);   // + opmask, ZMM_Hi256, Hi16_ZMM
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    set(CpuFeature::kAvx2, (b >> 5) & 1);
    set(CpuFeature::kAvx512f, (b >> 16) & 1);
    set(CpuFeature::kAvx512dq, (b >> 17) & 1);
    set(CpuFeature::kAvx512bw, (b >> 30) & 1);
    set(CpuFeature::kAvx512vl, (b >> 31) & 1);
    set(CpuFeature::kAvx512Vnni, (c >> 11) & 1);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) set(CpuFeature::kAvx512Bf16, (a >> 5) & 1);
  return f;
}

#elif defined(__aarch64__) && defined(__linux__)

CpuFeatures Detect() {
  CpuFeatures f;
  auto set = [&f](CpuFeature feature, bool on) {
    if (on) f.Add(feature);
  };
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  set(CpuFeature::kAsimd, hw & HWCAP_ASIMD);
  set(CpuFeature::kAsimdDotprod, hw & HWCAP_ASIMDDP);
  set(CpuFeature::kFp16, (hw & HWCAP_FPHP) && (hw & HWCAP_ASIMDHP));  // scalar and vector half arithmetic
  set(CpuFeature::kI8mm, hw2 & HWCAP2_I8MM);
  set(CpuFeature::kBf16, hw2 & HWCAP2_BF16);
  return f;
}

#elif defined(__aarch64__)

// Outside Linux no HWCAPs: Advanced SIMD, which every AArch64 ABI requires, and nothing optional.
CpuFeatures Detect() { return {CpuFeature::kAsimd}; }

#else

// No detection on this architecture: only tiers that need no feature (scalar) run.
CpuFeatures Detect() { return {}; }

#endif

}  // namespace

std::string_view CpuFeatureName(CpuFeature feature) {
  switch (feature) {
    case CpuFeature::kAvx2: return "avx2";
    case CpuFeature::kFma: return "fma";
    case CpuFeature::kF16c: return "f16c";
    case CpuFeature::kAvx512f: return "avx512f";
    case CpuFeature::kAvx512bw: return "avx512bw";
    case CpuFeature::kAvx512dq: return "avx512dq";
    case CpuFeature::kAvx512vl: return "avx512vl";
    case CpuFeature::kAvx512Vnni: return "avx512_vnni";
    case CpuFeature::kAvx512Bf16: return "avx512_bf16";
    case CpuFeature::kOsYmm: return "os:ymm";
    case CpuFeature::kOsZmm: return "os:zmm";
    case CpuFeature::kAsimd: return "asimd";
    case CpuFeature::kAsimdDotprod: return "asimddp";
    case CpuFeature::kI8mm: return "i8mm";
    case CpuFeature::kFp16: return "fp16";
    case CpuFeature::kBf16: return "bf16";
    case CpuFeature::kCount: break;
  }
  return "unknown";
}

std::string CpuFeatures::Summary() const {
  std::string s;
  for (int i = 0; i < static_cast<int>(CpuFeature::kCount); ++i) {
    const auto feature = static_cast<CpuFeature>(i);
    if (!Has(feature)) continue;
    if (!s.empty()) s += ' ';
    s += CpuFeatureName(feature);
  }
  return s.empty() ? "none" : s;
}

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace fak::kernels
