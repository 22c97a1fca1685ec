// Kernel bodies, written once and templated on a vector policy V, instantiated per tier.
//
// V supplies B (the register type: float or xsimd::batch), kWidth, the matmul blocking (kMR x kNR
// register tile, kDecodeNR, kMatMulRows, kKcSteps) and Load/Store/Set1/Fma/Hsum/HsumBatch/Exp/Tanh,
// where HsumBatch(v)[i] must equal Hsum(v[i]) bit for bit (and optionally HsumHalfBatch, the same
// for kWidth / 2 vectors). Each tier TU defines its V in an anonymous
// namespace, so every instantiation has internal linkage and no tier's code can be merged into
// another by the linker (the ODR trap in docs/kernels.md). Include only from kernels/arch/*.cc.
//
// Exactness rules kept here: every reduction runs in one fixed order that depends only on the
// reduced length (never on M, blocking, thread or call site); tails that need a transcendental are
// padded to a full vector so each element sees the same function wherever it falls.
#ifndef FAK_KERNELS_SIMD_KERNELS_IMPL_H_
#define FAK_KERNELS_SIMD_KERNELS_IMPL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/kv_convert.h"

namespace fak::kernels::simd {

// Loads n < kWidth floats, zero-padding the rest of the register.
template <class V>
typename V::B LoadPartial(const float* p, size_t n) {
  alignas(64) float tmp[V::kWidth] = {};
  for (size_t i = 0; i < n; ++i) tmp[i] = p[i];
  return V::Load(tmp);
}

template <class V>
void StorePartial(float* p, typename V::B v, size_t n) {
  alignas(64) float tmp[V::kWidth];
  V::Store(tmp, v);
  for (size_t i = 0; i < n; ++i) p[i] = tmp[i];
}

template <class V>
float Dot(const float* a, const float* b, size_t n) {
  typename V::B acc = V::Set1(0.0f);
  size_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) acc = V::Fma(V::Load(a + i), V::Load(b + i), acc);
  float s = V::Hsum(acc);
  for (; i < n; ++i) s = s + a[i] * b[i];
  return s;
}

// Matmul. Every output Y[m][n] is Dot's arithmetic: one vector accumulator over the full-width K
// chunks in order (acc = fma(x, w, acc)), V::Hsum, then the scalar tail in order. Blocking only
// changes when each FMA runs: a K-block's partial accumulators are parked in scratch (unreduced,
// lane for lane) and picked up by the next K-block, and V::HsumBatch reduces kWidth accumulators at
// once with V::Hsum's exact tree (straight from registers on the last K-block, unless K has a
// scalar tail). So results never depend on M, the n range, blocking or thread.

// Reduces an MR x NR block of accumulators held in registers and stores output (i, j) at
// y[i * ldy + j]: the same bits as MatMulFinish when K has no scalar tail, without parking the
// accumulators in scratch. Batches of kWidth (and, where the tier has one, kWidth / 2) go through
// one transposed reduction; the rest through V::Hsum.
template <class V, int MR, int NR>
inline void ReduceTileTo(const typename V::B (&a)[MR][NR], float* y, size_t ldy) {
  constexpr int kCount = MR * NR, kW = static_cast<int>(V::kWidth);
  alignas(64) float sums[kCount + kW];
  const typename V::B* flat = &a[0][0];
  int c = 0;
  for (; c + kW <= kCount; c += kW) V::Store(sums + c, V::HsumBatch(flat + c));
  if constexpr (requires { V::HsumHalfBatch(flat); }) {
    if (c + kW / 2 <= kCount) {
      V::Store(sums + c, V::HsumHalfBatch(flat + c));
      c += kW / 2;
    }
  }
  for (; c < kCount; ++c) sums[c] = V::Hsum(flat[c]);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = sums[i * NR + j];
}

// Adds k_steps full-width chunks to an MR x NR block of accumulators, starting from zero unless
// `accumulate` (then from acc[i + j * acc_ld]). x and w point at the block's first chunk. The block
// ends in acc, or, when y is set (the last K-block of a K with no scalar tail), reduced into
// y[i * ldy + j]. If pf is set, one cache line of each of pf_rows rows (pf_ld apart) is prefetched
// per chunk: W rows a later tile or strip will read, into L1 (kPfLocality 3: the next prefill strip,
// packed soon) or L2 (2: decode's DRAM stream, which L1's few miss buffers would throttle).
template <class V, int MR, int NR, int kPfLocality = 3>
void MatMulTile(const float* x, size_t ldx, const float* w, size_t ldw, size_t k_steps, bool accumulate,
                typename V::B* acc, size_t acc_ld, const float* pf = nullptr, float* y = nullptr, size_t ldy = 0,
                size_t pf_rows = 1, size_t pf_ld = 0) {
  typename V::B a[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) a[i][j] = accumulate ? acc[i + j * acc_ld] : V::Set1(0.0f);
  for (size_t s = 0; s < k_steps; ++s) {
    const size_t kk = s * V::kWidth;
    if (pf != nullptr) {
      for (size_t r = 0; r < pf_rows; ++r) __builtin_prefetch(pf + r * pf_ld + s * (64 / sizeof(float)), 0, kPfLocality);
    }
    typename V::B wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = V::Load(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      typename V::B xv = V::Load(x + i * ldx + kk);
      for (int j = 0; j < NR; ++j) a[i][j] = V::Fma(xv, wv[j], a[i][j]);
    }
  }
  if (y != nullptr) return ReduceTileTo<V, MR, NR>(a, y, ldy);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i + j * acc_ld] = a[i][j];
}

