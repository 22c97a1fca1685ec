// The quantized matmul (KernelTable::quantize_act + matmul_q) in every tier: against the product of
// the dequantized operands (tight: only float rounding differs), against the unquantized product
// (format-typical error), and the batch-independence contract (architecture §2.1): each output's
// bits do not depend on M, the column range or the thread count. With non-vacuity controls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/kernels/oracle/checked_ops.h"
#include "kernels/kernel_table.h"
#include "kernels/parallel.h"
#include "kernels/quant_format.h"
#include "tests/kernels/oracle/ref_kernels.h"
#include "tests/kernels/oracle/ref_quant.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"

namespace fak::kernels::testing {
namespace {

class QuantMatMulTest : public QuantTierTest {};
FAK_INSTANTIATE_OVER_TIERS(QuantMatMulTest);

struct Shape {
  size_t m, k, n;
};

// Shapes per family: K a multiple of the block (one block, a few, a model width), odd N.
std::vector<Shape> ShapesFor(QuantType t) {
  if (IsK(t)) return {{1, 256, 37}, {3, 768, 5}, {17, 512, 1}, {4, 2048, 9}};
  return {{1, 32, 37}, {3, 96, 5}, {17, 576, 1}, {4, 2048, 9}};
}

TEST_P(QuantMatMulTest, MatchesTheProductOfTheDequantizedOperands) {
  for (QuantType t : kAllTypes) {
    for (const Shape& s : ShapesFor(t)) {
      SCOPED_TRACE(Name(t) + " m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n));
      std::vector<float> x = WeightLikeRows(s.m, s.k, 1 + s.k), wf = WeightLikeRows(s.n, s.k, 2 + s.n);
      std::vector<uint8_t> w = QuantizeRows(t, wf, s.n, s.k), xq = QuantizeAct(t, x, s.m, s.k);
      std::vector<float> y = Run(t, x, w, s.m, s.k, s.n);
      const size_t rb = QuantRowBytes(t, s.k), arb = QuantActRowBytes(t, s.k);
      const size_t n_blocks = s.k / FormatOf(t).block_elems;
      std::vector<double> ref(s.m * s.n), tol(s.m * s.n);
      for (size_t i = 0; i < s.m; ++i) {
        for (size_t j = 0; j < s.n; ++j) {
          double bound;
          ref[i * s.n + j] = RefRowProduct(t, w.data() + j * rb, xq.data() + i * arb, s.k, &bound);
          // Per block a rounded scale product, int→float, product and sum (two sums for Q4_K/Q5_K),
          // then the lane tree; plus the dequantized weight's own rounding.
          tol[i * s.n + j] = Gamma(2 * n_blocks + 16) * bound;
        }
      }
      ExpectWithin(y.data(), ref, tol, "quantized matmul vs dequantized product");
    }
  }
}

TEST_P(QuantMatMulTest, IsNearTheUnquantizedProduct) {
  // Relative RMS error over all outputs against X·Wᵀ in double from the original floats: weight
  // quantization error plus activation (8-bit) error.
  // Q8_0 Q4_0 Q5_0 Q4_K Q5_K Q6_K Q4_1 Q5_1 Q2_K Q3_K IQ4_NL IQ4_XS MXFP4
  const double kBound[] = {0.015, 0.1, 0.05, 0.1, 0.05, 0.03, 0.1, 0.05, 0.35, 0.2, 0.1, 0.1, 0.15};
  const size_t m = 4, k = 1024, n = 33;
  std::vector<float> x = RandomVector(m * k, 41), wf = RandomVector(n * k, 42);
  for (QuantType t : kAllTypes) {
    std::vector<float> y = Run(t, x, QuantizeRows(t, wf, n, k), m, k, n);
    double err = 0, norm = 0;
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double r = ref::Dot(x.data() + i * k, wf.data() + j * k, k), d = y[i * n + j] - r;
        err += d * d, norm += r * r;
      }
    const double rel = std::sqrt(err / norm);
    EXPECT_LT(rel, kBound[static_cast<int>(t)]) << Name(t);
    EXPECT_GT(rel, 1e-4) << Name(t) << ": no quantization error at all (non-vacuity)";
  }
}

// Every row of every batch size, by one call, through the pool with 1 and 2 threads, and one
// row at a time, has the bits of the M = 1 path.
TEST_P(QuantMatMulTest, RowsAreBitIdenticalToTheDecodePath) {
  const size_t n = 37;  // odd: NR = 4 strips plus single-column tails, and uneven thread shares
  internal::ThreadPool pool1(1), pool2(2);
  for (QuantType t : kAllTypes) {
    const size_t k = IsK(t) ? 512 : 96;
    std::vector<uint8_t> w = QuantizeRows(t, WeightLikeRows(n, k, 3 + k), n, k);
    for (size_t m : {1, 3, 8, 17, 64}) {
      SCOPED_TRACE(Name(t) + " m=" + std::to_string(m));
      std::vector<float> x = WeightLikeRows(m, k, 4 + m);
      std::vector<float> batched = Run(t, x, w, m, k, n);
      std::vector<uint8_t> scratch(m * QuantActRowBytes(t, k));
      for (internal::ThreadPool* pool : {&pool1, &pool2, static_cast<internal::ThreadPool*>(nullptr)}) {
        std::vector<float> y(m * n, std::nanf(""));
        ParallelMatMulQuant(T(), pool, t, x.data(), k, w.data(), QuantRowBytes(t, k), y.data(), n, m, k, n,
                            scratch.data());
        EXPECT_EQ(0, std::memcmp(y.data(), batched.data(), y.size() * sizeof(float)));
      }
      for (size_t i = 0; i < m; ++i) {
        std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
        std::vector<float> row = Run(t, xi, w, 1, k, n);
        ASSERT_EQ(0, std::memcmp(row.data(), batched.data() + i * n, n * sizeof(float))) << "row " << i;
      }
    }
  }
}

// ParallelMatMuls (several products of one input in one hand-off, as q/k/v and gate/up run) gives
// each output the bits of its own ParallelMatMul / ParallelMatMulQuant call, for f32 and mixed quant
// types (both activation formats), above and below the size where work is split across threads.
TEST_P(QuantMatMulTest, FusedProductsMatchSeparateCalls) {
  internal::ThreadPool pool1(1), pool2(2), pool3(3);
  const QuantType types[] = {QuantType::kQ4_K, QuantType::kQ8_0, QuantType::kQ6_K};
  const size_t k = 512;
  for (size_t m : {1, 5}) {
    for (size_t n : {7, 100}) {  // under and over the parallel threshold; n not a multiple of 48
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n));
      std::vector<float> x = WeightLikeRows(m, k, 21), wf = WeightLikeRows(n, k, 22);
      std::vector<std::vector<uint8_t>> wq;
      for (size_t i = 0; i < 3; ++i) wq.push_back(QuantizeRows(types[i], WeightLikeRows(n, k, 23 + i), n, k));
      std::vector<std::vector<float>> expected(4, std::vector<float>(m * n));
      ParallelMatMul(T(), nullptr, x.data(), k, wf.data(), k, expected[0].data(), n, m, k, n);
      for (size_t i = 0; i < 3; ++i) {
        std::vector<uint8_t> scratch(m * QuantActRowBytes(types[i], k));
        ParallelMatMulQuant(T(), nullptr, types[i], x.data(), k, wq[i].data(), QuantRowBytes(types[i], k),
                            expected[i + 1].data(), n, m, k, n, scratch.data());
      }
      for (internal::ThreadPool* pool : {&pool1, &pool2, &pool3, static_cast<internal::ThreadPool*>(nullptr)}) {
        std::vector<std::vector<float>> got(4, std::vector<float>(m * n, std::nanf("")));
        std::vector<WeightProduct> products = {
            {false, QuantType::kQ8_0, wf.data(), k * sizeof(float), got[0].data(), n, n}};
        for (size_t i = 0; i < 3; ++i)
          products.push_back({true, types[i], wq[i].data(), QuantRowBytes(types[i], k), got[i + 1].data(), n, n});
        ParallelMatMuls(T(), pool, x.data(), k, m, k, products);
        for (size_t i = 0; i < 4; ++i)
          EXPECT_EQ(0, std::memcmp(got[i].data(), expected[i].data(), m * n * sizeof(float))) << "product " << i;
      }
      EXPECT_NE(0, std::memcmp(expected[1].data(), expected[2].data(), m * n * sizeof(float)));  // non-vacuity
    }
  }
}

