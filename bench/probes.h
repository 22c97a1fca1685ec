// Machine probes shared by the benches: read bandwidth (sum a large float array with independent
// SIMD accumulators) and peak FMA throughput (independent FMA chains held in registers). Benches
// quote their figures as a fraction of these, measured in the same run on the same machine.
// x86: AVX-512 or AVX2 registers; aarch64: NEON.
#ifndef FAK_BENCH_PROBES_H_
#define FAK_BENCH_PROBES_H_

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/tier_registry.h"
#include "src/core/thread_pool.h"

namespace fak::bench {

#if defined(__x86_64__) || defined(__i386__)
// Sums [0, n) of a float array with 4 independent AVX-512 accumulators (n a multiple of 64).
__attribute__((target("avx512f"))) inline float SumAvx512(const float* p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
// The same with AVX2 (n a multiple of 32).
__attribute__((target("avx2"))) inline float SumAvx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

#endif

// 10 independent FMA chains (enough to cover latency x throughput on current x86 and ARM cores),
// kFmaIters rounds: 10 * lanes * 2 flops per round. The empty asm keeps the chains in registers.
inline constexpr long kFmaIters = 1 << 24;
inline constexpr int kFmaChains = 10;
#if defined(__x86_64__) || defined(__i386__)
#define FAK_FMA_ROUND(FMA)                                                                                \
  a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c); a4 = FMA(a4, m, c);    \
  a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c); a8 = FMA(a8, m, c); a9 = FMA(a9, m, c);    \
  __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), \
                   "+v"(a8), "+v"(a9))
__attribute__((target("avx512f,fma"))) inline float FmaChainsAvx512(float seed) {
  __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f), a0 = _mm512_set1_ps(seed);
  __m512 a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  for (long i = 0; i < kFmaIters; ++i) { FAK_FMA_ROUND(_mm512_fmadd_ps); }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  return _mm512_reduce_add_ps(_mm512_add_ps(s, _mm512_add_ps(a8, a9)));
}
__attribute__((target("avx2,fma"))) inline float FmaChainsAvx2(float seed) {
  __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f), a0 = _mm256_set1_ps(seed);
  __m256 a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  for (long i = 0; i < kFmaIters; ++i) { FAK_FMA_ROUND(_mm256_fmadd_ps); }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  return t[0] + t[7];
}
#undef FAK_FMA_ROUND

// The widest of the above the CPU runs (`wide`: AVX-512).
inline float ProbeSum(const float* p, size_t n, bool wide) { return wide ? SumAvx512(p, n) : SumAvx2(p, n); }
inline float FmaChains(bool wide, float seed) { return wide ? FmaChainsAvx512(seed) : FmaChainsAvx2(seed); }
#elif defined(__aarch64__)
// Sums [0, n) with 4 independent NEON accumulators (n a multiple of 16).
inline float ProbeSum(const float* p, size_t n, bool) {
  float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    a0 = vaddq_f32(a0, vld1q_f32(p + i));
    a1 = vaddq_f32(a1, vld1q_f32(p + i + 4));
    a2 = vaddq_f32(a2, vld1q_f32(p + i + 8));
    a3 = vaddq_f32(a3, vld1q_f32(p + i + 12));
  }
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
}
inline float FmaChains(bool, float seed) {
  float32x4_t m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f), a0 = vdupq_n_f32(seed);
  float32x4_t a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  auto fma = [](float32x4_t a, float32x4_t b, float32x4_t acc) { return vfmaq_f32(acc, a, b); };
  for (long i = 0; i < kFmaIters; ++i) {
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c); a4 = fma(a4, m, c);
    a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c); a8 = fma(a8, m, c); a9 = fma(a9, m, c);
    __asm__ volatile("" : "+w"(a0), "+w"(a1), "+w"(a2), "+w"(a3), "+w"(a4), "+w"(a5), "+w"(a6), "+w"(a7), "+w"(a8),
                     "+w"(a9));
  }
  float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)), vaddq_f32(vaddq_f32(a4, a5), vaddq_f32(a6, a7)));
  return vaddvq_f32(vaddq_f32(s, vaddq_f32(a8, a9)));
}
#endif

// Flops one FmaChains call performs (lanes per register: 16 AVX-512, 8 AVX2, 4 NEON).
inline double FmaFlopsPerCall(bool wide) {
#if defined(__aarch64__)
  const double lanes = 4;
#else
  const double lanes = wide ? 16 : 8;
#endif
  return kFmaIters * kFmaChains * lanes * 2;
}

// Whether `tier` runs 16-lane (zmm) code: the probes then use zmm too.
inline bool TierUsesZmm(kernels::Tier tier) {
  return kernels::RegisteredTiers()[static_cast<size_t>(tier)]->requires_features.Has(kernels::CpuFeature::kAvx512f);
}

// One pass of the read probe over a[0, n): on the calling thread alone, or split over `pool`.
inline void ReadPass(const float* a, size_t n, internal::ThreadPool* pool, float* sink) {
  const bool avx512 = TierUsesZmm(kernels::SupportedTiers().back());
  auto body = [&](size_t b, size_t e) {
    float s = ProbeSum(a + b, e - b, avx512);
    sink[b == 0 ? 0 : 1] = s;
  };
  if (pool == nullptr) body(0, n); else pool->ParallelFor(n, 1 << 16, body);
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median read bandwidth in GB/s over `reps` passes of a 1 GiB array; pool null = one thread.
inline double ProbeReadBandwidth(internal::ThreadPool* pool, int reps) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::unique_ptr<float[]> a(new float[n]);
  std::fill(a.get(), a.get() + n, 1.0f);
  float sink[2] = {0, 0};
  std::vector<double> gbs;
  ReadPass(a.get(), n, pool, sink);  // warm-up (page faults, TLB)
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    ReadPass(a.get(), n, pool, sink);
    gbs.push_back(n * 4.0 * 1e-9 / SecondsSince(t0));
  }
  __asm__ volatile("" : : "r"(sink) : "memory");
  return Median(gbs);
}

// Median FMA throughput in GFLOP/s over `reps` calls with `threads` (1 or the pool's) threads.
inline double ProbeFma(bool avx512, internal::ThreadPool* pool, int reps) {
  const size_t threads = pool == nullptr ? 1 : pool->n_threads();
  std::vector<float> out(threads);
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto body = [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) out[i] = FmaChains(avx512, float(i));
    };
    if (pool == nullptr) body(0, 1); else pool->ParallelFor(threads, 1, body);
    g.push_back(FmaFlopsPerCall(avx512) * threads * 1e-9 / SecondsSince(t0));
  }
  __asm__ volatile("" : : "r"(out.data()) : "memory");
  return Median(g);
}

// The first three fields of /proc/loadavg ("?" where unreadable): benches print it, since a loaded
// machine moves every absolute figure (ratios measured in the same run move less).
inline std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "?";
  return a + " " + b + " " + c;
}

}  // namespace fak::bench

#endif  // FAK_BENCH_PROBES_H_