// Finishes `count` outputs from their accumulators: output c is acc[c] reduced, plus the scalar
// K tail of row x + c * x_step and column w + c * w_step, stored at y + c * y_step.
template <class V>
void MatMulFinish(const typename V::B* acc, size_t count, const float* x, size_t x_step, const float* w,
                  size_t w_step, size_t k, float* y, size_t y_step) {
  const size_t k_full = k / V::kWidth * V::kWidth;
  alignas(64) float sums[V::kWidth];
  for (size_t c0 = 0; c0 < count; c0 += V::kWidth) {
    const size_t n = count - c0 < V::kWidth ? count - c0 : V::kWidth;
    if (n == V::kWidth) {
      V::Store(sums, V::HsumBatch(acc + c0));
    } else {
      for (size_t c = 0; c < n; ++c) sums[c] = V::Hsum(acc[c0 + c]);
    }
    for (size_t c = 0; c < n; ++c) {
      const float* xr = x + (c0 + c) * x_step;
      const float* wr = w + (c0 + c) * w_step;
      float s = sums[c];
      for (size_t t = k_full; t < k; ++t) s = s + xr[t] * wr[t];
      y[(c0 + c) * y_step] = s;
    }
  }
}

// Row blocks at least this tall copy each K-block of W into an L1 buffer first (MatMulStrip).
inline constexpr size_t kPackMinRows = 64;

// Strips ahead that a strip of few rows (read in place, not packed) prefetches W: with little
// compute per W byte, W streams from DRAM nearly as in decode, so it goes into L2 from far enough
// ahead to cover DRAM latency (into L1 it would hold the core's few L1 miss buffers; see decode).
inline constexpr size_t kInPlaceStripsAhead = 3;

// Prefill: rows [0, rows <= kMatMulRows) x NR columns, K-blocked so the NR W rows of a K-block stay in
// L1 while every X row block streams past them. Accumulators are column-major in scratch. The row
// tiles of each K-block prefetch the same K-block of w_pf's NR rows, spread over the tiles: the next
// strip into L1 when W is packed (rows >= kPackMinRows), else the strip kInPlaceStripsAhead ahead
// into L2.
template <class V, int NR>
void MatMulStrip(const float* x, size_t ldx, const float* w, size_t ldw, float* y, size_t ldy, size_t rows,
                 size_t k, const float* w_pf) {
  constexpr size_t kRows = V::kMatMulRows;
  alignas(64) typename V::B acc[kRows * NR];
  alignas(64) float w_pack[NR * V::kKcSteps * V::kWidth];  // this K-block of the NR W rows
  const size_t steps = k / V::kWidth;
  const size_t n_blocks = steps == 0 ? 1 : (steps + V::kKcSteps - 1) / V::kKcSteps;
  const size_t block = (steps + n_blocks - 1) / n_blocks;  // equal K-blocks, each <= kKcSteps
  const bool reduce_in_tile = steps > 0 && k % V::kWidth == 0;  // no scalar K tail to add after the sum
  size_t s0 = 0;
  do {  // at least once, so that K < kWidth still zeroes the accumulators
    const size_t ns = steps - s0 < block ? steps - s0 : block;
    const float* xk = x + s0 * V::kWidth;
    // Copied so that a power-of-two ldw cannot alias the NR rows into one L1 set; a few row tiles
    // do not repay the copy, so they read W in place.
    const bool pack = rows >= kPackMinRows;
    const size_t ldp = pack ? ns * V::kWidth : ldw;
    if (pack) {
      for (int j = 0; j < NR; ++j) std::memcpy(w_pack + j * ldp, w + j * ldw + s0 * V::kWidth, ldp * sizeof(float));
    }
    const float* wk = pack ? w_pack : w + s0 * V::kWidth;
    float* y_out = s0 + ns == steps && reduce_in_tile ? y : nullptr;  // the last K-block finishes in registers
    const size_t tiles = rows / V::kMR, pf_per_tile = tiles == 0 ? 0 : (NR + tiles - 1) / tiles;
    size_t i = 0;
    for (; i + V::kMR <= rows; i += V::kMR) {
      const size_t first = i / V::kMR * pf_per_tile;  // this tile prefetches W rows [first, first + n_pf)
      const size_t n_pf = first < NR ? std::min(pf_per_tile, NR - first) : 0;
      const float* pf = w_pf != nullptr && n_pf > 0 ? w_pf + first * ldw + s0 * V::kWidth : nullptr;
      float* yi = y_out ? y_out + i * ldy : nullptr;
      if (pack) {
        MatMulTile<V, V::kMR, NR, 3>(xk + i * ldx, ldx, wk, ldp, ns, s0 > 0, acc + i, kRows, pf, yi, ldy, n_pf, ldw);
      } else {
        MatMulTile<V, V::kMR, NR, 2>(xk + i * ldx, ldx, wk, ldp, ns, s0 > 0, acc + i, kRows, pf, yi, ldy, n_pf, ldw);
      }
    }
    if constexpr (V::kMR > 2) {
      if (rows - i >= 2) {
        MatMulTile<V, 2, NR>(xk + i * ldx, ldx, wk, ldp, ns, s0 > 0, acc + i, kRows, nullptr,
                             y_out ? y_out + i * ldy : nullptr, ldy);
        i += 2;
      }
    }
    for (; i < rows; ++i)
      MatMulTile<V, 1, NR>(xk + i * ldx, ldx, wk, ldp, ns, s0 > 0, acc + i, kRows, nullptr,
                           y_out ? y_out + i * ldy : nullptr, ldy);
    s0 += ns;
  } while (s0 < steps);
  if (reduce_in_tile) return;
  for (int j = 0; j < NR; ++j) MatMulFinish<V>(acc + j * kRows, rows, x, ldx, w + j * ldw, 0, k, y + j, ldy);
}

