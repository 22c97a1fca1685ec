// The neon_i8mm tier (ARMv8.6 int8 matrix multiply: Neoverse V1/V2/N2 — Graviton 3/4 —, Apple M2 on,
// Cortex-A510/A710 on): neon_dotprod's kernels, plus SMMLA for the packed quantized products of two
// or more activation rows (prefill). One SMMLA multiplies 2 activation rows by 2 weight rows over 8
// elements: twice the multiply-adds of an SDOT. It yields the same exact integer sums, so this tier's
// results equal neon's and neon_dotprod's bit for bit (PackedQuantTest.NeonTiersAgreeBitForBit); it
// is still its own regime by name.
#include <arm_neon.h>

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/neon_float.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_neon.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct NeonI8mmI {
  // Lane l += Σ of the products of bytes 4l..4l+3: one SDOT.
  [[gnu::always_inline]] static int32x4_t Dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
  // acc (2 x 2, row-major) += A · Bᵀ, A and B 2 x 8 (row-major bytes): one SMMLA.
  [[gnu::always_inline]] static int32x4_t Mmla(int32x4_t acc, int8x16_t a, int8x16_t b) { return vmmlaq_s32(acc, a, b); }
};

void FillNeonI8mmTable(KernelTable* table) {
  simd::FillTable<NeonV>(table);
  simd::FillQuantTable<NeonV, simd::NeonQuantOps<NeonI8mmI>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillNeonI8mmTable);

}  // namespace fak::kernels
