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

// Q4_1 (levels 16) / Q5_1 (levels 32): the block's range [lo, hi], m = lo, d = (hi − lo) / (levels − 1).
inline void QuantizeOffset(const float* x, int levels, uint16_t* d16, uint16_t* m16, int* q) {
  float lo = x[0], hi = x[0];
  for (int e = 1; e < 32; ++e) lo = std::min(lo, x[e]), hi = std::max(hi, x[e]);
  *d16 = FloatToHalf((hi - lo) / static_cast<float>(levels - 1));
  *m16 = FloatToHalf(lo);
  const double d = HalfToFloat(*d16), m = HalfToFloat(*m16);
  for (int e = 0; e < 32; ++e) q[e] = d == 0 ? 0 : Clamp(Round((x[e] - m) / d), 0, levels - 1);
}

inline void QuantizeBlock(const float* x, BlockQ4_1* b) {
  int q[32];
  QuantizeOffset(x, 16, &b->d, &b->m, q);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

inline void QuantizeBlock(const float* x, BlockQ5_1* b) {
  int q[32];
  QuantizeOffset(x, 32, &b->d, &b->m, q);
  uint32_t h = 0;
  for (int e = 0; e < 32; ++e) h |= static_cast<uint32_t>((q[e] >> 4) & 1) << e;
  std::memcpy(b->qh, &h, 4);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

// Element e's 4-bit quant in the Q4_0 nibble order (byte e for e < 16, its high nibble above).
inline int Nibble(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0xF) : (qs[e - 16] >> 4); }

inline void DequantBlock(const BlockQ4_1& b, float* y) {
  for (int e = 0; e < 32; ++e) y[e] = HalfToFloat(b.d) * static_cast<float>(Nibble(b.qs, e)) + HalfToFloat(b.m);
}

inline void DequantBlock(const BlockQ5_1& b, float* y) {
  uint32_t h = b.qh[0] | (b.qh[1] << 8) | (b.qh[2] << 16) | (static_cast<uint32_t>(b.qh[3]) << 24);
  for (int e = 0; e < 32; ++e) {
    const int q = Nibble(b.qs, e) + 16 * static_cast<int>((h >> e) & 1);
    y[e] = HalfToFloat(b.d) * static_cast<float>(q) + HalfToFloat(b.m);
  }
}

// The level index nearest to v among `levels` (the first of two equally near).
inline int NearestLevel(const int8_t* levels, double v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(levels[i] - v) < std::fabs(levels[best] - v)) best = i;
  return best;
}

