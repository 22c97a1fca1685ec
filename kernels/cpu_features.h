// CpuFeatures: what this CPU and its OS let us run (x86: cpuid bits and XCR0 state via xgetbv;
// aarch64: HWCAPs via getauxval), as a set that kernel tiers state their requirements in (tier_registry.h).
#ifndef FAK_KERNELS_CPU_FEATURES_H_
#define FAK_KERNELS_CPU_FEATURES_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace fak::kernels {

// One feature a kernel tier may need. x86: the OS entries say the OS saves that register state on
// a context switch (XCR0): a CPU may report AVX-512 while the OS does not save zmm registers.
// aarch64: the kernel's HWCAP bits, which it sets only for what it supports (so no OS entries).
enum class CpuFeature : int {
  kAvx2, kFma, kF16c,
  kAvx512f, kAvx512bw, kAvx512dq, kAvx512vl, kAvx512Vnni, kAvx512Bf16,
  kOsYmm, kOsZmm,
  kAsimd, kAsimdDotprod, kI8mm, kFp16, kBf16,  // HWCAP_ASIMD, _ASIMDDP, HWCAP2_I8MM, FPHP+ASIMDHP, HWCAP2_BF16
  kCount,
};

// "avx512_vnni", "os:zmm", ...
std::string_view CpuFeatureName(CpuFeature feature);

// A set of CpuFeature; constexpr, so a tier's requirements are constant data.
class CpuFeatures {
 public:
  constexpr CpuFeatures() = default;
  constexpr CpuFeatures(std::initializer_list<CpuFeature> features) {
    for (CpuFeature f : features) Add(f);
  }
  constexpr void Add(CpuFeature f) { bits_ |= Bit(f); }
  constexpr void Remove(CpuFeature f) { bits_ &= ~Bit(f); }
  constexpr bool Has(CpuFeature f) const { return (bits_ & Bit(f)) != 0; }
  constexpr bool HasAll(CpuFeatures other) const { return (bits_ & other.bits_) == other.bits_; }
  // The features of `wanted` this set lacks.
  constexpr CpuFeatures Missing(CpuFeatures wanted) const { return FromBits(wanted.bits_ & ~bits_); }
  constexpr bool operator==(const CpuFeatures&) const = default;
  // "avx2 fma f16c avx512f ..." for reports, "none" when empty.
  std::string Summary() const;

 private:
  static constexpr uint64_t Bit(CpuFeature f) { return uint64_t{1} << static_cast<int>(f); }
  static constexpr CpuFeatures FromBits(uint64_t bits) {
    CpuFeatures s;
    s.bits_ = bits;
    return s;
  }
  uint64_t bits_ = 0;
};

// Detected once; cheap after the first call. Empty on an architecture without detection yet.
const CpuFeatures& DetectCpuFeatures();

}  // namespace fak::kernels

#endif  // FAK_KERNELS_CPU_FEATURES_H_
