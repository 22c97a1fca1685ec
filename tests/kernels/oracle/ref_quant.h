// Reference quantizers and dequantizers for the block formats of quant_format.h, written from
// ../shared/docs/model-formats.md §3 one element at a time. Test-only (header-only, never compiled
// into a tier TU): the oracle for the kernels' dequantizers, and the way tests (and synthetic
// models) make valid quantized rows. The quantizers are simple (min/max scales, round to nearest),
// not ggml's error-minimising search; any valid block is a fair test input.
#ifndef FAK_KERNELS_REF_REF_QUANT_H_
#define FAK_KERNELS_REF_REF_QUANT_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/quant_format.h"

namespace fak::kernels::ref {

// IEEE binary16 bits to float: (-1)^s · 2^(e−15) · 1.m, subnormals 2^−14 · 0.m.
inline float HalfToFloat(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant == 0 ? INFINITY : NAN;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else {
    v = std::ldexp(static_cast<double>(mant + 1024), exp - 25);
  }
  return static_cast<float>(sign ? -v : v);
}

// Float to binary16, round to nearest even (finite inputs within the half range).
inline uint16_t FloatToHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1)
  int exp = e - 1;    // a = 1.x · 2^exp
  if (exp < -14) exp = -14;  // subnormal: quantum 2^-24
  double quantum = std::ldexp(1.0, exp - 10);
  double q = std::nearbyint(a / quantum);  // default rounding mode: half to even
  double r = q * quantum;
  if (r >= 65520.0) return sign | 0x7c00;
  if (r == 0) return sign;  // under half the smallest subnormal
  // Re-encode r exactly.
  int re;
  std::frexp(r, &re);
  int rexp = re - 1;
  if (rexp < -14) return sign | static_cast<uint16_t>(std::ldexp(r, 24));
  uint16_t mant = static_cast<uint16_t>(std::ldexp(r, 10 - rexp) - 1024);
  return sign | static_cast<uint16_t>((rexp + 15) << 10) | mant;
}

inline int Clamp(long v, int lo, int hi) { return static_cast<int>(std::min<long>(hi, std::max<long>(lo, v))); }
inline long Round(double v) { return std::lround(v); }

// The value of largest magnitude in x[0, n) (with its sign), as ggml's quantizers pick it.
inline float SignedAbsMax(const float* x, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::fabs(x[i]) > std::fabs(m) ? x[i] : m;
  return m;
}

// ---- 32-element blocks ----

inline void QuantizeBlock(const float* x, BlockQ8_0* b) {
  float amax = std::fabs(SignedAbsMax(x, 32));
  b->d = FloatToHalf(amax / 127.0f);
  double d = HalfToFloat(b->d);
  for (int e = 0; e < 32; ++e) b->qs[e] = static_cast<int8_t>(d == 0 ? 0 : Clamp(Round(x[e] / d), -127, 127));
}

// Q4_0 (off = 8, levels 16) and Q5_0 (off = 16, levels 32): d = max / −off (d may be negative).
inline void QuantizeLegacy(const float* x, int off, uint16_t* d16, int* q) {
  *d16 = FloatToHalf(SignedAbsMax(x, 32) / static_cast<float>(-off));
  double d = HalfToFloat(*d16);
  for (int e = 0; e < 32; ++e) q[e] = d == 0 ? off : Clamp(Round(x[e] / d) + off, 0, 2 * off - 1);
}

