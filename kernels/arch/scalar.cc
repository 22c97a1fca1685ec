// Scalar tier: plain float arithmetic, no SIMD, no fused multiply-add (-ffp-contract=off).
#include <cmath>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct ScalarV {
  using B = float;
  static constexpr size_t kWidth = 1;
  static constexpr int kMR = 4, kNR = 4, kDecodeNR = 4;
  static constexpr size_t kMatMulRows = 64, kKcSteps = 512;
  static B Load(const float* p) { return *p; }
  static void Store(float* p, B v) { *p = v; }
  static B Set1(float v) { return v; }
  static B Fma(B a, B b, B c) { return a * b + c; }  // two roundings: this tier has no FMA
  static float Hsum(B v) { return v; }
  static B HsumBatch(const B* v) { return v[0]; }
  static B Max(B a, B b) { return b > a ? b : a; }
  static B Min(B a, B b) { return b < a ? b : a; }
  static B Exp(B v) { return std::exp(v); }
  static B Tanh(B v) { return std::tanh(v); }
};

void FillScalarTable(KernelTable* table) {
  simd::FillTable<ScalarV>(table);
  simd::FillQuantTable<ScalarV, simd::ScalarQuantOps<ScalarV>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillScalarTable);

}  // namespace fak::kernels
