// Weights of every quant type packed eight rows at a time (quant_pack.h, KernelTable::matmul_q_packed)
// in every tier: against the product of the dequantized operands, the batch-independence contract
// (each output's bits do not depend on M, the column range or the thread count), and through
// ParallelMatMuls. In the scalar tier the packed kernel keeps the plain kernel's bits (its steps
// already sum each block in integers first). With non-vacuity controls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/parallel.h"
#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "tests/kernels/oracle/ref_quant.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace fak::kernels::testing {
namespace {

constexpr QuantType kQ8 = QuantType::kQ8_0;

// A width of about `k` that the type's blocks divide.
size_t WidthFor(QuantType t, size_t k) { return IsK(t) ? (k + 255) / 256 * 256 : k; }

class PackedQuantTest : public QuantTierTest {
 protected:
  std::vector<uint8_t> Pack(QuantType t, const std::vector<uint8_t>& w, size_t n, size_t k) const {
    std::vector<uint8_t> packed(n * PackedRowBytes(t, k));
    PackRows(t, w.data(), n, k, packed.data());
    return packed;
  }
  std::vector<float> RunPacked(QuantType t, const std::vector<float>& x, const std::vector<uint8_t>& packed, size_t m,
                               size_t k, size_t n) const {
    return Run(t, x, packed, m, k, n, /*packed=*/true);
  }
  // Activations X[m][k] (seed) and type-t weights W[n][k] (seed + 1), k widened to t's blocks.
  struct Operands {
    size_t k;
    std::vector<float> x;
    std::vector<uint8_t> w;
  };
  Operands MakeOperands(QuantType t, size_t m, size_t n, size_t k0, uint32_t seed) const {
    const size_t k = WidthFor(t, k0);
    return {k, WeightLikeRows(m, k, seed), QuantizeRows(t, WeightLikeRows(n, k, seed + 1), n, k)};
  }
};
FAK_INSTANTIATE_OVER_TIERS(PackedQuantTest);

TEST_P(PackedQuantTest, Q8_0PackingMovesEveryByteOnce) {
  const size_t n = 16, k = 64;
  std::vector<uint8_t> w = QuantizeRows(kQ8, WeightLikeRows(n, k, 5), n, k), packed = Pack(kQ8, w, n, k);
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

TEST_P(PackedQuantTest, MatchesTheProductOfTheDequantizedOperands) {
  for (QuantType t : kAllTypes)
  for (auto [m, k0, n] : std::vector<std::array<size_t, 3>>{{1, 32, 8}, {3, 96, 16}, {17, 576, 8}, {70, 2048, 24}}) {
    const size_t k = WidthFor(t, k0);
    SCOPED_TRACE(Name(t) + " m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
    std::vector<float> x = WeightLikeRows(m, k, 1 + k);
    std::vector<uint8_t> w = QuantizeRows(t, WeightLikeRows(n, k, 2 + n), n, k), xq = QuantizeAct(t, x, m, k);
    std::vector<float> y = RunPacked(t, x, Pack(t, w, n, k), m, k, n);
    const size_t rb = QuantRowBytes(t, k), arb = QuantActRowBytes(t, k);
    std::vector<double> ref(m * n), tol(m * n);
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < n; ++j) {
        double bound;
        ref[i * n + j] = RefRowProduct(t, w.data() + j * rb, xq.data() + i * arb, k, &bound);
        tol[i * n + j] = Gamma(2 * (k / 32) + 16) * bound;  // per block: scale products, converts, fmas
      }
    }
    ExpectWithin(y.data(), ref, tol, "packed matmul vs dequantized product");
  }
}

// Every row of every batch size (across the 64-row blocks), through the pool with 1 and 2 threads,
// and one row at a time, has the bits of the M = 1 path; so do column ranges cut on groups.
TEST_P(PackedQuantTest, RowsAndColumnRangesAreBitIdentical) {
  const size_t n = 40;
  internal::ThreadPool pool1(1), pool2(2);
  for (QuantType t : kAllTypes)
  for (size_t m : {1, 3, 8, 17, 70}) {
    const size_t k = WidthFor(t, 192);
    SCOPED_TRACE(Name(t) + " m=" + std::to_string(m));
    std::vector<uint8_t> w = QuantizeRows(t, WeightLikeRows(n, k, 9), n, k), packed = Pack(t, w, n, k);
    std::vector<float> x = WeightLikeRows(m, k, 4 + m);
    std::vector<float> batched = RunPacked(t, x, packed, m, k, n);
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> row = RunPacked(t, std::vector<float>(x.begin() + i * k, x.begin() + (i + 1) * k), packed, 1, k, n);
      ASSERT_EQ(0, std::memcmp(row.data(), batched.data() + i * n, n * sizeof(float))) << "row " << i;
    }
    std::vector<uint8_t> xq = QuantizeAct(t, x, m, k);
    std::vector<float> pieces(m * n, std::nanf(""));
    for (auto [lo, hi] : {std::pair<size_t, size_t>{0, 8}, {8, 32}, {32, 40}})
      T().matmul_q_packed(t, xq.data(), packed.data(), PackedRowBytes(t, k), pieces.data(), n, m, k, lo, hi);
    EXPECT_EQ(0, std::memcmp(pieces.data(), batched.data(), batched.size() * sizeof(float)));
    for (internal::ThreadPool* pool : {&pool1, &pool2, static_cast<internal::ThreadPool*>(nullptr)}) {
      std::vector<float> y(m * n, std::nanf(""));
      WeightProduct p{true, t, packed.data(), PackedRowBytes(t, k), y.data(), n, n, /*packed=*/true};
      ParallelMatMuls(T(), pool, x.data(), k, m, k, {&p, 1});
      EXPECT_EQ(0, std::memcmp(y.data(), batched.data(), y.size() * sizeof(float)));
    }
  }
}