// Tiles of W rows a decode tile prefetches ahead of itself.
inline constexpr size_t kDecodeAhead = 2;

// Decode (one X row): stream W once, kDecodeNR columns in flight, reduced together.
template <class V>
void MatMulDecode(const float* x, const float* w, size_t ldw, float* y, size_t k, size_t n_begin, size_t n_end) {
  constexpr int NR = V::kDecodeNR;
  alignas(64) typename V::B acc[NR] = {};  // (every tile writes it first; GCC cannot always see that)
  const size_t steps = k / V::kWidth;
  size_t n = n_begin;
  const bool reduce_in_tile = steps > 0 && k % V::kWidth == 0;
  for (; n + NR <= n_end; n += NR) {
    // W streams from DRAM here: each tile prefetches the tile kDecodeAhead tiles ahead, row by row.
    const float* pf = n + (kDecodeAhead + 1) * NR <= n_end ? w + (n + kDecodeAhead * NR) * ldw : nullptr;
    MatMulTile<V, 1, NR, 2>(x, 0, w + n * ldw, ldw, steps, false, acc, 1, pf, reduce_in_tile ? y + n : nullptr, 0, NR,
                            ldw);
    if (!reduce_in_tile) MatMulFinish<V>(acc, NR, x, 0, w + n * ldw, ldw, k, y + n, 1);
  }
  for (; n < n_end; ++n) {
    MatMulTile<V, 1, 1>(x, 0, w + n * ldw, ldw, steps, false, acc, 1);
    MatMulFinish<V>(acc, 1, x, 0, w + n * ldw, ldw, k, y + n, 1);
  }
}

template <class V>
void MatMul(const float* x, size_t ldx, const float* w, size_t ldw, float* y, size_t ldy, size_t m, size_t k,
            size_t n_begin, size_t n_end) {
  if (k == 0) {  // an empty reduction: every output is 0, and no input may be read
    for (size_t i = 0; i < m; ++i)
      for (size_t n = n_begin; n < n_end; ++n) y[i * ldy + n] = 0.0f;
    return;
  }
  if (m == 1) return MatMulDecode<V>(x, w, ldw, y, k, n_begin, n_end);
  for (size_t i = 0; i < m; i += V::kMatMulRows) {
    const size_t rows = m - i < V::kMatMulRows ? m - i : V::kMatMulRows;
    const float* xi = x + i * ldx;
    float* yi = y + i * ldy;
    size_t n = n_begin;
    const size_t ahead = rows >= kPackMinRows ? 1 : kInPlaceStripsAhead;
    for (; n + V::kNR <= n_end; n += V::kNR) {
      const float* w_pf = n + (ahead + 1) * V::kNR <= n_end ? w + (n + ahead * V::kNR) * ldw : nullptr;
      MatMulStrip<V, V::kNR>(xi, ldx, w + n * ldw, ldw, yi + n, ldy, rows, k, w_pf);
    }
    for (; n < n_end; ++n) MatMulStrip<V, 1>(xi, ldx, w + n * ldw, ldw, yi + n, ldy, rows, k, nullptr);
  }
}

template <class V>
float SumSquares(const float* x, size_t n) { return Dot<V>(x, x, n); }

template <class V>
void RmsNorm(const float* x, const float* w, float* y, size_t n, float eps, bool one_plus_weight) {
  float mean = SumSquares<V>(x, n) / static_cast<float>(n);
  float inv = 1.0f / std::sqrt(mean + eps);
  typename V::B vinv = V::Set1(inv), one = V::Set1(one_plus_weight ? 1.0f : 0.0f);
  size_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) V::Store(y + i, (V::Load(x + i) * vinv) * (one + V::Load(w + i)));
  float o = one_plus_weight ? 1.0f : 0.0f;
  for (; i < n; ++i) y[i] = (x[i] * inv) * (o + w[i]);
}

// Softmax over x[0, n) whose denominator also holds exp(*sink) when `sink` is given: a logit that
// takes probability mass but has no value (gpt-oss's per-head attention sink). The sink joins the
// maximum, and its term is added after the others' sum, as llama.cpp adds it.
template <class V>
void SoftmaxSink(float* x, size_t n, const float* sink) {
  if (n == 0) return;
  // The maximum is exact in any order: only which NaN or which signed zero wins may differ, and
  // neither changes an output (a NaN makes every output NaN; x - (+0) and x - (-0) differ only for
  // x = ±0, and exp(±0) = 1).
  float mx = x[0];
  size_t i = 0;
  if (n >= V::kWidth) {
    typename V::B m = V::Load(x);
    for (i = V::kWidth; i + V::kWidth <= n; i += V::kWidth) m = V::Max(m, V::Load(x + i));
    alignas(64) float lanes[V::kWidth];
    V::Store(lanes, m);
    for (float l : lanes) mx = l > mx ? l : mx;
  }
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (sink != nullptr) mx = *sink > mx ? *sink : mx;
  typename V::B vmax = V::Set1(mx), acc = V::Set1(0.0f);
  i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    typename V::B e = V::Exp(V::Load(x + i) - vmax);
    V::Store(x + i, e);
    acc = acc + e;
  }
  float sum = V::Hsum(acc);
  if (i < n) {
    StorePartial<V>(x + i, V::Exp(LoadPartial<V>(x + i, n - i) - vmax), n - i);
    for (; i < n; ++i) sum = sum + x[i];
  }
  if (sink != nullptr) {
    alignas(64) float lanes[V::kWidth];
    V::Store(lanes, V::Exp(V::Set1(*sink - mx)));
    sum = sum + lanes[0];
  }
  float inv = 1.0f / sum;
  typename V::B vinv = V::Set1(inv);
  for (i = 0; i + V::kWidth <= n; i += V::kWidth) V::Store(x + i, V::Load(x + i) * vinv);
  for (; i < n; ++i) x[i] = x[i] * inv;
}