inline void QuantizeBlock(const float* x, BlockQ4_0* b) {
  int q[32];
  QuantizeLegacy(x, 8, &b->d, q);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

inline void QuantizeBlock(const float* x, BlockQ5_0* b) {
  int q[32];
  QuantizeLegacy(x, 16, &b->d, q);
  uint32_t h = 0;
  for (int e = 0; e < 32; ++e) h |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
  std::memcpy(b->qh, &h, 4);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

inline void DequantBlock(const BlockQ8_0& b, float* y) {
  for (int e = 0; e < 32; ++e) y[e] = HalfToFloat(b.d) * static_cast<float>(b.qs[e]);
}

inline void DequantBlock(const BlockQ4_0& b, float* y) {
  for (int e = 0; e < 32; ++e) {
    int q = e < 16 ? (b.qs[e] & 0xF) : (b.qs[e - 16] >> 4);
    y[e] = HalfToFloat(b.d) * static_cast<float>(q - 8);
  }
}

inline void DequantBlock(const BlockQ5_0& b, float* y) {
  uint32_t h = b.qh[0] | (b.qh[1] << 8) | (b.qh[2] << 16) | (static_cast<uint32_t>(b.qh[3]) << 24);
  for (int e = 0; e < 32; ++e) {
    int nib = e < 16 ? (b.qs[e] & 0xF) : (b.qs[e - 16] >> 4);
    int q = nib + 16 * static_cast<int>((h >> e) & 1);
    y[e] = HalfToFloat(b.d) * static_cast<float>(q - 16);
  }
}

// ---- K-quants ----

// Sub-block s's 6-bit scale and min from the 12 packed bytes, by the spec's per-s rule.
inline void KScaleMin(const uint8_t* p, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = p[s] & 63;
    *m = p[s + 4] & 63;
  } else {
    *sc = (p[s + 4] & 0x0F) | ((p[s - 4] >> 6) << 4);
    *m = (p[s + 4] >> 4) | ((p[s] >> 6) << 4);
  }
}

inline void PackKScales(const int* sc, const int* m, uint8_t* p) {
  for (int s = 0; s < 4; ++s) {
    p[s] = static_cast<uint8_t>((sc[s] & 63) | ((sc[s + 4] >> 4) << 6));
    p[s + 4] = static_cast<uint8_t>((m[s] & 63) | ((m[s + 4] >> 4) << 6));
    p[s + 8] = static_cast<uint8_t>((sc[s + 4] & 0xF) | ((m[s + 4] & 0xF) << 4));
  }
}

// Q4_K (levels 16) / Q5_K (levels 32): per sub-block an affine range [min(0, lo), hi], its step and
// −min quantized to 6 bits against block-wide d and dmin; q[256] receives the element levels.
inline void QuantizeK45(const float* x, int levels, uint16_t* d16, uint16_t* dmin16, uint8_t* scales, int* q) {
  double step[8], neg_min[8], max_step = 0, max_min = 0;
  for (int s = 0; s < 8; ++s) {
    double lo = 0, hi = -INFINITY;
    for (int e = 0; e < 32; ++e) lo = std::min<double>(lo, x[32 * s + e]), hi = std::max<double>(hi, x[32 * s + e]);
    step[s] = (hi - lo) / (levels - 1);
    neg_min[s] = -lo;
    max_step = std::max(max_step, step[s]);
    max_min = std::max(max_min, neg_min[s]);
  }
  *d16 = FloatToHalf(static_cast<float>(max_step / 63));
  *dmin16 = FloatToHalf(static_cast<float>(max_min / 63));
  const double d = HalfToFloat(*d16), dmin = HalfToFloat(*dmin16);
  int sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d == 0 ? 0 : Clamp(Round(step[s] / d), 0, 63);
    m[s] = dmin == 0 ? 0 : Clamp(std::lround(std::ceil(neg_min[s] / dmin)), 0, 63);
    const double ds = d * sc[s], ms = dmin * m[s];
    for (int e = 0; e < 32; ++e)
      q[32 * s + e] = ds == 0 ? 0 : Clamp(Round((x[32 * s + e] + ms) / ds), 0, levels - 1);
  }
  PackKScales(sc, m, scales);
}

inline void QuantizeBlock(const float* x, BlockQ4_K* b) {
  int q[256];
  QuantizeK45(x, 16, &b->d, &b->dmin, b->scales, q);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b->qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

inline void QuantizeBlock(const float* x, BlockQ5_K* b) {
  int q[256];
  QuantizeK45(x, 32, &b->d, &b->dmin, b->scales, q);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b->qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
}

// Element e's K-quant value: d·sc·q − dmin·m, in float as (d·sc)·q − (dmin·m).
inline float KValue(uint16_t d16, uint16_t dmin16, const uint8_t* scales, int s, int q) {
  int sc, m;
  KScaleMin(scales, s, &sc, &m);
  float d1 = HalfToFloat(d16) * static_cast<float>(sc), m1 = HalfToFloat(dmin16) * static_cast<float>(m);
  return d1 * static_cast<float>(q) - m1;
}

inline void DequantBlock(const BlockQ4_K& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    int c = e / 64, l = e % 32, high = (e % 64) / 32;
    int q = high ? (b.qs[32 * c + l] >> 4) : (b.qs[32 * c + l] & 0xF);
    y[e] = KValue(b.d, b.dmin, b.scales, 2 * c + high, q);
  }
}

inline void DequantBlock(const BlockQ5_K& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    int c = e / 64, l = e % 32, high = (e % 64) / 32;
    int nib = high ? (b.qs[32 * c + l] >> 4) : (b.qs[32 * c + l] & 0xF);
    int bit = (b.qh[l] >> (2 * c + high)) & 1;
    y[e] = KValue(b.d, b.dmin, b.scales, 2 * c + high, nib + 16 * bit);
  }
}