TEST_P(PackedQuantTest, AnOutputDependsOnItsRowAndColumnOnly) {
  const size_t m = 5, n = 16;
  for (QuantType t : kAllTypes) {
    SCOPED_TRACE(Name(t));
    const auto [k, x, w] = MakeOperands(t, m, n, 96, 31);
    const std::vector<float> base = RunPacked(t, x, Pack(t, w, n, k), m, k, n);
    // One quant byte of column 11 (group 1, lane 3), near the end of its first block, past the
    // scales (and Q5_0's fifth bits): only column 11 moves, in every row.
    std::vector<uint8_t> w2 = w;
    w2[11 * QuantRowBytes(t, k) + FormatOf(t).block_bytes - 3] ^= 0x11;
    const std::vector<float> moved = RunPacked(t, x, Pack(t, w2, n, k), m, k, n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) EXPECT_EQ(moved[i * n + j] != base[i * n + j], j == 11) << i << "," << j;
    // The plain bytes read as if packed give other sums: the kernel really reads the packed layout.
    std::vector<uint8_t> misread = w;
    misread.resize(n * PackedRowBytes(t, k));
    EXPECT_NE(0, std::memcmp(RunPacked(t, x, misread, m, k, n).data(), base.data(), base.size() * sizeof(float)));
  }
}

TEST_P(PackedQuantTest, ScalarTierKeepsThePlainKernelsBits) {
  const size_t m = 6, n = 24;
  for (QuantType t : kAllTypes) {
    SCOPED_TRACE(Name(t));
    const auto [k, x, w] = MakeOperands(t, m, n, 160, 51);
    const std::vector<float> packed = RunPacked(t, x, Pack(t, w, n, k), m, k, n), plain = Run(t, x, w, m, k, n);
    if (T().tier == Tier::kScalar) {
      EXPECT_EQ(0, std::memcmp(packed.data(), plain.data(), plain.size() * sizeof(float)));
    } else {  // kernels revisions 3-6: the SIMD tiers sum each block in integers before the float step
      EXPECT_NE(0, std::memcmp(packed.data(), plain.data(), plain.size() * sizeof(float)));
    }
  }
}

// AVX2 and both AVX-512 tiers compute the same integers and the same float ops, so the same bits:
// plain and packed, for several rows and for one (decode, where the AVX-512 tiers run zmm forms of
// some steps). Control: the scalar tier, which accumulates in another order, differs.
TEST_P(PackedQuantTest, X86TiersAgreeBitForBit) {
  const Result<Tier> avx2_tier = ParseTier("avx2");
  if (T().tier == Tier::kScalar || !avx2_tier.has_value() || !TierSupported(*avx2_tier))
    GTEST_SKIP() << "needs an x86 SIMD tier and AVX2";
  const KernelTable& avx2 = **TableFor(*avx2_tier);
  const size_t n = 32;
  bool scalar_differs = false;
  for (QuantType t : kAllTypes) {
    for (size_t m : {size_t{17}, size_t{7}, size_t{1}}) {
      SCOPED_TRACE(Name(t) + " m=" + std::to_string(m));
      const auto [k, x, w] = MakeOperands(t, m, n, 320, 61);
      auto run = [&](const KernelTable& table, const std::vector<uint8_t>& weights, bool packed) {
        std::vector<uint8_t> xq(m * QuantActRowBytes(t, k));
        table.quantize_act(t, x.data(), k, m, k, xq.data());
        std::vector<float> y(m * n, std::nanf(""));
        const size_t row_bytes = packed ? PackedRowBytes(t, k) : QuantRowBytes(t, k);
        (packed ? table.matmul_q_packed : table.matmul_q)(t, xq.data(), weights.data(), row_bytes, y.data(), n, m, k, 0, n);
        return y;
      };
      const std::vector<float> here = run(T(), w, false);
      EXPECT_EQ(0, std::memcmp(here.data(), run(avx2, w, false).data(), here.size() * sizeof(float)));
      scalar_differs |= std::memcmp(here.data(), run(**TableFor(Tier::kScalar), w, false).data(),
                                    here.size() * sizeof(float)) != 0;
      const std::vector<uint8_t> packed = Pack(t, w, n, k);
      const std::vector<float> here_packed = run(T(), packed, true);
      EXPECT_EQ(0, std::memcmp(here_packed.data(), run(avx2, packed, true).data(), here.size() * sizeof(float)));
    }
  }
  EXPECT_TRUE(scalar_differs) << "the comparison cannot tell tiers apart";
}

