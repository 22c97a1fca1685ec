// Every elementwise and reduction op of KernelTable, in every tier the host supports, against the
// double-precision reference (tests/kernels/oracle/ref_kernels.h). Matmul and attention have their own
// files. Tolerances are stated per op with the reason; lengths are odd to hit every tail path.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernel_table.h"
#include "tests/kernels/oracle/ref_kernels.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

class KernelsTest : public TierTest {};
FAK_INSTANTIATE_OVER_TIERS(KernelsTest);

TEST_P(KernelsTest, TableIsCompleteAndNamed) {
  const KernelTable& t = T();
  EXPECT_EQ(t.tier, GetParam());
  EXPECT_EQ(std::string_view(t.name), TierName(GetParam()));
  for (const void* fn : {(const void*)t.dot, (const void*)t.matmul, (const void*)t.rmsnorm, (const void*)t.softmax,
                         (const void*)t.exp_scaled,
                         (const void*)t.attention, (const void*)t.silu, (const void*)t.gelu_tanh,
                         (const void*)t.silu_mul, (const void*)t.gelu_tanh_mul, (const void*)t.clamped_swiglu_mul, (const void*)t.add, (const void*)t.mul,
                         (const void*)t.scale, (const void*)t.f16_to_f32, (const void*)t.bf16_to_f32})
    EXPECT_NE(fn, nullptr);
}

// --- dot ---

TEST_P(KernelsTest, DotMatchesReference) {
  for (size_t n : TailLengths()) {
    std::vector<float> a = RandomVector(n, 1 + n), b = RandomVector(n, 1000 + n);
    double ref = ref::Dot(a.data(), b.data(), n), abs_sum = 0;
    for (size_t i = 0; i < n; ++i) abs_sum += std::abs(static_cast<double>(a[i]) * b[i]);
    // Tolerance: γ_n · Σ|a_i b_i| (see Gamma), rigorous for any summation order.
    EXPECT_NEAR(T().dot(a.data(), b.data(), n), ref, Gamma(n) * abs_sum) << "n=" << n;
  }
  EXPECT_EQ(T().dot(nullptr, nullptr, 0), 0.0f);
}

TEST_P(KernelsTest, DotIsDeterministicAndSensitive) {
  std::vector<float> a = RandomVector(1001, 5), b = RandomVector(1001, 6);
  float d = T().dot(a.data(), b.data(), a.size());
  EXPECT_EQ(Bits(T().dot(a.data(), b.data(), a.size())), Bits(d));
  // Non-vacuity: every position takes part, including the last (scalar tail) element.
  for (size_t i : {size_t{0}, size_t{500}, size_t{1000}}) {
    std::vector<float> p = a;
    p[i] += 0.5f;
    EXPECT_NE(T().dot(p.data(), b.data(), p.size()), d) << "perturbing a[" << i << "]";
  }
}

// --- rmsnorm ---

TEST_P(KernelsTest, RmsNormMatchesReferenceBothVariants) {
  for (bool one_plus : {false, true}) {
    for (size_t n : TailLengths()) {
      std::vector<float> x = RandomVector(n, 10 + n, -3, 3), w = RandomVector(n, 20 + n, -2, 2);
      GuardedBuffer y(n);
      const float eps = 1e-6f;
      T().rmsnorm(x.data(), w.data(), y.data(), n, eps, one_plus);
      std::vector<double> ref = ref::RmsNorm(x.data(), w.data(), n, eps, one_plus);
      // Tolerance: (n + 10)·u relative per element. The sum of squares carries γ_n, halved by the
      // sqrt; the mean, sqrt, reciprocal, (1 + w) and two products add about six roundings. We
      // allow the full n (not n/2) as margin. ref uses eps in double; the float eps differs by
      // ≤ u·eps, negligible next to Σx²/n ≈ 3.
      std::vector<double> tol(n);
      for (size_t i = 0; i < n; ++i) tol[i] = static_cast<double>(n + 10) * kU * std::abs(ref[i]) + 1e-30;
      ExpectWithin(y.data(), ref, tol, "rmsnorm n=" + std::to_string(n) + (one_plus ? " (1+w)" : " (w)"));
      EXPECT_TRUE(y.GuardIntact()) << "n=" << n;
    }
  }
}

