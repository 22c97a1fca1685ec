// Quantized-weight kernels, written once and instantiated per tier: row dequantizers, activation
// row quantizers (ggml's Q8_0 and Q8_1 blocks of 32, Q8_K super-blocks of 256) and the quantized
// matmul driver. Include only from kernels/arch/*.cc (the ODR rule of kernels_impl.h applies: everything
// here is a template on a tier policy defined in that TU's anonymous namespace).
//
// The tier supplies Q, a policy of block steps:
//   Q::Acc                       float accumulator (a float, or a vector of float lanes)
//   Q::Zero(), Q::Reduce(acc)    the empty accumulator; its fixed-order horizontal sum
//   Q::Step(acc, w_block, x_block)  acc plus one weight block · one activation block, overloaded on
//                                the block types (BlockQ4_0* with ActQ8_0*, BlockQ4_1* with ActQ8_1*,
//                                BlockQ4_K* with ActQ8_K*…)
//   Q::F16(bits)                 IEEE half to float (exact)
// Inside a block the integer dot product is exact, so how a tier computes it does not matter; the
// float operations of Step (per block, in block order) and Reduce define each output's bits. Every
// output Y[i][n] is Reduce(Step(...Step(Zero(), W[n] block 0, X[i] block 0)..., last block)), the
// same sequence for any M, column range, strip width or thread: batch independence by construction.
#ifndef FAK_KERNELS_SIMD_QUANT_IMPL_H_
#define FAK_KERNELS_SIMD_QUANT_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/quant_format.h"
#include "kernels/simd/kernels_impl.h"

namespace fak::kernels::simd {

// ---- Shared scalar pieces ----

// Round half to even for |v| < 2^22 without libm (ggml's nearest_int): the same bits everywhere.
template <class V>
int NearestInt(float v) {
  float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

template <class V>
float F16One(uint16_t h) {
  float f;
  F16ToF32<V>(&h, &f, 1);
  return f;
}

// MXFP4's block scale: the E8M0 exponent e as 2^(e − 128), half of 2^(e − 127) because the element
// levels are doubled (kMXFP4Levels); e < 2 gives a subnormal, as ggml's table does.
template <class V>
float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Group g's 6-bit Q3_K scale (0..63; the value is g − 32) from the 12 packed bytes.
template <class V>
int Q3KScale(const uint8_t* packed, int g) {
  return ((packed[g % 8] >> (4 * (g / 8))) & 0xF) | (((packed[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}

// Sub-block s's 6-bit IQ4_XS scale (0..63; the value is ls − 32).
template <class V>
int IQ4XSScale(const BlockIQ4_XS& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

// The 12 packed bytes of a Q4_K/Q5_K block to sc[0..7] (out[0..7]) and m[0..7] (out[8..15]),
// with 32-bit masks as ggml does (model-formats.md §3.3 gives the per-element rule; tests check both).
template <class V>
void UnpackKScales(const uint8_t* packed, uint8_t* out) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, packed, 12);
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
  const uint32_t mins_lo = u[1] & kLow6;
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  u[2] = mins_lo;
  u[0] &= kLow6;
  std::memcpy(out, u, 16);
}

// ---- Activation quantization (one row at a time; the bytes of a row depend on that row only) ----

// d = amax / 127 and q = round(x · 127 / amax) over the N values of a block (32 or 256); q lands in
// [-127, 127].
//
// amax runs in 16 lanes of a GCC vector (each lane its own running maximum; one chain through
// every element was half of this function's time). A maximum of non-negative values is exact in any
// order, and a NaN never enters one (its comparison is false, lane by lane as in one chain), so the
// lanes give the bits one chain gives, in every tier.
template <class V, size_t N>
float QuantizeBlock(const float* x, int8_t* q) {
  using Lanes = float __attribute__((vector_size(64)));
  constexpr size_t kLanes = sizeof(Lanes) / sizeof(float);
  static_assert(N % kLanes == 0);
  Lanes lanes = {};
  for (size_t i = 0; i < N; i += kLanes) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof(v));
    const Lanes a = v < 0 ? -v : v;
    lanes = a > lanes ? a : lanes;
  }
  float lane[kLanes];
  std::memcpy(lane, &lanes, sizeof(lane));
  float amax = 0.0f;
  for (const float m : lane) amax = m > amax ? m : amax;
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (size_t i = 0; i < N; ++i) {
    int v = NearestInt<V>(x[i] * id);
    q[i] = static_cast<int8_t>(v > 127 ? 127 : v < -127 ? -127 : v);
  }
  return amax / 127.0f;
}

// f rounded to the nearest IEEE binary16 value (ties to even, subnormals and overflow to infinity
// as a hardware conversion gives), returned as a float; integer and exact float steps only, so
// every tier gets the same bits.
template <class V>
float RoundToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = u & 0x80000000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return f;  // infinity or NaN
  if (a < 0x38800000u) {           // below 2^-14: a half subnormal, whose quantum is 2^-24
    return static_cast<float>(NearestInt<V>(f * 16777216.0f)) * (1.0f / 16777216.0f);
  }
  uint32_t r = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;  // keep 10 mantissa bits, ties to even
  if (r >= 0x47800000u) r = 0x7f800000u;                       // past 65504
  r |= sign;
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}

// The scale is rounded to f16 as ggml stores it (block_q8_0.d): llama.cpp's products use the rounded
// value, and a 2^-11 relative difference per block, re-quantized at every layer, compounds with depth
// (measured: 94.7% top-1 agreement on a 30-layer Q8_0 model with f32 scales, against llama.cpp).
template <class V>
void QuantizeRowQ8_0(const float* x, size_t k, ActQ8_0* y) {
  for (size_t b = 0; b < k / kQK0; ++b) y[b].d = RoundToHalf<V>(QuantizeBlock<V, kQK0>(x + b * kQK0, y[b].qs));
}

// ggml's block_q8_1: Q8_0's bytes plus s = d·Σq (d unrounded, s then rounded to f16), the term
// Q4_1/Q5_1 weights' offset m multiplies.
template <class V>
void QuantizeRowQ8_1(const float* x, size_t k, ActQ8_1* y) {
  for (size_t b = 0; b < k / kQK0; ++b) {
    const float d = QuantizeBlock<V, kQK0>(x + b * kQK0, y[b].qs);
    int sum = 0;
    for (int e = 0; e < 32; ++e) sum += y[b].qs[e];
    y[b].d = RoundToHalf<V>(d);
    y[b].s = RoundToHalf<V>(d * static_cast<float>(sum));
  }
}

template <class V>
void QuantizeRowQ8_K(const float* x, size_t k, ActQ8_K* y) {
  for (size_t b = 0; b < k / kQKK; ++b) {
    y[b].d = QuantizeBlock<V, kQKK>(x + b * kQKK, y[b].qs);
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int e = 0; e < 16; ++e) s += y[b].qs[16 * g + e];
      y[b].bsums[g] = static_cast<int16_t>(s);
    }
  }
}

