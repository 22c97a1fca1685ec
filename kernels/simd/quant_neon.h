// aarch64 NEON block steps for the quantized matmul (quant_impl.h's Q policy), the counterpart of
// quant_x86.h. Include only from kernels/arch/neon*.cc: it uses intrinsics, and every function is a
// member of a template on the tier's integer policy I (defined in that TU's anonymous namespace), so
// nothing here has external linkage.
//
// I supplies the int8 dot product that NEON variants compute differently, and optionally SMMLA:
//   I::Dot(acc, a, b)    acc + Σ_{4 bytes of lane} a·b  (s8 × s8 → i32 lanes; lane l covers bytes 4l..4l+3)
//   I::Mmla(acc, a, b)   acc + A·Bᵀ for 2 x 8 byte matrices (i8mm; used by the packed kernels, M ≥ 2)
// kernels/arch/neon.cc does Dot with vmull + pairwise adds (every ARMv8 core), or with one SDOT
// (vdotq_s32) when built for dotprod: the same lanes; neon_i8mm.cc adds Mmla, which only regroups
// exact integer sums, so every NEON tier gives the same bits. Unlike x86 there is a signed × signed
// multiply, so weight quants are made signed first (q − offset) and no sign trick or offset
// correction is needed.
//
// Float order per output: Acc is 4 float lanes. Each block adds fma(float(lanes), scale, acc) — one
// fma per block (K-quants with mins and Q4_1/Q5_1: a second for the mins/offset term) — and Reduce
// sums the 4 lanes as (l0 + l1) + (l2 + l3). Integer lanes are exact (bounds noted at each step).
// The packed layouts (quant_pack.h) put eight weight rows side by side: there the lanes are output
// columns, two Acc per row of outputs.
#ifndef FAK_KERNELS_SIMD_QUANT_NEON_H_
#define FAK_KERNELS_SIMD_QUANT_NEON_H_

#include <arm_neon.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/quant_format.h"
#include "kernels/simd/quant_impl.h"

namespace fak::kernels::simd {

template <class I>
struct NeonQuantOps {
  using Acc = float32x4_t;
  // Whether the tier has the optional I::Mmla (SMMLA, i8mm).
  static constexpr bool kMmla = requires(int32x4_t acc, int8x16_t v) { I::Mmla(acc, v, v); };
  static Acc Zero() { return vdupq_n_f32(0.0f); }
  // (l0 + l1) + (l2 + l3), always.
  static float Reduce(Acc v) {
    const float32x4_t p = vpaddq_f32(v, v);
    return vpadds_f32(vget_low_f32(p));
  }
  static float F16(uint16_t h) {
    __fp16 f;
    std::memcpy(&f, &h, 2);
    return static_cast<float>(f);  // exact
  }
  static Acc Fma(Acc acc, float scale, int32x4_t lanes) { return vfmaq_n_f32(acc, vcvtq_f32_s32(lanes), scale); }
  static int8x16_t Load(const int8_t* p) { return vld1q_s8(p); }
  static int8x16_t S8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }
  // Σ over 32 elements, two registers against 32 activation bytes.
  static int32x4_t Dot32(int32x4_t acc, const int8x16_t (&q)[2], const int8_t* x) {
    return I::Dot(I::Dot(acc, q[0], Load(x)), q[1], Load(x + 16));
  }