TEST_P(KernelsTest, RmsNormVariantsDiffer) {
  // Non-vacuity for the flag: (1 + w) and w give different outputs, and w = 0 with (1 + w) is x/rms.
  const size_t n = 33;
  std::vector<float> x = RandomVector(n, 7), w = RandomVector(n, 8), zero(n, 0.0f), a(n), b(n), c(n);
  T().rmsnorm(x.data(), w.data(), a.data(), n, 1e-5f, false);
  T().rmsnorm(x.data(), w.data(), b.data(), n, 1e-5f, true);
  EXPECT_NE(a, b);
  T().rmsnorm(x.data(), zero.data(), c.data(), n, 1e-5f, true);
  std::vector<double> ref = ref::RmsNorm(x.data(), zero.data(), n, 1e-5, true);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(c[i], ref[i], 64 * kU * std::abs(ref[i])) << i;
}

// --- softmax ---

TEST_P(KernelsTest, SoftmaxMatchesReference) {
  for (size_t n : TailLengths()) {
    std::vector<float> x = RandomVector(n, 30 + n, -10, 10);
    std::vector<double> xd(x.begin(), x.end());
    std::vector<double> ref = ref::Softmax(xd);
    const double mx = *std::max_element(xd.begin(), xd.end());
    GuardedBuffer y(n);
    std::copy(x.begin(), x.end(), y.data());
    T().softmax(y.data(), n);
    // Tolerance: relative (n + |x_i − max| + 10)·u. The float subtraction x_i − max is off by
    // ≤ u·|x_i − max|, which exp turns into that much relative error; the n-term sum of exps
    // carries γ_n; exp itself (std::exp or xsimd's polynomial, ≤ 3 ulp measured) and the final
    // division need a few more u.
    std::vector<double> tol(n);
    for (size_t i = 0; i < n; ++i) tol[i] = (static_cast<double>(n) + std::abs(xd[i] - mx) + 10) * kU * ref[i];
    ExpectWithin(y.data(), ref, tol, "softmax n=" + std::to_string(n));
    EXPECT_TRUE(y.GuardIntact()) << "n=" << n;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += y[i];
    EXPECT_NEAR(sum, 1.0, (n + 10) * kU);
  }
}

// --- exp_scaled (a sampler's token weights) ---

TEST_P(KernelsTest, ExpScaledMatchesReferenceAndIsLaneIndependent) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (size_t n : TailLengths()) {
    std::vector<float> x = RandomVector(n, 70 + n, -30, 5);
    if (n > 2) x[n / 2] = ninf;  // a masked token weighs exactly 0
    const float shift = 5.0f, scale = 1.0f / 0.7f;
    GuardedBuffer y(n);
    T().exp_scaled(x.data(), shift, scale, y.data(), n);
    EXPECT_TRUE(y.GuardIntact()) << "n=" << n;
    for (size_t i = 0; i < n; ++i) {
      if (x[i] == ninf) {
        EXPECT_EQ(y[i], 0.0f) << "n=" << n << " i=" << i;
        continue;
      }
      // (x - shift) and the scaling each round once; exp (std::exp or xsimd's polynomial) adds a few u.
      const double arg = (static_cast<double>(x[i]) - shift) * scale, ref = std::exp(arg);
      EXPECT_NEAR(y[i], ref, (2 * std::abs(arg) + 10) * kU * ref) << "n=" << n << " i=" << i;
      // One element alone has the bits it has among the others: the sampler weighs a token either way.
      float alone = -1.0f;
      T().exp_scaled(&x[i], shift, scale, &alone, 1);
      EXPECT_EQ(std::bit_cast<uint32_t>(alone), std::bit_cast<uint32_t>(y[i])) << "n=" << n << " i=" << i;
    }
  }
  float changed = 0.0f, input = 1.0f;  // non-vacuity: the shift and scale are applied
  T().exp_scaled(&input, 1.0f, 1.0f, &changed, 1);
  EXPECT_EQ(changed, 1.0f);
  T().exp_scaled(&input, 0.0f, 2.0f, &changed, 1);
  EXPECT_NEAR(changed, std::exp(2.0), 8 * kU * std::exp(2.0));
}

