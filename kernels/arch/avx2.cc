// AVX2+FMA tier: 8-lane xsimd batches, fused multiply-add. Built with -mavx2 -mfma only here.
#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_x86.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct Avx2V {
  using B = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static constexpr size_t kWidth = B::size;
  // 16 ymm registers: 3x4 accumulators + 3 X rows + 1 W row (the W loads fold into the FMAs).
  // Prefill blocks: 129 X rows, K-blocks of up to 96 x 8 floats.
  static constexpr int kMR = 3, kNR = 4, kDecodeNR = 8;
  static constexpr size_t kMatMulRows = 129, kKcSteps = 96;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  static B Fma(B a, B b, B c) { return xsimd::fma(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
  // Lane i is Hsum(v[i]) with xsimd's avx hadd tree: t_j = x_j + x_(j+4), then t0 + t1 and t2 + t3
  // (hadd), then their sum (hadd). (xsimd's own avx haddp pairs lanes differently.)
  [[gnu::always_inline]] static B HsumBatch(const B* v) {
    __m256 s[4];
    for (int i = 0; i < 4; ++i) {
      __m256 a = v[i], b = v[i + 4];
      s[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    return _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3]));
  }
  // Lanes 0-3 are Hsum(v[0..3]) by the same tree; lanes 4-7 are left unspecified.
  [[gnu::always_inline]] static B HsumHalfBatch(const B* v) {
    __m256 s[2];
    for (int i = 0; i < 2; ++i) {  // lanes 0-3: t of row i, lanes 4-7: t of row i + 2
      __m256 a = v[i], b = v[i + 2];
      s[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    __m256 h = _mm256_hadd_ps(s[0], s[1]);
    __m256 r = _mm256_hadd_ps(h, h);  // rows 0, 1 in lanes 0-1, rows 2, 3 in lanes 4-5
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 1, 4, 5, 0, 1, 4, 5));
  }
  // Exact widenings of 8 stored KV elements (kernels_impl.h LoadKV): F16C, and a shift for bf16.
  static B LoadF16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static B LoadBf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static B Max(B a, B b) { return xsimd::max(a, b); }
  static B Min(B a, B b) { return xsimd::min(a, b); }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

// int8 dot products for the quantized matmul (quant_x86.h): vpmaddubsw, then vpmaddwd.
struct Avx2I {
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m256i DotU8S8Scaled(__m256i acc, __m256i u, __m256i s, __m256i c) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), c));
  }
  // Byte e = 0xFF iff bit e is set: replicate byte e/8, set every other bit, compare with all-ones.
  static __m256i BitMaskBytes(uint32_t bits) {
    const __m256i pick = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), pick);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
  }
};

void FillAvx2Table(KernelTable* table) {
  simd::FillTable<Avx2V>(table);
  simd::FillQuantTable<Avx2V, simd::X86QuantOps<Avx2I>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillAvx2Table);

}  // namespace fak::kernels