template <class V>
void Softmax(float* x, size_t n) { SoftmaxSink<V>(x, n, nullptr); }

template <class V>
void ExpScaled(const float* x, float shift, float scale, float* y, size_t n) {
  const typename V::B vshift = V::Set1(shift), vscale = V::Set1(scale);
  size_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) V::Store(y + i, V::Exp((V::Load(x + i) - vshift) * vscale));
  if (i < n) StorePartial<V>(y + i, V::Exp((LoadPartial<V>(x + i, n - i) - vshift) * vscale), n - i);
}

// Applies f to every element, full registers only (the tail is padded).
template <class V, class F>
void MapUnary(float* x, size_t n, F f) {
  size_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) V::Store(x + i, f(V::Load(x + i)));
  if (i < n) StorePartial<V>(x + i, f(LoadPartial<V>(x + i, n - i)), n - i);
}

template <class V, class F>
void MapBinary(const float* a, const float* b, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) V::Store(y + i, f(V::Load(a + i), V::Load(b + i)));
  if (i < n) StorePartial<V>(y + i, f(LoadPartial<V>(a + i, n - i), LoadPartial<V>(b + i, n - i)), n - i);
}

template <class V>
typename V::B SiluOf(typename V::B x) {
  return x / (V::Set1(1.0f) + V::Exp(V::Set1(0.0f) - x));
}

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as Gemma's gelu_pytorch_tanh.
template <class V>
typename V::B GeluTanhOf(typename V::B x) {
  typename V::B inner = V::Set1(0.7978845608028654f) * (x + V::Set1(0.044715f) * (x * x * x));
  return V::Set1(0.5f) * x * (V::Set1(1.0f) + V::Tanh(inner));
}

template <class V>
void Silu(float* x, size_t n) { MapUnary<V>(x, n, [](typename V::B v) { return SiluOf<V>(v); }); }
template <class V>
void GeluTanh(float* x, size_t n) { MapUnary<V>(x, n, [](typename V::B v) { return GeluTanhOf<V>(v); }); }
template <class V>
void SiluMul(const float* g, const float* u, float* y, size_t n) {
  MapBinary<V>(g, u, y, n, [](typename V::B a, typename V::B b) { return SiluOf<V>(a) * b; });
}
template <class V>
void GeluTanhMul(const float* g, const float* u, float* y, size_t n) {
  MapBinary<V>(g, u, y, n, [](typename V::B a, typename V::B b) { return GeluTanhOf<V>(a) * b; });
}
// gpt-oss's clamped SwiGLU: with x = min(gate, limit) and u = clamp(up, -limit, limit),
// x / (1 + exp(-alpha x)) · (u + 1), in llama.cpp's (swiglu_oai) order of operations.
template <class V>
void ClampedSwigluMul(const float* g, const float* u, float* y, size_t n, float alpha, float limit) {
  using B = typename V::B;
  const B va = V::Set1(alpha), hi = V::Set1(limit), lo = V::Set1(-limit), one = V::Set1(1.0f), zero = V::Set1(0.0f);
  MapBinary<V>(g, u, y, n, [&](B a, B b) {
    const B x = V::Min(a, hi);
    return x / (one + V::Exp(zero - va * x)) * (V::Min(V::Max(b, lo), hi) + one);
  });
}
template <class V>
void Add(const float* a, const float* b, float* y, size_t n) {
  MapBinary<V>(a, b, y, n, [](typename V::B p, typename V::B q) { return p + q; });
}
template <class V>
void Mul(const float* a, const float* b, float* y, size_t n) {
  MapBinary<V>(a, b, y, n, [](typename V::B p, typename V::B q) { return p * q; });
}
template <class V>
void Scale(const float* a, float s, float* y, size_t n) {
  size_t i = 0;
  typename V::B vs = V::Set1(s);
  for (; i + V::kWidth <= n; i += V::kWidth) V::Store(y + i, V::Load(a + i) * vs);
  for (; i < n; ++i) y[i] = a[i] * s;
}