// IQ4_NL: d = signed max / −127 so the block's largest element maps to the level −127.
inline void QuantizeBlock(const float* x, BlockIQ4_NL* b) {
  b->d = FloatToHalf(SignedAbsMax(x, 32) / -127.0f);
  const double d = HalfToFloat(b->d);
  int q[32];
  for (int e = 0; e < 32; ++e) q[e] = NearestLevel(kIQ4Levels, d == 0 ? 0 : x[e] / d);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

inline void DequantBlock(const BlockIQ4_NL& b, float* y) {
  for (int e = 0; e < 32; ++e) y[e] = HalfToFloat(b.d) * static_cast<float>(kIQ4Levels[Nibble(b.qs, e)]);
}

// MXFP4's scale 2^(e − 128), in double (e < 2 included).
inline double MXFP4Scale(uint8_t e) { return std::ldexp(1.0, static_cast<int>(e) - 128); }

// MXFP4: the smallest power-of-two scale that keeps max|x| within the largest level (12).
inline void QuantizeBlock(const float* x, BlockMXFP4* b) {
  const double amax = std::fabs(SignedAbsMax(x, 32));
  int e = amax == 0 ? 0 : static_cast<int>(std::ceil(std::log2(amax / 12))) + 128;
  b->e = static_cast<uint8_t>(std::clamp(e, 0, 254));
  const double d = MXFP4Scale(b->e);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = NearestLevel(kMXFP4Levels, x[i] / d);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

inline void DequantBlock(const BlockMXFP4& b, float* y) {
  for (int e = 0; e < 32; ++e) y[e] = static_cast<float>(kMXFP4Levels[Nibble(b.qs, e)] * MXFP4Scale(b.e));
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

// Q2_K and Q3_K element e: byte 32·(e / 128) + e % 32 of qs, bits 2·(e % 128 / 32); group e / 16;
// Q3_K's high bit is bit e / 32 of hmask[e % 32].
inline int Q2Bits(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3; }

// Q2_K: per group of 16 an affine range [min(0, lo), hi] in 3 steps, step and −min to 4 bits
// against block-wide d and dmin (QuantizeK45's rule).
inline void QuantizeBlock(const float* x, BlockQ2_K* b) {
  double step[16], neg_min[16], max_step = 0, max_min = 0;
  for (int g = 0; g < 16; ++g) {
    double lo = 0, hi = -INFINITY;
    for (int e = 0; e < 16; ++e) lo = std::min<double>(lo, x[16 * g + e]), hi = std::max<double>(hi, x[16 * g + e]);
    step[g] = (hi - lo) / 3;
    neg_min[g] = -lo;
    max_step = std::max(max_step, step[g]);
    max_min = std::max(max_min, neg_min[g]);
  }
  b->d = FloatToHalf(static_cast<float>(max_step / 15));
  b->dmin = FloatToHalf(static_cast<float>(max_min / 15));
  const double d = HalfToFloat(b->d), dmin = HalfToFloat(b->dmin);
  std::memset(b->qs, 0, sizeof b->qs);
  for (int g = 0; g < 16; ++g) {
    const int sc = d == 0 ? 0 : Clamp(Round(step[g] / d), 0, 15);
    const int m = dmin == 0 ? 0 : Clamp(std::lround(std::ceil(neg_min[g] / dmin)), 0, 15);
    b->scales[g] = static_cast<uint8_t>(sc | (m << 4));
    const double ds = d * sc, ms = dmin * m;
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * g + i, q = ds == 0 ? 0 : Clamp(Round((x[e] + ms) / ds), 0, 3);
      b->qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q << (2 * (e % 128 / 32)));
    }
  }
}

inline void DequantBlock(const BlockQ2_K& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    const int sc = b.scales[e / 16] & 0xF, m = b.scales[e / 16] >> 4;
    const float dl = HalfToFloat(b.d) * static_cast<float>(sc), ml = HalfToFloat(b.dmin) * static_cast<float>(m);
    y[e] = dl * static_cast<float>(Q2Bits(b.qs, e)) - ml;
  }
}

