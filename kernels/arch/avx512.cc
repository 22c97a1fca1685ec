// AVX-512 tiers: 16-lane xsimd batches, fused multiply-add. Built with -mavx512* only here, twice:
// as avx512 (with VNNI) and as avx512_skx (without; cmake/kernel_tiers.cmake), one body for both.
#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_x86.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct Avx512V {
  using B = xsimd::batch<float, xsimd::avx512bw>;
  static constexpr size_t kWidth = B::size;
  // 32 zmm registers: 4x6 accumulators + 6 W rows + 1 X row. Prefill blocks: 128 X rows, K-blocks of
  // up to 48 x 16 floats (the packed 6 W rows, 18 KiB, stay in L1 while 4-row X tiles stream from L2).
  // Stack per prefill call: 48 KiB of accumulators + 18 KiB of packed W.
  static constexpr int kMR = 4, kNR = 6, kDecodeNR = 8;
  static constexpr size_t kMatMulRows = 128, kKcSteps = 48;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  // A true fused multiply-add: xsimd 8.1 has no AVX-512 fma and falls back to a * b + c (two roundings).
  static B Fma(B a, B b, B c) { return _mm512_fmadd_ps(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
  // Lane i is Hsum(v[i]) with xsimd's hadd tree: lanes (j, j+8), then (j, j+4), then (0,1) and
  // (2,3), then the last pair. (xsimd 8.1's haddp uses that tree but returns lanes out of order.)
  [[gnu::always_inline]] static B HsumBatch(const B* v) {
    __m512 h[8], q[4], p[2];
    for (int i = 0; i < 8; ++i)  // rows i | i+8, 8 lanes each
      h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 8], 0xee));
    for (int i = 0; i < 4; ++i)  // rows i | i+8 | i+4 | i+12, 4 lanes each
      q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[i], h[i + 4], 0x88), _mm512_shuffle_f32x4(h[i], h[i + 4], 0xdd));
    for (int i = 0; i < 2; ++i)  // per 128-bit lane: rows (2i, 2i+1) of that lane's family, 2 lanes each
      p[i] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0x88), _mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0xdd));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], 0x88), _mm512_shuffle_ps(p[0], p[1], 0xdd));
    return _mm512_shuffle_f32x4(r, r, 0xd8);  // rows 0-3 | 8-11 | 4-7 | 12-15 -> in order
  }
  // Lanes 0-7 are Hsum(v[0..7]) by the same tree (HsumBatch's first three stages on half the rows,
  // then the last pair within each 128-bit lane); lanes 8-15 are left unspecified.
  [[gnu::always_inline]] static B HsumHalfBatch(const B* v) {
    __m512 h[4], q[2];
    for (int i = 0; i < 4; ++i)  // rows i | i+4, 8 lanes each
      h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 4], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 4], 0xee));
    for (int i = 0; i < 2; ++i)  // rows i | i+4 | i+2 | i+6, 4 lanes each
      q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[i], h[i + 2], 0x88), _mm512_shuffle_f32x4(h[i], h[i + 2], 0xdd));
    __m512 p = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], 0x88), _mm512_shuffle_ps(q[0], q[1], 0xdd));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(p, p, 0x88), _mm512_shuffle_ps(p, p, 0xdd));
    // r's 128-bit lanes hold rows (0,1), (4,5), (2,3), (6,7) in their first two floats.
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 8, 9, 4, 5, 12, 13, 0, 1, 8, 9, 4, 5, 12, 13), r);
  }
  // Exact widenings of 16 stored KV elements (kernels_impl.h LoadKV): vcvtph2ps, and a shift for
  // bf16 (AVX-512 BF16's dot products would round the query to bf16 too: another regime).
  static B LoadF16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static B LoadBf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static B Max(B a, B b) { return xsimd::max(a, b); }
  static B Min(B a, B b) { return xsimd::min(a, b); }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

// int8 dot products for the quantized matmul (quant_x86.h): AVX512-VNNI on ymm (AVX512VL); built
// without VNNI (the avx512_skx tier), vpmaddubsw + vpmaddwd as on AVX2 — the same integer lanes.
struct Avx512I {
#if defined(__AVX512VNNI__)
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m256i DotU8S8Scaled(__m256i acc, __m256i u, __m256i s, __m256i c) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), c);
  }
#else
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i DotU8S8Scaled(__m256i acc, __m256i u, __m256i s, __m256i c) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), c));
  }
#endif
  static __m256i BitMaskBytes(uint32_t bits) { return _mm256_movm_epi8(bits); }
};

void FillAvx512Table(KernelTable* table) {
  simd::FillTable<Avx512V>(table);
  simd::FillQuantTable<Avx512V, simd::X86QuantOps<Avx512I>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillAvx512Table);

}  // namespace fak::kernels
