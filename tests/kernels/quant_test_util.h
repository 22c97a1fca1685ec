// Helpers shared by the quantized-kernel tests: weight-like random rows, reference-quantized
// matrices and the per-element magnitudes that bound the kernels' float error.
#ifndef FAK_TESTS_KERNELS_QUANT_TEST_UTIL_H_
#define FAK_TESTS_KERNELS_QUANT_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "tests/kernels/oracle/ref_quant.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {

using ::fak::testing::RandomVector;

inline constexpr QuantType kAllTypes[] = {
    QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ5_0, QuantType::kQ4_K,   QuantType::kQ5_K,   QuantType::kQ6_K,
    QuantType::kQ4_1, QuantType::kQ5_1, QuantType::kQ2_K, QuantType::kQ3_K, QuantType::kIQ4_NL, QuantType::kIQ4_XS,
    QuantType::kMXFP4};
static_assert(std::size(kAllTypes) == kNumQuantTypes);

// Byte offsets in a block of its f16 fields (scales and mins); MXFP4 has none (its scale is a
// byte exponent at 0).
inline std::vector<size_t> F16FieldsOf(QuantType t) {
  switch (t) {
    case QuantType::kQ6_K: return {208};
    case QuantType::kQ4_K: case QuantType::kQ5_K: case QuantType::kQ4_1: case QuantType::kQ5_1: return {0, 2};
    case QuantType::kQ2_K: return {80, 82};
    case QuantType::kQ3_K: return {108};
    case QuantType::kMXFP4: return {};
    default: return {0};
  }
}
// Where the block's (first) scale lives: flipping its lowest bit changes every element.
inline size_t ScaleByteOf(QuantType t) { return t == QuantType::kMXFP4 ? 0 : F16FieldsOf(t)[0]; }

inline bool IsK(QuantType t) { return FormatOf(t).block_elems == kQKK; }
inline std::string Name(QuantType t) { return FormatOf(t).name; }

// Random rows whose 32-element blocks have varied magnitudes (2^-4 .. 2^3); about two in nine have
// one sign only (K-quant mins of 0, or of the whole range), and a few are all zero.
inline std::vector<float> WeightLikeRows(size_t rows, size_t k, uint32_t seed) {
  std::vector<float> v = RandomVector(rows * k, seed);
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  for (size_t b = 0; b * 32 < v.size(); ++b) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 8) - 4);
    const int mode = static_cast<int>(rng() % 9);
    for (size_t e = b * 32; e < b * 32 + 32 && e < v.size(); ++e) {
      float x = v[e] * scale;
      if (mode == 0) x = std::fabs(x);
      if (mode == 1) x = -std::fabs(x);
      if (mode == 2 && b % 5 == 0) x = 0;
      v[e] = x;
    }
  }
  return v;
}

// n rows of k quantized by the reference quantizer, back to back.
inline std::vector<uint8_t> QuantizeRows(QuantType t, const std::vector<float>& w, size_t n, size_t k) {
  std::vector<uint8_t> out;
  for (size_t j = 0; j < n; ++j) {
    std::vector<uint8_t> row = ref::QuantizeRow(t, w.data() + j * k, k);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// Element e's offset term: +m for Q4_1/Q5_1, −dmin·m for Q2_K/Q4_K/Q5_K; 0 for the scaled types.
inline double OffsetTerm(QuantType t, const uint8_t* row, size_t e) {
  const size_t bytes = FormatOf(t).block_bytes, in_block = e % FormatOf(t).block_elems;
  const uint8_t* blk = row + e / FormatOf(t).block_elems * bytes;
  auto half_at = [&](size_t at) {
    uint16_t h;
    std::memcpy(&h, blk + at, 2);
    return static_cast<double>(ref::HalfToFloat(h));
  };
  switch (t) {
    case QuantType::kQ4_1: case QuantType::kQ5_1: return half_at(2);
    case QuantType::kQ2_K: return -half_at(82) * (blk[in_block / 16] >> 4);
    case QuantType::kQ4_K: case QuantType::kQ5_K: {
      int sc, m;
      ref::KScaleMin(blk + 4, static_cast<int>(in_block / 32), &sc, &m);
      return -half_at(2) * m;
    }
    default: return 0;
  }
}

// Per element, the magnitude the kernel's float error is proportional to: |w| for the scaled
// types, |w − offset| + |offset| for those with an offset term (summed separately).
inline std::vector<double> Magnitudes(QuantType t, const uint8_t* row, size_t k) {
  std::vector<float> deq = ref::DequantizeRow(t, row, k);
  std::vector<double> mag(k);
  for (size_t e = 0; e < k; ++e) {
    const double off = OffsetTerm(t, row, e);
    mag[e] = std::fabs(static_cast<double>(deq[e]) - off) + std::fabs(off);
  }
  return mag;
}

// Σ_e w_e·x_e in double over one weight row and one row from quantize_act: the dequantized
// operands (for Q4_1/Q5_1 the offset m meets each block's s, as in ggml). *bound receives
// Σ_e magnitude_e·|x_e|, which the kernels' float error is proportional to.
inline double RefRowProduct(QuantType t, const uint8_t* w_row, const uint8_t* xq_row, size_t k, double* bound) {
  const std::vector<float> wd = ref::DequantizeRow(t, w_row, k), xd = ref::DequantizeActRow(t, xq_row, k);
  const std::vector<double> mag = Magnitudes(t, w_row, k);
  const bool q8_1 = FormatOf(t).act == ActFormat::kQ8_1;
  double acc = 0;
  *bound = 0;
  for (size_t e = 0; e < k; ++e) {
    acc += (double(wd[e]) - (q8_1 ? OffsetTerm(t, w_row, e) : 0.0)) * xd[e];
    *bound += mag[e] * std::fabs(double(xd[e]));
  }
  if (q8_1)
    for (size_t b = 0; b < k / kQK0; ++b) acc += OffsetTerm(t, w_row, b * kQK0) * reinterpret_cast<const ActQ8_1*>(xq_row)[b].s;
  return acc;
}

// A tier-parameterized fixture with the quantized matmul run the way callers run it: activations
// quantized per row, then matmul_q over every column.
class QuantTierTest : public TierTest {
 protected:
  std::vector<uint8_t> QuantizeAct(QuantType t, const std::vector<float>& x, size_t m, size_t k) const {
    std::vector<uint8_t> xq(m * QuantActRowBytes(t, k));
    T().quantize_act(t, x.data(), k, m, k, xq.data());
    return xq;
  }
  // matmul_q, or matmul_q_packed when w is packed (quant_pack.h).
  std::vector<float> Run(QuantType t, const std::vector<float>& x, const std::vector<uint8_t>& w, size_t m,
                         size_t k, size_t n, bool packed = false) const {
    std::vector<uint8_t> xq = QuantizeAct(t, x, m, k);
    std::vector<float> y(m * n, std::nanf(""));
    const size_t row_bytes = packed ? PackedRowBytes(t, k) : QuantRowBytes(t, k);
    (packed ? T().matmul_q_packed : T().matmul_q)(t, xq.data(), w.data(), row_bytes, y.data(), n, m, k, 0, n);
    return y;
  }
};

}  // namespace fak::kernels::testing

#endif  // FAK_TESTS_KERNELS_QUANT_TEST_UTIL_H_