// Q6_K: per 16-element group a signed 8-bit scale against d = max|scale| / 127.
inline void QuantizeBlock(const float* x, BlockQ6_K* b) {
  double gs[16], max_abs = 0;
  for (int g = 0; g < 16; ++g) {
    gs[g] = SignedAbsMax(x + 16 * g, 16) / -32.0;
    max_abs = std::max(max_abs, std::fabs(gs[g]));
  }
  b->d = FloatToHalf(static_cast<float>(max_abs / 127));
  const double d = HalfToFloat(b->d);
  std::memset(b->ql, 0, sizeof b->ql);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int g = 0; g < 16; ++g) b->scales[g] = static_cast<int8_t>(d == 0 ? 0 : Clamp(Round(gs[g] / d), -128, 127));
  for (int e = 0; e < 256; ++e) {
    const double ds = d * b->scales[e / 16];
    const int q = ds == 0 ? 32 : Clamp(Round(x[e] / ds) + 32, 0, 63);
    const int h = e / 128, t = (e % 128) / 32, l = e % 32;
    uint8_t& ql = b->ql[64 * h + l + 32 * (t & 1)];
    ql |= static_cast<uint8_t>((q & 0xF) << (t >= 2 ? 4 : 0));
    b->qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * t));
  }
}

inline void DequantBlock(const BlockQ6_K& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, t = (e % 128) / 32, l = e % 32;
    const uint8_t ql = b.ql[64 * h + l + 32 * (t & 1)];
    const int q = ((t >= 2 ? ql >> 4 : ql & 0xF) | (((b.qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
    y[e] = HalfToFloat(b.d) * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q);
  }
}

// ---- Rows ----

// A row of k floats (k a multiple of the block) as back-to-back blocks of type B.
template <class B>
std::vector<uint8_t> QuantizeRow(const float* x, size_t k) {
  constexpr size_t kElems = sizeof(B) == sizeof(BlockQ8_0) || sizeof(B) == sizeof(BlockQ4_0) ||
                                    sizeof(B) == sizeof(BlockQ5_0) ? kQK0 : kQKK;
  std::vector<uint8_t> out(k / kElems * sizeof(B));
  for (size_t i = 0; i < k / kElems; ++i) {
    B b;
    QuantizeBlock(x + i * kElems, &b);
    std::memcpy(out.data() + i * sizeof(B), &b, sizeof(B));
  }
  return out;
}

template <class B>
std::vector<float> DequantizeRow(const uint8_t* src, size_t k) {
  constexpr size_t kElems = sizeof(B) == sizeof(BlockQ8_0) || sizeof(B) == sizeof(BlockQ4_0) ||
                                    sizeof(B) == sizeof(BlockQ5_0) ? kQK0 : kQKK;
  std::vector<float> y(k);
  for (size_t i = 0; i < k / kElems; ++i) {
    B b;
    std::memcpy(&b, src + i * sizeof(B), sizeof(B));
    DequantBlock(b, y.data() + i * kElems);
  }
  return y;
}

// Type-erased forms for tests parameterised over QuantType.
inline std::vector<uint8_t> QuantizeRow(QuantType t, const float* x, size_t k) {
  switch (t) {
    case QuantType::kQ8_0: return QuantizeRow<BlockQ8_0>(x, k);
    case QuantType::kQ4_0: return QuantizeRow<BlockQ4_0>(x, k);
    case QuantType::kQ5_0: return QuantizeRow<BlockQ5_0>(x, k);
    case QuantType::kQ4_K: return QuantizeRow<BlockQ4_K>(x, k);
    case QuantType::kQ5_K: return QuantizeRow<BlockQ5_K>(x, k);
    case QuantType::kQ6_K: return QuantizeRow<BlockQ6_K>(x, k);
  }
  return {};
}

inline std::vector<float> DequantizeRow(QuantType t, const uint8_t* src, size_t k) {
  switch (t) {
    case QuantType::kQ8_0: return DequantizeRow<BlockQ8_0>(src, k);
    case QuantType::kQ4_0: return DequantizeRow<BlockQ4_0>(src, k);
    case QuantType::kQ5_0: return DequantizeRow<BlockQ5_0>(src, k);
    case QuantType::kQ4_K: return DequantizeRow<BlockQ4_K>(src, k);
    case QuantType::kQ5_K: return DequantizeRow<BlockQ5_K>(src, k);
    case QuantType::kQ6_K: return DequantizeRow<BlockQ6_K>(src, k);
  }
  return {};
}

// An activation row from quantize_act back to floats: d · q per element.
inline std::vector<float> DequantizeActRow(QuantType wtype, const uint8_t* src, size_t k) {
  std::vector<float> y(k);
  const bool kq = wtype == QuantType::kQ4_K || wtype == QuantType::kQ5_K || wtype == QuantType::kQ6_K;
  const size_t elems = kq ? kQKK : kQK0, bytes = kq ? sizeof(ActQ8_K) : sizeof(ActQ8_0);
  for (size_t b = 0; b < k / elems; ++b) {
    float d;
    std::memcpy(&d, src + b * bytes, 4);
    const int8_t* q = reinterpret_cast<const int8_t*>(src + b * bytes + 4);
    for (size_t e = 0; e < elems; ++e) y[b * elems + e] = d * static_cast<float>(q[e]);
  }
  return y;
}

}  // namespace fak::kernels::ref

#endif  // FAK_KERNELS_REF_REF_QUANT_H_