TEST_P(QuantMatMulTest, ColumnRangesAreBitIdentical) {
  const size_t m = 17, n = 37;
  for (QuantType t : kAllTypes) {
    const size_t k = IsK(t) ? 256 : 64;
    std::vector<float> x = WeightLikeRows(m, k, 11);
    std::vector<uint8_t> w = QuantizeRows(t, WeightLikeRows(n, k, 12), n, k), xq = QuantizeAct(t, x, m, k);
    std::vector<float> whole = Run(t, x, w, m, k, n), pieces(m * n, std::nanf(""));
    const size_t cuts[] = {0, 1, 5, 6, 17, 18, 33, 37};
    for (size_t c = 0; c + 1 < std::size(cuts); ++c)
      T().matmul_q(t, xq.data(), w.data(), QuantRowBytes(t, k), pieces.data(), n, m, k, cuts[c], cuts[c + 1]);
    EXPECT_EQ(0, std::memcmp(pieces.data(), whole.data(), whole.size() * sizeof(float))) << Name(t);
  }
}

TEST_P(QuantMatMulTest, PerturbationsChangeExactlyTheDependentOutputs) {
  // Non-vacuity for the bit-equality tests: an output depends on its X row and W row only.
  const size_t m = 9, n = 11;
  for (QuantType t : kAllTypes) {
    SCOPED_TRACE(Name(t));
    const size_t k = IsK(t) ? 512 : 96;
    std::vector<float> x = RandomVector(m * k, 31), wf = RandomVector(n * k, 32);
    std::vector<uint8_t> w = QuantizeRows(t, wf, n, k);
    std::vector<float> base = Run(t, x, w, m, k, n);
    std::vector<float> x2 = x;
    const size_t pi = 4;
    for (size_t e = 0; e < k; ++e) x2[pi * k + e] *= 1.5f;  // whole row: changes every block's scale
    std::vector<float> y2 = Run(t, x2, w, m, k, n);
    std::vector<uint8_t> w2 = w;
    const size_t pj = 10;  // the last column: a single-column tail
    const size_t bb = FormatOf(t).block_bytes;
    w2[(pj + 1) * QuantRowBytes(t, k) - bb + ScaleByteOf(t)] ^= 0x01;  // last block's scale, lowest bit
    std::vector<float> y3 = Run(t, x, w2, m, k, n);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        EXPECT_EQ(i == pi, Bits(y2[i * n + j]) != Bits(base[i * n + j])) << i << "," << j;
        EXPECT_EQ(j == pj, Bits(y3[i * n + j]) != Bits(base[i * n + j])) << i << "," << j;
      }
  }
}