TEST_P(KernelsTest, SoftmaxEdgeCases) {
  float one = 3.5f;
  T().softmax(&one, 1);
  EXPECT_EQ(one, 1.0f);  // exp(0) / exp(0), exactly
  T().softmax(nullptr, 0);  // no-op

  // Stability: huge logits must not overflow (the max is subtracted first).
  std::vector<float> big = {1e30f, 0.0f, -1e30f, 88.0f, 1e30f};
  T().softmax(big.data(), big.size());
  EXPECT_EQ(big[0], 0.5f);
  EXPECT_EQ(big[4], 0.5f);
  EXPECT_EQ(big[1], 0.0f);
  EXPECT_EQ(big[2], 0.0f);

  // Equal logits: uniform (an odd length, so the tail sees it too).
  std::vector<float> flat(19, 7.25f);
  T().softmax(flat.data(), flat.size());
  for (float v : flat) EXPECT_NEAR(v, 1.0 / 19, 4 * kU);

  // -inf (a masked score) becomes exactly 0 and does not poison the others, in body and tail.
  std::vector<float> masked(37, 0.0f);
  const float ninf = -std::numeric_limits<float>::infinity();
  masked[3] = masked[20] = masked[36] = ninf;
  T().softmax(masked.data(), masked.size());
  for (size_t i = 0; i < masked.size(); ++i) {
    if (i == 3 || i == 20 || i == 36) {
      EXPECT_EQ(masked[i], 0.0f) << i;
    } else {
      EXPECT_NEAR(masked[i], 1.0 / 34, 4 * kU) << i;
    }
  }
}

// --- activations ---

// Inputs covering the interesting range of SiLU/GELU, plus zeros, tiny values and saturation.
std::vector<float> ActivationInputs(size_t n, uint32_t seed) {
  std::vector<float> x = RandomVector(n, seed, -12, 12);
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-3f, -1e-3f, 40.0f, -40.0f, 100.0f, -100.0f, 0.5f};
  for (size_t i = 0; i < n && i < std::size(specials); ++i) x[(i * 7) % n] = specials[i];
  return x;
}

// SiLU = x·σ(x) has no cancellation: tolerance 8u relative (measured ≤ 3u in every tier: exp's
// ulp error plus the add and divide). 1e-37 absolute covers results that underflow to 0 in
// float while the double reference keeps a sub-normal (x = −100 gives ≈ −4e-42).
double SiluTol(double x, double ref) { return 8 * kU * std::abs(ref) + 1e-37; }
// GELU-tanh = ½x(1 + tanh z): for x ≪ 0 the 1 + tanh z cancels, so the error is absolute in
// units of |x| (tanh's and the add's rounding, ≈ 2u, times ½|x|; measured ≤ 1.7u·|x|). Tolerance
// 8u·|x| + 8u·|ref|.
double GeluTol(double x, double ref) { return 8 * kU * (std::abs(x) + std::abs(ref)) + 1e-37; }

TEST_P(KernelsTest, SiluAndGeluMatchReference) {
  for (size_t n : TailLengths()) {
    std::vector<float> x = ActivationInputs(n, 40 + n);
    GuardedBuffer s(n), g(n);
    std::copy(x.begin(), x.end(), s.data());
    std::copy(x.begin(), x.end(), g.data());
    T().silu(s.data(), n);
    T().gelu_tanh(g.data(), n);
    std::vector<double> rs(n), rg(n), ts(n), tg(n);
    for (size_t i = 0; i < n; ++i) {
      rs[i] = ref::Silu(x[i]);
      rg[i] = ref::GeluTanh(x[i]);
      ts[i] = SiluTol(x[i], rs[i]);
      tg[i] = GeluTol(x[i], rg[i]);
    }
    ExpectWithin(s.data(), rs, ts, "silu n=" + std::to_string(n));
    ExpectWithin(g.data(), rg, tg, "gelu_tanh n=" + std::to_string(n));
    EXPECT_TRUE(s.GuardIntact() && g.GuardIntact()) << "n=" << n;
  }
}