// QuantFormat::act, as a switch (tier TUs do not read the constexpr table at run time).
template <class V>
ActFormat ActFormatOf(QuantType t) {
  switch (t) {
    case QuantType::kQ4_1: case QuantType::kQ5_1: return ActFormat::kQ8_1;
    case QuantType::kQ8_0: case QuantType::kQ4_0: case QuantType::kQ5_0: case QuantType::kIQ4_NL:
    case QuantType::kMXFP4: return ActFormat::kQ8_0;
    default: return ActFormat::kQ8_K;
  }
}

template <class V, class XB, void (*kRow)(const float*, size_t, XB*)>
void QuantizeRows(const float* x, size_t ldx, size_t m, size_t k, uint8_t* out) {
  constexpr size_t kElems = std::is_same_v<XB, ActQ8_K> ? kQKK : kQK0;
  const size_t row_bytes = k / kElems * sizeof(XB);
  for (size_t i = 0; i < m; ++i) kRow(x + i * ldx, k, reinterpret_cast<XB*>(out + i * row_bytes));
}

template <class V>
void QuantizeAct(QuantType wtype, const float* x, size_t ldx, size_t m, size_t k, void* xq) {
  auto* out = static_cast<uint8_t*>(xq);
  switch (ActFormatOf<V>(wtype)) {
    case ActFormat::kQ8_0: return QuantizeRows<V, ActQ8_0, &QuantizeRowQ8_0<V>>(x, ldx, m, k, out);
    case ActFormat::kQ8_1: return QuantizeRows<V, ActQ8_1, &QuantizeRowQ8_1<V>>(x, ldx, m, k, out);
    case ActFormat::kQ8_K: return QuantizeRows<V, ActQ8_K, &QuantizeRowQ8_K<V>>(x, ldx, m, k, out);
  }
}

// ---- Dequantization: the spec's formulas in float, left to right as ggml writes them ----

template <class Q>
void DequantBlock(const BlockQ8_0& b, float* y) {
  const float d = Q::F16(b.d);
  for (int e = 0; e < 32; ++e) y[e] = d * static_cast<float>(b.qs[e]);
}

