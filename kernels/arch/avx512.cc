// AVX-512 tiers: 16-lane xsimd batches, fused multiply-add. Built with -mavx512* only here, twice:
// as avx512 (with VNNI) and as avx512_skx (without; cmake/kernel_tiers.cmake), one body for both.
// The avx512 tier also runs packed Q8_0 products of several rows on AMX-INT8 where the CPU and OS
// allow it (a run-time check, so the tier asks no more of the CPU than VNNI), and some quantized
// decode steps on zmm (quant_avx512.h: the same integers, so the ymm bits).
#include <xsimd/xsimd.hpp>

#if defined(__AVX512VNNI__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#endif

#include "kernels/simd/kernels_impl.h"
#include "kernels/simd/quant_impl.h"
#include "kernels/simd/quant_x86.h"
#include "kernels/simd/quant_avx512.h"
#include "kernels/tier_registry.h"

namespace fak::kernels {
namespace {

struct Avx512V {
  using B = xsimd::batch<float, xsimd::avx512bw>;
  static constexpr size_t kWidth = B::size;
  // 32 zmm registers: 4x6 accumulators + 6 W rows + 1 X row. Prefill blocks: 128 X rows, K-blocks of
  // up to 48 x 16 floats (the packed 6 W rows, 18 KiB, stay in L1 while 4-row X tiles stream from L2).
  // Stack per prefill call: 48 KiB of accumulators + 18 KiB of packed W.
  static constexpr int kMR = 4, kNR = 6, kDecodeNR = 8;
  static constexpr size_t kMatMulRows = 128, kKcSteps = 48;
  static B Load(const float* p) { return B::load_unaligned(p); }
  static void Store(float* p, B v) { v.store_unaligned(p); }
  static B Set1(float v) { return B(v); }
  // A true fused multiply-add: xsimd 8.1 has no AVX-512 fma and falls back to a * b + c (two roundings).
  static B Fma(B a, B b, B c) { return _mm512_fmadd_ps(a, b, c); }
  static float Hsum(B v) { return xsimd::hadd(v); }
  // Lane i is Hsum(v[i]) with xsimd's hadd tree: lanes (j, j+8), then (j, j+4), then (0,1) and
  // (2,3), then the last pair. (xsimd 8.1's haddp uses that tree but returns lanes out of order.)
  [[gnu::always_inline]] static B HsumBatch(const B* v) {
    __m512 h[8], q[4], p[2];
    for (int i = 0; i < 8; ++i)  // rows i | i+8, 8 lanes each
      h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 8], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 8], 0xee));
    for (int i = 0; i < 4; ++i)  // rows i | i+8 | i+4 | i+12, 4 lanes each
      q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[i], h[i + 4], 0x88), _mm512_shuffle_f32x4(h[i], h[i + 4], 0xdd));
    for (int i = 0; i < 2; ++i)  // per 128-bit lane: rows (2i, 2i+1) of that lane's family, 2 lanes each
      p[i] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0x88), _mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0xdd));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], 0x88), _mm512_shuffle_ps(p[0], p[1], 0xdd));
    return _mm512_shuffle_f32x4(r, r, 0xd8);  // rows 0-3 | 8-11 | 4-7 | 12-15 -> in order
  }
  // Lanes 0-7 are Hsum(v[0..7]) by the same tree (HsumBatch's first three stages on half the rows,
  // then the last pair within each 128-bit lane); lanes 8-15 are left unspecified.
  [[gnu::always_inline]] static B HsumHalfBatch(const B* v) {
    __m512 h[4], q[2];
    for (int i = 0; i < 4; ++i)  // rows i | i+4, 8 lanes each
      h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[i], v[i + 4], 0x44), _mm512_shuffle_f32x4(v[i], v[i + 4], 0xee));
    for (int i = 0; i < 2; ++i)  // rows i | i+4 | i+2 | i+6, 4 lanes each
      q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[i], h[i + 2], 0x88), _mm512_shuffle_f32x4(h[i], h[i + 2], 0xdd));
    __m512 p = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], 0x88), _mm512_shuffle_ps(q[0], q[1], 0xdd));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(p, p, 0x88), _mm512_shuffle_ps(p, p, 0xdd));
    // r's 128-bit lanes hold rows (0,1), (4,5), (2,3), (6,7) in their first two floats.
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 8, 9, 4, 5, 12, 13, 0, 1, 8, 9, 4, 5, 12, 13), r);
  }
  // Exact widenings of 16 stored KV elements (kernels_impl.h LoadKV): vcvtph2ps, and a shift for
  // bf16 (AVX-512 BF16's dot products would round the query to bf16 too: another regime).
  static B LoadF16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static B LoadBf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static B Max(B a, B b) { return xsimd::max(a, b); }
  static B Min(B a, B b) { return xsimd::min(a, b); }
  static B Exp(B v) { return xsimd::exp(v); }
  static B Tanh(B v) { return xsimd::tanh(v); }
};

