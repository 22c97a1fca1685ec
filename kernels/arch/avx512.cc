// AVX-512 tier: 16-lane xsimd batches, fused multiply-add. Built with -mavx512* only here.
#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"

namespace fak::kernels {
namespace {

struct Avx512V {
  using B = xsimd::batch<float, xsimd::avx512bw>;
  static constexpr size_t kWidth = B::size;
  // 32 zmm registers: 4x6 accumulators + 6 W rows + 1 X row.
  static constexpr int kMR = 4, kNR = 6, kDecodeNR = 8;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  static B Fma(B a, B b, B c) { return xsimd::fma(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

}  // namespace

void FillAvx512Table(KernelTable* table) {
  simd::FillTable<Avx512V>(table);
  table->tier = Tier::kAvx512;
  table->name = "avx512";
}

}  // namespace fak::kernels