template <class Q>
void DequantBlock(const BlockQ4_0& b, float* y) {
  const float d = Q::F16(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((b.qs[j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((b.qs[j] >> 4) - 8);
  }
}

template <class Q>
void DequantBlock(const BlockQ5_0& b, float* y) {
  const float d = Q::F16(b.d);
  uint32_t h;
  std::memcpy(&h, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b.qs[j] & 0xF) | static_cast<int>(((h >> j) & 1) << 4);
    const int hi = (b.qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + 16] = d * static_cast<float>(hi - 16);
  }
}

// Q4_1 and Q5_1: y = d·q + m. qh is null for Q4_1.
template <class Q>
void DequantOffset(uint16_t d16, uint16_t m16, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = Q::F16(d16), m = Q::F16(m16);
  uint32_t h = 0;
  if (qh != nullptr) std::memcpy(&h, qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | static_cast<int>(((h >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
    y[j] = d * static_cast<float>(lo) + m;
    y[j + 16] = d * static_cast<float>(hi) + m;
  }
}
template <class Q>
void DequantBlock(const BlockQ4_1& b, float* y) { DequantOffset<Q>(b.d, b.m, nullptr, b.qs, y); }
template <class Q>
void DequantBlock(const BlockQ5_1& b, float* y) { DequantOffset<Q>(b.d, b.m, b.qh, b.qs, y); }

// IQ4_NL and MXFP4: a level from the table times the block scale.
template <class Q>
void DequantLevels(float d, const int8_t* levels, const uint8_t* qs, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(levels[qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(levels[qs[j] >> 4]);
  }
}
template <class Q>
void DequantBlock(const BlockIQ4_NL& b, float* y) { DequantLevels<Q>(Q::F16(b.d), kIQ4Levels, b.qs, y); }
template <class Q>
void DequantBlock(const BlockMXFP4& b, float* y) { DequantLevels<Q>(E8M0Half<Q>(b.e), kMXFP4Levels, b.qs, y); }

// Q2_K: y = (d·sc)·q − (dmin·m) per group of 16.
template <class Q>
void DequantBlock(const BlockQ2_K& b, float* y) {
  const float d = Q::F16(b.d), dmin = Q::F16(b.dmin);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[8 * h + 2 * j + half];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 16 * half; l < 16 * half + 16; ++l)
          y[128 * h + 32 * j + l] = dl * static_cast<float>((b.qs[32 * h + l] >> (2 * j)) & 3) - ml;
      }
}

// Q3_K: y = (d·(sc − 32))·q per group of 16, q ∈ [−4, 3].
template <class Q>
void DequantBlock(const BlockQ3_K& b, float* y) {
  const float d = Q::F16(b.d);
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j)
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(Q3KScale<Q>(b.scales, 8 * h + 2 * j + half) - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q = ((b.qs[32 * h + l] >> (2 * j)) & 3) - (((b.hmask[l] >> (4 * h + j)) & 1) ? 0 : 4);
          y[128 * h + 32 * j + l] = dl * static_cast<float>(q);
        }
      }
}

// IQ4_XS: y = (d·(ls − 32))·level per sub-block of 32.
template <class Q>
void DequantBlock(const BlockIQ4_XS& b, float* y) {
  const float d = Q::F16(b.d);
  for (int s = 0; s < 8; ++s)
    DequantLevels<Q>(d * static_cast<float>(IQ4XSScale<Q>(b, s) - 32), kIQ4Levels, b.qs + 16 * s, y + 32 * s);
}

// Q4_K and Q5_K: y = (d·sc)·q − (dmin·m), per sub-block. qh is null for Q4_K.
template <class Q>
void DequantK45(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                float* y) {
  const float d = Q::F16(d16), dmin = Q::F16(dmin16);
  uint8_t sm[16];
  UnpackKScales<Q>(scales, sm);
  for (int c = 0; c < 4; ++c) {
    const float d_lo = d * sm[2 * c], m_lo = dmin * sm[8 + 2 * c];
    const float d_hi = d * sm[2 * c + 1], m_hi = dmin * sm[8 + 2 * c + 1];
    for (int l = 0; l < 32; ++l) {
      int lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
      if (qh != nullptr) {
        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      y[64 * c + l] = d_lo * static_cast<float>(lo) - m_lo;
      y[64 * c + 32 + l] = d_hi * static_cast<float>(hi) - m_hi;
    }
  }
}

template <class Q>
void DequantBlock(const BlockQ4_K& b, float* y) { DequantK45<Q>(b.d, b.dmin, b.scales, b.qs, nullptr, y); }
template <class Q>
void DequantBlock(const BlockQ5_K& b, float* y) { DequantK45<Q>(b.d, b.dmin, b.scales, b.qs, b.qh, y); }

template <class Q>
void DequantBlock(const BlockQ6_K& b, float* y) {
  const float d = Q::F16(b.d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    const int8_t* sc = b.scales + 8 * h;
    float* yh = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      yh[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q0);
      yh[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q1);
      yh[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q2);
      yh[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q3);
    }
  }
}

// The activation block each weight block type is multiplied with, and the elements of both.
template <class WB>
struct ActOf {
  using type = std::conditional_t<
      std::is_same_v<WB, BlockQ4_1> || std::is_same_v<WB, BlockQ5_1>, ActQ8_1,
      std::conditional_t<std::is_same_v<WB, BlockQ8_0> || std::is_same_v<WB, BlockQ4_0> ||
                             std::is_same_v<WB, BlockQ5_0> || std::is_same_v<WB, BlockIQ4_NL> ||
                             std::is_same_v<WB, BlockMXFP4>,
                         ActQ8_0, ActQ8_K>>;
};
template <class WB>
inline constexpr size_t kBlockElemsOf = std::is_same_v<typename ActOf<WB>::type, ActQ8_K> ? kQKK : kQK0;

template <class Q, class WB>
void DequantizeRow(const void* src, float* y, size_t k) {
  const WB* b = static_cast<const WB*>(src);
  for (size_t i = 0; i < k / kBlockElemsOf<WB>; ++i) DequantBlock<Q>(b[i], y + i * kBlockElemsOf<WB>);
}

// ---- Scalar block steps (the scalar tier's Q): full integer block sums, then plain float ops ----

template <class V>
struct ScalarQuantOps {
  using Acc = float;
  static Acc Zero() { return 0.0f; }
  static float Reduce(Acc a) { return a; }
  static float F16(uint16_t h) { return F16One<V>(h); }

  // Row tiles (see X86QuantOps): the scalar steps read the block in place.
  template <class WB>
  struct InPlace {
    const WB* w;
  };
  template <class WB>
  static InPlace<WB> Unpack(const WB* w) { return {w}; }
  // Activation blocks need no preparation here (see X86QuantOps::Prep).
  template <class WB, class XB>
  static const XB* Prep(const WB*, const XB* x) { return x; }
  template <class WB>
  static Acc Dot(Acc acc, InPlace<WB> u, const typename ActOf<WB>::type* x) { return Step(acc, u.w, x); }

  // acc + (dw·dx)·isum: one rounded product of scales, one rounded product, one rounded sum.
  static Acc Add(Acc acc, float scale, int32_t isum) { return acc + scale * static_cast<float>(isum); }

  static Acc Step(Acc acc, const BlockQ8_0* w, const ActQ8_0* x) {
    int32_t s = 0;
    for (int e = 0; e < 32; ++e) s += w->qs[e] * x->qs[e];
    return Add(acc, F16(w->d) * x->d, s);
  }
  static Acc Step(Acc acc, const BlockQ4_0* w, const ActQ8_0* x) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) s += ((w->qs[j] & 0xF) - 8) * x->qs[j] + ((w->qs[j] >> 4) - 8) * x->qs[j + 16];
    return Add(acc, F16(w->d) * x->d, s);
  }
  static Acc Step(Acc acc, const BlockQ5_0* w, const ActQ8_0* x) {
    uint32_t h;
    std::memcpy(&h, w->qh, 4);
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = (w->qs[j] & 0xF) | static_cast<int>(((h >> j) & 1) << 4);
      const int hi = (w->qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
      s += (lo - 16) * x->qs[j] + (hi - 16) * x->qs[j + 16];
    }
    return Add(acc, F16(w->d) * x->d, s);
  }

  // Q4_1 / Q5_1: acc + (dw·dx)·Σq·x, then + m·s (s = dx·Σx from the activation block).
  static Acc StepOffset(Acc acc, uint16_t d, uint16_t m, const uint8_t* qh, const uint8_t* qs, const ActQ8_1* x) {
    uint32_t h = 0;
    if (qh != nullptr) std::memcpy(&h, qh, 4);
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0xF) | static_cast<int>(((h >> j) & 1) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((h >> (j + 16)) & 1) << 4);
      s += lo * x->qs[j] + hi * x->qs[j + 16];
    }
    return Add(acc, F16(d) * x->d, s) + F16(m) * x->s;
  }
  static Acc Step(Acc acc, const BlockQ4_1* w, const ActQ8_1* x) { return StepOffset(acc, w->d, w->m, nullptr, w->qs, x); }
  static Acc Step(Acc acc, const BlockQ5_1* w, const ActQ8_1* x) { return StepOffset(acc, w->d, w->m, w->qh, w->qs, x); }

  // IQ4_NL / MXFP4: levels from a table, one scale per block.
  static int32_t LevelDot(const int8_t* levels, const uint8_t* qs, const int8_t* xq) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) s += levels[qs[j] & 0xF] * xq[j] + levels[qs[j] >> 4] * xq[j + 16];
    return s;
  }
  static Acc Step(Acc acc, const BlockIQ4_NL* w, const ActQ8_0* x) {
    return Add(acc, F16(w->d) * x->d, LevelDot(kIQ4Levels, w->qs, x->qs));
  }
  static Acc Step(Acc acc, const BlockMXFP4* w, const ActQ8_0* x) {
    return Add(acc, E8M0Half<V>(w->e) * x->d, LevelDot(kMXFP4Levels, w->qs, x->qs));
  }

  // Q2_K / Q3_K: the sums of the 16 groups of 16 (q ∈ [0, 3] for Q2_K, [−4, 3] for Q3_K).
  static void GroupSums(const uint8_t* qs, const uint8_t* hmask, const int8_t* xq, int32_t* g) {
    for (int i = 0; i < 16; ++i) g[i] = 0;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          int q = (qs[32 * h + l] >> (2 * j)) & 3;
          if (hmask != nullptr) q -= ((hmask[l] >> (4 * h + j)) & 1) ? 0 : 4;
          g[8 * h + 2 * j + l / 16] += q * xq[128 * h + 32 * j + l];
        }
  }
  // acc + (dx·d)·Σ_g sc_g·Σ q·x, then − (dx·dmin)·Σ_g m_g·Σ x.
  static Acc Step(Acc acc, const BlockQ2_K* w, const ActQ8_K* x) {
    int32_t g[16], sum = 0, mins = 0;
    GroupSums(w->qs, nullptr, x->qs, g);
    for (int i = 0; i < 16; ++i) {
      sum += (w->scales[i] & 0xF) * g[i];
      mins += (w->scales[i] >> 4) * x->bsums[i];
    }
    acc = Add(acc, x->d * F16(w->d), sum);
    return acc - (x->d * F16(w->dmin)) * static_cast<float>(mins);
  }
  static Acc Step(Acc acc, const BlockQ3_K* w, const ActQ8_K* x) {
    int32_t g[16], sum = 0;
    GroupSums(w->qs, w->hmask, x->qs, g);
    for (int i = 0; i < 16; ++i) sum += (Q3KScale<V>(w->scales, i) - 32) * g[i];
    return Add(acc, F16(w->d) * x->d, sum);
  }

  static Acc Step(Acc acc, const BlockIQ4_XS* w, const ActQ8_K* x) {
    int32_t sum = 0;
    for (int s = 0; s < 8; ++s)
      sum += (IQ4XSScale<V>(*w, s) - 32) * LevelDot(kIQ4Levels, w->qs + 16 * s, x->qs + 32 * s);
    return Add(acc, F16(w->d) * x->d, sum);
  }

  // Q4_K / Q5_K: acc + (dx·d)·Σ_s sc_s·Σ q·x, then − (dx·dmin)·Σ_s m_s·Σ x.
  static Acc StepK45(Acc acc, uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs,
                     const uint8_t* qh, const ActQ8_K* x) {
    uint8_t sm[16];
    UnpackKScales<V>(scales, sm);
    int32_t sum = 0, mins = 0;
    for (int c = 0; c < 4; ++c) {
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        int ql = qs[32 * c + l] & 0xF, qhi = qs[32 * c + l] >> 4;
        if (qh != nullptr) {
          ql |= ((qh[l] >> (2 * c)) & 1) << 4;
          qhi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        lo += ql * x->qs[64 * c + l];
        hi += qhi * x->qs[64 * c + 32 + l];
      }
      sum += sm[2 * c] * lo + sm[2 * c + 1] * hi;
    }
    for (int s = 0; s < 8; ++s) mins += sm[8 + s] * (x->bsums[2 * s] + x->bsums[2 * s + 1]);
    acc = Add(acc, x->d * F16(d), sum);
    return acc - (x->d * F16(dmin)) * static_cast<float>(mins);
  }
  static Acc Step(Acc acc, const BlockQ4_K* w, const ActQ8_K* x) {
    return StepK45(acc, w->d, w->dmin, w->scales, w->qs, nullptr, x);
  }
  static Acc Step(Acc acc, const BlockQ5_K* w, const ActQ8_K* x) {
    return StepK45(acc, w->d, w->dmin, w->scales, w->qs, w->qh, x);
  }

  static Acc Step(Acc acc, const BlockQ6_K* w, const ActQ8_K* x) {
    int32_t sum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w->ql + 64 * h;
      const uint8_t* qh = w->qh + 32 * h;
      const int8_t* xq = x->qs + 128 * h;
      int32_t g[8] = {};  // the 8 scale groups of 16 in this half
      for (int l = 0; l < 32; ++l) {
        g[l / 16] += (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32) * xq[l];
        g[2 + l / 16] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * xq[l + 32];
        g[4 + l / 16] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * xq[l + 64];
        g[6 + l / 16] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * xq[l + 96];
      }
      for (int i = 0; i < 8; ++i) sum += w->scales[8 * h + i] * g[i];
    }
    return Add(acc, F16(w->d) * x->d, sum);
  }
};

