// x86 block steps for the quantized matmul (quant_impl.h's Q policy), shared by the AVX2 and
// AVX-512 tiers. Include only from kernels/arch/avx2.cc and avx512.cc: it uses intrinsics, and
// every function is a member of a template on the tier's integer policy I (defined in that TU's
// anonymous namespace), so nothing here has external linkage.
//
// I supplies the int8 dot products, which is where the tiers differ:
//   I::DotU8S8(acc, u, s)            acc + Σ_{4 bytes of lane} u·s (u8 × s8 → i32 lanes)
//   I::DotU8S8Scaled(acc, u, s, c)   acc + Σ_{pairs of lane} c16 · (u·s + u·s) (c: i16 lanes)
//   I::BitMaskBytes(bits)            byte e = 0xFF where bit e of bits is set, else 0
// AVX-512 does these with VNNI (vpdpbusd / vpdpwssd on ymm via AVX512VL) and mask registers; AVX2
// and avx512_skx (no VNNI) with vpmaddubsw + vpmaddwd. All produce the same integer lanes (lane l
// covers bytes 4l..4l+3).
//
// Float order per output: Acc is 8 float lanes. Each block adds fma(scale, float(lanes), acc) —
// one fma per block (K-quants with mins: a second, fnmadd, for the mins term) — and Reduce sums the
// 8 lanes in one fixed tree. Integer lanes are exact (bounds noted at each step).
#ifndef FAK_KERNELS_SIMD_QUANT_X86_H_
#define FAK_KERNELS_SIMD_QUANT_X86_H_

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/quant_format.h"
#include "kernels/simd/quant_impl.h"

namespace fak::kernels::simd {

template <class I>
struct X86QuantOps {
  using Acc = __m256;
  static Acc Zero() { return _mm256_setzero_ps(); }
  // ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)), always.
  static float Reduce(Acc v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float F16(uint16_t h) { return _cvtsh_ss(h); }

  static Acc Fma(Acc acc, float scale, __m256i lanes) {
    return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(lanes), acc);
  }
  static __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static __m256i Mask(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

  // 16 bytes of nibbles to 32 bytes: the low nibbles, then the high ones (the Q4_0/Q5_0 order).
  static __m256i Nibbles16(const uint8_t* p) {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(both, Mask(0x0F));
  }

  // Each weight block is unpacked once (Unpack) and can then serve several activation rows, and each
  // activation block prepared once (Prep) for several weight rows; Step(acc, w, x) is
  // Dot(acc, Unpack(w), Prep(w, x)), so a row tile and a single row give the same bits.
  template <class WB>
  static Acc Step(Acc acc, const WB* w, const typename ActOf<WB>::type* x) {
    return Dot(acc, Unpack(w), Prep(w, x));
  }
  // Most activation blocks are used as they are; the first argument only selects the overload.
  template <class WB, class XB>
  static const XB* Prep(const WB*, const XB* x) { return x; }

  struct Q8_0W {
    __m256i abs, q;
    float d;
  };
  static Q8_0W Unpack(const BlockQ8_0* w) {
    __m256i q = Load(w->qs);
    return {_mm256_abs_epi8(q), q, F16(w->d)};
  }
  static Acc Dot(Acc acc, const Q8_0W& u, const ActQ8_0* x) {
    // |w|·sign(x, w) = w·x; |−128| reads as 128 unsigned; 2·128·127 fits AVX2's i16 pair sums.
    __m256i lanes = I::DotU8S8(_mm256_setzero_si256(), u.abs, _mm256_sign_epi8(Load(x->qs), u.q));
    return Fma(acc, u.d * x->d, lanes);
  }

  template <int kOffset>  // Q4_0 (8) and Q5_0 (16): unsigned quants q, weight (q − offset)·d
  struct OffsetW {
    __m256i q;
    float d;
  };
  static OffsetW<8> Unpack(const BlockQ4_0* w) { return {Nibbles16(w->qs), F16(w->d)}; }
  static OffsetW<16> Unpack(const BlockQ5_0* w) {
    uint32_t h;
    std::memcpy(&h, w->qh, 4);
    return {_mm256_or_si256(Nibbles16(w->qs), _mm256_and_si256(I::BitMaskBytes(h), Mask(0x10))), F16(w->d)};
  }
  // An ActQ8_0 block prepared for Q4_0/Q5_0 weights: its quants, and per lane −offset · Σ of the
  // lane's 4 activations, which does not depend on the weights and so is computed once per row.
  template <int kOffset>
  struct OffsetX {
    __m256i q, neg_offset_sums;
    float d;
  };
  template <int kOffset>
  static OffsetX<kOffset> PrepOffset(const ActQ8_0* x) {
    const __m256i q = Load(x->qs), zero = _mm256_setzero_si256();
    return {q, _mm256_sub_epi32(zero, I::DotU8S8(zero, Mask(kOffset), q)), x->d};
  }
  static OffsetX<8> Prep(const BlockQ4_0*, const ActQ8_0* x) { return PrepOffset<8>(x); }
  static OffsetX<16> Prep(const BlockQ5_0*, const ActQ8_0* x) { return PrepOffset<16>(x); }
  // Σ (q − off)·x per lane as −off·Σx + Σ q·x (q ∈ [0, 31], |x| ≤ 127: exact in any order).
  template <int kOffset>
  static Acc Dot(Acc acc, const OffsetW<kOffset>& u, const OffsetX<kOffset>& x) {
    return Fma(acc, u.d * x.d, I::DotU8S8(x.neg_offset_sums, u.q, x.q));
  }

  // Q4_1 / Q5_1: unsigned quants q ∈ [0, 31]; lanes Σ q·x, then fma(d·dx, lanes, acc), and the
  // offset term m·s (s = dx·Σx, from the activation block) added to lane 0 by one more fma whose
  // other lanes add 0.
  struct OffsetMW {
    __m256i q;
    float d, m;
  };
  static OffsetMW Unpack(const BlockQ4_1* w) { return {Nibbles16(w->qs), F16(w->d), F16(w->m)}; }
  static OffsetMW Unpack(const BlockQ5_1* w) {
    uint32_t h;
    std::memcpy(&h, w->qh, 4);
    return {_mm256_or_si256(Nibbles16(w->qs), _mm256_and_si256(I::BitMaskBytes(h), Mask(0x10))), F16(w->d), F16(w->m)};
  }
  static Acc Dot(Acc acc, const OffsetMW& u, const ActQ8_1* x) {
    acc = Fma(acc, u.d * x->d, I::DotU8S8(_mm256_setzero_si256(), u.q, Load(x->qs)));
    return _mm256_fmadd_ps(_mm256_set1_ps(u.m), _mm256_zextps128_ps256(_mm_set_ss(x->s)), acc);
  }

  // 16 bytes of nibbles through a 16-entry table of signed levels (IQ4_NL, IQ4_XS, MXFP4), in the
  // Q4_0 order.
  static __m256i Levels(const int8_t (&table)[16], const uint8_t* qs) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
    return _mm256_shuffle_epi8(lut, Nibbles16(qs));
  }
  // IQ4_NL and MXFP4 levels are signed bytes (|level| ≤ 127): Q8_0's block step, sign trick included.
  static Q8_0W Unpack(const BlockIQ4_NL* w) {
    const __m256i q = Levels(kIQ4Levels, w->qs);
    return {_mm256_abs_epi8(q), q, F16(w->d)};
  }
  static Q8_0W Unpack(const BlockMXFP4* w) {
    const __m256i q = Levels(kMXFP4Levels, w->qs);
    return {_mm256_abs_epi8(q), q, E8M0Half<I>(w->e)};
  }

