// The NEON tiers' float policy (kernels_impl.h's V): 4-lane xsimd batches, vfmaq_f32, pairwise
// horizontal sums. Shared by kernels/arch/neon*.cc, which differ only in their int8 policy. Include
// only from those TUs: NeonV lives in an anonymous namespace so that each tier's instantiations keep
// internal linkage and the linker cannot merge code built with one tier's flags into another (the
// ODR trap in docs/kernels.md).
#ifndef FAK_KERNELS_SIMD_NEON_FLOAT_H_
#define FAK_KERNELS_SIMD_NEON_FLOAT_H_

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <xsimd/xsimd.hpp>

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

}  // namespace
}  // namespace fak::kernels

#endif  // FAK_KERNELS_SIMD_NEON_FLOAT_H_