  // 16 bytes of nibbles: the low nibbles (elements 0-15), then the high ones (16-31).
  static void Nibbles16(const uint8_t* p, uint8x16_t* lo, uint8x16_t* hi) {
    const uint8x16_t raw = vld1q_u8(p);
    *lo = vandq_u8(raw, vdupq_n_u8(0x0F));
    *hi = vshrq_n_u8(raw, 4);
  }
  // Byte e = 0xFF where bit e of bits is set (e < 16), else 0.
  static uint8x16_t BitMaskBytes(uint32_t bits) {
    static constexpr uint8_t kPick[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vqtbl1q_u8(vreinterpretq_u8_u32(vdupq_n_u32(bits)), vld1q_u8(kPick));
    return vtstq_u8(bytes, vld1q_u8(kBit));
  }
  static uint8x16_t FifthBit(uint32_t bits) { return vandq_u8(BitMaskBytes(bits), vdupq_n_u8(0x10)); }

  // Each weight block is unpacked once (Unpack) and can then serve several activation rows;
  // Step(acc, w, x) is Dot(acc, Unpack(w), Prep(w, x)), so a row tile and a single row give the same bits.
  template <class WB>
  static Acc Step(Acc acc, const WB* w, const typename ActOf<WB>::type* x) {
    return Dot(acc, Unpack(w), Prep(w, x));
  }
  template <class WB, class XB>
  static const XB* Prep(const WB*, const XB* x) { return x; }

  // Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4: 32 signed weights (|q| ≤ 128) and one scale; |lane| ≤ 8·2^14.
  struct S8W {
    int8x16_t q[2];
    float d;
  };
  static Acc Dot(Acc acc, const S8W& u, const ActQ8_0* x) {
    return Fma(acc, u.d * x->d, Dot32(vdupq_n_s32(0), u.q, x->qs));
  }
  static S8W Unpack(const BlockQ8_0* w) { return {{Load(w->qs), Load(w->qs + 16)}, F16(w->d)}; }
  static S8W Unpack(const BlockQ4_0* w) {
    uint8x16_t lo, hi;
    Nibbles16(w->qs, &lo, &hi);
    const int8x16_t eight = vdupq_n_s8(8);
    return {{vsubq_s8(S8(lo), eight), vsubq_s8(S8(hi), eight)}, F16(w->d)};
  }
  static S8W Unpack(const BlockQ5_0* w) {
    uint32_t h;
    std::memcpy(&h, w->qh, 4);
    uint8x16_t lo, hi;
    Nibbles16(w->qs, &lo, &hi);
    const int8x16_t sixteen = vdupq_n_s8(16);
    return {{vsubq_s8(S8(vorrq_u8(lo, FifthBit(h))), sixteen), vsubq_s8(S8(vorrq_u8(hi, FifthBit(h >> 16))), sixteen)},
            F16(w->d)};
  }
  // Level indices to signed levels through a 16-entry table.
  static S8W Levels(const int8_t (&table)[16], const uint8_t* qs, float d) {
    uint8x16_t lo, hi;
    Nibbles16(qs, &lo, &hi);
    const int8x16_t lut = vld1q_s8(table);
    return {{vqtbl1q_s8(lut, lo), vqtbl1q_s8(lut, hi)}, d};
  }
  static S8W Unpack(const BlockIQ4_NL* w) { return Levels(kIQ4Levels, w->qs, F16(w->d)); }
  static S8W Unpack(const BlockMXFP4* w) { return Levels(kMXFP4Levels, w->qs, E8M0Half<I>(w->e)); }

  // Q4_1 / Q5_1: q ∈ [0, 31]; lanes Σ q·x, fma(lanes, d·dx, acc), then the offset term m·s (s = dx·Σx
  // from the activation block) into lane 0 by one more fma whose other lanes add 0.
  struct OffsetMW {
    int8x16_t q[2];
    float d, m;
  };
  static OffsetMW Unpack(const BlockQ4_1* w) {
    uint8x16_t lo, hi;
    Nibbles16(w->qs, &lo, &hi);
    return {{S8(lo), S8(hi)}, F16(w->d), F16(w->m)};
  }
  static OffsetMW Unpack(const BlockQ5_1* w) {
    uint32_t h;
    std::memcpy(&h, w->qh, 4);
    uint8x16_t lo, hi;
    Nibbles16(w->qs, &lo, &hi);
    return {{S8(vorrq_u8(lo, FifthBit(h))), S8(vorrq_u8(hi, FifthBit(h >> 16)))}, F16(w->d), F16(w->m)};
  }
  static Acc Dot(Acc acc, const OffsetMW& u, const ActQ8_1* x) {
    acc = Fma(acc, u.d * x->d, Dot32(vdupq_n_s32(0), u.q, x->qs));
    return vfmaq_n_f32(acc, vsetq_lane_f32(x->s, vdupq_n_f32(0.0f), 0), u.m);
  }

  // IQ4_XS: lanes Σ_s (ls_s − 32)·Σ level·x over 8 sub-blocks of 32 (|lane| ≤ 8·32·8·127·127 < 2^25).
  struct IQ4XSW {
    int8x16_t q[8][2];
    int32_t sc[8];  // ls_s − 32
    float d;
  };
  static IQ4XSW Unpack(const BlockIQ4_XS* w) {
    IQ4XSW u;
    for (int s = 0; s < 8; ++s) {
      const S8W l = Levels(kIQ4Levels, w->qs + 16 * s, 0.0f);
      u.q[s][0] = l.q[0];
      u.q[s][1] = l.q[1];
      u.sc[s] = IQ4XSScale<I>(*w, s) - 32;
    }
    u.d = F16(w->d);
    return u;
  }
  static Acc Dot(Acc acc, const IQ4XSW& u, const ActQ8_K* x) {
    int32x4_t sum = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) sum = vmlaq_n_s32(sum, Dot32(vdupq_n_s32(0), u.q[s], x->qs + 32 * s), u.sc[s]);
    return Fma(acc, u.d * x->d, sum);
  }