  // IQ4_XS: lanes Σ_s (ls_s − 32)·level·x with the sign trick per sub-block (a vpmaddubsw pair is at
  // most 2·127·127 < 2^15; |lane| ≤ 8·2·32·32258 < 2^25).
  struct IQ4XSW {
    __m256i abs[8], q[8];  // sub-block s's levels and their magnitudes
    __m256i sc[8];         // ls_s − 32 in every i16 lane
    float d;
  };
  static IQ4XSW Unpack(const BlockIQ4_XS* w) {
    IQ4XSW u;
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      u.q[s] = Levels(kIQ4Levels, w->qs + 16 * s);
      u.abs[s] = _mm256_abs_epi8(u.q[s]);
      u.sc[s] = _mm256_set1_epi16(static_cast<int16_t>(IQ4XSScale<I>(*w, s) - 32));
    }
    u.d = F16(w->d);
    return u;
  }
  static Acc Dot(Acc acc, const IQ4XSW& u, const ActQ8_K* x) {
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int s = 0; s < 8; s += 2) {
      even = I::DotU8S8Scaled(even, u.abs[s], _mm256_sign_epi8(Load(x->qs + 32 * s), u.q[s]), u.sc[s]);
      odd = I::DotU8S8Scaled(odd, u.abs[s + 1], _mm256_sign_epi8(Load(x->qs + 32 * (s + 1)), u.q[s + 1]), u.sc[s + 1]);
    }
    return Fma(acc, u.d * x->d, _mm256_add_epi32(even, odd));
  }

  // i16 lane pattern that broadcasts i16 element k of each 128-bit half (for vpshufb).
  static __m256i PickI16(int k_lo, int k_hi) {
    __m128i lo = _mm_set1_epi16(static_cast<short>(((2 * k_lo + 1) << 8) | (2 * k_lo)));
    __m128i hi = _mm_set1_epi16(static_cast<short>(((2 * k_hi + 1) << 8) | (2 * k_hi)));
    return _mm256_set_m128i(hi, lo);
  }

  // UnpackKScales (quant_impl.h) in one xmm: the 8 scales, then the 8 mins, as bytes. Reads 16
  // bytes at `packed` (its 12 and the 4 after them, which every K-quant block has).
  static __m128i KScaleBytes(const uint8_t* packed) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));  // words u0, u1, u2
    const __m128i low6 = _mm_and_si128(v, _mm_set1_epi8(0x3f));                   // scales 0-3, mins 0-3
    const __m128i top2 = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));  // bits 6-7 of u0, u1 at 4-5
    const __m128i u2 = _mm_shuffle_epi32(v, 0xaa);
    const __m128i nibbles = _mm_unpacklo_epi32(_mm_and_si128(u2, _mm_set1_epi8(0x0f)),
                                               _mm_and_si128(_mm_srli_epi32(u2, 4), _mm_set1_epi8(0x0f)));
    // [u0 & low6, low nibbles of u2 | top2(u0), u1 & low6, high nibbles of u2 | top2(u1)]
    return _mm_unpacklo_epi32(low6, _mm_or_si128(nibbles, top2));
  }

  // Σ_s sc[s]·(q[s]·x_s) per lane over a K-quant block's 8 groups of 32 activations. Integer sums are
  // exact in any order, so the even and odd groups run as two chains (half the dependent latency).
  static __m256i ScaledSubBlockSums(const __m256i (&q)[8], const __m256i (&sc)[8], const int8_t* xq) {
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int s = 0; s < 8; s += 2) {
      even = I::DotU8S8Scaled(even, q[s], Load(xq + 32 * s), sc[s]);
      odd = I::DotU8S8Scaled(odd, q[s + 1], Load(xq + 32 * (s + 1)), sc[s + 1]);
    }
    return _mm256_add_epi32(even, odd);
  }

  // Q4_K / Q5_K: lanes Σ_s sc_s·q·x (|lane| ≤ 8·2·2·31·127·63 < 2^23), mins Σ_s m_s·(bsums pair).
  struct K45W {
    __m256i q[8];   // sub-block s's quants (low or high nibbles of a 32-byte group, + the fifth bit)
    __m256i sc[8];  // sub-block s's scale in every i16 lane
    __m256i mins;   // m_s as i16 pairs, against the activation's bsums
    float d, dmin;
  };
  static K45W UnpackK45(uint16_t d, uint16_t dmin, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh) {
    K45W u;
    const __m128i sm = KScaleBytes(scales);
    __m128i s16 = _mm_cvtepu8_epi16(sm);
    __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
    u.mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    __m256i sc = _mm256_broadcastsi128_si256(s16);
    __m256i hbits = qh != nullptr ? Load(qh) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256i raw = Load(qs + 32 * c);
      __m256i lo = _mm256_and_si256(raw, Mask(0x0F));
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), Mask(0x0F));
      if (qh != nullptr) {
        __m256i b_lo = Mask(1 << (2 * c)), b_hi = Mask(1 << (2 * c + 1));
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b_lo), b_lo), Mask(0x10)));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b_hi), b_hi), Mask(0x10)));
      }
      u.q[2 * c] = lo;
      u.q[2 * c + 1] = hi;
      u.sc[2 * c] = _mm256_shuffle_epi8(sc, PickI16(2 * c, 2 * c));
      u.sc[2 * c + 1] = _mm256_shuffle_epi8(sc, PickI16(2 * c + 1, 2 * c + 1));
    }
    u.d = F16(d);
    u.dmin = F16(dmin);
    return u;
  }
  static K45W Unpack(const BlockQ4_K* w) { return UnpackK45(w->d, w->dmin, w->scales, w->qs, nullptr); }
  static K45W Unpack(const BlockQ5_K* w) { return UnpackK45(w->d, w->dmin, w->scales, w->qs, w->qh); }
  static Acc Dot(Acc acc, const K45W& u, const ActQ8_K* x) {
    __m256i mins = _mm256_madd_epi16(Load(x->bsums), u.mins);
    acc = Fma(acc, x->d * u.d, ScaledSubBlockSums(u.q, u.sc, x->qs));
    return _mm256_fnmadd_ps(_mm256_set1_ps(x->d * u.dmin), _mm256_cvtepi32_ps(mins), acc);
  }

  // ---- The 32-element types packed eight rows at a time (quant_format.h): kernels revision 3 ----
  // Lanes are the eight weight rows (output columns). For each block and activation row, the eight
  // 4-byte groups' integer dot products (each against a broadcast of four activation bytes) add up,
  // exactly and in four chains, to every column's block sum — for Q4_0/Q5_0 minus offset·Σx, the
  // same for all columns — which then takes one convert and one fma:
  // y_c += (d_c·d_x) · float(Σ_e (w_ce − offset)·x_e), block by block. So a block costs eight integer
  // steps and three float ops for eight outputs, where the lane-over-K order above pays a convert,
  // a scale product and an fma for each output.
  struct PackedW {
    __m256i q[8];  // group j of the eight rows: Q8_0 quants or IQ4_NL/MXFP4 levels (signed), the
                   // others' quants in [0, 31]
    __m256i a[8];  // the signed types only: |q|, for the sign trick of their block step
    __m256 d;      // the eight rows' scales
    __m256 m;      // Q4_1/Q5_1 only: the eight rows' offsets
  };
  static __m256 Scales(const uint16_t (&d)[8]) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d))); }
  static __m256 Scales(const uint8_t (&e)[8]) {  // MXFP4's E8M0 exponents, halved (E8M0Half)
    return _mm256_setr_ps(E8M0Half<I>(e[0]), E8M0Half<I>(e[1]), E8M0Half<I>(e[2]), E8M0Half<I>(e[3]), E8M0Half<I>(e[4]),
                          E8M0Half<I>(e[5]), E8M0Half<I>(e[6]), E8M0Half<I>(e[7]));
  }
  static void UnpackPacked(const BlockQ8_0x8& w, PackedW* u) {
    for (int j = 0; j < 8; ++j) {
      u->q[j] = Load(w.qs + 32 * j);
      u->a[j] = _mm256_abs_epi8(u->q[j]);
    }
    u->d = Scales(w.d);
  }
  static void UnpackNibbleGroups(const uint8_t* qs, PackedW* u) {
    for (int j = 0; j < 4; ++j) {
      const __m256i raw = Load(qs + 32 * j);
      u->q[j] = _mm256_and_si256(raw, Mask(0x0F));
      u->q[j + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), Mask(0x0F));
    }
  }
  static void UnpackPacked(const BlockQ4_0x8& w, PackedW* u) {
    UnpackNibbleGroups(w.qs, u);
    u->d = Scales(w.d);
  }
  static void FifthBits(const uint32_t (&qh)[8], PackedW* u) {
    for (int j = 0; j < 8; ++j) u->q[j] = _mm256_or_si256(u->q[j], _mm256_and_si256(I::BitMaskBytes(qh[j]), Mask(0x10)));
  }
  static void UnpackPacked(const BlockQ5_0x8& w, PackedW* u) {
    UnpackNibbleGroups(w.qs, u);
    FifthBits(w.qh, u);
    u->d = Scales(w.d);
  }
  static void UnpackPacked(const BlockQ4_1x8& w, PackedW* u) {
    UnpackNibbleGroups(w.qs, u);
    u->d = Scales(w.d);
    u->m = Scales(w.m);
  }
  static void UnpackPacked(const BlockQ5_1x8& w, PackedW* u) {
    UnpackNibbleGroups(w.qs, u);
    FifthBits(w.qh, u);
    u->d = Scales(w.d);
    u->m = Scales(w.m);
  }
  // Level indices to signed levels through the 16-entry table.
  static void LevelGroups(const uint8_t* qs, const int8_t (&table)[16], PackedW* u) {
    UnpackNibbleGroups(qs, u);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
    for (int j = 0; j < 8; ++j) {
      u->q[j] = _mm256_shuffle_epi8(lut, u->q[j]);
      u->a[j] = _mm256_abs_epi8(u->q[j]);
    }
  }
  static void UnpackPacked(const BlockIQ4_NLx8& w, PackedW* u) {
    LevelGroups(w.qs, kIQ4Levels, u);
    u->d = Scales(w.d);
  }
  static void UnpackPacked(const BlockMXFP4x8& w, PackedW* u) {
    LevelGroups(w.qs, kMXFP4Levels, u);
    u->d = Scales(w.e);
  }
  // Per packed type: the offset subtracted from unsigned quants (Q4_0, Q5_0), whether the quants
  // are signed (sign trick), whether rows carry an offset m (Q4_1, Q5_1: ActQ8_1 activations).
  template <class PB>
  static constexpr int kPackedOffset = std::is_same_v<PB, BlockQ4_0x8> ? 8 : std::is_same_v<PB, BlockQ5_0x8> ? 16 : 0;
  template <class PB>
  static constexpr bool kPackedSigned = std::is_same_v<PB, BlockQ8_0x8> || std::is_same_v<PB, BlockIQ4_NLx8> ||
                                        std::is_same_v<PB, BlockMXFP4x8>;
  template <class PB>
  static constexpr bool kPackedMin = std::is_same_v<PB, BlockQ4_1x8> || std::is_same_v<PB, BlockQ5_1x8>;
  template <class PB>
  using PackedAct = std::conditional_t<kPackedMin<PB>, ActQ8_1, ActQ8_0>;
  // Group j's dot product against four activation bytes in every lane.
  template <class PB>
  static __m256i PackedGroupDot(__m256i acc, const PackedW& u, int j, __m256i x4) {
    if constexpr (kPackedSigned<PB>) return I::DotU8S8(acc, u.a[j], _mm256_sign_epi8(x4, u.q[j]));  // as Q8_0's step
    return I::DotU8S8(acc, u.q[j], x4);  // q ∈ [0, 31], |x| ≤ 127: exact
  }

  // neg_off[i·n_blocks + b]: −offset·Σx of activation row i's block b (null for Q8_0).
  template <class PB, int MR, bool kPrefetch>
  static void PackedTile(const PackedAct<PB>* x, const int32_t* neg_off, size_t n_blocks, const PB* w, float* y,
                         size_t ldy) {
    __m256 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b) {
      if constexpr (kPrefetch) RequestBlock(w + b);
      PackedW u;
      UnpackPacked(w[b], &u);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const PackedAct<PB>& xb = x[i * n_blocks + b];
        __m256i sums[4];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          int32_t xj;
          std::memcpy(&xj, xb.qs + 4 * j, 4);
          const __m256i start = j < 4 ? _mm256_setzero_si256() : sums[j % 4];
          sums[j % 4] = PackedGroupDot<PB>(start, u, j, _mm256_set1_epi32(xj));
        }
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(sums[0], sums[1]), _mm256_add_epi32(sums[2], sums[3]));
        if constexpr (kPackedOffset<PB> != 0) sum = _mm256_add_epi32(sum, _mm256_set1_epi32(neg_off[i * n_blocks + b]));
        acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(u.d, _mm256_set1_ps(xb.d)), _mm256_cvtepi32_ps(sum), acc[i]);
        if constexpr (kPackedMin<PB>) acc[i] = _mm256_fmadd_ps(u.m, _mm256_set1_ps(xb.s), acc[i]);  // + m·s
      }
    }
    for (int i = 0; i < MR; ++i) _mm256_storeu_ps(y + i * ldy, acc[i]);
  }
  // Decode streams W from DRAM: each packed block's lines are all requested (into L2) before the
  // block is read, so their misses overlap instead of queueing one by one behind the loads. A
  // group's blocks are contiguous and the hardware prefetcher runs on along them by itself; on Zen 4,
  // prefetching two groups further (18-87 KiB) instead streamed 10-40% slower (one-row Q4_K over
  // 230-390 MB of weights, interleaved runs).
  template <class PB>
  static void RequestBlock(const PB* block) {
    for (size_t o = 0; o < sizeof(PB); o += 64) __builtin_prefetch(reinterpret_cast<const char*>(block) + o, 0, 2);
  }
  // The 256-element types' one-row tiles also request the lines kKRowAhead bytes further on: their
  // blocks take longer to compute than the 32-element types', and the hardware prefetcher alone let
  // a one-row pass over the Llama 3.2 1B shape's packed Q4_K/Q5_K/Q6_K matrices stream at 55-80% of
  // the plain Q6_K strip's rate on this Zen 4 (12 KiB ahead: Q4_K 1.4x, Q5_K 1.6-1.7x, Q6_K 0.9-1.0x
  // the plain strip; 16 and 20 KiB were slower for Q4_K, 24 KiB for Q5_K).
  static constexpr size_t kKRowAhead = 12 << 10;
  template <class PB>
  static void RequestBlockAndAhead(const PB* block) {
    RequestBlock(block);
    const char* ahead = reinterpret_cast<const char*>(block) + kKRowAhead;
    for (size_t o = 0; o < sizeof(PB); o += 64) __builtin_prefetch(ahead + o, 0, 2);
  }
  // Rows in blocks of kRowBlock (their activations stay in L2) x groups of eight columns (a group's
  // weights stay in L1 while the rows pass), in tiles of four rows; one row (decode) requests its
  // blocks (RequestBlock). tile.template operator()<MR, kPrefetch>(row, group, y) runs rows
  // [row, row + MR) against one group, writing at y.
  template <class PB, size_t kRowBlock, class Tile>
  static void ForEachPackedTile(const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t n_begin,
                                size_t n_end, Tile&& tile) {
    auto group = [&](size_t n) { return reinterpret_cast<const PB*>(static_cast<const uint8_t*>(w) + n * w_row_bytes); };
    if (m == 1) {
      for (size_t n = n_begin; n < n_end; n += 8) tile.template operator()<1, true>(0, group(n), y + n);
      return;
    }
    for (size_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const size_t i1 = std::min(m, i0 + kRowBlock);
      for (size_t n = n_begin; n < n_end; n += 8) {
        size_t i = i0;
        for (; i + 4 <= i1; i += 4) tile.template operator()<4, false>(i, group(n), y + i * ldy + n);
        for (; i < i1; ++i) tile.template operator()<1, false>(i, group(n), y + i * ldy + n);
      }
    }
  }
  // −offset·Σx of each of the n activation blocks; empty for offset 0.
  template <class Act>
  static std::vector<int32_t> NegOffsets(const Act* x, size_t n, int offset) {
    std::vector<int32_t> neg_off;
    if (offset != 0) {
      neg_off.resize(n);
      for (size_t r = 0; r < n; ++r) {
        int32_t sum = 0;
        for (int e = 0; e < 32; ++e) sum += x[r].qs[e];
        neg_off[r] = -offset * sum;
      }
    }
    return neg_off;
  }
  template <class PB>
  static void MatMulPackedTyped(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m,
                                size_t k, size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQK0;
    const auto* x = static_cast<const PackedAct<PB>*>(xq);
    const std::vector<int32_t> neg_off = NegOffsets(x, m * n_blocks, kPackedOffset<PB>);
    ForEachPackedTile<PB, 64>(w, w_row_bytes, y, ldy, m, n_begin, n_end,
                              [&]<int MR, bool kPf>(size_t i, const PB* g, float* yi) {
                                const int32_t* off = neg_off.empty() ? nullptr : neg_off.data() + i * n_blocks;
                                PackedTile<PB, MR, kPf>(x + i * n_blocks, off, n_blocks, g, yi, ldy);
                              });
  }
  // ---- The 256-element types packed eight rows at a time: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS ----
  // Per super-block, SuperBlockSums (one overload per packed type) leaves each column's exact integer
  // sums in the lanes of sum[i] (and, for the types with mins, mins[i]) for activation rows i < MR;
  // ApplyKScales then takes them to floats with the eight rows' scales.
  //
  // y_c = fma(d_c·d_x, float(sum_c), y_c), then for Q4_K / Q2_K fnmadd(dmin_c·d_x, float(mins_c), y_c),
  // per super-block: the scalar tier's order with the products fused.
  template <int MR, class PB>
  [[gnu::always_inline]]
  static void ApplyKScales(const PB& wb, const ActQ8_K* xb, size_t stride, const __m256i (&sum)[MR],
                           const __m256i (&mins)[MR], __m256 (&acc)[MR]) {
    const __m256 d = Scales(wb.d);
    for (int i = 0; i < MR; ++i) {
      const __m256 dx = _mm256_set1_ps(xb[i * stride].d);
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum[i]), acc[i]);
      if constexpr (requires { wb.dmin; })
        acc[i] = _mm256_fnmadd_ps(_mm256_mul_ps(Scales(wb.dmin), dx), _mm256_cvtepi32_ps(mins[i]), acc[i]);
    }
  }
  // Rows [0, MR) of x (n_blocks apart) against one group of eight columns, written at y.
  template <class PB, int MR, bool kPrefetch>
  static void PackedKTile(const ActQ8_K* x, size_t n_blocks, const PB* w, float* y, size_t ldy) {
    __m256 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b) {
      if constexpr (kPrefetch) RequestBlockAndAhead(w + b);
      __m256i sum[MR], mins[MR];
      for (int i = 0; i < MR; ++i) sum[i] = mins[i] = _mm256_setzero_si256();
      SuperBlockSums<MR>(w[b], x + b, n_blocks, sum, mins);
      ApplyKScales<MR>(w[b], x + b, n_blocks, sum, mins, acc);
    }
    for (int i = 0; i < MR; ++i) _mm256_storeu_ps(y + i * ldy, acc[i]);
  }
  template <class PB>
  static void MatMulPackedK(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                            size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQKK;
    const auto* x = static_cast<const ActQ8_K*>(xq);
    ForEachPackedTile<PB, 32>(w, w_row_bytes, y, ldy, m, n_begin, n_end,
                              [&]<int MR, bool kPf>(size_t i, const PB* g, float* yi) {
                                PackedKTile<PB, MR, kPf>(x + i * n_blocks, n_blocks, g, yi, ldy);
                              });
  }

  // Q4_K / Q5_K: per sub-block the eight groups' dot products (exact), times the column's scale, summed
  // over the super-block; the mins term Σ_s m_s·Σx likewise (vpmaddwd on (m_s, m_s) pairs). Q5_K's
  // fifth bit is bit s of its qh byte, moved to bit 4 (|sum| ≤ 8·32·31·127·63 < 2^26).
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ4_Kx8> || std::is_same_v<PB, BlockQ5_Kx8>
  [[gnu::always_inline]]
  static void SuperBlockSums(const PB& wb, const ActQ8_K* x, size_t stride, __m256i (&sum)[MR], __m256i (&mins)[MR]) {
    for (int s = 0; s < 8; ++s) {  // sub-block s: chunk s / 2, low nibbles for even s
      const int ch = s / 2, shift = 4 * (s % 2);
      __m256i q[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        q[j] = _mm256_and_si256(_mm256_srli_epi16(Load(wb.qs[ch][j]), shift), Mask(0x0F));
        if constexpr (requires { wb.qh; }) {
          const __m256i qh = Load(wb.qh[j]);
          const __m256i bit = s >= 4 ? _mm256_srli_epi16(qh, s - 4) : _mm256_slli_epi16(qh, 4 - s);
          q[j] = _mm256_or_si256(q[j], _mm256_and_si256(bit, Mask(0x10)));
        }
      }
      const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.sc[s])));
      const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.m[s])));
      const __m256i m_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const ActQ8_K& xb = x[i * stride];
        __m256i c0 = _mm256_setzero_si256(), c1 = c0;
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          int32_t x0, x1;
          std::memcpy(&x0, xb.qs + 32 * s + 4 * j, 4);
          std::memcpy(&x1, xb.qs + 32 * s + 4 * j + 4, 4);
          c0 = I::DotU8S8(c0, q[j], _mm256_set1_epi32(x0));  // q ∈ [0, 15], |x| ≤ 127: exact
          c1 = I::DotU8S8(c1, q[j + 1], _mm256_set1_epi32(x1));
        }
        sum[i] = _mm256_add_epi32(sum[i], _mm256_mullo_epi32(_mm256_add_epi32(c0, c1), sc));
        int32_t bsum_pair;
        std::memcpy(&bsum_pair, xb.bsums + 2 * s, 4);
        mins[i] = _mm256_add_epi32(mins[i], _mm256_madd_epi16(m_pairs, _mm256_set1_epi32(bsum_pair)));
      }
    }
  }

  // IQ4_XS: per sub-block the eight groups' dot products on the table levels with the sign trick
  // (exact), times the column's ls − 32 (vpmulld), summed over the super-block
  // (|sum| ≤ 8·32·32·127·127 < 2^27). No mins.
  template <int MR>
  [[gnu::always_inline]]
  static void SuperBlockSums(const BlockIQ4_XSx8& wb, const ActQ8_K* x, size_t stride, __m256i (&sum)[MR],
                             __m256i (&)[MR]) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Levels)));
    for (int s = 0; s < 8; ++s) {  // group j < 4: low nibbles of wb.qs[s][j]; j >= 4: high nibbles of j - 4
      __m256i q[8], a[8];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i raw = Load(wb.qs[s][g]);
        q[g] = _mm256_shuffle_epi8(lut, _mm256_and_si256(raw, Mask(0x0F)));
        q[g + 4] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(raw, 4), Mask(0x0F)));
      }
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) a[j] = _mm256_abs_epi8(q[j]);
      const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.sc[s])));
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const int8_t* xs = x[i * stride].qs + 32 * s;
        __m256i c0 = _mm256_setzero_si256(), c1 = c0;
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          int32_t x0, x1;
          std::memcpy(&x0, xs + 4 * j, 4);
          std::memcpy(&x1, xs + 4 * j + 4, 4);
          c0 = I::DotU8S8(c0, a[j], _mm256_sign_epi8(_mm256_set1_epi32(x0), q[j]));  // |level|, |x| ≤ 127
          c1 = I::DotU8S8(c1, a[j + 1], _mm256_sign_epi8(_mm256_set1_epi32(x1), q[j + 1]));
        }
        sum[i] = _mm256_add_epi32(sum[i], _mm256_mullo_epi32(_mm256_add_epi32(c0, c1), sc));
      }
    }
  }

  // Q2_K / Q3_K / Q6_K: quarter t = 4h + j of the super-block is elements 32t.., in 4-byte groups g
  // (g < 4: group of 16 number 2t, else 2t + 1): for Q2_K bits 2j..2j+1 of the bytes qs[h][g]. Per
  // group the four 4-byte dot products (exact) times the column's group scale (vpmulld), summed over
  // the super-block; Σ_g c_g·bsum_g from the activation's 16-element sums (vpmaddwd on (c_2t, c_2t+1)
  // pairs) — Q2_K's mins, or Q3_K's and Q6_K's scales against their offsets. q: the quarter's eight
  // unsigned quant registers (≤ 63); sc0/sc1 the two groups' scales as i32; c_pairs the (c_2t, c_2t+1)
  // i16 pairs.
  template <int MR>
  [[gnu::always_inline]]
  static void QuarterSums(const __m256i (&q)[8], __m256i sc0, __m256i sc1, __m256i c_pairs, const ActQ8_K* x,
                          size_t stride, int t, __m256i (&sum)[MR], __m256i (&bsum_terms)[MR]) {
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const ActQ8_K& xb = x[i * stride];
      __m256i c0 = _mm256_setzero_si256(), c1 = c0;  // the quarter's two groups of 16
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        int32_t x0, x1;
        std::memcpy(&x0, xb.qs + 32 * t + 4 * g, 4);
        std::memcpy(&x1, xb.qs + 32 * t + 16 + 4 * g, 4);
        c0 = I::DotU8S8(c0, q[g], _mm256_set1_epi32(x0));  // q ≤ 63, |x| ≤ 127: exact
        c1 = I::DotU8S8(c1, q[g + 4], _mm256_set1_epi32(x1));
      }
      sum[i] = _mm256_add_epi32(sum[i], _mm256_add_epi32(_mm256_mullo_epi32(c0, sc0), _mm256_mullo_epi32(c1, sc1)));
      int32_t bsum_pair;
      std::memcpy(&bsum_pair, xb.bsums + 2 * t, 4);
      bsum_terms[i] = _mm256_add_epi32(bsum_terms[i], _mm256_madd_epi16(c_pairs, _mm256_set1_epi32(bsum_pair)));
    }
  }
  // Q2_K: q ∈ [0, 3], 4-bit scale and min per group (|sum| ≤ 16·16·3·127·15 < 2^21).
  template <int MR>
  [[gnu::always_inline]]
  static void SuperBlockSums(const BlockQ2_Kx8& wb, const ActQ8_K* x, size_t stride, __m256i (&sum)[MR],
                             __m256i (&mins)[MR]) {
    for (int t = 0; t < 8; ++t) {
      const int h = t / 4, j = t % 4;
      __m256i q[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) q[g] = _mm256_and_si256(_mm256_srli_epi16(Load(wb.qs[h][g]), 2 * j), Mask(3));
      const __m128i s0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scales[2 * t]));
      const __m128i s1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scales[2 * t + 1]));
      const __m256i sc0 = _mm256_cvtepu8_epi32(_mm_and_si128(s0, _mm_set1_epi8(0x0F)));
      const __m256i sc1 = _mm256_cvtepu8_epi32(_mm_and_si128(s1, _mm_set1_epi8(0x0F)));
      const __m128i m0 = _mm_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s0, 4), _mm_set1_epi8(0x0F)));
      const __m128i m1 = _mm_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s1, 4), _mm_set1_epi8(0x0F)));
      const __m256i m_pairs = _mm256_set_m128i(_mm_unpackhi_epi16(m0, m1), _mm_unpacklo_epi16(m0, m1));
      QuarterSums<MR>(q, sc0, sc1, m_pairs, x, stride, t, sum, mins);
    }
  }
  // Q3_K / Q6_K: the weight is (u − o)·sc with u unsigned (Q3_K: low two bits + 4·third bit ∈ [0, 7],
  // o = 4, sc the scale less its bias of 32; Q6_K: u ∈ [0, 63], o = 32), so
  // sum = Σ_g sc_g·Σ u·x − o·Σ_g sc_g·bsum_g (|sum| ≤ 16·16·63·127·128 < 2^29; the term < 2^28).
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ3_Kx8> || std::is_same_v<PB, BlockQ6_Kx8>
  [[gnu::always_inline]]
  static void SuperBlockSums(const PB& wb, const ActQ8_K* x, size_t stride, __m256i (&sum)[MR], __m256i (&)[MR]) {
    __m256i corr[MR];
    for (int i = 0; i < MR; ++i) corr[i] = _mm256_setzero_si256();
    for (int t = 0; t < 8; ++t) {
      __m256i q[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) q[g] = QuarterQuants(wb, t, g);
      const __m128i s0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.sc[2 * t]));
      const __m128i s1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.sc[2 * t + 1]));
      const __m128i c0 = _mm_cvtepi8_epi16(s0), c1 = _mm_cvtepi8_epi16(s1);
      QuarterSums<MR>(q, _mm256_cvtepi8_epi32(s0), _mm256_cvtepi8_epi32(s1),
                      _mm256_set_m128i(_mm_unpackhi_epi16(c0, c1), _mm_unpacklo_epi16(c0, c1)), x, stride, t, sum, corr);
    }
    for (int i = 0; i < MR; ++i) sum[i] = _mm256_sub_epi32(sum[i], _mm256_slli_epi32(corr[i], kQuarterOffsetLog2<PB>));
  }
  // log2 of the offset o above.
  template <class PB>
  static constexpr int kQuarterOffsetLog2 = std::is_same_v<PB, BlockQ6_Kx8> ? 5 : 2;
  // Quarter t's 4-byte group g of all eight columns, unsigned. Q3_K: the low two bits, and the third
  // (bit t of the hmask byte) moved to bit 2.
  static __m256i QuarterQuants(const BlockQ3_Kx8& wb, int t, int g) {
    const int h = t / 4, j = t % 4;
    const __m256i hm = Load(wb.hmask[g]);
    const __m256i bit = t >= 2 ? _mm256_srli_epi16(hm, t - 2) : _mm256_slli_epi16(hm, 2 - t);
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Load(wb.qs[h][g]), 2 * j), Mask(3)),
                           _mm256_and_si256(bit, Mask(4)));
  }
  // Q6_K: nibble j / 2 of ql[h][j % 2], and bits 2j..2j+1 of qh[h] moved to bits 4-5.
  static __m256i QuarterQuants(const BlockQ6_Kx8& wb, int t, int g) {
    const int h = t / 4, j = t % 4;
    const __m256i ql = Load(wb.ql[h][j % 2][g]), qh = Load(wb.qh[h][g]);
    const __m256i high = j >= 2 ? _mm256_srli_epi16(qh, 2 * j - 4) : _mm256_slli_epi16(qh, 4 - 2 * j);
    return _mm256_or_si256(_mm256_and_si256(j >= 2 ? _mm256_srli_epi16(ql, 4) : ql, Mask(0x0F)),
                           _mm256_and_si256(high, Mask(0x30)));
  }

  static void MatMulPacked(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                           size_t m, size_t k, size_t n_begin, size_t n_end) {
    switch (wtype) {
      case QuantType::kQ4_K: return MatMulPackedK<BlockQ4_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_XS: return MatMulPackedK<BlockIQ4_XSx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ2_K: return MatMulPackedK<BlockQ2_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ3_K: return MatMulPackedK<BlockQ3_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_K: return MatMulPackedK<BlockQ5_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ6_K: return MatMulPackedK<BlockQ6_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_0: return MatMulPackedTyped<BlockQ4_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_0: return MatMulPackedTyped<BlockQ5_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ4_1: return MatMulPackedTyped<BlockQ4_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kQ5_1: return MatMulPackedTyped<BlockQ5_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kIQ4_NL:
        return MatMulPackedTyped<BlockIQ4_NLx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      case QuantType::kMXFP4: return MatMulPackedTyped<BlockMXFP4x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
      default:
        // Several rows on the tier's own block-sum engine where it has one (AMX on avx512): exact
        // integer sums, the same float step, so the same bits as PackedTile.
        if constexpr (requires { I::MatMulPackedQ8_0Rows(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end); }) {
          if (m > 1 && I::MatMulPackedQ8_0Rows(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end)) return;
        }
        return MatMulPackedTyped<BlockQ8_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
    }
  }

  // Q2_K / Q3_K: the 32 elements 128h + 32j + l (l < 32) are bits 2j..2j+1 of byte l of qs[32h..] —
  // one register per quarter t = 4h + j, against activations 32t.. — with groups 2t (bytes 0-15)
  // and 2t + 1 (bytes 16-31): Q6_K's arrangement, so ScaledSubBlockSums serves them too.
  struct Q23KW {
    __m256i q[8];   // quarter t: Q2_K q ∈ [0, 3]; Q3_K q + 4 ∈ [0, 7]
    __m256i sc[8];  // its two groups' scales, i16 lanes
    __m256i g16;    // per group, as i16 against the activation's bsums: Q2_K's mins, Q3_K's scales
    float d, dmin;
  };
  // scales16: the 16 group scales as i16 (8 per half).
  static void UnpackQuarters(const uint8_t* qs, const uint8_t* hmask, const __m256i& scales16, Q23KW* u) {
    const __m256i hm = hmask != nullptr ? Load(hmask) : _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = Load(qs + 32 * h);
      const __m256i sc = h == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                                : _mm256_permute2x128_si256(scales16, scales16, 0x11);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), Mask(3));
        if (hmask != nullptr) {
          const __m256i bit = Mask(1 << (4 * h + j));
          q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), Mask(4)));
        }
        u->q[4 * h + j] = q;
        u->sc[4 * h + j] = _mm256_shuffle_epi8(sc, PickI16(2 * j, 2 * j + 1));
      }
    }
  }
  // Q2_K: lanes Σ_g sc_g·q·x (|lane| ≤ 16·2·3·127·15 < 2^18), mins Σ_g m_g·bsum_g.
  struct Q2KW : Q23KW {};
  struct Q3KW : Q23KW {};
  static Q2KW Unpack(const BlockQ2_K* w) {
    Q2KW u;
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales));
    UnpackQuarters(w->qs, nullptr, _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0F))), &u);
    u.g16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
    u.d = F16(w->d);
    u.dmin = F16(w->dmin);
    return u;
  }
  // Q3_K: lanes Σ_g sc_g·(q + 4)·x − 4·Σ_g sc_g·bsum_g (sc_g ∈ [−32, 31], |lane| < 2^22).
  // Q3KScale (quant_impl.h) for the 16 groups at once, minus 32, as i16: low nibbles of bytes 0-7
  // (groups 0-7), their high nibbles (8-15), and 2 high bits per group from bytes 8-11.
  static __m256i Q3KScales(const uint8_t* packed) {
    uint64_t lo;
    uint32_t hi;
    std::memcpy(&lo, packed, 8);
    std::memcpy(&hi, packed + 8, 4);
    const __m128i l = _mm_cvtsi64_si128(static_cast<long long>(lo));
    const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(l, _mm_srli_epi16(l, 4)), _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_setr_epi32(static_cast<int>(hi), static_cast<int>(hi >> 2),
                                                      static_cast<int>(hi >> 4), static_cast<int>(hi >> 6)),
                                       _mm_set1_epi8(3));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32)));
  }
  static Q3KW Unpack(const BlockQ3_K* w) {
    Q3KW u;
    u.g16 = Q3KScales(w->scales);
    UnpackQuarters(w->qs, w->hmask, u.g16, &u);
    u.d = F16(w->d);
    u.dmin = 0.0f;
    return u;
  }
  static Acc Dot(Acc acc, const Q2KW& u, const ActQ8_K* x) {
    const __m256i mins = _mm256_madd_epi16(Load(x->bsums), u.g16);
    acc = Fma(acc, x->d * u.d, ScaledSubBlockSums(u.q, u.sc, x->qs));
    return _mm256_fnmadd_ps(_mm256_set1_ps(x->d * u.dmin), _mm256_cvtepi32_ps(mins), acc);
  }
  static Acc Dot(Acc acc, const Q3KW& u, const ActQ8_K* x) {
    const __m256i corr = _mm256_madd_epi16(Load(x->bsums), u.g16);
    return Fma(acc, u.d * x->d, _mm256_sub_epi32(ScaledSubBlockSums(u.q, u.sc, x->qs), _mm256_slli_epi32(corr, 2)));
  }

  // Q6_K: lanes Σ_g sc_g·q·x − 32·Σ_g sc_g·bsum_g, q ∈ [0, 63] (|lane| < 2^26).
  struct Q6KW {
    __m256i q[8];  // quarter t of half h at 4h + t
    __m256i sc[8];  // its two groups' scales, i16 lanes
    __m256i sc16;   // the 16 group scales as i16, against the activation's bsums
    float d;
  };
  static Q6KW Unpack(const BlockQ6_K* w) {
    Q6KW u;
    u.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)));
    const __m256i m4 = Mask(0x0F), m6 = Mask(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i ql0 = Load(w->ql + 64 * h), ql1 = Load(w->ql + 64 * h + 32), qh = Load(w->qh + 32 * h);
      u.q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m6));
      u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m6));
      u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m6));
      u.q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m6));
      // This half's 8 scales as i16 in both 128-bit halves; quarter t uses groups 2t (bytes 0-15)
      // and 2t+1 (bytes 16-31).
      __m256i sc = _mm256_broadcastsi128_si256(
          _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w->scales + 8 * h))));
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) u.sc[4 * h + t] = _mm256_shuffle_epi8(sc, PickI16(2 * t, 2 * t + 1));
    }
    u.d = F16(w->d);
    return u;
  }
  static Acc Dot(Acc acc, const Q6KW& u, const ActQ8_K* x) {
    __m256i corr = _mm256_madd_epi16(Load(x->bsums), u.sc16);
    __m256i sum = _mm256_sub_epi32(ScaledSubBlockSums(u.q, u.sc, x->qs), _mm256_slli_epi32(corr, 5));
    return Fma(acc, u.d * x->d, sum);
  }
};

}  // namespace fak::kernels::simd

#endif  // FAK_KERNELS_SIMD_QUANT_X86_H_