// ---- The quantized matmul driver ----

// Each W block is prefetched this many rows ahead (a hint only). Rows are short (612 bytes for a
// Q8_0 row of 576), too short for the hardware prefetcher to ramp up on each, but a strip's rows
// are contiguous, so two strips ahead is one long stream running a few KiB in front. The hint is
// "into L2" (prefetcht1), not "into L1": an L1 prefetch holds one of the core's few L1 miss buffers
// for the whole DRAM latency, which capped a decoding core at ~8 GB/s (measured: shape (b) Q4_K_M
// tg 12 -> 28 tok/s on one thread, 28 -> 47 on two).
inline constexpr size_t kQuantPrefetchRows = 8;

// NR outputs of one activation row: y[j] = X row · W row j, for j < NR (W rows w_row_bytes apart).
template <class Q, class WB, class XB, int NR>
void QDotStrip(const XB* x, const uint8_t* w, size_t w_row_bytes, size_t n_blocks, float* y) {
  // Unrolled so that the NR accumulators live in registers (a spilled accumulator puts a store-to-
  // load round trip on every block's dependency chain).
  typename Q::Acc acc[NR];
  const WB* rows[NR];
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) {
    acc[j] = Q::Zero();
    rows[j] = reinterpret_cast<const WB*>(w + j * w_row_bytes);
  }
  for (size_t b = 0; b < n_blocks; ++b) {
    const auto xp = Q::Prep(rows[0], x + b);  // once for the NR weight rows
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const char* ahead = reinterpret_cast<const char*>(rows[j] + b) + kQuantPrefetchRows * w_row_bytes;
      for (size_t o = 0; o < sizeof(WB); o += 64) __builtin_prefetch(ahead + o, 0, /*locality: L2*/ 2);
      acc[j] = Q::Dot(acc[j], Q::Unpack(rows[j] + b), xp);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NR; ++j) y[j] = Q::Reduce(acc[j]);
}

