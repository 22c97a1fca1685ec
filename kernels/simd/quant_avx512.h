// zmm forms of quant_x86.h's block steps for the AVX-512 tiers: the same integers on 64-byte
// registers, so the same bits with about half the instructions per block. Include only from
// kernels/arch/avx512.cc (everything is a template on that TU's integer policy I, which adds
//   I::DotU8S8(acc, u, s) and I::DotU8S8Scaled(acc, u, s, c) on __m512i, lane for lane as the
//   __m256i forms).
#ifndef FAK_KERNELS_SIMD_QUANT_AVX512_H_
#define FAK_KERNELS_SIMD_QUANT_AVX512_H_

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/quant_format.h"
#include "kernels/simd/quant_x86.h"

namespace fak::kernels::simd {

template <class I>
struct Avx512QuantOps : X86QuantOps<I> {
  using Base = X86QuantOps<I>;
  using typename Base::Acc;
  using Base::Dot;
  using Base::Unpack;

  // Q6_K on zmm. A half h of the block is four quarters of 32 elements; one zmm holds two of them
  // (t = 0 | 1 and t = 2 | 3: the low and high nibbles of ql[64h..64h+63], whose halves are the
  // ymm step's ql0 and ql1), against the 64 contiguous activations of those quarters. Integer lane
  // L of the low 256 bits is the ymm step's lane L for the first quarter, of the high 256 bits for
  // the second; adding the halves gives the ymm step's lanes exactly (integers), and the float step
  // after it is Base's: so the same bits as quant_x86.h's Q6_K.
  struct Q6KZ {
    __m512i q[4];   // half h: quarters 0|1 at 2h, 2|3 at 2h + 1; q ∈ [0, 63]
    __m512i sc[4];  // their groups' scales, i16 lanes: 128-bit lane k holds group 8h + 4·(pair) + k
    __m256i sc16;   // the 16 group scales as i16, against the activation's bsums
    float d;
  };
  static Q6KZ Unpack(const BlockQ6_K* w) {
    Q6KZ u;
    u.sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)));
    const __m512i sc = _mm512_zextsi256_si512(u.sc16);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x30);
    // qh's bits for quarters 0|1 move up by 4|2, for 2|3 down by 0|2 (16-bit shifts; the masks drop
    // what crosses a byte).
    const __m512i up = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i down = _mm512_mask_blend_epi64(0xF0, _mm512_setzero_si512(), _mm512_set1_epi16(2));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(w->ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w->qh + 32 * h)));
      u.q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, up), m6));
      u.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi16(qh, down), m6));
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {  // i16 lane e of pair p: group 8h + 4p + e / 8
        const __m512i idx = _mm512_add_epi16(_mm512_srli_epi16(LaneIndex(), 3), _mm512_set1_epi16(8 * h + 4 * p));
        u.sc[2 * h + p] = _mm512_permutexvar_epi16(idx, sc);
      }
    }
    u.d = Base::F16(w->d);
    return u;
  }
  static Acc Dot(Acc acc, const Q6KZ& u, const ActQ8_K* x) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0;  // two chains: half 0's quarter pairs, then half 1's
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      s0 = I::DotU8S8Scaled(s0, u.q[2 * h], _mm512_loadu_si512(x->qs + 128 * h), u.sc[2 * h]);
      s1 = I::DotU8S8Scaled(s1, u.q[2 * h + 1], _mm512_loadu_si512(x->qs + 128 * h + 64), u.sc[2 * h + 1]);
    }
    const __m512i s = _mm512_add_epi32(s0, s1);
    const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    const __m256i corr = _mm256_madd_epi16(Base::Load(x->bsums), u.sc16);
    return Base::Fma(acc, u.d * x->d, _mm256_sub_epi32(lanes, _mm256_slli_epi32(corr, 5)));
  }

  // The packed K-quants times one activation row (decode) or IQ4_XS and the 32-element types times
  // several (prefill) on zmm; everything else as Base.
  static void MatMulPacked(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                           size_t m, size_t k, size_t n_begin, size_t n_end) {
    if (m == 1) {
      switch (wtype) {
        case QuantType::kQ4_K:
          return OneRow<BlockQ4_Kx8, &Q4KRowGroup<BlockQ4_Kx8>>(xq, w, w_row_bytes, y, k, n_begin, n_end);
        case QuantType::kQ2_K:
          return OneRow<BlockQ2_Kx8, &QuarterRowGroup<BlockQ2_Kx8>>(xq, w, w_row_bytes, y, k, n_begin, n_end);
        case QuantType::kQ3_K:
          return OneRow<BlockQ3_Kx8, &QuarterRowGroup<BlockQ3_Kx8>>(xq, w, w_row_bytes, y, k, n_begin, n_end);
        case QuantType::kQ5_K:
          return OneRow<BlockQ5_Kx8, &Q4KRowGroup<BlockQ5_Kx8>>(xq, w, w_row_bytes, y, k, n_begin, n_end);
        case QuantType::kQ6_K:
          return OneRow<BlockQ6_Kx8, &QuarterRowGroup<BlockQ6_Kx8>>(xq, w, w_row_bytes, y, k, n_begin, n_end);
        default: break;
      }
    } else {
      switch (wtype) {
        case QuantType::kQ4_K: return PackedKRows<BlockQ4_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kIQ4_XS:
          if constexpr (I::kUnsaturatedDot) return PackedKRows<BlockIQ4_XSx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
          break;
        case QuantType::kQ2_K: return PackedKRows<BlockQ2_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ3_K: return PackedKRows<BlockQ3_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ5_K: return PackedKRows<BlockQ5_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ6_K: return PackedKRows<BlockQ6_Kx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ4_0: return Block32Rows<BlockQ4_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ5_0: return Block32Rows<BlockQ5_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ4_1: return Block32Rows<BlockQ4_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        case QuantType::kQ5_1: return Block32Rows<BlockQ5_1x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
        // The signed types go unsigned with +128 (Block32PairTile), whose products only vpdpbusd
        // sums without saturating; for Q8_0 AMX goes first where it runs.
        case QuantType::kQ8_0:
          if constexpr (I::kUnsaturatedDot) {
            if (I::MatMulPackedQ8_0Rows(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end)) return;
            return Block32Rows<BlockQ8_0x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
          }
          break;
        case QuantType::kIQ4_NL:
          if constexpr (I::kUnsaturatedDot) return Block32Rows<BlockIQ4_NLx8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
          break;
        case QuantType::kMXFP4:
          if constexpr (I::kUnsaturatedDot) return Block32Rows<BlockMXFP4x8>(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
          break;
        default: break;
      }
    }
    Base::MatMulPacked(wtype, xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
  }

  // Rows in blocks of kRowBlock (their activations stay in L2) x pairs of groups (n, n + 8) in
  // [n_begin, n_end), in tiles of kTallRows (16 or 8), eight, four and one rows:
  // tile.template operator()<MR>(row, n) runs rows [row, row + MR) against the pair at n. Returns
  // where the pairs end: an odd group left over is the caller's (Base's tile).
  template <size_t kRowBlock, int kTallRows, class Tile>
  static size_t ForEachPairTile(size_t m, size_t n_begin, size_t n_end, Tile&& tile) {
    const size_t n_pairs_end = n_begin + (n_end - n_begin) / 16 * 16;
    for (size_t i0 = 0; i0 < m; i0 += kRowBlock) {
      const size_t i1 = std::min(m, i0 + kRowBlock);
      for (size_t n = n_begin; n < n_pairs_end; n += 16) {
        size_t i = i0;
        if constexpr (kTallRows == 16)
          for (; i + 16 <= i1; i += 16) tile.template operator()<16>(i, n);
        for (; i + 8 <= i1; i += 8) tile.template operator()<8>(i, n);
        for (; i + 4 <= i1; i += 4) tile.template operator()<4>(i, n);
        for (; i < i1; ++i) tile.template operator()<1>(i, n);
      }
    }
    return n_pairs_end;
  }
  // The pair tiles read two streams, group n's blocks and n + 8's, one block of each in turn; this
  // Zen 4's hardware prefetcher does not follow that, and with few rows (batched decode: the weights
  // come from DRAM and are used by one or two tiles) the tiles streamed at half the one-row rate.
  // So each tile requests, per block, the lines kPairAhead bytes further on in both streams (Gemma
  // 3's Q8_0 head at 16 rows, one thread: 29-34 -> 19-21 ms; 16 KiB beat 0.5, 2 and 8 KiB).
  static constexpr size_t kPairAhead = 16 << 10;
  template <class PB>
  static void RequestAhead(const PB* a, const PB* b) {
    const char* pa = reinterpret_cast<const char*>(a) + kPairAhead;
    const char* pb = reinterpret_cast<const char*>(b) + kPairAhead;
#pragma GCC unroll 32
    for (size_t o = 0; o < sizeof(PB); o += 64) {
      __builtin_prefetch(pa + o, 0, 2);
      __builtin_prefetch(pb + o, 0, 2);
    }
  }
  // The tallest pair tile per type: sixteen rows share each decoded weight vector where decoding
  // is dear — the K-quants' scales, fifth and sixth bits, MXFP4's table — and eight elsewhere,
  // where sixteen rows' accumulators spill. One thread on Zen 5, K 2048, N 5632, M 512: Q2_K to
  // Q6_K +6-13%, MXFP4 +14%; IQ4_XS -16%, Q4_0 and Q4_1 -5%, Q5_0, Q5_1, Q8_0, IQ4_NL even.
  template <class PB>
  static constexpr int kTallRows =
      std::is_same_v<PB, BlockQ2_Kx8> || std::is_same_v<PB, BlockQ3_Kx8> || std::is_same_v<PB, BlockQ4_Kx8> ||
              std::is_same_v<PB, BlockQ5_Kx8> || std::is_same_v<PB, BlockQ6_Kx8> || std::is_same_v<PB, BlockMXFP4x8>
          ? 16
          : 8;
  template <class PB>
  static const PB* Group(const void* w, size_t w_row_bytes, size_t n) {
    return reinterpret_cast<const PB*>(static_cast<const uint8_t*>(w) + n * w_row_bytes);
  }

  // Packed Q4_0, Q5_0, Q4_1, Q5_1, Q8_0, IQ4_NL or MXFP4 times m ≥ 2 activation rows (prefill) on
  // zmm: Base's PackedTile with two groups of eight columns side by side (Block32PairTile). The same
  // integers and the same float ops per column, so the same bits.
  template <class PB>
  static void Block32Rows(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                         size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQK0;
    const auto* x = static_cast<const typename Base::template PackedAct<PB>*>(xq);
    const std::vector<int32_t> neg_off = Base::NegOffsets(x, m * n_blocks, kOffset<PB>);
    const size_t n_pairs_end = ForEachPairTile<64, kTallRows<PB>>(m, n_begin, n_end, [&]<int MR>(size_t i, size_t n) {
      Block32PairTile<PB, MR>(x + i * n_blocks, neg_off.empty() ? nullptr : neg_off.data() + i * n_blocks, n_blocks,
                              Group<PB>(w, w_row_bytes, n), Group<PB>(w, w_row_bytes, n + 8), y + i * ldy + n, ldy);
    });
    if (n_pairs_end < n_end) Base::MatMulPacked(kPackedType<PB>, xq, w, w_row_bytes, y, ldy, m, k, n_pairs_end, n_end);
  }
  template <class PB>
  static constexpr QuantType kPackedType = std::is_same_v<PB, BlockQ4_0x8>   ? QuantType::kQ4_0
                                           : std::is_same_v<PB, BlockQ5_0x8> ? QuantType::kQ5_0
                                           : std::is_same_v<PB, BlockQ4_1x8> ? QuantType::kQ4_1
                                           : std::is_same_v<PB, BlockQ5_1x8> ? QuantType::kQ5_1
                                           : std::is_same_v<PB, BlockQ8_0x8> ? QuantType::kQ8_0
                                           : std::is_same_v<PB, BlockIQ4_NLx8> ? QuantType::kIQ4_NL
                                           : std::is_same_v<PB, BlockMXFP4x8>  ? QuantType::kMXFP4
                                           : std::is_same_v<PB, BlockQ4_Kx8>   ? QuantType::kQ4_K
                                           : std::is_same_v<PB, BlockIQ4_XSx8> ? QuantType::kIQ4_XS
                                           : std::is_same_v<PB, BlockQ2_Kx8>   ? QuantType::kQ2_K
                                           : std::is_same_v<PB, BlockQ5_Kx8>   ? QuantType::kQ5_K
                                           : std::is_same_v<PB, BlockQ6_Kx8>   ? QuantType::kQ6_K
                                                                               : QuantType::kQ3_K;
  // The offset the tile's unsigned quants carry: Q4_0's and Q5_0's own, and the +128 that makes
  // the signed types' quants or levels unsigned (Σ(q + 128)·x − 128·Σx = Σq·x, exact in i32).
  template <class PB>
  static constexpr int kOffset = Base::template kPackedSigned<PB> ? 128 : Base::template kPackedOffset<PB>;
  // IQ4_NL's or MXFP4's 16 levels + 128, as unsigned bytes, in each 128-bit lane (for vpshufb).
  template <class PB>
  static constexpr std::array<uint8_t, 64> kLevelsPlus128 = [] {
    const int8_t* levels = std::is_same_v<PB, BlockIQ4_NLx8> ? kIQ4Levels : kMXFP4Levels;
    std::array<uint8_t, 64> lut{};
    for (int i = 0; i < 64; ++i) lut[i] = static_cast<uint8_t>(levels[i % 16] + 128);
    return lut;
  }();

  // Rows [0, MR) of x (n_blocks apart) against groups a and b (16 columns), written at y: group a's
  // column c in zmm lane c, b's in lane 8 + c, so one activation broadcast serves both.
  template <class PB, int MR>
  static void Block32PairTile(const typename Base::template PackedAct<PB>* x, const int32_t* neg_off, size_t n_blocks,
                              const PB* wa, const PB* wb, float* y, size_t ldy) {
    constexpr bool kFifthBit = requires(PB p) { p.qh; };
    constexpr bool kMin = Base::template kPackedMin<PB>;
    constexpr bool kLevels = std::is_same_v<PB, BlockIQ4_NLx8> || std::is_same_v<PB, BlockMXFP4x8>;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i levels;
    if constexpr (kLevels) levels = _mm512_loadu_si512(kLevelsPlus128<PB>.data());
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b) {
      const PB& A = wa[b];
      const PB& B = wb[b];
      RequestAhead(&A, &B);
      __m512i q[8];  // group j of both groups' rows, unsigned: in [0, 31], the signed types' + 128
      if constexpr (std::is_same_v<PB, BlockQ8_0x8>) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) q[j] = _mm512_xor_si512(Pair(A.qs + 32 * j, B.qs + 32 * j), _mm512_set1_epi8(-128));
      } else {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i raw = Pair(A.qs + 32 * j, B.qs + 32 * j);
          q[j] = _mm512_and_si512(raw, m4);
          q[j + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        }
        if constexpr (kLevels) {
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) q[j] = _mm512_shuffle_epi8(levels, q[j]);
        }
      }
      if constexpr (kFifthBit) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j)
          q[j] = _mm512_mask_add_epi8(q[j], _cvtu64_mask64(A.qh[j] | uint64_t{B.qh[j]} << 32), q[j], _mm512_set1_epi8(0x10));
      }
      const __m512 d = Join(ColumnScales(A), ColumnScales(B));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const auto& xb = x[i * n_blocks + b];
        __m512i sums[4];
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {  // q ≤ 255, |x| ≤ 127: exact with vpdpbusd (q ≤ 31 with vpmaddubsw)
          int32_t xj;
          std::memcpy(&xj, xb.qs + 4 * j, 4);
          sums[j % 4] = I::DotU8S8(j < 4 ? _mm512_setzero_si512() : sums[j % 4], q[j], _mm512_set1_epi32(xj));
        }
        __m512i sum = _mm512_add_epi32(_mm512_add_epi32(sums[0], sums[1]), _mm512_add_epi32(sums[2], sums[3]));
        if (neg_off) sum = _mm512_add_epi32(sum, _mm512_set1_epi32(neg_off[i * n_blocks + b]));
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xb.d)), _mm512_cvtepi32_ps(sum), acc[i]);
        if constexpr (kMin) acc[i] = _mm512_fmadd_ps(Join(Base::Scales(A.m), Base::Scales(B.m)), _mm512_set1_ps(xb.s), acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) _mm512_storeu_ps(y + i * ldy, acc[i]);
  }
  template <class PB>
  static __m256 ColumnScales(const PB& w) {
    if constexpr (requires { w.e; }) return Base::Scales(w.e);  // MXFP4
    else return Base::Scales(w.d);
  }
  // 32 bytes at a, then 32 at b.
  static __m512i Pair(const void* a, const void* b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Base::Load(a)), Base::Load(b), 1);
  }
  static __m512 Join(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }

  // Packed Q4_K, IQ4_XS, Q2_K or Q3_K times m ≥ 2 activation rows (prefill) on zmm: Base's
  // PackedKTile frame on two groups of eight columns side by side (PairKTile), rows in blocks of 32
  // as Base's MatMulPackedK. Each type's integer sums (PairSums) are Base's SuperBlockSums' numbers
  // and the float steps per column ApplyKScales', so the bits are PackedKTile's.
  template <class PB>
  static void PackedKRows(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k,
                          size_t n_begin, size_t n_end) {
    const size_t n_blocks = k / kQKK;
    const auto* x = static_cast<const ActQ8_K*>(xq);
    // Each row's and super-block's eight sub-block sums of x (i16: |Σx| ≤ 32·127), from its
    // 16-element sums: Q4_K's mins and IQ4_XS's offset terms take them.
    std::vector<int16_t> sub_sums(m * n_blocks * 8);
    for (size_t r = 0; r < m * n_blocks; ++r) {
      const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].bsums)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r].bsums + 8)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(sub_sums.data() + 8 * r), bs);
    }
    const size_t n_pairs_end = ForEachPairTile<32, kTallRows<PB>>(m, n_begin, n_end, [&]<int MR>(size_t i, size_t n) {
      PairKTile<PB, MR>(x + i * n_blocks, sub_sums.data() + 8 * i * n_blocks, n_blocks, Group<PB>(w, w_row_bytes, n),
                        Group<PB>(w, w_row_bytes, n + 8), y + i * ldy + n, ldy);
    });
    if (n_pairs_end < n_end) Base::MatMulPacked(kPackedType<PB>, xq, w, w_row_bytes, y, ldy, m, k, n_pairs_end, n_end);
  }

  // Rows [0, MR) of x (n_blocks apart; sub_sums 8·n_blocks apart) against groups a and b (16
  // columns), written at y, as Block32PairTile pairs them.
  template <class PB, int MR>
  static void PairKTile(const ActQ8_K* x, const int16_t* sub_sums, size_t n_blocks, const PB* wa, const PB* wb, float* y,
                        size_t ldy) {
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (size_t b = 0; b < n_blocks; ++b) {
      const PB& A = wa[b];
      const PB& B = wb[b];
      RequestAhead(&A, &B);
      __m512i sum[MR], mins[MR];
      for (int i = 0; i < MR; ++i) sum[i] = mins[i] = _mm512_setzero_si512();
      PairSums<MR>(A, B, x + b, sub_sums + 8 * b, n_blocks, sum, mins);
      // ApplyKScales per lane: fma(d·d_x, sum), then for the types with a dmin fnmadd(dmin·d_x, mins).
      const __m512 d = Join(Base::Scales(A.d), Base::Scales(B.d));
      for (int i = 0; i < MR; ++i) {
        const __m512 dx = _mm512_set1_ps(x[i * n_blocks + b].d);
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sum[i]), acc[i]);
        if constexpr (requires { A.dmin; })
          acc[i] = _mm512_fnmadd_ps(_mm512_mul_ps(Join(Base::Scales(A.dmin), Base::Scales(B.dmin)), dx),
                                    _mm512_cvtepi32_ps(mins[i]), acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) _mm512_storeu_ps(y + i * ldy, acc[i]);
  }

  // Q4_K / Q5_K: each 64-byte chunk's load gives sub-blocks 2ch (low nibbles) and 2ch + 1 (high),
  // Q5_K's fifth bits added where its qh bits are set; the mins term once per super-block, two
  // sub-blocks per vpmaddwd against the (Σx of 2t, of 2t + 1) pairs.
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ4_Kx8> || std::is_same_v<PB, BlockQ5_Kx8>
  static void PairSums(const PB& A, const PB& B, const ActQ8_K* x, const int16_t* sub_sums, size_t stride,
                       __m512i (&sum)[MR], __m512i (&mins)[MR]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int ch = 0; ch < 4; ++ch) {
      __m512i lo[8], hi[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i raw = Pair(A.qs[ch][j], B.qs[ch][j]);
        lo[j] = _mm512_and_si512(raw, m4);
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if constexpr (requires { A.qh; }) AddFifthBits(Pair(A.qh[j], B.qh[j]), ch, lo[j], hi[j]);
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi32(PairBytes(A.sc[2 * ch], B.sc[2 * ch]));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(PairBytes(A.sc[2 * ch + 1], B.sc[2 * ch + 1]));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const int8_t* xs = x[i * stride].qs + 64 * ch;
        __m512i c_lo = _mm512_setzero_si512(), c_hi = c_lo;
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {  // q ≤ 31, |x| ≤ 127: exact
          c_lo = I::DotU8S8Broadcast(c_lo, lo[j], xs + 4 * j);
          c_hi = I::DotU8S8Broadcast(c_hi, hi[j], xs + 32 + 4 * j);
        }
        sum[i] = _mm512_add_epi32(sum[i], _mm512_add_epi32(_mm512_mullo_epi32(c_lo, sc_lo), _mm512_mullo_epi32(c_hi, sc_hi)));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {  // (m_2t, m_2t+1) per column against (Σx of 2t, of 2t + 1)
      const __m128i ma = _mm_unpacklo_epi8(Bytes8(A.m[2 * t]), Bytes8(A.m[2 * t + 1]));
      const __m128i mb = _mm_unpacklo_epi8(Bytes8(B.m[2 * t]), Bytes8(B.m[2 * t + 1]));
      const __m512i m_pairs = _mm512_cvtepu8_epi16(_mm256_set_m128i(mb, ma));
      for (int i = 0; i < MR; ++i) {
        int32_t sums_pair;
        std::memcpy(&sums_pair, sub_sums + 8 * i * stride + 2 * t, 4);
        mins[i] = I::DotI16(mins[i], m_pairs, _mm512_set1_epi32(sums_pair));
      }
    }
  }

  // IQ4_XS, where vpdpbusd runs: per sub-block the table gives the levels + 128 and the dot starts
  // from −128·Σx of the sub-block, so it is the ymm sign trick's i32, times the same ls − 32.
  template <int MR>
  static void PairSums(const BlockIQ4_XSx8& A, const BlockIQ4_XSx8& B, const ActQ8_K* x, const int16_t* sub_sums,
                       size_t stride, __m512i (&sum)[MR], __m512i (&)[MR]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i levels = _mm512_loadu_si512(kLevelsPlus128<BlockIQ4_NLx8>.data());  // IQ4_NL's table
    for (int sb = 0; sb < 8; ++sb) {  // group j < 4: low nibbles of qs[sb][j]; j >= 4: high nibbles of j - 4
      __m512i q[8];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m512i raw = Pair(A.qs[sb][g], B.qs[sb][g]);
        q[g] = _mm512_shuffle_epi8(levels, _mm512_and_si512(raw, m4));
        q[g + 4] = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
      }
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(Bytes8(A.sc[sb]), Bytes8(B.sc[sb])));
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const int8_t* xs = x[i * stride].qs + 32 * sb;
        __m512i c0 = _mm512_set1_epi32(-128 * sub_sums[8 * i * stride + sb]), c1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j += 2) {  // level + 128 ≤ 255, |x| ≤ 127: exact with vpdpbusd
          int32_t x0, x1;
          std::memcpy(&x0, xs + 4 * j, 4);
          std::memcpy(&x1, xs + 4 * j + 4, 4);
          c0 = I::DotU8S8(c0, q[j], _mm512_set1_epi32(x0));
          c1 = I::DotU8S8(c1, q[j + 1], _mm512_set1_epi32(x1));
        }
        sum[i] = _mm512_add_epi32(sum[i], _mm512_mullo_epi32(_mm512_add_epi32(c0, c1), sc));
      }
    }
  }

  // Q2_K / Q3_K / Q6_K: per quarter Base's QuarterSums on the pair (QuarterQuants), the two groups'
  // scales and the (c_2t, c_2t+1) pairs for the bsum terms widened to 16 columns: Q2_K's mins, or
  // Q3_K's and Q6_K's offset terms. Those go into sum as they come, the pairs scaled by −offset
  // (|sc·offset| ≤ 4096 in i16; the i32 sum is exact in any order): Base's SuperBlockSums subtracts
  // them at the end from a second set of MR accumulators, which spilled here (Q6_K +23% without).
  template <int MR, class PB>
    requires std::is_same_v<PB, BlockQ2_Kx8> || std::is_same_v<PB, BlockQ3_Kx8> || std::is_same_v<PB, BlockQ6_Kx8>
  static void PairSums(const PB& A, const PB& B, const ActQ8_K* x, const int16_t*, size_t stride, __m512i (&sum)[MR],
                       __m512i (&mins)[MR]) {
    constexpr bool kOffset = !std::is_same_v<PB, BlockQ2_Kx8>;  // signed scales against an offset
    const auto pair = [&](auto field) { return Pair(field(A), field(B)); };
    for (int t = 0; t < 8; ++t) {  // quarter t: g < 4 group 2t, else 2t + 1
      __m512i q[8];
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) q[g] = QuarterQuants<PB>(t, g, pair);
      __m512i sc0, sc1, c_pairs;
      if constexpr (kOffset) {
        const __m128i r0 = _mm_unpacklo_epi64(Bytes8(A.sc[2 * t]), Bytes8(B.sc[2 * t]));
        const __m128i r1 = _mm_unpacklo_epi64(Bytes8(A.sc[2 * t + 1]), Bytes8(B.sc[2 * t + 1]));
        sc0 = _mm512_cvtepi8_epi32(r0);
        sc1 = _mm512_cvtepi8_epi32(r1);
        const __m512i c = _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(r0, r1), _mm_unpacklo_epi8(r0, r1)));
        c_pairs = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(c, kOffsetLog2<PB>));
      } else {
        const __m128i r0 = _mm_unpacklo_epi64(Bytes8(A.scales[2 * t]), Bytes8(B.scales[2 * t]));
        const __m128i r1 = _mm_unpacklo_epi64(Bytes8(A.scales[2 * t + 1]), Bytes8(B.scales[2 * t + 1]));
        const __m128i low = _mm_set1_epi8(0x0F);
        sc0 = _mm512_cvtepu8_epi32(_mm_and_si128(r0, low));
        sc1 = _mm512_cvtepu8_epi32(_mm_and_si128(r1, low));
        const __m128i m0 = _mm_and_si128(_mm_srli_epi16(r0, 4), low), m1 = _mm_and_si128(_mm_srli_epi16(r1, 4), low);
        c_pairs = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(m0, m1), _mm_unpacklo_epi8(m0, m1)));
      }
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const ActQ8_K& xb = x[i * stride];
        __m512i c0 = _mm512_setzero_si512(), c1 = c0;  // the quarter's two groups of 16
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {  // q ≤ 63, |x| ≤ 127: exact
          c0 = I::DotU8S8Broadcast(c0, q[g], xb.qs + 32 * t + 4 * g);
          c1 = I::DotU8S8Broadcast(c1, q[g + 4], xb.qs + 32 * t + 16 + 4 * g);
        }
        sum[i] = _mm512_add_epi32(sum[i], _mm512_add_epi32(_mm512_mullo_epi32(c0, sc0), _mm512_mullo_epi32(c1, sc1)));
        int32_t bsum_pair;
        std::memcpy(&bsum_pair, xb.bsums + 2 * t, 4);
        __m512i& terms = kOffset ? sum[i] : mins[i];
        terms = I::DotI16(terms, c_pairs, _mm512_set1_epi32(bsum_pair));
      }
    }
  }
  // Quarter t's 4-byte group g, unsigned, as Base::QuarterQuants makes it, for 16 columns:
  // `load(field)` reads 64 bytes of a field given as a function of the block — group g of both
  // column groups of a pair (PairSums), or groups g and g + 1 of one column group (QuarterRowGroup).
  template <class PB, class Load>
  static __m512i QuarterQuants(int t, int g, Load&& load) {
    const int h = t / 4, j = t % 4;
    if constexpr (std::is_same_v<PB, BlockQ6_Kx8>) {  // nibble j / 2 of ql[h][j % 2], qh[h]'s bits 2j.. to 4-5
      const __m512i ql = load([&](const PB& w) { return w.ql[h][j % 2][g]; });
      const __m512i qh = load([&](const PB& w) { return w.qh[h][g]; });
      const __m512i high = j >= 2 ? _mm512_srli_epi16(qh, 2 * j - 4) : _mm512_slli_epi16(qh, 4 - 2 * j);
      return _mm512_or_si512(_mm512_and_si512(j >= 2 ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F)),
                             _mm512_and_si512(high, _mm512_set1_epi8(0x30)));
    } else {  // bits 2j.. of qs[h]; Q3_K's third bit, bit t of the hmask byte, moved to bit 2
      __m512i q = _mm512_and_si512(_mm512_srli_epi16(load([&](const PB& w) { return w.qs[h][g]; }), 2 * j),
                                   _mm512_set1_epi8(3));
      if constexpr (std::is_same_v<PB, BlockQ3_Kx8>) {
        const __m512i hm = load([&](const PB& w) { return w.hmask[g]; });
        const __m512i bit = t >= 2 ? _mm512_srli_epi16(hm, t - 2) : _mm512_slli_epi16(hm, 2 - t);
        q = _mm512_or_si512(q, _mm512_and_si512(bit, _mm512_set1_epi8(4)));
      }
      return q;
    }
  }
  template <class PB>
  static constexpr int kOffsetLog2 = Base::template kQuarterOffsetLog2<PB>;
  // Q5_K's fifth bits (bit 2ch of qh for the low nibbles' sub-block, 2ch + 1 for the high) as 16.
  static void AddFifthBits(__m512i qh, int ch, __m512i& lo, __m512i& hi) {
    const __m512i sixteen = _mm512_set1_epi8(0x10);
    lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, _mm512_set1_epi8(static_cast<char>(1 << (2 * ch)))), lo, sixteen);
    hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, _mm512_set1_epi8(static_cast<char>(2 << (2 * ch)))), hi, sixteen);
  }

  // One activation row against eight packed Q4_K or Q5_K columns: Base's SuperBlockSums<1> with two
  // 4-byte groups per zmm (group 2p in lanes 0-7, 2p + 1 in lanes 8-15, each against its own four
  // activation bytes) and both nibbles of a load used, then Base's ApplyKScales. The integer sums
  // are the same (exact), so the bits are PackedKTile's.
  template <class PB>
  static void Q4KRowGroup(const ActQ8_K* x, size_t n_blocks, const PB* w, float* y) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i pick[4] = {PairIndex(0), PairIndex(1), PairIndex(2), PairIndex(3)};
    __m256 acc[1] = {_mm256_setzero_ps()};
    for (size_t b = 0; b < n_blocks; ++b) {
      Base::RequestBlockAndAhead(w + b);
      const PB& wb = w[b];
      const ActQ8_K& xb = x[b];
      __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int ch = 0; ch < 4; ++ch) {  // sub-blocks 2ch (low nibbles) and 2ch + 1 (high)
        const __m512i x_lo = _mm512_zextsi256_si512(Base::Load(xb.qs + 64 * ch));
        const __m512i x_hi = _mm512_zextsi256_si512(Base::Load(xb.qs + 64 * ch + 32));
        __m512i c_lo = _mm512_setzero_si512(), c_hi = c_lo;
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          const __m512i raw = _mm512_loadu_si512(wb.qs[ch][2 * p]);
          __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
          if constexpr (requires { wb.qh; }) AddFifthBits(_mm512_loadu_si512(wb.qh[2 * p]), ch, lo, hi);
          c_lo = I::DotU8S8(c_lo, lo, _mm512_permutexvar_epi32(pick[p], x_lo));  // q ≤ 31
          c_hi = I::DotU8S8(c_hi, hi, _mm512_permutexvar_epi32(pick[p], x_hi));
        }
        sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_mullo_epi32(c_lo, SubBlockScales(wb.sc[2 * ch])),
                                                     _mm512_mullo_epi32(c_hi, SubBlockScales(wb.sc[2 * ch + 1]))));
      }
      // Σ_s m_s·(bsum_2s + bsum_2s+1), as (m_s, m_s+1) pairs against (Σx of s, of s + 1).
      const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.bsums + 8)));
      const __m256i mins = _mm256_add_epi32(_mm256_add_epi32(MinTerms(wb.m[0], _mm256_broadcastd_epi32(bs)),
                                                             MinTerms(wb.m[2], _mm256_broadcastd_epi32(_mm_srli_si128(bs, 4)))),
                                            _mm256_add_epi32(MinTerms(wb.m[4], _mm256_broadcastd_epi32(_mm_srli_si128(bs, 8))),
                                                             MinTerms(wb.m[6], _mm256_broadcastd_epi32(_mm_srli_si128(bs, 12)))));
      const __m256i sums[1] = {_mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1))};
      const __m256i min_sums[1] = {mins};
      Base::template ApplyKScales<1>(wb, &xb, 0, sums, min_sums, acc);
    }
    _mm256_storeu_ps(y, acc[0]);
  }

  // One activation row against eight packed Q2_K, Q3_K or Q6_K columns: Base's QuarterSums<1> with
  // two 4-byte groups per zmm, as Q4KRowGroup, each group's products summed in i16 pairs and scaled
  // by its column's group scale in i32 (vpmaddubsw, vpmaddwd: q ≤ 63, |x| ≤ 127, |scale| ≤ 128, so
  // exact) instead of a vpmulld per group; the same integers, so PackedKTile's bits.
  template <class PB>
  static void QuarterRowGroup(const ActQ8_K* x, size_t n_blocks, const PB* w, float* y) {
    constexpr bool kOffset = !std::is_same_v<PB, BlockQ2_Kx8>;  // signed scales against an offset
    const __m512i pick[4] = {PairIndex(0), PairIndex(1), PairIndex(2), PairIndex(3)};
    // i16 lane e: column (e / 2) % 8 of the first group (c0) or the second (c1); of both, alternating (pairs).
    const __m512i lane = LaneIndex();
    const __m512i first = _mm512_and_si512(_mm512_srli_epi16(lane, 1), _mm512_set1_epi16(7));
    const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(8));
    const __m256i pairs = _mm512_castsi512_si256(
        _mm512_add_epi16(_mm512_srli_epi16(lane, 1), _mm512_slli_epi16(_mm512_and_si512(lane, _mm512_set1_epi16(1)), 3)));
    __m256 acc[1] = {_mm256_setzero_ps()};
    for (size_t b = 0; b < n_blocks; ++b) {
      Base::RequestBlockAndAhead(w + b);
      const PB& wb = w[b];
      const ActQ8_K& xb = x[b];
      const auto load = [&](auto field) { return _mm512_loadu_si512(field(wb)); };
      __m512i sum = _mm512_setzero_si512();
      __m256i bsum_terms = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
        // Groups 2t and 2t + 1's column scales as i16 (sc) and their bsum coefficients (coef):
        // Q2_K's 4-bit scales and mins, Q3_K's and Q6_K's signed scales for both.
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(GroupScales(wb, 2 * t)));
        __m256i sc, coef;
        if constexpr (kOffset) {
          sc = coef = _mm256_cvtepi8_epi16(raw);
        } else {
          sc = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(0x0F)));
          coef = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
        }
        const __m512i sc_z = _mm512_zextsi256_si512(sc);
        const __m512i c[2] = {_mm512_permutexvar_epi16(first, sc_z), _mm512_permutexvar_epi16(second, sc_z)};
        const __m512i xt = _mm512_zextsi256_si512(Base::Load(xb.qs + 32 * t));
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p)  // groups 2p, 2p + 1 of the quarter: g < 4 group 2t, else 2t + 1
          sum = I::DotU8S8Scaled(sum, QuarterQuants<PB>(t, 2 * p, load), _mm512_permutexvar_epi32(pick[p], xt), c[p / 2]);
        int32_t bsum_pair;
        std::memcpy(&bsum_pair, xb.bsums + 2 * t, 4);
        bsum_terms = _mm256_add_epi32(bsum_terms, _mm256_madd_epi16(_mm256_permutexvar_epi16(pairs, coef),
                                                                    _mm256_set1_epi32(bsum_pair)));
      }
      __m256i sums[1] = {_mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1))};
      const __m256i mins[1] = {bsum_terms};
      if constexpr (kOffset) sums[0] = _mm256_sub_epi32(sums[0], _mm256_slli_epi32(bsum_terms, kOffsetLog2<PB>));
      Base::template ApplyKScales<1>(wb, &xb, 0, sums, mins, acc);
    }
    _mm256_storeu_ps(y, acc[0]);
  }

 private:
  static __m128i Bytes8(const uint8_t (&v)[8]) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v)); }
  static __m128i Bytes8(const int8_t (&v)[8]) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v)); }
  // Eight bytes of a, then eight of b.
  static __m128i PairBytes(const uint8_t (&a)[8], const uint8_t (&b)[8]) { return _mm_unpacklo_epi64(Bytes8(a), Bytes8(b)); }
  // Group g's eight column scales: Q2_K's scale | min bytes, Q3_K's and Q6_K's signed scales.
  static const void* GroupScales(const BlockQ2_Kx8& w, int g) { return w.scales[g]; }
  static const void* GroupScales(const BlockQ3_Kx8& w, int g) { return w.sc[g]; }
  static const void* GroupScales(const BlockQ6_Kx8& w, int g) { return w.sc[g]; }
  // One activation row, eight columns at a time, through Group(x, n_blocks, group, y).
  template <class PB, auto Group>
  static void OneRow(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t k, size_t n_begin,
                     size_t n_end) {
    const auto* x = static_cast<const ActQ8_K*>(xq);
    const auto* wb = static_cast<const uint8_t*>(w);
    for (size_t n = n_begin; n < n_end; n += 8) Group(x, k / kQKK, reinterpret_cast<const PB*>(wb + n * w_row_bytes), y + n);
  }
  // i32 lanes 0-7 take element 2p, lanes 8-15 element 2p + 1.
  static __m512i PairIndex(int p) {
    return _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(2 * p), _mm512_set1_epi32(2 * p + 1));
  }
  // A sub-block's eight column scales (bytes) as i32 in lanes c and c + 8.
  static __m512i SubBlockScales(const uint8_t (&sc)[8]) {
    int64_t v;
    std::memcpy(&v, sc, 8);
    return _mm512_cvtepu8_epi32(_mm_set1_epi64x(v));
  }
  // m[s][c]·bs_s + m[s+1][c]·bs_s+1 per column c, from the 16 bytes m[s], m[s + 1] (contiguous rows
  // of BlockQ4_Kx8::m, at m_rows) and (bs_s, bs_s+1).
  static __m256i MinTerms(const uint8_t* m_rows, __m256i bs_pair) {
    const __m128i two = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m_rows));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(two, _mm_srli_si128(two, 8))), bs_pair);
  }
  static __m512i LaneIndex() {
    return _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8,
                            7, 6, 5, 4, 3, 2, 1, 0);
  }
};

}  // namespace fak::kernels::simd

#endif  // FAK_KERNELS_SIMD_QUANT_AVX512_H_