  // Q4_K / Q5_K: 8 sub-blocks of 32, q ∈ [0, 31]; lanes Σ_s sc_s·Σ q·x (|lane| ≤ 8·63·8·31·127 < 2^24),
  // mins Σ_s m_s·(Σ x of the sub-block) from the activation's bsums, in lanes too.
  struct K45W {
    int8x16_t q[8][2];
    int32_t sc[8];
    int16x8_t mins;  // m_s, against the activation's sub-block sums
    float d, dmin;
  };
  static K45W UnpackK45(uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh) {
    K45W u;
    uint8_t sm[16];
    UnpackKScales<I>(scales, sm);
    for (int s = 0; s < 8; ++s) u.sc[s] = sm[s];
    u.mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
    for (int c = 0; c < 4; ++c) {
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t raw = vld1q_u8(qs + 32 * c + 16 * half);
        uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(raw, 4);
        if (qh != nullptr) {
          const uint8x16_t bits = vld1q_u8(qh + 16 * half);
          lo = vorrq_u8(lo, vandq_u8(vtstq_u8(bits, vdupq_n_u8(1 << (2 * c))), vdupq_n_u8(0x10)));
          hi = vorrq_u8(hi, vandq_u8(vtstq_u8(bits, vdupq_n_u8(1 << (2 * c + 1))), vdupq_n_u8(0x10)));
        }
        u.q[2 * c][half] = S8(lo);
        u.q[2 * c + 1][half] = S8(hi);
      }
    }
    u.d = F16(d);
    u.dmin = F16(dmin);
    return u;
  }
  static K45W Unpack(const BlockQ4_K* w) { return UnpackK45(w->d, w->dmin, w->scales, w->qs, nullptr); }
  static K45W Unpack(const BlockQ5_K* w) { return UnpackK45(w->d, w->dmin, w->scales, w->qs, w->qh); }
  // The eight sub-block sums of 32 activations, from the 16 bsums of 16.
  static int16x8_t SubBlockSums(const ActQ8_K* x) { return vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8)); }
  // Σ_s m_s·a_s in four lanes: lane l holds s = l and s = l + 4.
  static int32x4_t MinsLanes(int16x8_t m, int16x8_t a) {
    return vmlal_s16(vmull_s16(vget_low_s16(m), vget_low_s16(a)), vget_high_s16(m), vget_high_s16(a));
  }
  static Acc Dot(Acc acc, const K45W& u, const ActQ8_K* x) {
    int32x4_t sum = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) sum = vmlaq_n_s32(sum, Dot32(vdupq_n_s32(0), u.q[s], x->qs + 32 * s), u.sc[s]);
    acc = Fma(acc, x->d * u.d, sum);
    return vfmsq_n_f32(acc, vcvtq_f32_s32(MinsLanes(u.mins, SubBlockSums(x))), x->d * u.dmin);
  }

  // Q2_K, Q3_K, Q6_K: 16 groups of 16 consecutive elements, group g scaled by sc_g, signed q (Q2_K
  // [0, 3], Q3_K [−4, 3], Q6_K [−32, 31]); lanes Σ_g sc_g·Σ q·x (|lane| ≤ 16·128·4·32·127 < 2^25).
  struct G16W {
    int8x16_t q[16];
    int32_t sc[16];
    int16x8_t mins[2];  // Q2_K only: m_g, against the activation's bsums
    float d, dmin;
  };
  static int32x4_t GroupSums(const G16W& u, const int8_t* x) {
    int32x4_t sum = vdupq_n_s32(0);
    for (int g = 0; g < 16; ++g) sum = vmlaq_n_s32(sum, I::Dot(vdupq_n_s32(0), u.q[g], Load(x + 16 * g)), u.sc[g]);
    return sum;
  }
  // Elements 128h + 32j + l (l < 32) are bits 2j..2j+1 of byte l of qs[32h..]; Q3_K's third bit is
  // bit 4h + j of hmask[l] (clear: subtract 4).
  static void UnpackTwoBit(const uint8_t* qs, const uint8_t* hmask, G16W* u) {
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int half = 0; half < 2; ++half) {
          const uint8x16_t bits = vld1q_u8(qs + 32 * h + 16 * half);
          int8x16_t q = S8(vandq_u8(vshlq_u8(bits, vdupq_n_s8(static_cast<int8_t>(-2 * j))), vdupq_n_u8(3)));
          if (hmask != nullptr) {
            const uint8x16_t set = vtstq_u8(vld1q_u8(hmask + 16 * half), vdupq_n_u8(static_cast<uint8_t>(1 << (4 * h + j))));
            q = vsubq_s8(q, S8(vbicq_u8(vdupq_n_u8(4), set)));
          }
          u->q[8 * h + 2 * j + half] = q;
        }
  }
  struct Q2KW : G16W {};
  struct Q3KW : G16W {};
  struct Q6KW : G16W {};
  static Q2KW Unpack(const BlockQ2_K* w) {
    Q2KW u;
    UnpackTwoBit(w->qs, nullptr, &u);
    const uint8x16_t sc = vld1q_u8(w->scales);
    const uint8x16_t m = vshrq_n_u8(sc, 4);
    for (int g = 0; g < 16; ++g) u.sc[g] = w->scales[g] & 0xF;
    u.mins[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
    u.mins[1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
    u.d = F16(w->d);
    u.dmin = F16(w->dmin);
    return u;
  }
  static Q3KW Unpack(const BlockQ3_K* w) {
    Q3KW u;
    UnpackTwoBit(w->qs, w->hmask, &u);
    for (int g = 0; g < 16; ++g) u.sc[g] = Q3KScale<I>(w->scales, g) - 32;
    u.d = F16(w->d);
    u.dmin = 0.0f;
    return u;
  }
  // Element 128h + l + 32t (l < 32, t < 4): low 4 bits from ql (t odd: byte l + 32; t ≥ 2: the high
  // nibble), high 2 bits from bits 2t..2t+1 of qh[32h + l]; minus 32.
  static Q6KW Unpack(const BlockQ6_K* w) {
    Q6KW u;
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t ql0 = vld1q_u8(w->ql + 64 * h + 16 * half), ql1 = vld1q_u8(w->ql + 64 * h + 32 + 16 * half);
        const uint8x16_t qh = vld1q_u8(w->qh + 32 * h + 16 * half);
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m6 = vdupq_n_u8(0x30);
        const uint8x16_t q[4] = {vorrq_u8(vandq_u8(ql0, m4), vandq_u8(vshlq_n_u8(qh, 4), m6)),
                                 vorrq_u8(vandq_u8(ql1, m4), vandq_u8(vshlq_n_u8(qh, 2), m6)),
                                 vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, m6)),
                                 vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), m6))};
        for (int t = 0; t < 4; ++t) u.q[8 * h + 2 * t + half] = vsubq_s8(S8(q[t]), vdupq_n_s8(32));
      }
    for (int g = 0; g < 16; ++g) u.sc[g] = w->scales[g];
    u.d = F16(w->d);
    return u;
  }
  static Acc Dot(Acc acc, const Q2KW& u, const ActQ8_K* x) {
    const int32x4_t mins = vaddq_s32(MinsLanes(u.mins[0], vld1q_s16(x->bsums)), MinsLanes(u.mins[1], vld1q_s16(x->bsums + 8)));
    acc = Fma(acc, x->d * u.d, GroupSums(u, x->qs));
    return vfmsq_n_f32(acc, vcvtq_f32_s32(mins), x->d * u.dmin);
  }
  static Acc Dot(Acc acc, const Q3KW& u, const ActQ8_K* x) { return Fma(acc, u.d * x->d, GroupSums(u, x->qs)); }
  static Acc Dot(Acc acc, const Q6KW& u, const ActQ8_K* x) { return Fma(acc, u.d * x->d, GroupSums(u, x->qs)); }

  // ---- The packed layouts (quant_format.h): eight weight rows side by side ----
  // Group j (elements 4j..4j+3 of a 32-element block) of the eight rows is 32 bytes, row c's four at
  // 4c: two registers, rows 0-3 and 4-7. Against a broadcast of the activation's four bytes, I::Dot
  // gives each row's group sum in its own lane; the eight groups add up (exactly) to each row's block
  // sum, which takes one convert and one fma: y_c += float(sum_c)·(d_c·d_x), block by block.
  struct PackedW {
    int8x16_t q[8][2];  // group j, rows 0-3 and 4-7: signed weights
    float32x4_t d[2];    // the eight rows' scales
    float32x4_t m[2];    // Q4_1/Q5_1 only: their offsets
  };
  static void Scales(const uint16_t (&h)[8], float32x4_t (&out)[2]) {
    const float16x8_t v = vreinterpretq_f16_u16(vld1q_u16(h));
    out[0] = vcvt_f32_f16(vget_low_f16(v));
    out[1] = vcvt_high_f32_f16(v);
  }
  static void UnpackPacked(const BlockQ8_0x8& w, PackedW* u) {
    for (int j = 0; j < 8; ++j)
      for (int r = 0; r < 2; ++r) u->q[j][r] = Load(w.qs + 32 * j + 16 * r);
    Scales(w.d, u->d);
  }
  // Groups j < 4 are the low nibbles of the 32 bytes at 32j, groups j + 4 their high nibbles.
  static void NibbleGroups(const uint8_t* qs, const uint32_t* qh, int offset, PackedW* u) {
    for (int j = 0; j < 4; ++j)
      for (int r = 0; r < 2; ++r) {
        const uint8x16_t raw = vld1q_u8(qs + 32 * j + 16 * r);
        uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(raw, 4);
        if (qh != nullptr) {  // group j's bit 4c + e is row c's element e
          lo = vorrq_u8(lo, FifthBit(qh[j] >> (16 * r)));
          hi = vorrq_u8(hi, FifthBit(qh[j + 4] >> (16 * r)));
        }
        u->q[j][r] = vsubq_s8(S8(lo), vdupq_n_s8(static_cast<int8_t>(offset)));
        u->q[j + 4][r] = vsubq_s8(S8(hi), vdupq_n_s8(static_cast<int8_t>(offset)));
      }
  }
  static void UnpackPacked(const BlockQ4_0x8& w, PackedW* u) {
    NibbleGroups(w.qs, nullptr, 8, u);
    Scales(w.d, u->d);
  }
  static void UnpackPacked(const BlockQ5_0x8& w, PackedW* u) {
    NibbleGroups(w.qs, w.qh, 16, u);
    Scales(w.d, u->d);
  }
  static void UnpackPacked(const BlockQ4_1x8& w, PackedW* u) {
    NibbleGroups(w.qs, nullptr, 0, u);
    Scales(w.d, u->d);
    Scales(w.m, u->m);
  }
  static void UnpackPacked(const BlockQ5_1x8& w, PackedW* u) {
    NibbleGroups(w.qs, w.qh, 0, u);
    Scales(w.d, u->d);
    Scales(w.m, u->m);
  }
  static void LevelGroups(const uint8_t* qs, const int8_t (&table)[16], PackedW* u) {
    NibbleGroups(qs, nullptr, 0, u);
    const int8x16_t lut = vld1q_s8(table);
    for (int j = 0; j < 8; ++j)
      for (int r = 0; r < 2; ++r) u->q[j][r] = vqtbl1q_s8(lut, vreinterpretq_u8_s8(u->q[j][r]));
  }
  static void UnpackPacked(const BlockIQ4_NLx8& w, PackedW* u) {
    LevelGroups(w.qs, kIQ4Levels, u);
    Scales(w.d, u->d);
  }
  static void UnpackPacked(const BlockMXFP4x8& w, PackedW* u) {
    LevelGroups(w.qs, kMXFP4Levels, u);
    alignas(16) float d[8];
    for (int c = 0; c < 8; ++c) d[c] = E8M0Half<I>(w.e[c]);
    u->d[0] = vld1q_f32(d);
    u->d[1] = vld1q_f32(d + 4);
  }
  template <class PB>
  static constexpr bool kPackedMin = std::is_same_v<PB, BlockQ4_1x8> || std::is_same_v<PB, BlockQ5_1x8>;
  template <class PB>
  using PackedAct = std::conditional_t<kPackedMin<PB>, ActQ8_1, ActQ8_0>;
  static int8x16_t Broadcast4(const int8_t* x) {
    int32_t v;
    std::memcpy(&v, x, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
  }

  // The eight rows' exact sums over one 32-element group set (q[j][r]: elements 4j..4j+3 of rows
  // 4r..4r+3) against MR activation rows (x(i): row i's 32 bytes), in kParts parts of 32 / kParts
  // elements: sums[i][p][r] lane c is row 4r + c's Σ q·x over part p. Exact, so any way of computing
  // it gives the same integers. With I::Mmla (i8mm) two activation rows at a time: the groups are
  // regrouped into 8 bytes of each of two weight rows (one zip), one SMMLA per 8 elements and row
  // pair, a 2 x 2 block [x_i·w_c, x_i·w_c+1, x_i+1·w_c, x_i+1·w_c+1]. Else (and for an odd last
  // row) I::Dot on a broadcast of four activation bytes.
  template <int MR, int kParts, class RowBytes>
  [[gnu::always_inline]] static void PackedSums(const int8x16_t (&q)[8][2], RowBytes x,
                                                int32x4_t (&sums)[MR][kParts][2]) {
    static_assert(kParts == 1 || kParts == 2);
    int i = 0;
    if constexpr (kMmla && MR >= 2) {
      int8x16_t pair[4][2][2];  // elements 8t..8t+7; rows 4r + 2h and 4r + 2h + 1
      for (int t = 0; t < 4; ++t)
        for (int r = 0; r < 2; ++r) {
          const int32x4_t lo = vreinterpretq_s32_s8(q[2 * t][r]), hi = vreinterpretq_s32_s8(q[2 * t + 1][r]);
          pair[t][r][0] = vreinterpretq_s8_s32(vzip1q_s32(lo, hi));
          pair[t][r][1] = vreinterpretq_s8_s32(vzip2q_s32(lo, hi));
        }
      for (; i + 2 <= MR; i += 2) {
        const int8_t* x0 = x(i);
        const int8_t* x1 = x(i + 1);
        int32x4_t block[kParts][2][2];
        for (int p = 0; p < kParts; ++p)
          for (int r = 0; r < 2; ++r) block[p][r][0] = block[p][r][1] = vdupq_n_s32(0);
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          const int p = t * kParts / 4;
          const int8x16_t a = vcombine_s8(vld1_s8(x0 + 8 * t), vld1_s8(x1 + 8 * t));
          for (int r = 0; r < 2; ++r)
            for (int h = 0; h < 2; ++h) block[p][r][h] = I::Mmla(block[p][r][h], a, pair[t][r][h]);
        }
        for (int p = 0; p < kParts; ++p)
          for (int r = 0; r < 2; ++r) {
            const int64x2_t c01 = vreinterpretq_s64_s32(block[p][r][0]), c23 = vreinterpretq_s64_s32(block[p][r][1]);
            sums[i][p][r] = vreinterpretq_s32_s64(vzip1q_s64(c01, c23));
            sums[i + 1][p][r] = vreinterpretq_s32_s64(vzip2q_s64(c01, c23));
          }
      }
    }
    for (; i < MR; ++i) {
      const int8_t* xi = x(i);
      int32x4_t chain[2][2];  // rows 0-3 / 4-7; two chains (one part) or one per part
      for (int r = 0; r < 2; ++r) chain[r][0] = chain[r][1] = vdupq_n_s32(0);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const int c = kParts == 1 ? j % 2 : j / 4;
        const int8x16_t xj = Broadcast4(xi + 4 * j);
        for (int r = 0; r < 2; ++r) chain[r][c] = I::Dot(chain[r][c], q[j][r], xj);
      }
      for (int r = 0; r < 2; ++r) {
        if constexpr (kParts == 1) {
          sums[i][0][r] = vaddq_s32(chain[r][0], chain[r][1]);
        } else {
          sums[i][0][r] = chain[r][0];
          sums[i][1][r] = chain[r][1];
        }
      }
    }
  }

  template <class PB, int MR, bool kPrefetch>
  static void PackedTile(const PackedAct<PB>* x, size_t n_blocks, const PB* w, float* y, size_t ldy, const PB* w_ahead) {
    float32x4_t acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < n_blocks; ++b) {
      if constexpr (kPrefetch) {  // decode streams W from DRAM: a later group's block, into L2
        for (size_t o = 0; o < sizeof(PB); o += 64) __builtin_prefetch(reinterpret_cast<const char*>(w_ahead + b) + o, 0, 2);
      }
      PackedW u;
      UnpackPacked(w[b], &u);
      int32x4_t sum[MR][1][2];
      PackedSums<MR, 1>(u.q, [&](int i) { return x[i * n_blocks + b].qs; }, sum);
      for (int i = 0; i < MR; ++i) {
        const PackedAct<PB>& xb = x[i * n_blocks + b];
        for (int r = 0; r < 2; ++r) {
          acc[i][r] = vfmaq_f32(acc[i][r], vcvtq_f32_s32(sum[i][0][r]), vmulq_n_f32(u.d[r], xb.d));
          if constexpr (kPackedMin<PB>) acc[i][r] = vfmaq_n_f32(acc[i][r], u.m[r], xb.s);  // + m·s
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      vst1q_f32(y + i * ldy, acc[i][0]);
      vst1q_f32(y + i * ldy + 4, acc[i][1]);
    }
  }
  // Rows in blocks of kRowBlock (their activations stay in L2) x groups of eight columns (a group's
  // weights stay in L1 while the rows pass), in tiles of four rows; one row (decode) prefetches two
  // groups ahead. tile.template operator()<MR, kPrefetch>(row, group, group_ahead, y).
  template <class PB, size_t kRowBlock, class Tile>
  static void ForEachPackedTile(const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t n_begin,
                                size_t n_end, Tile&& tile) {
    constexpr size_t kAheadGroups = 2;
    auto group = [&](size_t n) { return reinterpret_cast<const PB*>(static_cast<const uint8_t*>(w) + n * w_row_bytes); };
    if (m == 1) {
      for (size_t n = n_begin; n < n_end; n += 8)
        tile.template operator()<1, true>(0, group(n), group(std::min(n + 8 * kAheadGroups, n_end - 8)), y + n);
      return;
    }
    for (size_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const size_t i1 = std::min(m, i0 + kRowBlock);
      for (size_t n = n_begin; n < n_end; n += 8) {
        size_t i = i0;
        for (; i + 4 <= i1; i += 4) tile.template operator()<4, false>(i, group(n), nullptr, y + i * ldy + n);
        for (; i < i1; ++i) tile.template operator()<1, false>(i, group(n), nullptr, y + i * ldy + n);
      }
    }
  }
  template <class PB>
  static void MatMulPackedTyped(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m,
                                size_t k, size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQK0;
    const auto* x = static_cast<const PackedAct<PB>*>(xq);
    ForEachPackedTile<PB, 64>(w, w_row_bytes, y, ldy, m, n_begin, n_end,
                              [&]<int MR, bool kPf>(size_t i, const PB* g, const PB* ahead, float* yi) {
                                PackedTile<PB, MR, kPf>(x + i * n_blocks, n_blocks, g, yi, ldy, ahead);
                              });
  }

  // ---- The 256-element types packed eight rows at a time: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS ----
  // Per super-block, SuperBlockSums (one overload per packed type) leaves each column's exact integer
  // sums in sum[i][r] (rows 0-3 / 4-7) and, for the types with mins, mins[i][r], for activation rows
  // i < MR; ApplyKScales then: y_c = fma(float(sum_c), d_c·d_x, y_c), and for Q4_K / Q2_K
  // fms(float(mins_c), dmin_c·d_x, y_c), per super-block.
  static void WidenS16(int16x8_t v, int32x4_t (&out)[2]) {
    out[0] = vmovl_s16(vget_low_s16(v));
    out[1] = vmovl_high_s16(v);
  }
  template <int MR, class PB>
  [[gnu::always_inline]]
  static void ApplyKScales(const PB& wb, const ActQ8_K* xb, size_t stride, const int32x4_t (&sum)[MR][2],
                           const int32x4_t (&mins)[MR][2], float32x4_t (&acc)[MR][2]) {
    float32x4_t d[2];
    Scales(wb.d, d);
    for (int i = 0; i < MR; ++i) {
      const float dx = xb[i * stride].d;
      for (int r = 0; r < 2; ++r) acc[i][r] = vfmaq_f32(acc[i][r], vcvtq_f32_s32(sum[i][r]), vmulq_n_f32(d[r], dx));
      if constexpr (requires { wb.dmin; }) {
        float32x4_t dmin[2];
        Scales(wb.dmin, dmin);
        for (int r = 0; r < 2; ++r) acc[i][r] = vfmsq_f32(acc[i][r], vcvtq_f32_s32(mins[i][r]), vmulq_n_f32(dmin[r], dx));
      }
    }
  }
  // Rows [0, MR) of x (n_blocks apart) against one group of eight columns, written at y.
  template <class PB, int MR, bool kPrefetch>
  static void PackedKTile(const ActQ8_K* x, size_t n_blocks, const PB* w, float* y, size_t ldy, const PB* w_ahead) {
    float32x4_t acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < n_blocks; ++b) {
      if constexpr (kPrefetch) {
        for (size_t o = 0; o < sizeof(PB); o += 64) __builtin_prefetch(reinterpret_cast<const char*>(w_ahead + b) + o, 0, 2);
      }
      int32x4_t sum[MR][2], mins[MR][2];
      for (int i = 0; i < MR; ++i) sum[i][0] = sum[i][1] = mins[i][0] = mins[i][1] = vdupq_n_s32(0);
      SuperBlockSums<MR>(w[b], x + b, n_blocks, sum, mins);
      ApplyKScales<MR>(w[b], x + b, n_blocks, sum, mins, acc);
    }
    for (int i = 0; i < MR; ++i) {
      vst1q_f32(y + i * ldy, acc[i][0]);
      vst1q_f32(y + i * ldy + 4, acc[i][1]);
    }
  }
  template <class PB>
  static void MatMulPackedK(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                            size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQKK;
    const auto* x = static_cast<const ActQ8_K*>(xq);
    ForEachPackedTile<PB, 32>(w, w_row_bytes, y, ldy, m, n_begin, n_end,
                              [&]<int MR, bool kPf>(size_t i, const PB* g, const PB* ahead, float* yi) {
                                PackedKTile<PB, MR, kPf>(x + i * n_blocks, n_blocks, g, yi, ldy, ahead);
                              });
  }

  // Q4_K / Q5_K: per sub-block s the eight groups' sums (exact) times each row's scale, summed over
  // the super-block; the mins term Σ_s m_s·Σx likewise. Q5_K's fifth bit is bit s of its qh byte.
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ4_Kx8> || std::is_same_v<PB, BlockQ5_Kx8>
  [[gnu::always_inline]]
  static void SuperBlockSums(const PB& wb, const ActQ8_K* x, size_t stride, int32x4_t (&sum)[MR][2],
                             int32x4_t (&mins)[MR][2]) {
    for (int s = 0; s < 8; ++s) {  // sub-block s: chunk s / 2, low nibbles for even s
      const int ch = s / 2;
      int8x16_t q[8][2];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        for (int r = 0; r < 2; ++r) {
          const uint8x16_t raw = vld1q_u8(wb.qs[ch][j] + 16 * r);
          uint8x16_t u = s % 2 == 0 ? vandq_u8(raw, vdupq_n_u8(0x0F)) : vshrq_n_u8(raw, 4);
          if constexpr (requires { wb.qh; }) {
            const uint8x16_t set = vtstq_u8(vld1q_u8(wb.qh[j] + 16 * r), vdupq_n_u8(static_cast<uint8_t>(1 << s)));
            u = vorrq_u8(u, vandq_u8(set, vdupq_n_u8(0x10)));
          }
          q[j][r] = S8(u);
        }
      const uint16x8_t sc16 = vmovl_u8(vld1_u8(wb.sc[s])), m16 = vmovl_u8(vld1_u8(wb.m[s]));
      const int32x4_t sc[2] = {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc16))),
                               vreinterpretq_s32_u32(vmovl_high_u16(sc16))};
      const int32x4_t mc[2] = {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(m16))),
                               vreinterpretq_s32_u32(vmovl_high_u16(m16))};
      int32x4_t c[MR][1][2];  // q ∈ [0, 15]: exact
      PackedSums<MR, 1>(q, [&](int i) { return x[i * stride].qs + 32 * s; }, c);
      for (int i = 0; i < MR; ++i) {
        const ActQ8_K& xb = x[i * stride];
        const int32_t bsum = xb.bsums[2 * s] + xb.bsums[2 * s + 1];
        for (int r = 0; r < 2; ++r) {
          sum[i][r] = vmlaq_s32(sum[i][r], c[i][0][r], sc[r]);
          mins[i][r] = vmlaq_n_s32(mins[i][r], mc[r], bsum);
        }
      }
    }
  }

  // IQ4_XS: per sub-block the eight groups' sums on the table levels (|level|, |x| ≤ 127: exact) times
  // each row's ls − 32, summed over the super-block (|sum| < 2^27). Group j < 4 is the low nibbles of
  // qs[s][j] (elements 4j..), j ≥ 4 the high nibbles of qs[s][j − 4] (elements 16 + 4(j − 4) = 4j..).
  template <int MR>
  [[gnu::always_inline]]
  static void SuperBlockSums(const BlockIQ4_XSx8& wb, const ActQ8_K* x, size_t stride, int32x4_t (&sum)[MR][2],
                             int32x4_t (&)[MR][2]) {
    const int8x16_t lut = vld1q_s8(kIQ4Levels);
    for (int s = 0; s < 8; ++s) {
      int8x16_t q[8][2];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g)
        for (int r = 0; r < 2; ++r) {
          const uint8x16_t raw = vld1q_u8(wb.qs[s][g] + 16 * r);
          q[g][r] = vqtbl1q_s8(lut, vandq_u8(raw, vdupq_n_u8(0x0F)));
          q[g + 4][r] = vqtbl1q_s8(lut, vshrq_n_u8(raw, 4));
        }
      int32x4_t sc[2];
      WidenS16(vmovl_s8(vld1_s8(wb.sc[s])), sc);
      int32x4_t c[MR][1][2];
      PackedSums<MR, 1>(q, [&](int i) { return x[i * stride].qs + 32 * s; }, c);
      for (int i = 0; i < MR; ++i)
        for (int r = 0; r < 2; ++r) sum[i][r] = vmlaq_s32(sum[i][r], c[i][0][r], sc[r]);
    }
  }

  // Q2_K / Q3_K / Q6_K: quarter t = 4h + j of the super-block is elements 32t.., in 4-byte groups g
  // (g < 4: group of 16 number 2t, else 2t + 1): for Q2_K bits 2j..2j+1 of the bytes qs[h][g]. Per
  // group the four 4-byte sums (exact) times each row's group scale (sc0, sc1), summed over the
  // super-block; for Q2_K the mins term Σ_g m_g·bsum_g (m0, m1) likewise.
  template <int MR, bool kMins>
  [[gnu::always_inline]]
  static void QuarterSums(const int8x16_t (&q)[8][2], const int32x4_t (&sc0)[2], const int32x4_t (&sc1)[2],
                          const int32x4_t (&m0)[2], const int32x4_t (&m1)[2], const ActQ8_K* x, size_t stride, int t,
                          int32x4_t (&sum)[MR][2], int32x4_t (&mins)[MR][2]) {
    int32x4_t c[MR][2][2];  // the quarter's two groups of 16; |q| ≤ 32, |x| ≤ 127: exact
    PackedSums<MR, 2>(q, [&](int i) { return x[i * stride].qs + 32 * t; }, c);
    for (int i = 0; i < MR; ++i) {
      const ActQ8_K& xb = x[i * stride];
      for (int r = 0; r < 2; ++r) {
        sum[i][r] = vmlaq_s32(vmlaq_s32(sum[i][r], c[i][0][r], sc0[r]), c[i][1][r], sc1[r]);
        if constexpr (kMins)
          mins[i][r] = vmlaq_n_s32(vmlaq_n_s32(mins[i][r], m0[r], xb.bsums[2 * t]), m1[r], xb.bsums[2 * t + 1]);
      }
    }
  }
  static uint8x16_t TwoBits(const uint8_t* qs, int j) {
    return vandq_u8(vshlq_u8(vld1q_u8(qs), vdupq_n_s8(static_cast<int8_t>(-2 * j))), vdupq_n_u8(3));
  }
  // Q2_K: q ∈ [0, 3], 4-bit scale and min per group (|sum| < 2^21).
  template <int MR>
  [[gnu::always_inline]]
  static void SuperBlockSums(const BlockQ2_Kx8& wb, const ActQ8_K* x, size_t stride, int32x4_t (&sum)[MR][2],
                             int32x4_t (&mins)[MR][2]) {
    for (int t = 0; t < 8; ++t) {
      const int h = t / 4, j = t % 4;
      int8x16_t q[8][2];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g)
        for (int r = 0; r < 2; ++r) q[g][r] = S8(TwoBits(wb.qs[h][g] + 16 * r, j));
      const uint8x8_t s0 = vld1_u8(wb.scales[2 * t]), s1 = vld1_u8(wb.scales[2 * t + 1]);
      int32x4_t sc0[2], sc1[2], m0[2], m1[2];
      WidenS16(vreinterpretq_s16_u16(vmovl_u8(vand_u8(s0, vdup_n_u8(0x0F)))), sc0);
      WidenS16(vreinterpretq_s16_u16(vmovl_u8(vand_u8(s1, vdup_n_u8(0x0F)))), sc1);
      WidenS16(vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(s0, 4))), m0);
      WidenS16(vreinterpretq_s16_u16(vmovl_u8(vshr_n_u8(s1, 4))), m1);
      QuarterSums<MR, true>(q, sc0, sc1, m0, m1, x, stride, t, sum, mins);
    }
  }
  // Q3_K / Q6_K: signed quants with signed group scales, no mins: Q3_K's q = low two bits − 4 where
  // bit t of the hmask byte is clear, ∈ [−4, 3], scale sc − 32 (|sum| < 2^23); Q6_K's q = its six
  // bits − 32 ∈ [−32, 31] (|sum| < 2^29).
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ3_Kx8> || std::is_same_v<PB, BlockQ6_Kx8>
  [[gnu::always_inline]]
  static void SuperBlockSums(const PB& wb, const ActQ8_K* x, size_t stride, int32x4_t (&sum)[MR][2],
                             int32x4_t (&mins)[MR][2]) {
    for (int t = 0; t < 8; ++t) {
      int8x16_t q[8][2];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g)
        for (int r = 0; r < 2; ++r) q[g][r] = QuarterQuants(wb, t, g, r);
      int32x4_t sc0[2], sc1[2];
      WidenS16(vmovl_s8(vld1_s8(wb.sc[2 * t])), sc0);
      WidenS16(vmovl_s8(vld1_s8(wb.sc[2 * t + 1])), sc1);
      QuarterSums<MR, false>(q, sc0, sc1, sc0, sc1, x, stride, t, sum, mins);
    }
  }
  // Quarter t's 4-byte group g of rows 4r..4r+3, signed.
  static int8x16_t QuarterQuants(const BlockQ3_Kx8& wb, int t, int g, int r) {
    const uint8x16_t set = vtstq_u8(vld1q_u8(wb.hmask[g] + 16 * r), vdupq_n_u8(static_cast<uint8_t>(1 << t)));
    return vsubq_s8(S8(TwoBits(wb.qs[t / 4][g] + 16 * r, t % 4)), S8(vbicq_u8(vdupq_n_u8(4), set)));
  }
  // Q6_K: nibble j / 2 of ql[h][j % 2], with bits 2j..2j+1 of qh[h] above it.
  static int8x16_t QuarterQuants(const BlockQ6_Kx8& wb, int t, int g, int r) {
    const int h = t / 4, j = t % 4;
    const uint8x16_t ql = vld1q_u8(wb.ql[h][j % 2][g] + 16 * r), qh = vld1q_u8(wb.qh[h][g] + 16 * r);
    const uint8x16_t low = j < 2 ? vandq_u8(ql, vdupq_n_u8(0x0F)) : vshrq_n_u8(ql, 4);
    const uint8x16_t high = vandq_u8(vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(4 - 2 * j))), vdupq_n_u8(0x30));
    return vsubq_s8(S8(vorrq_u8(low, high)), vdupq_n_s8(32));
  }

  static void MatMulPacked(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                           size_t m, size_t k, size_t n_begin, size_t n_end) {
    switch (wtype) {
      case QuantType::kQ4_K: return MatMulPackedK<BlockQ4_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_K: return MatMulPackedK<BlockQ5_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ6_K: return MatMulPackedK<BlockQ6_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_XS: return MatMulPackedK<BlockIQ4_XSx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ2_K: return MatMulPackedK<BlockQ2_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ3_K: return MatMulPackedK<BlockQ3_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_0: return MatMulPackedTyped<BlockQ4_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_0: return MatMulPackedTyped<BlockQ5_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_1: return MatMulPackedTyped<BlockQ4_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_1: return MatMulPackedTyped<BlockQ5_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_NL:
        return MatMulPackedTyped<BlockIQ4_NLx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kMXFP4: return MatMulPackedTyped<BlockMXFP4x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      default: return MatMulPackedTyped<BlockQ8_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    }
  }
};

}  // namespace fak::kernels::simd

#endif  // FAK_KERNELS_SIMD_QUANT_NEON_H_