TEST_P(KernelsTest, GatedActivationsMatchReferenceAndAlias) {
  for (size_t n : TailLengths()) {
    std::vector<float> gate = ActivationInputs(n, 50 + n), up = RandomVector(n, 60 + n, -4, 4);
    GuardedBuffer ys(n), yg(n);
    T().silu_mul(gate.data(), up.data(), ys.data(), n);
    T().gelu_tanh_mul(gate.data(), up.data(), yg.data(), n);
    std::vector<double> rs(n), rg(n), ts(n), tg(n);
    for (size_t i = 0; i < n; ++i) {
      rs[i] = ref::Silu(gate[i]) * up[i];
      rg[i] = ref::GeluTanh(gate[i]) * up[i];
      // The activation's tolerance scaled by |up|, plus one rounding for the product.
      ts[i] = SiluTol(gate[i], ref::Silu(gate[i])) * std::abs(up[i]) + kU * std::abs(rs[i]);
      tg[i] = GeluTol(gate[i], ref::GeluTanh(gate[i])) * std::abs(up[i]) + kU * std::abs(rg[i]);
    }
    ExpectWithin(ys.data(), rs, ts, "silu_mul n=" + std::to_string(n));
    ExpectWithin(yg.data(), rg, tg, "gelu_tanh_mul n=" + std::to_string(n));
    EXPECT_TRUE(ys.GuardIntact() && yg.GuardIntact()) << "n=" << n;

    // y may alias gate: same bits as the out-of-place call.
    std::vector<float> in_place = gate;
    T().silu_mul(in_place.data(), up.data(), in_place.data(), n);
    EXPECT_EQ(0, std::memcmp(in_place.data(), ys.data(), n * sizeof(float))) << "silu_mul aliased, n=" << n;
    in_place = gate;
    T().gelu_tanh_mul(in_place.data(), up.data(), in_place.data(), n);
    EXPECT_EQ(0, std::memcmp(in_place.data(), yg.data(), n * sizeof(float))) << "gelu_tanh_mul aliased, n=" << n;
  }
}

// gpt-oss's clamped SwiGLU against the double formula: x = min(gate, limit), u = clamp(up, ±limit),
// x·σ(alpha·x)·(u + 1); the clamps are exact, so the tolerance is SiLU's (plus the rounding of
// alpha·x) scaled by |u + 1|, plus the product's rounding. Gate and up span ±12 around the limit 7, so both clamps bite; aliasing gives
// the same bits. Control: without the clamps (limit 1e30) the clamped elements differ.
TEST_P(KernelsTest, ClampedSwigluMatchesReferenceAndClamps) {
  const float alpha = 1.702f, limit = 7.0f;
  for (size_t n : TailLengths()) {
    std::vector<float> gate = ActivationInputs(n, 80 + n), up = RandomVector(n, 90 + n, -12, 12);
    GuardedBuffer y(n);
    T().clamped_swiglu_mul(gate.data(), up.data(), y.data(), n, alpha, limit);
    std::vector<double> r(n), tol(n);
    for (size_t i = 0; i < n; ++i) {
      const double x = std::min<double>(gate[i], limit), u = std::clamp<double>(up[i], -limit, limit);
      const double glu = x / (1.0 + std::exp(-static_cast<double>(alpha * x)));
      r[i] = glu * (u + 1.0);
      // exp's argument alpha·x is rounded to f32 first: a relative error of |alpha·x|·u in exp.
      tol[i] = ((8 + std::abs(alpha * x)) * kU * std::abs(glu) + 1e-37) * std::abs(u + 1.0) + 2 * kU * std::abs(r[i]) + 1e-37;
    }
    ExpectWithin(y.data(), r, tol, "clamped_swiglu_mul n=" + std::to_string(n));
    EXPECT_TRUE(y.GuardIntact()) << "n=" << n;
    std::vector<float> in_place = gate;
    T().clamped_swiglu_mul(in_place.data(), up.data(), in_place.data(), n, alpha, limit);
    EXPECT_EQ(0, std::memcmp(in_place.data(), y.data(), n * sizeof(float))) << "aliased, n=" << n;
    std::vector<float> unclamped(n);
    T().clamped_swiglu_mul(gate.data(), up.data(), unclamped.data(), n, alpha, 1e30f);
    for (size_t i = 0; i < n; ++i) {
      // (where x·σ(alpha·x) is not 0: gate neither 0 nor so negative that it underflows)
      if (std::abs(up[i]) > limit + 0.5f && std::abs(gate[i]) < limit && std::abs(gate[i]) > 1e-3f) {
        EXPECT_NE(unclamped[i], y.data()[i]) << "the up clamp must bite at " << i;
      }
    }
  }
}