#if defined(__AVX512VNNI__)
// ---- AMX-INT8: packed Q8_0 (BlockQ8_0x8) times several activation rows ----
//
// One TDPBSSD gives the exact int32 block sums Σ_e w·x of up to 16 activation rows × 8 weight columns
// (a packed group's qs are B's layout as they lie: row j = bytes 4j..4j+3 of the eight columns), so a
// block of 16 rows × 16 columns is two instructions instead of 256 VNNI steps and sign tricks. The
// float step is PackedTile's (quant_x86.h) lane for lane — acc = fma(d_c·d_x, float(sum), acc) per
// block in block order, starting from 0 — so every output has the bits of the VNNI kernel, which
// one-row products (decode) keep using (PackedQuantTest: rows, column ranges, AVX2 against AVX-512).
#define FAK_AMX_TARGET __attribute__((target("amx-tile,amx-int8")))

// AMX-TILE and AMX-INT8 (CPUID.(7,0):EDX bits 24, 25), and the OS's leave to use the tile data
// state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA). Asked once per process.
bool AmxInt8Usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

// Tiles: 0 = A (rows × 32 activation bytes), 1 and 2 = B of two groups (8 × 32 bytes), 3 and 4 = C
// of those groups (rows × 8 int32).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig ConfigFor(int rows) {
  TileConfig c;
  for (int t = 0; t < 5; ++t) c.colsb[t] = 32;
  c.rows[0] = c.rows[3] = c.rows[4] = static_cast<uint8_t>(rows);
  c.rows[1] = c.rows[2] = 8;
  return c;
}

// Rows [0, rows) (rows ≤ 16, the loaded config's) against columns [n, n + 8·groups), groups 1 or 2.
// `ahead` (or null): weights a later call reads, prefetched into L2 at the pace of this one's blocks —
// a batched decode step streams its weights from DRAM, as the one-row kernel does.
FAK_AMX_TARGET void AmxQ8_0Block(const ActQ8_0* x, size_t n_blocks, const uint8_t* w, size_t w_row_bytes, float* y,
                                 size_t ldy, int rows, size_t n, int groups, const uint8_t* ahead) {
  const auto* g0 = reinterpret_cast<const BlockQ8_0x8*>(w + n * w_row_bytes);
  const auto* g1 = reinterpret_cast<const BlockQ8_0x8*>(w + (n + 8) * w_row_bytes);
  alignas(64) int32_t sums[16][16] = {};  // [row][column]: C of group 0, then of group 1 (when there is one)
  __m512 acc[16];
  for (int r = 0; r < rows; ++r) acc[r] = _mm512_setzero_ps();
  const size_t x_stride = n_blocks * sizeof(ActQ8_0);
  for (size_t b = 0; b < n_blocks; ++b) {
    if (ahead != nullptr) {
      for (size_t o = 0; o < 2 * sizeof(BlockQ8_0x8); o += 64) __builtin_prefetch(ahead + 2 * b * sizeof(BlockQ8_0x8) + o, 0, 2);
    }
    _tile_loadd(0, x[b].qs, x_stride);
    _tile_zero(3);
    _tile_loadd(1, g0[b].qs, 32);
    _tile_dpbssd(3, 0, 1);
    _tile_stored(3, &sums[0][0], 64);
    __m256i d16 = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g0[b].d)));
    if (groups == 2) {
      _tile_zero(4);
      _tile_loadd(2, g1[b].qs, 32);
      _tile_dpbssd(4, 0, 2);
      _tile_stored(4, &sums[0][8], 64);
      d16 = _mm256_inserti128_si256(d16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(g1[b].d)), 1);
    }
    const __m512 d = _mm512_cvtph_ps(d16);
    for (int r = 0; r < rows; ++r) {
      const __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(x[r * n_blocks + b].d));
      acc[r] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_load_si512(sums[r])), acc[r]);
    }
  }
  const __mmask16 keep = groups == 2 ? 0xFFFF : 0x00FF;
  for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(y + r * ldy, keep, acc[r]);
}