// Q3_K group g's 6-bit scale, by the per-g rule of quant_format.h.
inline int Q3Scale(const uint8_t* p, int g) {
  const int low = g < 8 ? p[g] & 0xF : p[g - 8] >> 4;
  return low | (((p[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
}

// Q3_K: per group of 16 a signed scale (max / −4) against d = max|scale| / 32 in 6 bits (−32..31).
inline void QuantizeBlock(const float* x, BlockQ3_K* b) {
  double gs[16], max_abs = 0;
  for (int g = 0; g < 16; ++g) {
    gs[g] = SignedAbsMax(x + 16 * g, 16) / -4.0;
    max_abs = std::max(max_abs, std::fabs(gs[g]));
  }
  b->d = FloatToHalf(static_cast<float>(max_abs / 32));
  const double d = HalfToFloat(b->d);
  std::memset(b->hmask, 0, sizeof b->hmask);
  std::memset(b->qs, 0, sizeof b->qs);
  std::memset(b->scales, 0, sizeof b->scales);
  for (int g = 0; g < 16; ++g) {
    const int sc = d == 0 ? 0 : Clamp(Round(gs[g] / d), -32, 31), u = sc + 32;
    b->scales[g % 8] |= static_cast<uint8_t>((u & 0xF) << (4 * (g / 8)));
    b->scales[8 + g % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (g / 4)));
    const double ds = d * sc;
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * g + i, q = (ds == 0 ? 0 : Clamp(Round(x[e] / ds), -4, 3)) + 4;
      b->qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((q & 3) << (2 * (e % 128 / 32)));
      b->hmask[e % 32] |= static_cast<uint8_t>((q >> 2) << (e / 32));
    }
  }
}

inline void DequantBlock(const BlockQ3_K& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    const int q = Q2Bits(b.qs, e) + 4 * ((b.hmask[e % 32] >> (e / 32)) & 1) - 4;
    const float dl = HalfToFloat(b.d) * static_cast<float>(Q3Scale(b.scales, e / 16) - 32);
    y[e] = dl * static_cast<float>(q);
  }
}

inline int IQ4XSScale(const BlockIQ4_XS& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

// IQ4_XS: per sub-block of 32 a signed scale (max / −127) against d = max|scale| / 32 in 6 bits.
inline void QuantizeBlock(const float* x, BlockIQ4_XS* b) {
  double ss[8], max_abs = 0;
  for (int s = 0; s < 8; ++s) {
    ss[s] = SignedAbsMax(x + 32 * s, 32) / -127.0;
    max_abs = std::max(max_abs, std::fabs(ss[s]));
  }
  b->d = FloatToHalf(static_cast<float>(max_abs / 32));
  const double d = HalfToFloat(b->d);
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof b->scales_l);
  for (int s = 0; s < 8; ++s) {
    const int sc = d == 0 ? 0 : Clamp(Round(ss[s] / d), -32, 31), u = sc + 32;
    b->scales_l[s / 2] |= static_cast<uint8_t>((u & 0xF) << (4 * (s % 2)));
    b->scales_h |= static_cast<uint16_t>((u >> 4) << (2 * s));
    const double ds = d * sc;
    int q[32];
    for (int e = 0; e < 32; ++e) q[e] = NearestLevel(kIQ4Levels, ds == 0 ? 0 : x[32 * s + e] / ds);
    for (int j = 0; j < 16; ++j) b->qs[16 * s + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
}

inline void DequantBlock(const BlockIQ4_XS& b, float* y) {
  for (int e = 0; e < 256; ++e) {
    const float dl = HalfToFloat(b.d) * static_cast<float>(IQ4XSScale(b, e / 32) - 32);
    y[e] = dl * static_cast<float>(kIQ4Levels[Nibble(b.qs + 16 * (e / 32), e % 32)]);
  }
}

// ---- Rows ----

// A row of k floats (k a multiple of the block) as back-to-back blocks of type B.
// Elements per block of type B (the 256-element blocks are all larger than 80 bytes).
template <class B>
inline constexpr size_t kElemsOf = sizeof(B) > 80 ? kQKK : kQK0;

template <class B>
std::vector<uint8_t> QuantizeRow(const float* x, size_t k) {
  constexpr size_t kElems = kElemsOf<B>;
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
  constexpr size_t kElems = kElemsOf<B>;
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
    case QuantType::kQ4_1: return QuantizeRow<BlockQ4_1>(x, k);
    case QuantType::kQ5_1: return QuantizeRow<BlockQ5_1>(x, k);
    case QuantType::kQ2_K: return QuantizeRow<BlockQ2_K>(x, k);
    case QuantType::kQ3_K: return QuantizeRow<BlockQ3_K>(x, k);
    case QuantType::kIQ4_NL: return QuantizeRow<BlockIQ4_NL>(x, k);
    case QuantType::kIQ4_XS: return QuantizeRow<BlockIQ4_XS>(x, k);
    case QuantType::kMXFP4: return QuantizeRow<BlockMXFP4>(x, k);
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
    case QuantType::kQ4_1: return DequantizeRow<BlockQ4_1>(src, k);
    case QuantType::kQ5_1: return DequantizeRow<BlockQ5_1>(src, k);
    case QuantType::kQ2_K: return DequantizeRow<BlockQ2_K>(src, k);
    case QuantType::kQ3_K: return DequantizeRow<BlockQ3_K>(src, k);
    case QuantType::kIQ4_NL: return DequantizeRow<BlockIQ4_NL>(src, k);
    case QuantType::kIQ4_XS: return DequantizeRow<BlockIQ4_XS>(src, k);
    case QuantType::kMXFP4: return DequantizeRow<BlockMXFP4>(src, k);
  }
  return {};
}

// An activation row from quantize_act back to floats: d · q per element.
inline std::vector<float> DequantizeActRow(QuantType wtype, const uint8_t* src, size_t k) {
  std::vector<float> y(k);
  const ActFormat act = FormatOf(wtype).act;
  const size_t elems = act == ActFormat::kQ8_K ? kQKK : kQK0, bytes = FormatOf(wtype).act_block_bytes;
  const size_t qs_at = act == ActFormat::kQ8_1 ? offsetof(ActQ8_1, qs) : offsetof(ActQ8_0, qs);
  for (size_t b = 0; b < k / elems; ++b) {
    float d;
    std::memcpy(&d, src + b * bytes, 4);
    const int8_t* q = reinterpret_cast<const int8_t*>(src + b * bytes + qs_at);
    for (size_t e = 0; e < elems; ++e) y[b * elems + e] = d * static_cast<float>(q[e]);
  }
  return y;
}

}  // namespace fak::kernels::ref

#endif  // FAK_KERNELS_REF_REF_QUANT_H_