// Stored KV elements (KeyRun): float, or the 16-bit patterns of an f16 or bf16 cache. Attention
// widens each element as it loads it — exactly (F16C or a shift where the tier has them, else the
// scalar conversion) — so an f16 call has the bits of an f32 call on the widened values.
struct F16 {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

inline float ToF32(float x) { return x; }
inline float ToF32(F16 x) { return F16ToF32(x.bits); }
inline float ToF32(Bf16 x) { return Bf16ToF32(x.bits); }

// kWidth stored elements widened to a register.
template <class V>
typename V::B LoadKV(const float* p) { return V::Load(p); }
template <class V>
typename V::B LoadKV(const F16* p) {
  if constexpr (requires { V::LoadF16(&p->bits); }) {
    return V::LoadF16(&p->bits);
  } else {
    alignas(64) float tmp[V::kWidth];
    for (size_t i = 0; i < V::kWidth; ++i) tmp[i] = ToF32(p[i]);
    return V::Load(tmp);
  }
}
template <class V>
typename V::B LoadKV(const Bf16* p) {
  if constexpr (requires { V::LoadBf16(&p->bits); }) {
    return V::LoadBf16(&p->bits);
  } else {
    alignas(64) float tmp[V::kWidth];
    for (size_t i = 0; i < V::kWidth; ++i) tmp[i] = ToF32(p[i]);
    return V::Load(tmp);
  }
}

// Dot(a, b, n) with b stored as E: the same arithmetic on the widened values.
template <class V, class E>
float DotKV(const float* a, const E* b, size_t n) {
  if constexpr (std::is_same_v<E, float>) {
    return Dot<V>(a, b, n);
  } else {
    typename V::B acc = V::Set1(0.0f);
    size_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) acc = V::Fma(V::Load(a + i), LoadKV<V>(b + i), acc);
    float s = V::Hsum(acc);
    for (; i < n; ++i) s = s + a[i] * ToF32(b[i]);
    return s;
  }
}

// Grouped-query attention shares each K and V row among the query heads of its KV head: up to
// kAttentionHeadsAtOnce of them run together, so one load of a K or V chunk feeds several fmas.
// Every score still has Dot's arithmetic (full-width chunks in order, Hsum, the scalar tail) and
// every value sum runs over the keys in order, so how many heads run together changes no bit.

// s_h[t] = Dot(q_h, k_t) · scale for HB heads (q_h at q + h·head_dim, s_h at s + h·ld_s) over n keys
// (k_t at k + t·head_dim): blocks of KB keys × HB heads fill one HsumBatch of kWidth accumulators.
template <class V, size_t HB, class E>
void AttentionScores(const float* q, const E* k, size_t head_dim, size_t n, float scale, float* s, size_t ld_s) {
  constexpr size_t W = V::kWidth, KB = W / HB;
  const size_t full = head_dim / W * W;
  alignas(64) float sums[W];
  size_t t = 0;
  for (; t + KB <= n; t += KB) {
    typename V::B acc[W];  // head h, key j at h·KB + j; any left over stay zero
    for (size_t j = 0; j < W; ++j) acc[j] = V::Set1(0.0f);
    for (size_t i = 0; i < full; i += W) {
      typename V::B kv[KB];
      for (size_t j = 0; j < KB; ++j) kv[j] = LoadKV<V>(k + (t + j) * head_dim + i);
      for (size_t h = 0; h < HB; ++h) {
        const typename V::B qv = V::Load(q + h * head_dim + i);
        for (size_t j = 0; j < KB; ++j) acc[h * KB + j] = V::Fma(qv, kv[j], acc[h * KB + j]);
      }
    }
    V::Store(sums, V::HsumBatch(acc));
    for (size_t h = 0; h < HB; ++h) {
      const float* qh = q + h * head_dim;
      for (size_t j = 0; j < KB; ++j) {
        const E* kj = k + (t + j) * head_dim;
        float x = sums[h * KB + j];
        for (size_t i = full; i < head_dim; ++i) x = x + qh[i] * ToF32(kj[i]);
        s[h * ld_s + t + j] = x * scale;
      }
    }
  }
  for (; t < n; ++t)
    for (size_t h = 0; h < HB; ++h) s[h * ld_s + t] = DotKV<V>(q + h * head_dim, k + t * head_dim, head_dim) * scale;
}

// Calls f(k, v, first, n) for each stored stretch of keys [a.key_begin, a.key_end) of KV head
// `kv_head`, in key order: k and v point at key `first` (elements of type E), the n keys after it
// are contiguous.
template <class E, class F>
void ForEachKeyStretch(const AttentionArgs& a, size_t kv_head, F&& f) {
  size_t run_first = 0;
  for (size_t r = 0; r < a.n_runs && run_first < a.key_end; ++r) {
    const KeyRun& run = a.runs[r];
    const size_t lo = std::max(run_first, a.key_begin), hi = std::min(run_first + run.n, a.key_end);
    if (lo < hi) {
      const size_t offset = kv_head * run.kv_head_stride + (lo - run_first) * a.head_dim;
      f(static_cast<const E*>(run.k) + offset, static_cast<const E*>(run.v) + offset, lo, hi - lo);
    }
    run_first += run.n;
  }
}

