// NEON tiers (aarch64 Advanced SIMD): 4-lane xsimd batches, fused multiply-add (vfmaq; neon_float.h),
// int8 dot products for the quantized matmul (quant_neon.h). Registered twice
// (cmake/kernel_tiers.cmake): `neon` at the baseline -march (NEON is in every ARMv8-A core) and
// `neon_dotprod` with +dotprod, which changes only how the int8 dot products are computed, not their
// result. (neon_i8mm.cc adds SMMLA.)
#include <arm_neon.h>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/neon_float.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_neon.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

// The int8 dot product of quant_neon.h: lane l += Σ of the products of bytes 4l..4l+3. One SDOT when
// this TU is built for dotprod; else 16 products widened to i16 (|a·b| ≤ 2^14) and pairwise widening
// adds. The same integer lanes either way, so the same bits.
struct NeonI {
  [[gnu::always_inline]] static int32x4_t Dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
  }
};

void FillNeonTable(KernelTable* table) {
  simd::FillTable<NeonV>(table);
  simd::FillQuantTable<NeonV, simd::NeonQuantOps<NeonI>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillNeonTable);

}  // namespace fak::kernels
