// NEON tiers (aarch64 Advanced SIMD): 4-lane xsimd batches, fused multiply-add (vfmaq), int8 dot
// products for the quantized matmul (quant_neon.h). Registered twice (cmake/kernel_tiers.cmake):
// `neon` at the baseline -march (NEON is in every ARMv8-A core) and `neon_dotprod` with +dotprod,
// which changes only how the int8 dot products are computed, not their result.
#include <arm_neon.h>

#include <xsimd/xsimd.hpp>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_neon.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct NeonV {
  using B = xsimd::batch<float, xsimd::neon64>;
  static constexpr size_t kWidth = B::size;
  // 32 vector registers: 4x5 accumulators + 5 W rows + 1 X row (as AVX-512's tile, at a quarter of
  // the width). Prefill blocks: 128 X rows, K-blocks of up to 128 x 4 floats (the packed 5 W rows,
  // 10 KiB, stay in a 64 KiB L1 while 4-row X tiles stream from L2). Stack per prefill call:
  // 10 KiB of accumulators + 10 KiB of packed W.
  static constexpr int kMR = 4, kNR = 5, kDecodeNR = 8;
  static constexpr size_t kMatMulRows = 128, kKcSteps = 128;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  static B Fma(B a, B b, B c) { return vfmaq_f32(c, a, b); }  // one rounding
  // (l0 + l1) + (l2 + l3), written out with pairwise adds so that no library choice can change it.
  static float Hsum(B v) {
    const float32x4_t p = vpaddq_f32(v, v);
    return vpadds_f32(vget_low_f32(p));
  }
  // Lane i is Hsum(v[i]): the same pairwise tree for four vectors at once.
  [[gnu::always_inline]] static B HsumBatch(const B* v) {
    return vpaddq_f32(vpaddq_f32(v[0], v[1]), vpaddq_f32(v[2], v[3]));
  }
  // Lanes 0-1 are Hsum(v[0..1]); lanes 2-3 repeat them.
  [[gnu::always_inline]] static B HsumHalfBatch(const B* v) {
    const float32x4_t p = vpaddq_f32(v[0], v[1]);
    return vpaddq_f32(p, p);
  }
  // Exact widenings of 4 stored KV elements (kernels_impl.h LoadKV): fcvtl (base ARMv8), and a
  // shift for bf16.
  static B LoadF16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static B LoadBf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static B Max(B a, B b) { return xsimd::max(a, b); }
  static B Min(B a, B b) { return xsimd::min(a, b); }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

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
