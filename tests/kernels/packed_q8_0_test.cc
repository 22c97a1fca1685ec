// Q8_0 weights packed eight rows at a time (BlockQ8_0x8, KernelTable::matmul_q8_0x8) in every tier:
// against the product of the dequantized operands, the batch-independence contract (each output's
// bits do not depend on M, the column range or the thread count), and through ParallelMatMuls. In
// the scalar tier the packed kernel keeps the plain Q8_0 kernel's bits (its step already sums each
// block in integers first). With non-vacuity controls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/parallel.h"
#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "kernels/ref/ref_quant.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace fak::kernels::testing {
namespace {

constexpr QuantType kQ8 = QuantType::kQ8_0;

class PackedQ8_0Test : public QuantTierTest {
 protected:
  std::vector<uint8_t> Pack(const std::vector<uint8_t>& w, size_t n, size_t k) const {
    std::vector<uint8_t> packed(w.size());
    PackQ8_0x8(w.data(), n, k, packed.data());
    return packed;
  }
  std::vector<float> RunPacked(const std::vector<float>& x, const std::vector<uint8_t>& packed, size_t m, size_t k,
                               size_t n) const {
    std::vector<uint8_t> xq = QuantizeAct(kQ8, x, m, k);
    std::vector<float> y(m * n, std::nanf(""));
    T().matmul_q8_0x8(xq.data(), packed.data(), QuantRowBytes(kQ8, k), y.data(), n, m, k, 0, n);
    return y;
  }
};
FAK_INSTANTIATE_OVER_TIERS(PackedQ8_0Test);

TEST_P(PackedQ8_0Test, PackingMovesEveryByteOnce) {
  const size_t n = 16, k = 64;
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 5), n, k), packed = Pack(w, n, k);
  const auto* plain = reinterpret_cast<const BlockQ8_0*>(w.data());
  const auto* groups = reinterpret_cast<const BlockQ8_0x8*>(packed.data());
  for (size_t r = 0; r < n; ++r)
    for (size_t b = 0; b < k / 32; ++b) {
      const BlockQ8_0& src = plain[r * (k / 32) + b];
      const BlockQ8_0x8& dst = groups[(r / 8) * (k / 32) + b];
      ASSERT_EQ(dst.d[r % 8], src.d);
      for (size_t e = 0; e < 32; ++e) ASSERT_EQ(dst.qs[32 * (e / 4) + 4 * (r % 8) + e % 4], src.qs[e]) << r << "," << e;
    }
}

TEST_P(PackedQ8_0Test, MatchesTheProductOfTheDequantizedOperands) {
  for (auto [m, k, n] : std::vector<std::array<size_t, 3>>{{1, 32, 8}, {3, 96, 16}, {17, 576, 8}, {70, 2048, 24}}) {
    SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
    std::vector<float> x = WeightLikeRows(m, k, 1 + k);
    std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 2 + n), n, k), xq = QuantizeAct(kQ8, x, m, k);
    std::vector<float> y = RunPacked(x, Pack(w, n, k), m, k, n);
    const size_t rb = QuantRowBytes(kQ8, k), arb = QuantActRowBytes(kQ8, k);
    std::vector<double> ref(m * n), tol(m * n);
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> xd = ref::DequantizeActRow(kQ8, xq.data() + i * arb, k);
      for (size_t j = 0; j < n; ++j) {
        std::vector<float> wd = ref::DequantizeRow(kQ8, w.data() + j * rb, k);
        std::vector<double> mag = Magnitudes(kQ8, w.data() + j * rb, k);
        double acc = 0, bound = 0;
        for (size_t e = 0; e < k; ++e) acc += double(wd[e]) * xd[e], bound += mag[e] * std::fabs(double(xd[e]));
        ref[i * n + j] = acc;
        tol[i * n + j] = Gamma(2 * (k / 32) + 16) * bound;  // per block a scale product, a convert, an fma
      }
    }
    ExpectWithin(y.data(), ref, tol, "packed Q8_0 matmul vs dequantized product");
  }
}