TEST_P(KernelsTest, ActivationsAreElementwiseWhereverTheElementFalls) {
  // The padded-tail rule: an element gets the same bits in the vector body as in the tail.
  std::vector<float> x = ActivationInputs(40, 70);
  std::vector<float> whole = x;
  T().gelu_tanh(whole.data(), whole.size());
  for (size_t off = 0; off < 20; ++off) {
    std::vector<float> part(x.begin() + off, x.end());
    T().gelu_tanh(part.data(), part.size());
    ASSERT_EQ(0, std::memcmp(part.data(), whole.data() + off, part.size() * sizeof(float))) << "offset " << off;
  }
}

// --- add, mul, scale: one correctly rounded float operation each, so exact ---

TEST_P(KernelsTest, ElementwiseArithmeticIsExact) {
  for (size_t n : TailLengths()) {
    std::vector<float> a = RandomVector(n, 80 + n, -100, 100), b = RandomVector(n, 90 + n, -100, 100);
    const float s = 0.37f;
    GuardedBuffer ya(n), ym(n), ys(n);
    T().add(a.data(), b.data(), ya.data(), n);
    T().mul(a.data(), b.data(), ym.data(), n);
    T().scale(a.data(), s, ys.data(), n);
    for (size_t i = 0; i < n; ++i) {
      // The double sum/product of two floats rounded once to float is the IEEE float result, so
      // tolerance 0: every tier must produce it bit for bit.
      ASSERT_EQ(Bits(ya[i]), Bits(static_cast<float>(static_cast<double>(a[i]) + b[i]))) << "add n=" << n << " i=" << i;
      ASSERT_EQ(Bits(ym[i]), Bits(static_cast<float>(static_cast<double>(a[i]) * b[i]))) << "mul n=" << n << " i=" << i;
      ASSERT_EQ(Bits(ys[i]), Bits(static_cast<float>(static_cast<double>(a[i]) * s))) << "scale n=" << n << " i=" << i;
    }
    EXPECT_TRUE(ya.GuardIntact() && ym.GuardIntact() && ys.GuardIntact()) << "n=" << n;

    // y may alias a.
    std::vector<float> y = a;
    T().add(y.data(), b.data(), y.data(), n);
    EXPECT_EQ(0, std::memcmp(y.data(), ya.data(), n * sizeof(float)));
    y = a;
    T().mul(y.data(), b.data(), y.data(), n);
    EXPECT_EQ(0, std::memcmp(y.data(), ym.data(), n * sizeof(float)));
    y = a;
    T().scale(y.data(), s, y.data(), n);
    EXPECT_EQ(0, std::memcmp(y.data(), ys.data(), n * sizeof(float)));
  }
}

// --- f16 / bf16 → f32: exact conversions, checked exhaustively over all 65536 inputs ---

