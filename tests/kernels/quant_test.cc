// Quantized weights in every tier: dequantizers against the spec reference (tests/kernels/oracle/ref_quant.h),
// activation quantization, and the quantized matmul — accuracy against the product of the
// dequantized operands (tight) and of the unquantized ones (format-typical), plus the batch
// independence contract (architecture §2.1) with its non-vacuity controls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/parallel.h"
#include "kernels/quant_format.h"
#include "tests/kernels/oracle/ref_quant.h"
#include "src/core/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

class QuantTest : public QuantTierTest {};
FAK_INSTANTIATE_OVER_TIERS(QuantTest);

TEST(QuantFormatTest, SizesAndIdsMatchTheSpec) {
  struct Row { QuantType t; uint32_t id; size_t elems, bytes; };
  const Row rows[] = {{QuantType::kQ8_0, 8, 32, 34},     {QuantType::kQ4_0, 2, 32, 18},    {QuantType::kQ5_0, 6, 32, 22},
                      {QuantType::kQ4_K, 12, 256, 144},  {QuantType::kQ5_K, 13, 256, 176}, {QuantType::kQ6_K, 14, 256, 210},
                      {QuantType::kQ4_1, 3, 32, 20},     {QuantType::kQ5_1, 7, 32, 24},    {QuantType::kQ2_K, 10, 256, 84},
                      {QuantType::kQ3_K, 11, 256, 110},  {QuantType::kIQ4_NL, 20, 32, 18}, {QuantType::kIQ4_XS, 23, 256, 136},
                      {QuantType::kMXFP4, 39, 32, 17}};
  ASSERT_EQ(std::size(rows), static_cast<size_t>(kNumQuantTypes));
  for (const Row& r : rows) {
    EXPECT_EQ(FormatOf(r.t).ggml_type, r.id) << Name(r.t);
    EXPECT_EQ(FormatOf(r.t).block_elems, r.elems) << Name(r.t);
    EXPECT_EQ(FormatOf(r.t).block_bytes, r.bytes) << Name(r.t);
    EXPECT_EQ(QuantRowBytes(r.t, 2 * r.elems), 2 * r.bytes) << Name(r.t);
  }
  EXPECT_EQ(QuantActRowBytes(QuantType::kQ4_0, 64), 72u);
  EXPECT_EQ(QuantActRowBytes(QuantType::kQ6_K, 512), 584u);
  EXPECT_EQ(QuantActRowBytes(QuantType::kQ4_1, 64), 80u);
  EXPECT_EQ(QuantActRowBytes(QuantType::kMXFP4, 64), 72u);
}

TEST(QuantFormatTest, ReferenceHalfConversionRoundTrips) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite non-negative half, and its negative
    ASSERT_EQ(ref::FloatToHalf(ref::HalfToFloat(static_cast<uint16_t>(h))), h) << h;
    ASSERT_EQ(ref::FloatToHalf(ref::HalfToFloat(static_cast<uint16_t>(h | 0x8000))), h | 0x8000) << h;
  }
  EXPECT_EQ(ref::FloatToHalf(1.0f + 1.0f / 4096), 0x3c00);  // a tie rounds to even
  EXPECT_EQ(ref::FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);  // so does this one (1.5 quanta)
  EXPECT_EQ(ref::FloatToHalf(1.0f + 3.0f / 4096), 0x3c01);
}

TEST_P(QuantTest, DequantizeIsBitExactToTheSpecOnRandomBlocks) {
  // Arbitrary block bytes (every bit pattern of qs/qh/scales), with finite f16 scales.
  std::mt19937 rng(5);
  for (QuantType t : kAllTypes) {
    const size_t k = 4 * FormatOf(t).block_elems, bytes = QuantRowBytes(t, k);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<uint8_t> row(bytes);
      for (uint8_t& b : row) b = static_cast<uint8_t>(rng());
      const size_t bb = FormatOf(t).block_bytes;
      for (size_t blk = 0; blk < bytes / bb; ++blk)  // clear each f16 field's top exponent bit: finite
        for (size_t at : F16FieldsOf(t)) row[blk * bb + at + 1] &= 0xBF;
      std::vector<float> want = ref::DequantizeRow(t, row.data(), k), got(k + 1, 7.0f);
      T().dequantize[static_cast<int>(t)](row.data(), got.data(), k);
      for (size_t e = 0; e < k; ++e) ASSERT_EQ(Bits(got[e]), Bits(want[e])) << Name(t) << " trial " << trial << " e " << e;
      EXPECT_EQ(got[k], 7.0f) << "wrote past the row";
    }
  }
}