// avx512_skx is avx512.cc built without VNNI: vpmaddubsw + vpmaddwd give vpdpbusd's integers, so
// every quantized product, plain or packed, has the avx512 tier's bits. Control: the scalar tier,
// which accumulates in another order, differs on the same operands.
TEST_P(PackedQuantTest, Avx512TiersWithAndWithoutVnniAgreeBitForBit) {
  const Result<Tier> vnni = ParseTier("avx512");
  const Result<Tier> skx = ParseTier("avx512_skx");
  if (!vnni.has_value() || !skx.has_value() || T().tier != *skx || !TierSupported(*vnni))
    GTEST_SKIP() << "runs in the avx512_skx tier on a CPU with VNNI";
  const size_t m = 5, n = 16;
  bool scalar_differs = false;
  for (QuantType t : kAllTypes) {
    SCOPED_TRACE(Name(t));
    const auto [k, x, w] = MakeOperands(t, m, n, 512, 71);
    auto run = [&](const KernelTable& table, const std::vector<uint8_t>& weights, bool packed) {
      std::vector<uint8_t> xq(m * QuantActRowBytes(t, k));
      table.quantize_act(t, x.data(), k, m, k, xq.data());
      std::vector<float> y(m * n, std::nanf(""));
      const size_t row_bytes = packed ? PackedRowBytes(t, k) : QuantRowBytes(t, k);
      (packed ? table.matmul_q_packed : table.matmul_q)(t, xq.data(), weights.data(), row_bytes, y.data(), n, m, k, 0, n);
      return y;
    };
    const KernelTable& with_vnni = **TableFor(*vnni);
    const std::vector<float> here = run(T(), w, false);
    EXPECT_EQ(0, std::memcmp(here.data(), run(with_vnni, w, false).data(), here.size() * sizeof(float)));
    const std::vector<float> scalar = run(**TableFor(Tier::kScalar), w, false);
    scalar_differs |= std::memcmp(here.data(), scalar.data(), here.size() * sizeof(float)) != 0;
    const std::vector<uint8_t> packed = Pack(t, w, n, k);
    const std::vector<float> here_packed = run(T(), packed, true);
    EXPECT_EQ(0, std::memcmp(here_packed.data(), run(with_vnni, packed, true).data(), here.size() * sizeof(float)));
  }
  EXPECT_TRUE(scalar_differs) << "the comparison cannot tell tiers apart";
}

// neon_dotprod computes each int8 dot product with one SDOT where neon uses vmull and pairwise adds,
// and neon_i8mm the packed products of row pairs with SMMLA: the same integers and the same float
// ops, so the same bits, plain and packed, every type. m = 5: a tile of four rows (two SMMLA row
// pairs) and a single row (SDOT).
TEST_P(PackedQuantTest, NeonTiersAgreeBitForBit) {
  const Result<Tier> neon = ParseTier("neon"), dotprod = ParseTier("neon_dotprod"), i8mm = ParseTier("neon_i8mm");
  if (!(dotprod.has_value() && T().tier == *dotprod) && !(i8mm.has_value() && T().tier == *i8mm))
    GTEST_SKIP() << "runs in the neon_dotprod and neon_i8mm tiers";
  const size_t m = 5, n = 16;
  for (QuantType t : kAllTypes) {
    SCOPED_TRACE(Name(t));
    const auto [k, x, w] = MakeOperands(t, m, n, 320, 71);
    std::vector<uint8_t> xq = QuantizeAct(t, x, m, k);
    std::vector<float> here = Run(t, x, w, m, k, n), base(m * n, std::nanf(""));
    (*TableFor(*neon))->matmul_q(t, xq.data(), w.data(), QuantRowBytes(t, k), base.data(), n, m, k, 0, n);
    EXPECT_EQ(0, std::memcmp(here.data(), base.data(), base.size() * sizeof(float)));
    const std::vector<uint8_t> packed = Pack(t, w, n, k);
    here = RunPacked(t, x, packed, m, k, n);
    (*TableFor(*neon))->matmul_q_packed(t, xq.data(), packed.data(), PackedRowBytes(t, k), base.data(), n, m, k, 0, n);
    EXPECT_EQ(0, std::memcmp(here.data(), base.data(), base.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace fak::kernels::testing