// Each activation block's scale is its largest magnitude over 127 (rounded to f16 for ActQ8_0 and
// ActQ8_1, as ggml stores them), whichever lane of the vectorised maximum holds it, with a NaN
// ignored as a single running maximum ignores it; and every tier writes the scalar tier's bytes.
// Control: growing the largest element changes its block's scale.
TEST_P(QuantMatMulTest, ActivationScaleIsTheLargestMagnitudeInEveryLane) {
  const KernelTable& scalar = **TableFor(Tier::kScalar);
  for (QuantType t : {QuantType::kQ8_0, QuantType::kQ4_1, QuantType::kQ4_K}) {
    SCOPED_TRACE(Name(t));
    const size_t k = 1024, elems = FormatOf(t).act == ActFormat::kQ8_K ? kQKK : kQK0;
    const size_t blocks = k / elems, bytes = FormatOf(t).act_block_bytes;
    std::vector<float> x = RandomVector(k, 81);
    for (size_t b = 0; b < blocks; ++b) {  // the largest magnitude at a different place per block
      const size_t at = b * elems + (b * 7) % elems;
      x[at] = (b % 2 == 0 ? -4.0f : 4.0f) + 0.01f * static_cast<float>(b);
    }
    x[16] = std::nanf("");  // block 0: a NaN after its largest value (x[0]), in the same vector lane
    for (size_t e = elems; e < 2 * elems; ++e) x[e] = e % 2 == 0 ? 0.0f : -0.0f;  // block 1: all zeros
    auto quantize = [&](const KernelTable& table, const std::vector<float>& in) {
      std::vector<uint8_t> xq(QuantActRowBytes(t, k));
      table.quantize_act(t, in.data(), k, 1, k, xq.data());
      return xq;
    };
    const std::vector<uint8_t> xq = quantize(T(), x);
    EXPECT_EQ(xq, quantize(scalar, x)) << "tier bytes differ from the scalar tier's";
    auto scale_of = [&](const std::vector<uint8_t>& q, size_t b) {
      float d;
      std::memcpy(&d, q.data() + b * bytes, sizeof(d));
      return d;
    };
    for (size_t b = 0; b < blocks; ++b) {
      float amax = 0.0f;
      for (size_t e = b * elems; e < (b + 1) * elems; ++e) amax = std::fabs(x[e]) > amax ? std::fabs(x[e]) : amax;
      const float want = FormatOf(t).act == ActFormat::kQ8_K ? amax / 127.0f : ref::HalfToFloat(ref::FloatToHalf(amax / 127.0f));
      EXPECT_EQ(want, scale_of(xq, b)) << "block " << b;
    }
    EXPECT_EQ(0.0f, scale_of(xq, 1));
    std::vector<float> grown = x;
    grown[2 * elems + (2 * 7) % elems] *= 2.0f;
    EXPECT_NE(scale_of(xq, 2), scale_of(quantize(T(), grown), 2)) << "the comparison cannot see the largest element";
  }
}