// tests/data/quant/gguf_dequantize.bin (tests/tools/make_quant_fixture.py): random blocks of every
// type with the values the `gguf` Python package's dequantize gives them — a reading of the formats
// independent of ours. The reference and every tier's kernel give those values bit for bit.
TEST_P(QuantTest, DequantizeAgreesWithTheGgufPackage) {
  std::ifstream in(std::string(FAK_TEST_DATA_DIR) + "/quant/gguf_dequantize.bin", std::ios::binary);
  ASSERT_TRUE(in.good());
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<bool> seen(kNumQuantTypes, false);
  for (size_t at = 0; at < file.size();) {
    uint32_t head[4];  // ggml type, blocks, block bytes, block elements
    ASSERT_LE(at + sizeof head, file.size());
    std::memcpy(head, file.data() + at, sizeof head);
    const QuantFormat* f = nullptr;
    for (const QuantFormat& q : kQuantFormats) f = q.ggml_type == head[0] ? &q : f;
    ASSERT_NE(f, nullptr) << "ggml type " << head[0];
    ASSERT_EQ(head[2], f->block_bytes);
    ASSERT_EQ(head[3], f->block_elems);
    const size_t k = head[1] * f->block_elems, bytes = head[1] * f->block_bytes;
    ASSERT_LE(at + sizeof head + bytes + k * sizeof(float), file.size());
    const auto* blocks = reinterpret_cast<const uint8_t*>(file.data() + at + sizeof head);
    std::vector<float> want(k), got(k);
    std::memcpy(want.data(), blocks + bytes, k * sizeof(float));
    const std::vector<float> ref = ref::DequantizeRow(f->type, blocks, k);
    T().dequantize[static_cast<int>(f->type)](blocks, got.data(), k);
    for (size_t e = 0; e < k; ++e) {
      ASSERT_EQ(Bits(ref[e]), Bits(want[e])) << f->name << " reference, e " << e << ": " << ref[e] << " vs " << want[e];
      ASSERT_EQ(Bits(got[e]), Bits(want[e])) << f->name << " kernel, e " << e;
    }
    seen[static_cast<int>(f->type)] = true;
    at += sizeof head + bytes + k * sizeof(float);
  }
  for (QuantType t : kAllTypes) EXPECT_TRUE(seen[static_cast<int>(t)]) << Name(t) << " missing from the fixture";
}

TEST_P(QuantTest, RoundTripErrorIsTypicalOfTheFormat) {
  // Relative RMS error of quantize (reference) → dequantize (kernel) on uniform rows.
  // Q8_0 Q4_0 Q5_0 Q4_K Q5_K Q6_K Q4_1 Q5_1 Q2_K Q3_K IQ4_NL IQ4_XS MXFP4
  const double kBound[] = {0.01, 0.1, 0.05, 0.1, 0.05, 0.03, 0.1, 0.05, 0.35, 0.2, 0.1, 0.1, 0.15};
  for (QuantType t : kAllTypes) {
    const size_t k = 1024;
    std::vector<float> x = RandomVector(k, 9), y(k);
    std::vector<uint8_t> q = ref::QuantizeRow(t, x.data(), k);
    T().dequantize[static_cast<int>(t)](q.data(), y.data(), k);
    double err = 0, ref = 0;
    for (size_t e = 0; e < k; ++e) err += (y[e] - x[e]) * double(y[e] - x[e]), ref += double(x[e]) * x[e];
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, kBound[static_cast<int>(t)]) << Name(t);
    EXPECT_GT(rel, 1e-4) << Name(t) << ": suspiciously exact (non-vacuity)";
    if (!IsK(t)) {  // the 32-element formats: every element within half a step (+ f16 slack) of x,
      // or a whole step for Q4_0/Q5_0, whose levels run from −off to off−1 (the end opposite the
      // block's signed maximum is clamped); for the tables, half the widest gap between levels or
      // the clamp at the far end (IQ4_NL: 127 − 113 of 127; MXFP4: 12 − 8, with 12·scale < 2·amax)
      double step_of_amax = 0;
      switch (t) {
        case QuantType::kQ8_0: step_of_amax = 0.5 / 127; break;
        case QuantType::kQ4_0: step_of_amax = 1.0 / 8; break;
        case QuantType::kQ5_0: step_of_amax = 1.0 / 16; break;
        case QuantType::kQ4_1: step_of_amax = 1.0 / 15; break;  // half of (hi − lo) / 15 ≤ 2·amax / 15
        case QuantType::kQ5_1: step_of_amax = 1.0 / 31; break;
        case QuantType::kIQ4_NL: step_of_amax = 14.0 / 127; break;
        default: step_of_amax = 1.0 / 3; break;  // MXFP4
      }
      for (size_t e = 0; e < k; ++e) {
        const size_t b = e / 32 * 32;
        double amax = 0;
        for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(double(x[i])));
        ASSERT_LE(std::fabs(y[e] - x[e]), amax * step_of_amax + amax * 2e-3) << Name(t) << " e " << e;
      }
    }
  }
}