// Every row of every batch size (across the 64-row blocks), through the pool with 1 and 2 threads,
// and one row at a time, has the bits of the M = 1 path; so do column ranges cut on groups.
TEST_P(PackedQ8_0Test, RowsAndColumnRangesAreBitIdentical) {
  const size_t k = 192, n = 40;
  internal::ThreadPool pool1(1), pool2(2);
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 9), n, k), packed = Pack(w, n, k);
  for (size_t m : {1, 3, 8, 17, 70}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    std::vector<float> x = WeightLikeRows(m, k, 4 + m);
    std::vector<float> batched = RunPacked(x, packed, m, k, n);
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> row = RunPacked(std::vector<float>(x.begin() + i * k, x.begin() + (i + 1) * k), packed, 1, k, n);
      ASSERT_EQ(0, std::memcmp(row.data(), batched.data() + i * n, n * sizeof(float))) << "row " << i;
    }
    std::vector<uint8_t> xq = QuantizeAct(kQ8, x, m, k);
    std::vector<float> pieces(m * n, std::nanf(""));
    for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 8}, {8, 32}, {32, 40}})
      T().matmul_q8_0x8(xq.data(), packed.data(), QuantRowBytes(kQ8, k), pieces.data(), n, m, k, lo, hi);
    EXPECT_EQ(0, std::memcmp(pieces.data(), batched.data(), batched.size() * sizeof(float)));
    for (internal::ThreadPool* pool : {&pool1, &pool2, static_cast<internal::ThreadPool*>(nullptr)}) {
      std::vector<float> y(m * n, std::nanf(""));
      WeightProduct p{true, kQ8, packed.data(), QuantRowBytes(kQ8, k), y.data(), n, n, /*packed=*/true};
      ParallelMatMuls(T(), pool, x.data(), k, m, k, {&p, 1});
      EXPECT_EQ(0, std::memcmp(y.data(), batched.data(), y.size() * sizeof(float)));
    }
  }
}

TEST_P(PackedQ8_0Test, AnOutputDependsOnItsRowAndColumnOnly) {
  const size_t m = 5, k = 96, n = 16;
  std::vector<float> x = WeightLikeRows(m, k, 31);
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 32), n, k);
  const std::vector<float> base = RunPacked(x, Pack(w, n, k), m, k, n);
  // One weight of column 11 (group 1, lane 3): only column 11 moves, in every row.
  std::vector<uint8_t> w2 = w;
  reinterpret_cast<BlockQ8_0*>(w2.data())[11 * (k / 32) + 1].qs[7] ^= 0x10;
  const std::vector<float> moved = RunPacked(x, Pack(w2, n, k), m, k, n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) EXPECT_EQ(moved[i * n + j] != base[i * n + j], j == 11) << i << "," << j;
  // The plain bytes read as if packed give other sums: the kernel really reads the packed layout.
  EXPECT_NE(0, std::memcmp(RunPacked(x, w, m, k, n).data(), base.data(), base.size() * sizeof(float)));
}

TEST_P(PackedQ8_0Test, ScalarTierKeepsThePlainKernelsBits) {
  const size_t m = 6, k = 160, n = 24;
  std::vector<float> x = WeightLikeRows(m, k, 51);
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 52), n, k);
  const std::vector<float> packed = RunPacked(x, Pack(w, n, k), m, k, n), plain = Run(kQ8, x, w, m, k, n);
  if (T().tier == Tier::kScalar) {
    EXPECT_EQ(0, std::memcmp(packed.data(), plain.data(), plain.size() * sizeof(float)));
  } else {  // kernels revision 3: the x86 tiers sum each block in integers before the float step
    EXPECT_NE(0, std::memcmp(packed.data(), plain.data(), plain.size() * sizeof(float)));
  }
}

// AVX2 and AVX-512 compute the same integers and the same float ops, so the same bits.
TEST_P(PackedQ8_0Test, X86TiersAgreeBitForBit) {
  if (T().tier == Tier::kScalar || !TierSupported(Tier::kAvx2)) GTEST_SKIP() << "needs an x86 SIMD tier and AVX2";
  const size_t m = 7, k = 320, n = 32;
  std::vector<float> x = WeightLikeRows(m, k, 61);
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 62), n, k), packed = Pack(w, n, k);
  std::vector<uint8_t> xq = QuantizeAct(kQ8, x, m, k);
  std::vector<float> here = RunPacked(x, packed, m, k, n), avx2(m * n, std::nanf(""));
  (*TableFor(Tier::kAvx2))->matmul_q8_0x8(xq.data(), packed.data(), QuantRowBytes(kQ8, k), avx2.data(), n, m, k, 0, n);
  EXPECT_EQ(0, std::memcmp(here.data(), avx2.data(), avx2.size() * sizeof(float)));
}

}  // namespace
}  // namespace fak::kernels::testing
