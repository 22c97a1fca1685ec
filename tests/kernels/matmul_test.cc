// Matmul in every tier: accuracy against the double reference, and the batch-independence
// contract (architecture §2.1) — each output's bits do not depend on M, the column range, the
// row/column blocking, the thread count or the strides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/parallel.h"
#include "tests/kernels/oracle/ref_kernels.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

class MatMulTest : public TierTest {
 protected:
  // Y = X·Wᵀ over contiguous rows, one call.
  std::vector<float> Run(const std::vector<float>& x, const std::vector<float>& w, size_t m, size_t k, size_t n) const {
    std::vector<float> y(m * n, std::nanf(""));
    T().matmul(x.data(), k, w.data(), k, y.data(), n, m, k, 0, n);
    return y;
  }
};
FAK_INSTANTIATE_OVER_TIERS(MatMulTest);

struct Shape {
  size_t m, k, n;
};

TEST_P(MatMulTest, MatchesReference) {
  // K: below, at and above each tier's width (1, 8, 16), a multiple of 16 and not; N: not a
  // multiple of any register tile (4, 6, 8) or of the 48-column thread grain.
  const Shape shapes[] = {{1, 300, 101}, {3, 256, 101}, {17, 300, 37}, {64, 16, 5},  {5, 1, 7},
                          {2, 15, 3},    {8, 17, 13},   {65, 33, 11}, {4, 1024, 9}, {1, 7, 1}};
  for (const Shape& s : shapes) {
    std::vector<float> x = RandomVector(s.m * s.k, 1 + s.k), w = RandomVector(s.n * s.k, 2 + s.n);
    std::vector<float> y = Run(x, w, s.m, s.k, s.n);
    std::vector<double> ref = ref::MatMul(x.data(), w.data(), s.m, s.k, s.n);
    // Tolerance per output: γ_k · Σ_k |x w| (a k-term dot product, any order; see Gamma).
    std::vector<double> tol(ref.size());
    for (size_t i = 0; i < s.m; ++i)
      for (size_t j = 0; j < s.n; ++j) {
        double a = 0;
        for (size_t t = 0; t < s.k; ++t) a += std::abs(static_cast<double>(x[i * s.k + t]) * w[j * s.k + t]);
        tol[i * s.n + j] = Gamma(s.k) * a;
      }
    ExpectWithin(y.data(), ref, tol,
                 "matmul m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n));
  }
}

TEST_P(MatMulTest, ZeroKGivesZeros) {
  // Real (if unused) buffers: a null pointer with K = 0 reaches memcpy(dst, nullptr, 0), which is
  // undefined behaviour; MatMulChecked handles K = 0 without calling the kernel.
  std::vector<float> x(1), w(1), y(6, 1.0f);
  T().matmul(x.data(), 0, w.data(), 0, y.data(), 3, 2, 0, 0, 3);
  for (float v : y) EXPECT_EQ(Bits(v), 0u);
}

// Every row of every batch size, computed by one call, one call per row, and through the pool
// with 1 and 2 threads, has the same bits as the M = 1 (decode) path and as dot().
TEST_P(MatMulTest, RowsAreBitIdenticalToTheDecodePath) {
  const size_t n = 101;  // not a multiple of 4, 6, 8 or 48
  internal::ThreadPool pool1(1), pool2(2);
  for (size_t k : {256, 300, 1600}) {  // one K-block without and with a scalar tail; three K-blocks
    std::vector<float> w = RandomVector(n * k, 3 + k);
    for (size_t m : {1, 3, 8, 17, 64, 65, 130}) {
      SCOPED_TRACE(::testing::Message() << "k=" << k << " m=" << m);
      std::vector<float> x = RandomVector(m * k, 4 + m + k);
      std::vector<float> batched = Run(x, w, m, k, n);
      std::vector<float> threaded1(m * n), threaded2(m * n), unpooled(m * n);
      ParallelMatMul(T(), &pool1, x.data(), k, w.data(), k, threaded1.data(), n, m, k, n);
      ParallelMatMul(T(), &pool2, x.data(), k, w.data(), k, threaded2.data(), n, m, k, n);
      ParallelMatMul(T(), nullptr, x.data(), k, w.data(), k, unpooled.data(), n, m, k, n);
      EXPECT_EQ(0, std::memcmp(threaded1.data(), batched.data(), batched.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(threaded2.data(), batched.data(), batched.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(unpooled.data(), batched.data(), batched.size() * sizeof(float)));
      for (size_t i = 0; i < m; ++i) {
        std::vector<float> row(n);
        T().matmul(x.data() + i * k, k, w.data(), k, row.data(), n, 1, k, 0, n);
        ASSERT_EQ(0, std::memcmp(row.data(), batched.data() + i * n, n * sizeof(float))) << "row " << i;
        for (size_t j = 0; j < n; ++j) {
          float d = T().dot(x.data() + i * k, w.data() + j * k, k);
          ASSERT_EQ(Bits(d), Bits(batched[i * n + j])) << "row " << i << " col " << j << " differs from dot()";
        }
      }
    }
  }
}

TEST_P(MatMulTest, ColumnRangesAreBitIdentical) {
  // Computing [0, n) in uneven pieces (as threads do) gives the same bits as one call.
  const size_t m = 17, k = 300, n = 101;
  std::vector<float> x = RandomVector(m * k, 11), w = RandomVector(n * k, 12);
  std::vector<float> whole = Run(x, w, m, k, n);
  for (size_t m_try : {size_t{1}, m}) {
    std::vector<float> pieces(m_try * n, std::nanf(""));
    const size_t cuts[] = {0, 1, 5, 6, 49, 50, 97, 101};
    for (size_t c = 0; c + 1 < std::size(cuts); ++c)
      T().matmul(x.data(), k, w.data(), k, pieces.data(), n, m_try, k, cuts[c], cuts[c + 1]);
    EXPECT_EQ(0, std::memcmp(pieces.data(), whole.data(), m_try * n * sizeof(float))) << "m=" << m_try;
  }
}

TEST_P(MatMulTest, StridesAreHonouredAndDoNotChangeBits) {
  const size_t m = 9, k = 37, n = 23, ldx = k + 3, ldw = k + 5, ldy = n + 7;
  std::vector<float> x = RandomVector(m * k, 21), w = RandomVector(n * k, 22);
  std::vector<float> dense = Run(x, w, m, k, n);
  const float poison = 1e30f;  // padding that would wreck any output that read it
  std::vector<float> xs(m * ldx, poison), ws(n * ldw, poison), ys(m * ldy, std::nanf(""));
  for (size_t i = 0; i < m; ++i) std::memcpy(&xs[i * ldx], &x[i * k], k * sizeof(float));
  for (size_t j = 0; j < n; ++j) std::memcpy(&ws[j * ldw], &w[j * k], k * sizeof(float));
  T().matmul(xs.data(), ldx, ws.data(), ldw, ys.data(), ldy, m, k, 0, n);
  for (size_t i = 0; i < m; ++i) {
    EXPECT_EQ(0, std::memcmp(&ys[i * ldy], &dense[i * n], n * sizeof(float))) << "row " << i;
    for (size_t j = n; j < ldy; ++j) EXPECT_TRUE(std::isnan(ys[i * ldy + j])) << "wrote y padding at " << i << "," << j;
  }
}

TEST_P(MatMulTest, PerturbationsChangeExactlyTheDependentOutputs) {
  // Non-vacuity for the bit-equality tests above: outputs do depend on the inputs compared, and
  // only on their own row of X and column of W.
  const size_t m = 17, k = 300, n = 101;
  std::vector<float> x = RandomVector(m * k, 31), w = RandomVector(n * k, 32);
  std::vector<float> base = Run(x, w, m, k, n);

  const size_t pi = 5, pk = 299;  // the last k: the scalar tail of each dot
  std::vector<float> x2 = x;
  x2[pi * k + pk] += 0.25f;
  std::vector<float> y2 = Run(x2, w, m, k, n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == pi) {
        EXPECT_NE(Bits(y2[i * n + j]), Bits(base[i * n + j])) << i << "," << j;
      } else {
        EXPECT_EQ(Bits(y2[i * n + j]), Bits(base[i * n + j])) << i << "," << j;
      }
    }

  const size_t pj = 100;  // the last column: a single-column tile
  std::vector<float> w2 = w;
  w2[pj * k + 3] -= 0.25f;
  std::vector<float> y3 = Run(x, w2, m, k, n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (j == pj) {
        EXPECT_NE(Bits(y3[i * n + j]), Bits(base[i * n + j])) << i << "," << j;
      } else {
        EXPECT_EQ(Bits(y3[i * n + j]), Bits(base[i * n + j])) << i << "," << j;
      }
    }
}

}  // namespace
}  // namespace fak::kernels::testing