// ActQ8_0 scales are max|x|/127 rounded to f16 (ties to even, subnormal halves, overflow), as ggml
// stores them; ActQ8_K scales stay f32. Blocks span magnitudes from half-subnormal to near overflow.
TEST_P(QuantTest, ActivationScalesAreRoundedAsGgmlStoresThem) {
  const size_t k = 256;
  std::vector<float> x(k, 0.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float magnitudes[] = {1e-7f, 3e-6f, 7.7e-3f, 0.05f, 1.0f, 33.3f, 1000.0f, 8.3e6f};
  for (float mag : magnitudes) {
    for (size_t e = 0; e < k; ++e) x[e] = mag * u(rng);
    std::vector<uint8_t> q0 = QuantizeAct(QuantType::kQ8_0, x, 1, k), qk = QuantizeAct(QuantType::kQ4_K, x, 1, k);
    for (size_t b = 0; b < k / kQK0; ++b) {
      float amax = 0;
      for (size_t e = b * kQK0; e < (b + 1) * kQK0; ++e) amax = std::max(amax, std::fabs(x[e]));
      const float expected = ref::HalfToFloat(ref::FloatToHalf(amax / 127.0f));
      const float d = reinterpret_cast<const ActQ8_0*>(q0.data())[b].d;
      ASSERT_EQ(d, expected) << "magnitude " << mag << " block " << b;
    }
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(reinterpret_cast<const ActQ8_K*>(qk.data())->d, amax / 127.0f) << "magnitude " << mag;
    if (mag == 1.0f) {  // non-vacuity: the rounding changes this scale
      EXPECT_NE(amax / 127.0f, ref::HalfToFloat(ref::FloatToHalf(amax / 127.0f)));
    }
  }
}

TEST_P(QuantTest, ActivationRowsAreQuantizedPerRow) {
  const size_t m = 5, k = 512;
  std::vector<float> x = WeightLikeRows(m, k, 13);
  for (QuantType t : {QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ4_K}) {
    std::vector<uint8_t> all = QuantizeAct(t, x, m, k);
    const size_t rb = QuantActRowBytes(t, k);
    for (size_t i = 0; i < m; ++i) {
      std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
      std::vector<uint8_t> one = QuantizeAct(t, xi, 1, k);
      ASSERT_EQ(0, std::memcmp(one.data(), all.data() + i * rb, rb)) << Name(t) << " row " << i;
      std::vector<float> back = ref::DequantizeActRow(t, one.data(), k);
      const size_t be = FormatOf(t).block_elems;
      for (size_t e = 0; e < k; ++e) {
        double amax = 0;
        for (size_t j = e / be * be; j < e / be * be + be; ++j) amax = std::max(amax, std::fabs(double(xi[j])));
        // Half a step, plus (ActQ8_0) the f16 rounding of the scale: up to 2^-11 of d per unit of q.
        const double slack = IsK(t) ? 0.0 : 127.0 / 2048;
        ASSERT_LE(std::fabs(back[e] - xi[e]), amax / 127 * (0.5 + slack) * (1 + 1e-5)) << Name(t) << " e " << e;
      }
    }
    if (t == QuantType::kQ4_1) {  // ActQ8_1: d as ActQ8_0's, s = d·Σq with the unrounded d, rounded to f16
      const auto* a = reinterpret_cast<const ActQ8_1*>(all.data());
      for (size_t b = 0; b < k / kQK0; ++b) {
        float amax = 0;
        int sum = 0;
        for (size_t e = 0; e < kQK0; ++e) amax = std::max(amax, std::fabs(x[b * kQK0 + e])), sum += a[b].qs[e];
        ASSERT_EQ(a[b].d, ref::HalfToFloat(ref::FloatToHalf(amax / 127.0f))) << b;
        ASSERT_EQ(a[b].s, ref::HalfToFloat(ref::FloatToHalf(amax / 127.0f * static_cast<float>(sum)))) << b;
      }
    }
    if (IsK(t)) {  // bsums are the sums of 16 quants
      const auto* a = reinterpret_cast<const ActQ8_K*>(all.data());
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int e = 0; e < 16; ++e) s += a->qs[16 * g + e];
        EXPECT_EQ(a->bsums[g], s) << g;
      }
    }
  }
}

}  // namespace
}  // namespace fak::kernels::testing
