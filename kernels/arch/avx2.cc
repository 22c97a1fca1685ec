// AVX2+FMA tier: 8-lane xsimd batches, fused multiply-add. Built with -mavx2 -mfma only here.
#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"

namespace fak::kernels {
namespace {

struct Avx2V {
  using B = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static constexpr size_t kWidth = B::size;
  // 16 ymm registers: 2x4 accumulators + 4 W rows + 1 X row.
  static constexpr int kMR = 2, kNR = 4, kDecodeNR = 4;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  static B Fma(B a, B b, B c) { return xsimd::fma(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
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