// Y[m][n_begin, n_end) for packed Q8_0 weights (n_begin and n_end multiples of 8), or false when AMX
// cannot be used here (then nothing is written). Rows in blocks of 64 (their activations stay in L2)
// times column pairs of groups (their weights stay in L1 while the row tiles pass), in tiles of 16
// rows, then the rest as one tile under its own config.
FAK_AMX_TARGET bool AmxMatMulPackedQ8_0(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                                        size_t m, size_t k, size_t n_begin, size_t n_end) {
  if (!AmxInt8Usable()) return false;
  const size_t n_blocks = k / kQK0;
  const auto* x = static_cast<const ActQ8_0*>(xq);
  const auto* wb = static_cast<const uint8_t*>(w);
  for (size_t i0 = 0; i0 < m; i0 += 64) {
    const size_t i1 = std::min(m, i0 + 64), full_end = i0 + (i1 - i0) / 16 * 16;
    const size_t ranges[2][3] = {{i0, full_end, 16}, {full_end, i1, i1 - full_end}};  // first, last, tile rows
    for (const auto& [first, last, tile_rows] : ranges) {
      if (first == last) continue;
      const TileConfig config = ConfigFor(static_cast<int>(tile_rows));
      _tile_loadconfig(&config);
      for (size_t n = n_begin; n < n_end; n += 16) {
        const int groups = n + 16 <= n_end ? 2 : 1;
        // Two column pairs ahead, read once per pair (by its first row tile); none past the range.
        const uint8_t* ahead = n + 48 <= n_end ? wb + (n + 32) * w_row_bytes : nullptr;
        for (size_t i = first; i < last; i += tile_rows)
          AmxQ8_0Block(x + i * n_blocks, n_blocks, wb, w_row_bytes, y + i * ldy + n, ldy, static_cast<int>(tile_rows), n,
                       groups, i == first ? ahead : nullptr);
      }
    }
  }
  _tile_release();
  return true;
}
#endif

// int8 dot products for the quantized matmul (quant_x86.h): AVX512-VNNI on ymm (AVX512VL); built
// without VNNI (the avx512_skx tier), vpmaddubsw + vpmaddwd as on AVX2 — the same integer lanes.
struct Avx512I {
#if defined(__AVX512VNNI__)
  static constexpr bool kUnsaturatedDot = true;  // DotU8S8 sums any u8 · s8 products exactly
  // Packed Q8_0 times m ≥ 2 rows through AMX when it can be used (AmxMatMulPackedQ8_0).
  static bool MatMulPackedQ8_0Rows(const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m,
                                   size_t k, size_t n_begin, size_t n_end) {
    return AmxMatMulPackedQ8_0(xq, w, w_row_bytes, y, ldy, m, k, n_begin, n_end);
  }
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static __m512i DotU8S8(__m512i acc, __m512i u, __m512i s) { return _mm512_dpbusd_epi32(acc, u, s); }
  // DotU8S8 against the four bytes at s broadcast, folded into the vpdpbusd as an embedded
  // broadcast ({1to16}): one instruction where set1 + vpdpbusd would be two.
  static __m512i DotU8S8Broadcast(__m512i acc, __m512i u, const int8_t* s) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(s)));
    return acc;
  }
  static __m256i DotU8S8Scaled(__m256i acc, __m256i u, __m256i s, __m256i c) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), c);
  }
  static __m512i DotU8S8Scaled(__m512i acc, __m512i u, __m512i s, __m512i c) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, s), c);
  }
  static __m512i DotI16(__m512i acc, __m512i a, __m512i b) { return _mm512_dpwssd_epi32(acc, a, b); }
#else
  static constexpr bool kUnsaturatedDot = false;  // vpmaddubsw saturates a pair past ±32767
  static __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static __m512i DotU8S8(__m512i acc, __m512i u, __m512i s) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
  }
  static __m512i DotU8S8Broadcast(__m512i acc, __m512i u, const int8_t* s) {
    int32_t s4;
    std::memcpy(&s4, s, 4);
    return DotU8S8(acc, u, _mm512_set1_epi32(s4));
  }
  static __m256i DotU8S8Scaled(__m256i acc, __m256i u, __m256i s, __m256i c) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), c));
  }
  static __m512i DotU8S8Scaled(__m512i acc, __m512i u, __m512i s, __m512i c) {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), c));
  }
  static __m512i DotI16(__m512i acc, __m512i a, __m512i b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
#endif
  static __m256i BitMaskBytes(uint32_t bits) { return _mm256_movm_epi8(bits); }
};

void FillAvx512Table(KernelTable* table) {
  simd::FillTable<Avx512V>(table);
  simd::FillQuantTable<Avx512V, simd::Avx512QuantOps<Avx512I>>(table);
}

}  // namespace

FAK_DEFINE_KERNEL_TIER(FillAvx512Table);

}  // namespace fak::kernels