// out_h[d] = Σ_t s_h[t] · v_t[d] over the window's keys for HB heads (s_h at s + h·ld_s, out_h at
// out + h·head_dim), t in order for every (h, d) whatever the runs; four head_dim chunks of every
// head run side by side, so their chains overlap and each V chunk is loaded once for all heads.
template <class V, size_t HB, class E>
void AttentionValues(const AttentionArgs& a, size_t kv_head, const float* s, size_t ld_s, float* out) {
  constexpr size_t W = V::kWidth;
  const size_t head_dim = a.head_dim;
  auto for_each_key = [&](auto&& f) {  // f(s_t, v_t) with s_t = &s_0[t], for every key in order
    ForEachKeyStretch<E>(a, kv_head, [&](const E*, const E* v, size_t first, size_t n) {
      const float* st = s + (first - a.key_begin);
      for (size_t t = 0; t < n; ++t) f(st + t, v + t * head_dim);
    });
  };
  size_t d = 0;
  for (; d + 4 * W <= head_dim; d += 4 * W) {
    typename V::B acc[HB][4];
    for (size_t h = 0; h < HB; ++h)
      for (size_t c = 0; c < 4; ++c) acc[h][c] = V::Set1(0.0f);
    for_each_key([&](const float* st, const E* vt) {
      const typename V::B v0 = LoadKV<V>(vt + d), v1 = LoadKV<V>(vt + d + W), v2 = LoadKV<V>(vt + d + 2 * W),
                          v3 = LoadKV<V>(vt + d + 3 * W);
      for (size_t h = 0; h < HB; ++h) {
        const typename V::B sv = V::Set1(st[h * ld_s]);
        acc[h][0] = V::Fma(sv, v0, acc[h][0]);
        acc[h][1] = V::Fma(sv, v1, acc[h][1]);
        acc[h][2] = V::Fma(sv, v2, acc[h][2]);
        acc[h][3] = V::Fma(sv, v3, acc[h][3]);
      }
    });
    for (size_t h = 0; h < HB; ++h)
      for (size_t c = 0; c < 4; ++c) V::Store(out + h * head_dim + d + c * W, acc[h][c]);
  }
  for (; d + W <= head_dim; d += W) {
    typename V::B acc[HB];
    for (size_t h = 0; h < HB; ++h) acc[h] = V::Set1(0.0f);
    for_each_key([&](const float* st, const E* vt) {
      const typename V::B v0 = LoadKV<V>(vt + d);
      for (size_t h = 0; h < HB; ++h) acc[h] = V::Fma(V::Set1(st[h * ld_s]), v0, acc[h]);
    });
    for (size_t h = 0; h < HB; ++h) V::Store(out + h * head_dim + d, acc[h]);
  }
  for (; d < head_dim; ++d) {
    float acc[HB] = {};
    for_each_key([&](const float* st, const E* vt) {
      for (size_t h = 0; h < HB; ++h) acc[h] = acc[h] + st[h * ld_s] * ToF32(vt[d]);
    });
    for (size_t h = 0; h < HB; ++h) out[h * head_dim + d] = acc[h];
  }
}

// Gemma 2's attention soft-capping, score by score (so it adds nothing that depends on the batch):
// s = cap · tanh(s · (1/cap)), as llama.cpp scales, takes tanh and scales back.
inline void SoftCapScores(float* s, size_t n, float cap) {
  if (cap <= 0.0f) return;
  const float inv_cap = 1.0f / cap;
  for (size_t i = 0; i < n; ++i) s[i] = cap * std::tanh(s[i] * inv_cap);
}

// Query heads [h0, h0 + HB) of one KV head: scores, softmax per head, weighted values.
template <class V, size_t HB, class E>
void AttentionHeads(const AttentionArgs& a, size_t h0) {
  const size_t kv_head = h0 / (a.n_heads / a.n_kv_heads), n_keys = a.key_end - a.key_begin;
  const float* q = a.q + h0 * a.head_dim;
  ForEachKeyStretch<E>(a, kv_head, [&](const E* k, const E*, size_t first, size_t n) {
    AttentionScores<V, HB>(q, k, a.head_dim, n, a.scale, a.scratch + (first - a.key_begin), n_keys);
  });
  for (size_t h = 0; h < HB; ++h) {
    SoftCapScores(a.scratch + h * n_keys, n_keys, a.softcap);
    SoftmaxSink<V>(a.scratch + h * n_keys, n_keys, a.sinks != nullptr ? a.sinks + h0 + h : nullptr);
  }
  AttentionValues<V, HB, E>(a, kv_head, a.scratch, n_keys, a.out + h0 * a.head_dim);
}

// Query rows [0, a.rows) of heads [h0, h0 + HB) of one KV head. The scores of every (head, row)
// pair over the block's keys are one matmul (MatMul's outputs have Dot's arithmetic, so each score
// has the bits of AttentionScores'); each pair then keeps only its own keys for softmax and values,
// which run per row as for a single row. Scratch: the pairs' queries gathered, then their scores.
// The first key query row r attends (kernel_table.h: AttentionArgs).
inline size_t FirstKey(const AttentionArgs& a, size_t r) {
  const size_t end = a.key_end + r;
  return a.window > 0 && end > a.window ? std::max(a.key_begin, end - a.window) : a.key_begin;
}

// y[p][j] = Dot(x_p, k_j) for `pairs` rows x (ld hd) and n keys (ld hd) of type E, into y (ld ldy):
// the keys are MatMul's W. 16-bit keys are widened first, a stack-sized batch of keys at a time
// (MatMul's outputs do not depend on the column range, so batching changes no bit).
template <class V, class E>
void ScoreKeys(const float* x, size_t pairs, const E* k, size_t n, size_t hd, float* y, size_t ldy) {
  if constexpr (std::is_same_v<E, float>) {
    MatMul<V>(x, hd, k, hd, y, ldy, pairs, hd, 0, n);
  } else {
    constexpr size_t kFloats = 4096;  // 16 KiB: 16 keys of head_dim 256
    alignas(64) float buf[kFloats];
    const size_t batch = hd <= kFloats ? kFloats / hd : 1;
    for (size_t j = 0; j < n; j += batch) {
      const size_t m = std::min(batch, n - j);
      if (hd > kFloats) {  // no model has such heads; stay correct anyway, one key at a time
        for (size_t p = 0; p < pairs; ++p) y[p * ldy + j] = DotKV<V>(x + p * hd, k + j * hd, hd);
        continue;
      }
      const E* src = k + j * hd;
      size_t i = 0;
      for (; i + V::kWidth <= m * hd; i += V::kWidth) V::Store(buf + i, LoadKV<V>(src + i));
      for (; i < m * hd; ++i) buf[i] = ToF32(src[i]);
      MatMul<V>(x, hd, buf, hd, y + j, ldy, pairs, hd, 0, m);
    }
  }
}