// MR activation rows x NC W rows: each weight block is unpacked once for all MR rows (Q::Unpack) and
// each activation block prepared once for all NC columns (Q::Prep), then multiplied (Q::Dot) — the
// arithmetic of Q::Step, so the same bits.
template <class Q, class WB, class XB, int MR, int NC>
void QDotTile(const XB* x, const uint8_t* w, size_t w_row_bytes, size_t n_blocks, float* y, size_t ldy) {
  typename Q::Acc acc[MR][NC];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) acc[i][c] = Q::Zero();
  const WB* tag = reinterpret_cast<const WB*>(w);  // selects Prep's overload only
  for (size_t b = 0; b < n_blocks; ++b) {
    decltype(Q::Prep(tag, x)) xp[MR];
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) xp[i] = Q::Prep(tag, x + i * n_blocks + b);
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) {
      const auto u = Q::Unpack(reinterpret_cast<const WB*>(w + c * w_row_bytes) + b);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) acc[i][c] = Q::Dot(acc[i][c], u, xp[i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) y[i * ldy + c] = Q::Reduce(acc[i][c]);
}

// Columns per prefill tile: two for the 32-element types (an unpacked block is one register), one
// for the K-quants (sixteen).
template <class WB>
inline constexpr int kTileColsOf = kBlockElemsOf<WB> == kQK0 ? 2 : 1;

