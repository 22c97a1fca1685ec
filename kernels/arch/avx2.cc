// AVX2+FMA tier: 8-lane xsimd batches, fused multiply-add. Built with -mavx2 -mfma only here.
#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"

namespace fak::kernels {
namespace {

struct Avx2V {
  using B = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static constexpr size_t kWidth = B::size;
  // 16 ymm registers: 2x4 accumulators + 4 W rows + 1 X row. Prefill blocks: 64 X rows, K-blocks of
  // up to 96 x 8 floats.
  static constexpr int kMR = 2, kNR = 4, kDecodeNR = 8;
  static constexpr size_t kMatMulRows = 64, kKcSteps = 96;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  static B Fma(B a, B b, B c) { return xsimd::fma(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
  // Lane i is Hsum(v[i]) with xsimd's avx hadd tree: t_j = x_j + x_(j+4), then t0 + t1 and t2 + t3
  // (hadd), then their sum (hadd). (xsimd's own avx haddp pairs lanes differently.)
  static B HsumBatch(const B* v) {
    __m256 s[4];
    for (int i = 0; i < 4; ++i) {
      __m256 a = v[i], b = v[i + 4];
      s[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    return _mm256_hadd_ps(_mm256_hadd_ps(s[0], s[1]), _mm256_hadd_ps(s[2], s[3]));
  }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

}  // namespace

void FillAvx2Table(KernelTable* table) {
  simd::FillTable<Avx2V>(table);
  table->tier = Tier::kAvx2;
  table->name = "avx2";
}

}  // namespace fak::kernels
