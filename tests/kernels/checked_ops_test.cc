// Checked kernel entry points: every shape mismatch is an InvalidArgument naming the size at
// fault, and a valid call gives exactly the table kernel's bits.
#include "tests/kernels/oracle/checked_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

void ExpectInvalid(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string_view::npos) << "'" << needle << "' not in: " << s.ToString();
}

class CheckedOpsTest : public TierTest {};
FAK_INSTANTIATE_OVER_TIERS(CheckedOpsTest);

TEST_P(CheckedOpsTest, MatMulValidCallMatchesKernelBits) {
  const size_t m = 3, k = 37, n = 11;
  std::vector<float> x = RandomVector(m * k, 1), w = RandomVector(n * k, 2), y(m * n), direct(m * n);
  ASSERT_OK(MatMulChecked(T(), x, w, y, m, k, n));
  T().matmul(x.data(), k, w.data(), k, direct.data(), n, m, k, 0, n);
  EXPECT_EQ(0, std::memcmp(y.data(), direct.data(), y.size() * sizeof(float)));
  // Empty products are valid and touch nothing.
  EXPECT_OK(MatMulChecked(T(), {}, w, {}, 0, k, n));
  EXPECT_OK(MatMulChecked(T(), x, {}, {}, m, k, 0));
  // K = 0: empty (null) x and w, and y becomes zeros.
  std::vector<float> y0(m * n, 5.0f);
  ASSERT_OK(MatMulChecked(T(), {}, {}, y0, m, 0, n));
  for (float v : y0) EXPECT_EQ(Bits(v), 0u);
}

TEST_P(CheckedOpsTest, MatMulNamesTheMismatchedBuffer) {
  std::vector<float> x(12), w(20), y(15);  // m=3, k=4, n=5
  EXPECT_OK(MatMulChecked(T(), x, w, y, 3, 4, 5));
  std::vector<float> x10(10), w21(21), y14(14);
  ExpectInvalid(MatMulChecked(T(), x10, w, y, 3, 4, 5), "x has 10 floats, expected m*k = 12");
  ExpectInvalid(MatMulChecked(T(), x, w21, y, 3, 4, 5), "w has 21 floats, expected n*k = 20");
  ExpectInvalid(MatMulChecked(T(), x, w, y14, 3, 4, 5), "y has 14 floats, expected m*n = 15");
  // A wrong dimension with right-sized buffers is caught too.
  ExpectInvalid(MatMulChecked(T(), x, w, y, 4, 3, 5), "w has 20 floats, expected n*k = 15");
}

TEST_P(CheckedOpsTest, MatMulRejectsOverflowingShapes) {
  const size_t huge = std::numeric_limits<size_t>::max() / 2;
  std::vector<float> x(4), w(4), y(4);
  ExpectInvalid(MatMulChecked(T(), x, w, y, huge, 4, 1), "m*k overflows");
}

TEST_P(CheckedOpsTest, MatMulDoesNotWriteOnError) {
  std::vector<float> x(12, 1.0f), w(20, 1.0f), y(14, -7.0f);
  EXPECT_FALSE(MatMulChecked(T(), x, w, y, 3, 4, 5).ok());
  for (float v : y) EXPECT_EQ(v, -7.0f);
}

// A valid attention problem: 6 query heads over 2 KV heads, head_dim 8, 10 cache slots per head.
struct AttnBuffers {
  AttentionShape shape;
  std::vector<float> q, k, v, out, scratch;
  AttnBuffers() {
    shape.n_heads = 6;
    shape.n_kv_heads = 2;
    shape.head_dim = 8;
    shape.kv_head_stride = 10 * 8;
    shape.key_begin = 2;
    shape.key_end = 9;
    shape.head_begin = 0;
    shape.head_end = 6;
    shape.scale = 0.35f;
    q = RandomVector(6 * 8, 1);
    k = RandomVector(2 * 80, 2);
    v = RandomVector(2 * 80, 3);
    out.assign(6 * 8, 0.0f);
    scratch.assign(kAttentionHeadsAtOnce * 9, 0.0f);
  }
  Status Run(const KernelTable& t) { return AttentionChecked(t, q, k, v, out, scratch, shape); }
};

TEST_P(CheckedOpsTest, AttentionValidCallMatchesKernelBits) {
  AttnBuffers b;
  ASSERT_OK(b.Run(T()));
  std::vector<float> direct(b.out.size()), scratch(kAttentionHeadsAtOnce * b.shape.key_end);
  const AttentionShape& s = b.shape;
  const KeyRun run{b.k.data(), b.v.data(), s.kv_head_stride, s.key_end};
  AttentionArgs a{b.q.data(), &run, 1, direct.data(), scratch.data(), s.n_heads, s.n_kv_heads,
                  s.head_dim, s.key_begin, s.key_end, s.scale, s.head_begin, s.head_end};
  T().attention(a);
  EXPECT_EQ(0, std::memcmp(b.out.data(), direct.data(), direct.size() * sizeof(float)));
  // The last KV head may end right after key_end (no trailing capacity needed).
  b.k.resize(80 + 9 * 8);
  b.v.resize(80 + 9 * 8);
  EXPECT_OK(b.Run(T()));
  // An empty head range is valid.
  b.shape.head_begin = b.shape.head_end = 3;
  EXPECT_OK(b.Run(T()));
}