// Rows [i0, i1) of NC columns, in tiles of four rows.
template <class Q, class WB, class XB, int NC>
void TileColumns(const XB* x, const uint8_t* w, size_t w_row_bytes, size_t n_blocks, size_t i0, size_t i1, float* y,
                 size_t ldy) {
  size_t i = i0;
  for (; i + 4 <= i1; i += 4) QDotTile<Q, WB, XB, 4, NC>(x + i * n_blocks, w, w_row_bytes, n_blocks, y + i * ldy, ldy);
  for (; i < i1; ++i) QDotTile<Q, WB, XB, 1, NC>(x + i * n_blocks, w, w_row_bytes, n_blocks, y + i * ldy, ldy);
}

// Decode (one row): NR W rows streamed side by side. Prefill: rows in blocks of kRowBlock (their
// activations stay in L2) times column strips of kColStrip (their weight rows stay in L1 while the
// row block streams past), in tiles of four rows that share each unpacked weight block.
template <class Q, class WB, class XB>
void MatMulQTyped(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                  size_t n_begin, size_t n_end) {
  constexpr int NR = 4;
  constexpr size_t kRowBlock = 64, kColStrip = 16;
  const size_t n_blocks = k / kBlockElemsOf<WB>;
  const XB* xr = static_cast<const XB*>(xq);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  if (m == 1) {
    size_t n = n_begin;
    for (; n + NR <= n_end; n += NR) QDotStrip<Q, WB, XB, NR>(xr, wb + n * w_row_bytes, w_row_bytes, n_blocks, y + n);
    for (; n < n_end; ++n) QDotStrip<Q, WB, XB, 1>(xr, wb + n * w_row_bytes, w_row_bytes, n_blocks, y + n);
    return;
  }
  for (size_t i0 = 0; i0 < m; i0 += kRowBlock) {
    const size_t i1 = m - i0 < kRowBlock ? m : i0 + kRowBlock;
    for (size_t n0 = n_begin; n0 < n_end; n0 += kColStrip) {
      const size_t n1 = n_end - n0 < kColStrip ? n_end : n0 + kColStrip;
      constexpr int NC = kTileColsOf<WB>;
      size_t n = n0;
      for (; n + NC <= n1; n += NC) TileColumns<Q, WB, XB, NC>(xr, wb + n * w_row_bytes, w_row_bytes, n_blocks, i0, i1, y + n, ldy);
      for (; n < n1; ++n) TileColumns<Q, WB, XB, 1>(xr, wb + n * w_row_bytes, w_row_bytes, n_blocks, i0, i1, y + n, ldy);
    }
  }
}

template <class Q>
void MatMulQ(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m,
             size_t k, size_t n_begin, size_t n_end) {
  switch (wtype) {
    case QuantType::kQ8_0: return MatMulQTyped<Q, BlockQ8_0, ActQ8_0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ4_0: return MatMulQTyped<Q, BlockQ4_0, ActQ8_0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ5_0: return MatMulQTyped<Q, BlockQ5_0, ActQ8_0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ4_K: return MatMulQTyped<Q, BlockQ4_K, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ5_K: return MatMulQTyped<Q, BlockQ5_K, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ6_K: return MatMulQTyped<Q, BlockQ6_K, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ4_1: return MatMulQTyped<Q, BlockQ4_1, ActQ8_1>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ5_1: return MatMulQTyped<Q, BlockQ5_1, ActQ8_1>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ2_K: return MatMulQTyped<Q, BlockQ2_K, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kQ3_K: return MatMulQTyped<Q, BlockQ3_K, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kIQ4_NL:
      return MatMulQTyped<Q, BlockIQ4_NL, ActQ8_0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kIQ4_XS:
      return MatMulQTyped<Q, BlockIQ4_XS, ActQ8_K>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    case QuantType::kMXFP4: return MatMulQTyped<Q, BlockMXFP4, ActQ8_0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
  }
}