template <class V, size_t HB, class E>
void AttentionHeadsRows(const AttentionArgs& a, size_t h0) {
  const size_t kv_head = h0 / (a.n_heads / a.n_kv_heads), hd = a.head_dim, rows = a.rows, pairs = HB * rows;
  const size_t lo = FirstKey(a, 0), hi = a.key_end + rows - 1, n = hi - lo;
  float* qg = a.scratch;         // pair h * rows + r: the query of head h0 + h in row r
  float* s = a.scratch + pairs * hd;  // its scores over keys [lo, hi), n apart
  for (size_t h = 0; h < HB; ++h) {
    for (size_t r = 0; r < rows; ++r) {
      const float* src = a.q + (r * a.n_heads + h0 + h) * hd;
      float* dst = qg + (h * rows + r) * hd;
      for (size_t d = 0; d < hd; ++d) dst[d] = src[d];  // a few hundred bytes: not worth a libc call
    }
  }
  AttentionArgs block = a;
  block.key_begin = lo;
  block.key_end = hi;
  ForEachKeyStretch<E>(block, kv_head, [&](const E* k, const E*, size_t first, size_t len) {
    ScoreKeys<V>(qg, pairs, k, len, hd, s + (first - lo), n);
  });
  for (size_t r = 0; r < rows; ++r) {
    const size_t b = FirstKey(a, r), e = a.key_end + r;
    for (size_t h = 0; h < HB; ++h) {
      float* sr = s + (h * rows + r) * n + (b - lo);
      Scale<V>(sr, a.scale, sr, e - b);
      SoftCapScores(sr, e - b, a.softcap);
      SoftmaxSink<V>(sr, e - b, a.sinks != nullptr ? a.sinks + h0 + h : nullptr);
    }
    AttentionArgs row = a;
    row.key_begin = b;
    row.key_end = e;
    AttentionValues<V, HB, E>(row, kv_head, s + r * n + (b - lo), rows * n, a.out + (r * a.n_heads + h0) * hd);
  }
}

template <class V, class E>
void AttentionOf(const AttentionArgs& a) {
  static_assert(kAttentionHeadsAtOnce == 4);
  const size_t group = a.n_heads / a.n_kv_heads;
  AttentionArgs one = a;  // a single row: the window folded into key_begin
  one.key_begin = FirstKey(a, 0);
  for (size_t h = a.head_begin; h < a.head_end;) {
    const size_t group_end = (h / group + 1) * group;  // heads of one KV head run together
    const size_t heads = V::kWidth < 4 ? 1 : std::min({a.head_end, group_end, h + kAttentionHeadsAtOnce}) - h;
    auto run = [&]<size_t HB>() { a.rows == 1 ? AttentionHeads<V, HB, E>(one, h) : AttentionHeadsRows<V, HB, E>(a, h); };
    if constexpr (V::kWidth >= 4) {
      switch (heads) {
        case 4: run.template operator()<4>(); break;
        case 3: run.template operator()<3>(); break;
        case 2: run.template operator()<2>(); break;
        default: run.template operator()<1>(); break;
      }
    } else {  // one lane: nothing to share a batch with
      run.template operator()<1>();
    }
    h += heads;
  }
}

template <class V>
void Attention(const AttentionArgs& a) {
  switch (a.kv_dtype) {
    case KVDtype::kF16: return AttentionOf<V, F16>(a);
    case KVDtype::kBF16: return AttentionOf<V, Bf16>(a);
    default: return AttentionOf<V, float>(a);
  }
}

// MatMul over W stored as 16-bit elements E (KernelTable::matmul_f16 / matmul_bf16, W given as bit
// patterns, ldw in elements): W is widened exactly, a batch of rows at a time, into a buffer that the
// f32 MatMul then reads. A batch is a whole number of every register tile (prefill's kNR, decode's
// kDecodeNR), so the f32 kernel runs at full speed on it, and MatMul's outputs do not depend on the
// column range, so each output has the bits of MatMul over the widened W. The f32 kernel is reused
// as it is rather than taught to load 16-bit elements: its tiles are tuned to the register file, and
// another element type there changed GCC's inlining and register allocation of the f32 path (2x
// slower prefill). While a batch is widened, the rows two batches ahead are prefetched into L2 (at
// one row per call, decode streams W from DRAM).
//
// Decode (one X row) widens in registers instead (MatMulDecodeWidened): through a buffer, each W
// element was read at 2 bytes, written and read again at 4, and decode ran at about half the bytes
// per second of f32 weights.
template <class V, class E>
void MatMulDecodeWidened(const float* x, const E* w, size_t ldw, float* y, size_t k, size_t n_begin, size_t n_end);