TEST_P(CheckedOpsTest, AttentionRejectsBadHeadCounts) {
  AttnBuffers b;
  b.shape.n_kv_heads = 4;  // 6 % 4 != 0
  ExpectInvalid(b.Run(T()), "n_heads = 6 is not a multiple of n_kv_heads = 4");
  b = AttnBuffers();
  b.shape.n_kv_heads = 0;
  ExpectInvalid(b.Run(T()), "n_kv_heads");
  b = AttnBuffers();
  b.shape.head_dim = 0;
  ExpectInvalid(b.Run(T()), "head_dim");
}

TEST_P(CheckedOpsTest, AttentionRejectsBadRanges) {
  AttnBuffers b;
  b.shape.key_begin = b.shape.key_end = 5;
  ExpectInvalid(b.Run(T()), "key range [5, 5)");
  b = AttnBuffers();
  b.shape.key_begin = 7;
  b.shape.key_end = 3;
  ExpectInvalid(b.Run(T()), "key range [7, 3)");
  b = AttnBuffers();
  b.shape.head_end = 7;
  ExpectInvalid(b.Run(T()), "head range [0, 7)");
  b = AttnBuffers();
  b.shape.head_begin = 4;
  b.shape.head_end = 2;
  ExpectInvalid(b.Run(T()), "head range [4, 2)");
  b = AttnBuffers();
  b.shape.key_end = 11;  // past the 10 slots each KV head has
  ExpectInvalid(b.Run(T()), "kv_head_stride = 80 is less than (key_end+rows-1)*head_dim = 88");
}

TEST_P(CheckedOpsTest, AttentionNamesTheShortBuffer) {
  AttnBuffers b;
  b.q.resize(47);
  ExpectInvalid(b.Run(T()), "q has 47 floats, expected rows*n_heads*head_dim = 48");
  b = AttnBuffers();
  b.out.resize(49);
  ExpectInvalid(b.Run(T()), "out has 49 floats, expected rows*n_heads*head_dim = 48");
  b = AttnBuffers();
  b.k.resize(80 + 9 * 8 - 1);
  ExpectInvalid(b.Run(T()), "k has 151 floats, expected at least (n_kv_heads-1)*kv_head_stride + (key_end+rows-1)*head_dim = 152");
  b = AttnBuffers();
  b.v.resize(100);
  ExpectInvalid(b.Run(T()), "v has 100 floats");
  b = AttnBuffers();
  b.scratch.resize(35);
  ExpectInvalid(b.Run(T()), "scratch has 35 floats, expected at least AttentionScratchFloats(rows, key_end+rows-1, head_dim) = 36");
}

// Rows 1 and 2 after row 0 (key_end 9 -> the last row attends up to key 11): the buffers grow with
// the rows, and each shortfall is named.
TEST_P(CheckedOpsTest, AttentionRowsNeedTheirBuffers) {
  AttnBuffers b;
  b.shape.rows = 0;
  ExpectInvalid(b.Run(T()), "rows = 0");
  b = AttnBuffers();
  b.shape.rows = 3;
  b.shape.kv_head_stride = 12 * 8;
  b.k = RandomVector(2 * 96, 2);
  b.v = RandomVector(2 * 96, 3);
  b.q = RandomVector(3 * 48, 1);
  b.out.assign(3 * 48, 0.0f);
  b.scratch.assign(AttentionScratchFloats(3, 11, 8), 0.0f);
  ASSERT_OK(b.Run(T()));
  // Row r has the bits of a one-row call at key_end + r.
  for (size_t r = 0; r < 3; ++r) {
    AttnBuffers one = b;
    one.shape.rows = 1;
    one.shape.key_end = 9 + r;
    one.q.assign(b.q.begin() + r * 48, b.q.begin() + (r + 1) * 48);
    one.out.assign(48, 0.0f);
    ASSERT_OK(one.Run(T()));
    EXPECT_EQ(0, std::memcmp(one.out.data(), b.out.data() + r * 48, 48 * sizeof(float))) << "row " << r;
  }
  AttnBuffers short_q = b;
  short_q.q.resize(3 * 48 - 1);
  ExpectInvalid(short_q.Run(T()), "q has 143 floats, expected rows*n_heads*head_dim = 144");
  AttnBuffers short_k = b;
  short_k.k.resize(96 + 11 * 8 - 1);
  ExpectInvalid(short_k.Run(T()), "k has 183 floats, expected at least (n_kv_heads-1)*kv_head_stride + "
                                  "(key_end+rows-1)*head_dim = 184");
  AttnBuffers short_scratch = b;
  short_scratch.scratch.resize(AttentionScratchFloats(3, 11, 8) - 1);
  ExpectInvalid(short_scratch.Run(T()), "scratch has 227 floats");
  AttnBuffers narrow = b;
  narrow.shape.kv_head_stride = 10 * 8;  // keys 9 and 10 of KV head 0 would run into KV head 1
  ExpectInvalid(narrow.Run(T()), "kv_head_stride = 80 is less than (key_end+rows-1)*head_dim = 88");
}

TEST_P(CheckedOpsTest, AttentionDoesNotWriteOnError) {
  AttnBuffers b;
  b.out.assign(b.out.size(), -7.0f);
  b.scratch.resize(3);
  EXPECT_FALSE(b.Run(T()).ok());
  for (float v : b.out) EXPECT_EQ(v, -7.0f);
}

}  // namespace
}  // namespace fak::kernels::testing