// Packed weights (quant_pack.h) through the tier's own block step, one output at a time: the
// scalar tier, whose steps already sum each block in integers first, so packing changes no bit.
// (n_begin, n_end and the group address use the packed row bytes.)
// Plain(p, c) rebuilds row c's plain block.
template <class Q>
struct PackedSteps {
  static BlockQ8_0 Plain(const BlockQ8_0x8& p, size_t c) {
    BlockQ8_0 b;
    b.d = p.d[c];
    for (size_t j = 0; j < 8; ++j) std::memcpy(b.qs + 4 * j, p.qs + 32 * j + 4 * c, 4);
    return b;
  }
  static BlockQ4_0 Plain(const BlockQ4_0x8& p, size_t c) {
    BlockQ4_0 b;
    b.d = p.d[c];
    for (size_t j = 0; j < 4; ++j) std::memcpy(b.qs + 4 * j, p.qs + 32 * j + 4 * c, 4);
    return b;
  }
  static BlockQ5_0 Plain(const BlockQ5_0x8& p, size_t c) {
    BlockQ5_0 b;
    b.d = p.d[c];
    for (size_t j = 0; j < 4; ++j) std::memcpy(b.qs + 4 * j, p.qs + 32 * j + 4 * c, 4);
    uint32_t qh = 0;
    for (size_t j = 0; j < 8; ++j) qh |= ((p.qh[j] >> (4 * c)) & 0xFu) << (4 * j);
    std::memcpy(b.qh, &qh, 4);
    return b;
  }
  static void PlainNibbles(const uint8_t* packed, size_t c, uint8_t* qs) {
    for (size_t j = 0; j < 4; ++j) std::memcpy(qs + 4 * j, packed + 32 * j + 4 * c, 4);
  }
  static BlockQ4_1 Plain(const BlockQ4_1x8& p, size_t c) {
    BlockQ4_1 b;
    b.d = p.d[c];
    b.m = p.m[c];
    PlainNibbles(p.qs, c, b.qs);
    return b;
  }
  static BlockQ5_1 Plain(const BlockQ5_1x8& p, size_t c) {
    BlockQ5_1 b;
    b.d = p.d[c];
    b.m = p.m[c];
    PlainNibbles(p.qs, c, b.qs);
    uint32_t qh = 0;
    for (size_t j = 0; j < 8; ++j) qh |= ((p.qh[j] >> (4 * c)) & 0xFu) << (4 * j);
    std::memcpy(b.qh, &qh, 4);
    return b;
  }
  static BlockIQ4_NL Plain(const BlockIQ4_NLx8& p, size_t c) {
    BlockIQ4_NL b;
    b.d = p.d[c];
    PlainNibbles(p.qs, c, b.qs);
    return b;
  }
  static BlockMXFP4 Plain(const BlockMXFP4x8& p, size_t c) {
    BlockMXFP4 b;
    b.e = p.e[c];
    PlainNibbles(p.qs, c, b.qs);
    return b;
  }
  template <class PlainK, class PackedK>
  static PlainK PlainK45(const PackedK& p, size_t c) {
    PlainK b;
    b.d = p.d[c];
    b.dmin = p.dmin[c];
    for (size_t i = 0; i < 4; ++i) {  // the 6-bit packing UnpackKScales reads
      b.scales[i] = static_cast<uint8_t>(p.sc[i][c] | ((p.sc[i + 4][c] >> 4) << 6));
      b.scales[i + 4] = static_cast<uint8_t>(p.m[i][c] | ((p.m[i + 4][c] >> 4) << 6));
      b.scales[i + 8] = static_cast<uint8_t>((p.sc[i + 4][c] & 0xF) | ((p.m[i + 4][c] & 0xF) << 4));
    }
    for (size_t ch = 0; ch < 4; ++ch)
      for (size_t j = 0; j < 8; ++j) std::memcpy(b.qs + 32 * ch + 4 * j, p.qs[ch][j] + 4 * c, 4);
    if constexpr (requires { p.qh; })
      for (size_t j = 0; j < 8; ++j) std::memcpy(b.qh + 4 * j, p.qh[j] + 4 * c, 4);
    return b;
  }
  static BlockQ4_K Plain(const BlockQ4_Kx8& p, size_t c) { return PlainK45<BlockQ4_K>(p, c); }
  static BlockQ5_K Plain(const BlockQ5_Kx8& p, size_t c) { return PlainK45<BlockQ5_K>(p, c); }
  static BlockQ6_K Plain(const BlockQ6_Kx8& p, size_t c) {
    BlockQ6_K b;
    b.d = p.d[c];
    for (size_t g = 0; g < 16; ++g) b.scales[g] = p.sc[g][c];
    for (size_t h = 0; h < 2; ++h)
      for (size_t j = 0; j < 8; ++j) {
        for (size_t q = 0; q < 2; ++q) std::memcpy(b.ql + 64 * h + 32 * q + 4 * j, p.ql[h][q][j] + 4 * c, 4);
        std::memcpy(b.qh + 32 * h + 4 * j, p.qh[h][j] + 4 * c, 4);
      }
    return b;
  }
  static BlockQ2_K Plain(const BlockQ2_Kx8& p, size_t c) {
    BlockQ2_K b;
    b.d = p.d[c];
    b.dmin = p.dmin[c];
    for (size_t g = 0; g < 16; ++g) b.scales[g] = p.scales[g][c];
    for (size_t h = 0; h < 2; ++h)
      for (size_t j = 0; j < 8; ++j) std::memcpy(b.qs + 32 * h + 4 * j, p.qs[h][j] + 4 * c, 4);
    return b;
  }
  static BlockQ3_K Plain(const BlockQ3_Kx8& p, size_t c) {
    BlockQ3_K b{};
    b.d = p.d[c];
    for (size_t g = 0; g < 16; ++g) {  // the 6-bit packing Q3KScale reads
      const int sc = p.sc[g][c] + 32;
      b.scales[g % 8] = static_cast<uint8_t>(b.scales[g % 8] | ((sc & 0xF) << (4 * (g / 8))));
      b.scales[8 + g % 4] = static_cast<uint8_t>(b.scales[8 + g % 4] | ((sc >> 4) << (2 * (g / 4))));
    }
    for (size_t h = 0; h < 2; ++h)
      for (size_t j = 0; j < 8; ++j) std::memcpy(b.qs + 32 * h + 4 * j, p.qs[h][j] + 4 * c, 4);
    for (size_t j = 0; j < 8; ++j) std::memcpy(b.hmask + 4 * j, p.hmask[j] + 4 * c, 4);
    return b;
  }
  static BlockIQ4_XS Plain(const BlockIQ4_XSx8& p, size_t c) {
    BlockIQ4_XS b{};
    b.d = p.d[c];
    for (size_t s = 0; s < 8; ++s) {  // the 6-bit packing IQ4XSScale reads
      const int ls = p.sc[s][c] + 32;
      b.scales_l[s / 2] = static_cast<uint8_t>(b.scales_l[s / 2] | ((ls & 0xF) << (4 * (s % 2))));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * s)));
      for (size_t g = 0; g < 4; ++g) std::memcpy(b.qs + 16 * s + 4 * g, p.qs[s][g] + 4 * c, 4);
    }
    return b;
  }
  template <class PB, class XB, size_t kElems>
  static void Run(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                  size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kElems;
    const auto* x = static_cast<const XB*>(xq);
    for (size_t n = n_begin; n < n_end; n += 8) {
      const auto* group = reinterpret_cast<const PB*>(static_cast<const uint8_t*>(w) + n * w_row_bytes);
      for (size_t c = 0; c < 8; ++c) {
        for (size_t i = 0; i < m; ++i) {
          typename Q::Acc acc = Q::Zero();
          for (size_t b = 0; b < n_blocks; ++b) {
            const auto block = Plain(group[b], c);
            acc = Q::Step(acc, &block, x + i * n_blocks + b);
          }
          y[i * ldy + n + c] = Q::Reduce(acc);
        }
      }
    }
  }
  static void MatMul(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m,
                     size_t k, size_t n_begin, size_t n_end) {
    switch (wtype) {
      case QuantType::kQ4_0: return Run<BlockQ4_0x8, ActQ8_0, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_0: return Run<BlockQ5_0x8, ActQ8_0, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_K: return Run<BlockQ4_Kx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_1: return Run<BlockQ4_1x8, ActQ8_1, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_1: return Run<BlockQ5_1x8, ActQ8_1, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_NL:
        return Run<BlockIQ4_NLx8, ActQ8_0, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kMXFP4: return Run<BlockMXFP4x8, ActQ8_0, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_XS:
        return Run<BlockIQ4_XSx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ2_K: return Run<BlockQ2_Kx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ3_K: return Run<BlockQ3_Kx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_K: return Run<BlockQ5_Kx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ6_K: return Run<BlockQ6_Kx8, ActQ8_K, kQKK>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      default: return Run<BlockQ8_0x8, ActQ8_0, kQK0>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    }
  }
};