template <class V, class E>
void MatMulWidened(const float* x, size_t ldx, const uint16_t* w_bits, size_t ldw, float* y, size_t ldy, size_t m,
                   size_t k, size_t n_begin, size_t n_end) {
  static_assert(sizeof(E) == sizeof(uint16_t));
  if (k == 0) return MatMul<V>(x, ldx, nullptr, ldw, y, ldy, m, k, n_begin, n_end);  // zeros, reading nothing
  const E* w = reinterpret_cast<const E*>(w_bits);
  if (m == 1) return MatMulDecodeWidened<V, E>(x, w, ldw, y, k, n_begin, n_end);
  constexpr size_t kBatch = std::lcm(static_cast<size_t>(V::kNR), static_cast<size_t>(V::kDecodeNR));
  const size_t k_full = k / V::kWidth * V::kWidth;
  std::unique_ptr<float[]> buf = std::make_unique_for_overwrite<float[]>(kBatch * k);
  for (size_t n = n_begin; n < n_end; n += kBatch) {
    const size_t rows = std::min(kBatch, n_end - n);
    for (size_t j = 0; j < rows; ++j) {
      const E* src = w + (n + j) * ldw;
      float* dst = buf.get() + j * k;
      for (size_t i = 0; i < k_full; i += V::kWidth) V::Store(dst + i, LoadKV<V>(src + i));
      for (size_t i = k_full; i < k; ++i) dst[i] = ToF32(src[i]);
      if (const size_t ahead = n + 2 * kBatch + j; ahead < n_end) {
        const char* line = reinterpret_cast<const char*>(w + ahead * ldw);
        for (size_t o = 0; o < k * sizeof(E); o += 64) __builtin_prefetch(line + o, 0, 2);
      }
    }
    MatMul<V>(x, ldx, buf.get(), k, y + n, ldy, m, k, 0, rows);
  }
}

// MatMulDecode's arithmetic on W widened as it is loaded: NR columns in flight, one accumulator
// each over the full-width chunks in order, reduced as MatMulTile reduces them (V::Hsum's tree:
// HsumBatch equals it lane for lane), then the scalar tail in order. So each output has the bits of
// MatMulDecode over the widened W. W streams from DRAM: each tile prefetches the tile kDecodeAhead
// tiles ahead into L2.
template <class V, class E>
void MatMulDecodeWidened(const float* x, const E* w, size_t ldw, float* y, size_t k, size_t n_begin, size_t n_end) {
  constexpr int NR = V::kDecodeNR;
  constexpr size_t kLine = 64 / sizeof(E);  // elements per cache line
  const size_t steps = k / V::kWidth, k_full = steps * V::kWidth;
  const auto finish = [&](const typename V::B (&a)[1][NR], size_t n, int count) {
    if (k_full == k && count == NR) return ReduceTileTo<V, 1, NR>(a, y + n, 0);
    for (int j = 0; j < count; ++j) {
      const E* wr = w + (n + j) * ldw;
      float sum = V::Hsum(a[0][j]);
      for (size_t t = k_full; t < k; ++t) sum = sum + x[t] * ToF32(wr[t]);
      y[n + j] = sum;
    }
  };
  size_t n = n_begin;
  for (; n < n_end; n += NR) {
    const int count = n + NR <= n_end ? NR : static_cast<int>(n_end - n);
    const E* pf = n + (kDecodeAhead + 1) * NR <= n_end ? w + (n + kDecodeAhead * NR) * ldw : nullptr;
    typename V::B a[1][NR];  // MatMulTile's shape, for ReduceTileTo
    for (int j = 0; j < NR; ++j) a[0][j] = V::Set1(0.0f);
    if (count == NR) {
      for (size_t s = 0; s < steps; ++s) {
        const size_t kk = s * V::kWidth;
        if (pf != nullptr && kk % kLine == 0) {
          for (int j = 0; j < NR; ++j) __builtin_prefetch(pf + j * ldw + kk, 0, 2);
        }
        const typename V::B xv = V::Load(x + kk);
        for (int j = 0; j < NR; ++j) a[0][j] = V::Fma(xv, LoadKV<V>(w + (n + j) * ldw + kk), a[0][j]);
      }
    } else {
      for (int j = 0; j < count; ++j)
        for (size_t s = 0; s < steps; ++s)
          a[0][j] = V::Fma(V::Load(x + s * V::kWidth), LoadKV<V>(w + (n + j) * ldw + s * V::kWidth), a[0][j]);
    }
    finish(a, n, count);
  }
}

// IEEE half (bfloat16) to float; exact, so every tier gives the same bits.
template <class V>
void F16ToF32(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = ToF32(F16{x[i]});
}

template <class V>
void Bf16ToF32(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = ToF32(Bf16{x[i]});
}

template <class V>
void FillTable(KernelTable* t) {
  t->dot = &Dot<V>;
  t->matmul = &MatMul<V>;
  t->matmul_f16 = &MatMulWidened<V, F16>;
  t->matmul_bf16 = &MatMulWidened<V, Bf16>;
  t->rmsnorm = &RmsNorm<V>;
  t->softmax = &Softmax<V>;
  t->exp_scaled = &ExpScaled<V>;
  t->attention = &Attention<V>;
  t->silu = &Silu<V>;
  t->gelu_tanh = &GeluTanh<V>;
  t->silu_mul = &SiluMul<V>;
  t->gelu_tanh_mul = &GeluTanhMul<V>;
  t->clamped_swiglu_mul = &ClampedSwigluMul<V>;
  t->add = &Add<V>;
  t->mul = &Mul<V>;
  t->scale = &Scale<V>;
  t->f16_to_f32 = &F16ToF32<V>;
  t->bf16_to_f32 = &Bf16ToF32<V>;
}

}  // namespace fak::kernels::simd

#endif  // FAK_KERNELS_SIMD_KERNELS_IMPL_H_
