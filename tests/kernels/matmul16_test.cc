// Matmul over f16 and bf16 weights (KernelTable::matmul_f16 / matmul_bf16) in every tier: each
// 16-bit element is widened exactly, so every output has the bits of the f32 matmul over the
// widened weights — whatever M, the column range, the strides or the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/kv_convert.h"
#include "kernels/parallel.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

struct Format {
  FloatWeights kind;
  const char* name;
  uint16_t (*round)(float);
  float (*widen)(uint16_t);
};
const Format kFormats[] = {{FloatWeights::kF16, "f16", &F32ToF16, &F16ToF32},
                           {FloatWeights::kBF16, "bf16", &F32ToBf16, &Bf16ToF32}};

class MatMul16Test : public TierTest {
 protected:
  auto Kernel(const Format& f) const { return f.kind == FloatWeights::kF16 ? T().matmul_f16 : T().matmul_bf16; }
};
FAK_INSTANTIATE_OVER_TIERS(MatMul16Test);

// w rounded to 16 bits (with ld ≥ k, padding poisoned), and the same values widened back to f32.
struct Weights16 {
  std::vector<uint16_t> bits;
  std::vector<float> widened;
};
Weights16 Round(const Format& f, const std::vector<float>& w, size_t n, size_t k, size_t ld) {
  Weights16 r{std::vector<uint16_t>(n * ld, f.round(1e30f)), std::vector<float>(n * k)};
  for (size_t j = 0; j < n; ++j)
    for (size_t t = 0; t < k; ++t) {
      r.bits[j * ld + t] = f.round(w[j * k + t]);
      r.widened[j * k + t] = f.widen(r.bits[j * ld + t]);
    }
  return r;
}

TEST_P(MatMul16Test, GivesTheBitsOfTheF32MatMulOnTheWidenedWeights) {
  const size_t n = 101;  // not a multiple of 4, 6, 8 or 48
  internal::ThreadPool pool(2);
  for (const Format& f : kFormats) {
    // K: under a register, one K-block with and without a scalar tail, three K-blocks.
    for (size_t k : {7, 256, 300, 1600}) {
      const size_t ldw = k + 3;  // W's stride is honoured and its padding never read
      const Weights16 w = Round(f, RandomVector(n * k, 5 + k), n, k, ldw);
      for (size_t m : {1, 3, 8, 17, 64, 65, 130}) {  // decode; in-place strips; packed (widening) strips
        SCOPED_TRACE(::testing::Message() << f.name << " k=" << k << " m=" << m);
        const std::vector<float> x = RandomVector(m * k, 6 + m + k);
        std::vector<float> want(m * n), got(m * n, std::nanf("")), pieces(m * n, std::nanf("")), pooled(m * n);
        T().matmul(x.data(), k, w.widened.data(), k, want.data(), n, m, k, 0, n);
        Kernel(f)(x.data(), k, w.bits.data(), ldw, got.data(), n, m, k, 0, n);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
        const size_t cuts[] = {0, 1, 5, 6, 49, 50, 97, 101};
        for (size_t c = 0; c + 1 < std::size(cuts); ++c)
          Kernel(f)(x.data(), k, w.bits.data(), ldw, pieces.data(), n, m, k, cuts[c], cuts[c + 1]);
        EXPECT_EQ(0, std::memcmp(pieces.data(), want.data(), want.size() * sizeof(float)));
        WeightProduct p{false, QuantType::kQ8_0, w.bits.data(), ldw * sizeof(uint16_t), pooled.data(), n, n};
        p.floats = f.kind;
        ParallelMatMuls(T(), &pool, x.data(), k, m, k, {&p, 1});
        EXPECT_EQ(0, std::memcmp(pooled.data(), want.data(), want.size() * sizeof(float)));
      }
    }
  }
}

// Non-vacuity: the kernel reads the 16-bit values it is given — rounding the weights changes the
// outputs, and changing one stored element changes that weight row's column and nothing else.
TEST_P(MatMul16Test, OutputsFollowTheStoredElements) {
  const size_t m = 5, k = 300, n = 37;
  const std::vector<float> x = RandomVector(m * k, 31), w = RandomVector(n * k, 32);
  for (const Format& f : kFormats) {
    SCOPED_TRACE(f.name);
    Weights16 w16 = Round(f, w, n, k, k);
    std::vector<float> exact(m * n), base(m * n), moved(m * n);
    T().matmul(x.data(), k, w.data(), k, exact.data(), n, m, k, 0, n);
    Kernel(f)(x.data(), k, w16.bits.data(), k, base.data(), n, m, k, 0, n);
    EXPECT_NE(0, std::memcmp(exact.data(), base.data(), base.size() * sizeof(float)));
    const size_t row = 11;
    w16.bits[row * k + 123] ^= 0x4000;  // an exponent bit: a large change
    Kernel(f)(x.data(), k, w16.bits.data(), k, moved.data(), n, m, k, 0, n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j)
        EXPECT_EQ(Bits(moved[i * n + j]) != Bits(base[i * n + j]), j == row) << "row " << i << " col " << j;
  }
}

}  // namespace
}  // namespace fak::kernels::testing