TEST_P(QuantMatMulTest, CheckedEntryPointValidatesAndMatches) {
  const QuantType t = QuantType::kQ4_K;
  const size_t m = 3, k = 512, n = 7;
  std::vector<float> x = RandomVector(m * k, 51), y(m * n);
  std::vector<uint8_t> w = QuantizeRows(t, RandomVector(n * k, 52), n, k), scratch(m * QuantActRowBytes(t, k));
  ASSERT_TRUE(MatMulQuantChecked(T(), t, x, w, y, m, k, n, scratch).ok());
  std::vector<float> direct = Run(t, x, w, m, k, n);
  EXPECT_EQ(0, std::memcmp(y.data(), direct.data(), y.size() * sizeof(float)));
  // k not a multiple of 256; w one byte short; scratch one byte short; misaligned w.
  std::vector<float> x2(m * 300);
  EXPECT_FALSE(MatMulQuantChecked(T(), t, x2, w, y, m, 300, n, scratch).ok());
  EXPECT_FALSE(MatMulQuantChecked(T(), t, x, std::span<const uint8_t>(w).first(w.size() - 1), y, m, k, n, scratch).ok());
  EXPECT_FALSE(MatMulQuantChecked(T(), t, x, w, y, m, k, n, std::span<uint8_t>(scratch).first(scratch.size() - 1)).ok());
  std::vector<uint8_t> shifted(w.size() + 1);
  std::memcpy(shifted.data() + 1, w.data(), w.size());
  EXPECT_FALSE(MatMulQuantChecked(T(), t, x, std::span<const uint8_t>(shifted).subspan(1), y, m, k, n, scratch).ok());
  // Dequantize: right size is the reference's bits; a wrong size is an error.
  std::vector<float> row(k);
  ASSERT_TRUE(DequantizeRowChecked(T(), t, std::span<const uint8_t>(w).first(QuantRowBytes(t, k)), row).ok());
  std::vector<float> want = ref::DequantizeRow(t, w.data(), k);
  EXPECT_EQ(0, std::memcmp(row.data(), want.data(), k * sizeof(float)));
  EXPECT_FALSE(DequantizeRowChecked(T(), t, std::span<const uint8_t>(w).first(QuantRowBytes(t, k) - 1), row).ok());
}

}  // namespace
}  // namespace fak::kernels::testing