// IEEE binary16 decoded from its fields with ldexp, independently of the kernel's bit tricks.
double HalfValue(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -mag : mag;
}

double Bf16Value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  double mag = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, exp - 134);
  return sign ? -mag : mag;
}

std::vector<uint16_t> AllHalfBitPatterns() {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  return all;
}

TEST_P(KernelsTest, F16ToF32IsExactForEveryBitPattern) {
  std::vector<uint16_t> all = AllHalfBitPatterns();
  GuardedBuffer y(all.size());
  T().f16_to_f32(all.data(), y.data(), all.size());
  EXPECT_TRUE(y.GuardIntact());
  for (size_t i = 0; i < all.size(); ++i) {
    const uint16_t h = all[i];
    const bool sign = h >> 15;
    SCOPED_TRACE(::testing::Message() << "half 0x" << std::hex << h);
    ASSERT_EQ(std::signbit(y[i]), sign);  // includes −0
    if (((h >> 10) & 0x1f) == 0x1f) {
      if ((h & 0x3ff) == 0) {
        ASSERT_TRUE(std::isinf(y[i]));
      } else {
        ASSERT_TRUE(std::isnan(y[i]));
        ASSERT_EQ((Bits(y[i]) >> 22) & 1, (h >> 9) & 1u) << "quiet bit not preserved";
      }
      continue;
    }
    ASSERT_EQ(static_cast<double>(y[i]), HalfValue(h));
  }
}

TEST_P(KernelsTest, F16ToF32KnownValues) {
  const uint16_t in[] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x0400, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x7e00, 0x8001, 0x3555};
  float out[std::size(in)];
  T().f16_to_f32(in, out, std::size(in));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);                 // largest finite half
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));    // smallest subnormal
  EXPECT_EQ(out[4], std::ldexp(1023.0f, -24)); // largest subnormal
  EXPECT_EQ(out[5], std::ldexp(1.0f, -14));    // smallest normal
  EXPECT_EQ(out[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[7], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(out[8]), 0x80000000u);        // −0 keeps its sign
  EXPECT_EQ(Bits(out[9]), 0u);
  EXPECT_TRUE(std::isnan(out[10]));
  EXPECT_EQ(out[11], -std::ldexp(1.0f, -24));  // negative subnormal
  EXPECT_EQ(out[12], 0.333251953125f);
}

TEST_P(KernelsTest, Bf16ToF32IsExactForEveryBitPattern) {
  std::vector<uint16_t> all = AllHalfBitPatterns();
  GuardedBuffer y(all.size());
  T().bf16_to_f32(all.data(), y.data(), all.size());
  EXPECT_TRUE(y.GuardIntact());
  for (size_t i = 0; i < all.size(); ++i) {
    const uint16_t h = all[i];
    SCOPED_TRACE(::testing::Message() << "bf16 0x" << std::hex << h);
    ASSERT_EQ(std::signbit(y[i]), (h >> 15) != 0);
    if (((h >> 7) & 0xff) == 0xff) {
      ASSERT_TRUE((h & 0x7f) == 0 ? std::isinf(y[i]) : std::isnan(y[i]));
      continue;
    }
    ASSERT_EQ(static_cast<double>(y[i]), Bf16Value(h));
  }
  const uint16_t in[] = {0x3f80, 0xc040, 0x0001, 0x8000};
  float out[4];
  T().bf16_to_f32(in, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -133));  // float subnormal
  EXPECT_EQ(Bits(out[3]), 0x80000000u);
}

TEST_P(KernelsTest, ConversionsRespectLength) {
  std::vector<uint16_t> in(40, 0x3c00);
  for (size_t n : {0, 1, 7, 17, 33}) {
    GuardedBuffer a(n), b(n);
    T().f16_to_f32(in.data(), a.data(), n);
    T().bf16_to_f32(in.data(), b.data(), n);
    EXPECT_TRUE(a.GuardIntact() && b.GuardIntact()) << "n=" << n;
  }
}

}  // namespace
}  // namespace fak::kernels::testing