// Q: the tier's block-step policy; V: its float policy (for the activation quantizer's helpers).
template <class V, class Q>
void FillQuantTable(KernelTable* t) {
  t->dequantize[static_cast<int>(QuantType::kQ8_0)] = &DequantizeRow<Q, BlockQ8_0>;
  t->dequantize[static_cast<int>(QuantType::kQ4_0)] = &DequantizeRow<Q, BlockQ4_0>;
  t->dequantize[static_cast<int>(QuantType::kQ5_0)] = &DequantizeRow<Q, BlockQ5_0>;
  t->dequantize[static_cast<int>(QuantType::kQ4_K)] = &DequantizeRow<Q, BlockQ4_K>;
  t->dequantize[static_cast<int>(QuantType::kQ5_K)] = &DequantizeRow<Q, BlockQ5_K>;
  t->dequantize[static_cast<int>(QuantType::kQ6_K)] = &DequantizeRow<Q, BlockQ6_K>;
  t->dequantize[static_cast<int>(QuantType::kQ4_1)] = &DequantizeRow<Q, BlockQ4_1>;
  t->dequantize[static_cast<int>(QuantType::kQ5_1)] = &DequantizeRow<Q, BlockQ5_1>;
  t->dequantize[static_cast<int>(QuantType::kQ2_K)] = &DequantizeRow<Q, BlockQ2_K>;
  t->dequantize[static_cast<int>(QuantType::kQ3_K)] = &DequantizeRow<Q, BlockQ3_K>;
  t->dequantize[static_cast<int>(QuantType::kIQ4_NL)] = &DequantizeRow<Q, BlockIQ4_NL>;
  t->dequantize[static_cast<int>(QuantType::kIQ4_XS)] = &DequantizeRow<Q, BlockIQ4_XS>;
  t->dequantize[static_cast<int>(QuantType::kMXFP4)] = &DequantizeRow<Q, BlockMXFP4>;
  t->quantize_act = &QuantizeAct<V>;
  t->matmul_q = &MatMulQ<Q>;
  if constexpr (requires { &Q::MatMulPacked; }) {
    t->matmul_q_packed = &Q::MatMulPacked;
  } else {
    t->matmul_q_packed = &PackedSteps<Q>::MatMul;
  }
}

}  // namespace fak::kernels::simd

#endif  // FAK_KERNELS_SIMD_QUANT_IMPL_H_
