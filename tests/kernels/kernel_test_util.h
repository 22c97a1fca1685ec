// Helpers shared by the kernel tests: a fixture parameterised over every tier this host supports
// (independent of FAK_KERNEL_TIER, which only picks the *active* tier), tolerance checks against
// the double-precision reference, and guard-band buffers that catch writes past n.
#ifndef FAK_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define FAK_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kernel_table.h"

namespace fak::kernels::testing {

// Unit roundoff of float32 (half an ulp of 1.0): every tolerance below is a multiple of it.
inline constexpr double kU = 1.0 / (1 << 24);

// γ_n = n·u/(1 − n·u): the classic worst-case relative bound on an n-term float sum/dot product,
// whatever the summation order (sequential, lane-split SIMD, tree hadd). It is rigorous, so a
// failure is a real bug, yet tight enough that one dropped or doubled term of a random vector of
// length ≤ a few thousand exceeds it by orders of magnitude.
inline double Gamma(size_t n) {
  double nu = static_cast<double>(n + 2) * kU;  // +2: a rounded product and the final hadd/store
  return nu / (1.0 - nu);
}

class TierTest : public ::testing::TestWithParam<Tier> {
 protected:
  const KernelTable& T() const {
    Result<const KernelTable*> t = TableFor(GetParam());
    if (!t.has_value()) std::abort();  // SupportedTiers() only lists tiers TableFor accepts
    return **t;
  }
};

inline std::string TierParamName(const ::testing::TestParamInfo<Tier>& info) {
  return std::string(TierName(info.param));
}

#define FAK_INSTANTIATE_OVER_TIERS(Fixture)                                                                \
  INSTANTIATE_TEST_SUITE_P(Tiers, Fixture, ::testing::ValuesIn(::fak::kernels::SupportedTiers()), \
                           ::fak::kernels::testing::TierParamName)

inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// EXPECTs |got[i] − ref[i]| ≤ tol[i] for every i; reports the worst offender only (one line, not n).
inline void ExpectWithin(const float* got, const std::vector<double>& ref, const std::vector<double>& tol,
                         const std::string& what) {
  size_t worst = 0, bad = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    double ratio = err / tol[i];
    if (!(err <= tol[i])) ++bad;  // NaN counts as a failure
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.size() << " outside tolerance; worst at [" << worst
                     << "] got " << got[worst] << " ref " << ref[worst] << " tol " << tol[worst];
}

// A float buffer of n elements followed by a guard band of NaN-patterned sentinels.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 32;
  static constexpr uint32_t kSentinelBits = 0x7fc0dead;
  explicit GuardedBuffer(size_t n) : n_(n), data_(n + kGuard) {
    for (size_t i = 0; i < data_.size(); ++i) std::memcpy(&data_[i], &kSentinelBits, 4);
  }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](size_t i) { return data_[i]; }
  // True while nothing wrote past element n.
  bool GuardIntact() const {
    for (size_t i = n_; i < data_.size(); ++i)
      if (Bits(data_[i]) != kSentinelBits) return false;
    return true;
  }

 private:
  size_t n_;
  std::vector<float> data_;
};

// Odd and even lengths around every tier's vector width (1, 8, 16) and register tiles.
inline const std::vector<size_t>& TailLengths() {
  static const std::vector<size_t> kLengths = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 64, 100, 257, 1001};
  return kLengths;
}

}  // namespace fak::kernels::testing

#endif  // FAK_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
