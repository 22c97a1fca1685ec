// Quantized block formats: the byte layouts of GGUF's Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4 weight blocks (../shared/docs/model-formats.md §3, which
// restates ggml-common.h), and the three layouts fak quantizes activation rows into before a
// quantized matmul.
//
// Only constants, plain structs and constexpr helpers live here. The helpers are for code outside
// the tier TUs: kernels/arch/*.cc never call them at run time, because an inline function compiled
// there with -mavx512f could be merged by the linker with a baseline copy (the ODR trap in
// docs/style.md).
//
// All multi-byte fields are little-endian; `uint16_t d` fields hold IEEE binary16 bits. Blocks of a
// row follow each other without padding, so a weight row of k elements is k / kBlockElems blocks.
// Every struct has 2-byte alignment at most (weights) or 4 (activations); GGUF tensor data is
// 32-byte aligned and every block size but MXFP4's is even, so a block pointer is always suitably
// aligned (MXFP4's 17-byte block has bytes only, alignment 1).
#ifndef FAK_KERNELS_QUANT_FORMAT_H_
#define FAK_KERNELS_QUANT_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace fak::kernels {

// Weight quant types fak computes with. The value indexes KernelTable::dequantize.
enum class QuantType : int {
  kQ8_0 = 0, kQ4_0 = 1, kQ5_0 = 2, kQ4_K = 3, kQ5_K = 4, kQ6_K = 5,
  kQ4_1 = 6, kQ5_1 = 7, kQ2_K = 8, kQ3_K = 9, kIQ4_NL = 10, kIQ4_XS = 11, kMXFP4 = 12,
};
inline constexpr int kNumQuantTypes = 13;

inline constexpr size_t kQK0 = 32;   // elements per 32-element block (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4)
inline constexpr size_t kQKK = 256;  // elements per super-block (Q2_K .. Q6_K, IQ4_XS)
inline constexpr size_t kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

// ---- Weight blocks (byte-exact GGUF layouts) ----

// Q8_0 (ggml type 8): value e = d · qs[e].
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];
};

// Q4_0 (ggml type 2): byte j holds element j (low nibble) and j+16 (high nibble); value d·(q − 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};

// Q5_0 (ggml type 6): nibbles as Q4_0; bit e of the LE u32 qh is element e's 5th bit; d·(q − 16).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};

// Q4_1 (ggml type 3): nibbles as Q4_0; value d·q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};

// Q5_1 (ggml type 7): q as Q5_0 (nibble + 16·bit); value d·q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl), indexed by a 4-bit quant.
inline constexpr int8_t kIQ4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// The 16 values of MXFP4's E2M1 element, doubled (ggml's kvalues_mxfp4); the block scale is halved to match.
inline constexpr int8_t kMXFP4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ4_NL (ggml type 20): nibbles as Q4_0; value d·kIQ4Levels[q].
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};

// MXFP4 (ggml type 39): nibbles as Q4_0; value kMXFP4Levels[q] · 2^(e − 128) (e: E8M0 exponent).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};

// Q2_K (ggml type 10): 16 groups of 16, scales[g] = 4-bit scale (low) and 4-bit min (high). Half h
// (0/1) of 128 uses qs[32h..32h+31]: element 128h + 32j + l takes bits 2j..2j+1 of qs[32h + l],
// group 8h + 2j + l/16. Value d·sc·q − dmin·m.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};

// Q3_K (ggml type 11): Q2_K's element order for the low two bits; the third is bit 4h + j of
// hmask[l] (element 128h + 32j + l), and q = low + 4·bit − 4 ∈ [−4, 3]. 16 groups with 6-bit scales
// packed in `scales` (group g: low 4 bits in byte g % 8, nibble g / 8; high 2 bits in byte 8 + g % 4,
// bits 2·(g / 4)); value d·(sc − 32)·q.
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};

// IQ4_XS (ggml type 23): 8 sub-blocks of 32; sub-block s has the 6-bit scale
// ls = (scales_l[s/2] >> 4·(s%2) & 15) | (scales_h >> 2s & 3) << 4 and quants qs[16s..16s+15] (nibbles
// as Q4_0). Value d·(ls − 32)·kIQ4Levels[q].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

// Q4_K (ggml type 12): 8 sub-blocks of 32 with 6-bit scale sc[s] and min m[s] packed in `scales`.
// Chunk c (0..3) of 64 elements uses qs[32c..32c+31]: low nibbles are sub-block 2c, high nibbles
// sub-block 2c+1. Value d·sc[s]·q − dmin·m[s].
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[128];
};

// Q5_K (ggml type 13): Q4_K plus a 5th bit per element: qh[l] bit 2c for the low-nibble element l of
// chunk c, bit 2c+1 for the high-nibble one. q = nib + 16·bit.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[32];
  uint8_t qs[128];
};

// Q6_K (ggml type 14): two halves of 128; half h uses ql[64h..], qh[32h..], scales[8h..]. Value
// d · scales[e/16] · (q − 32) with q 6 bits (see model-formats.md §3.3). d comes last.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// ---- Packed weight blocks (fak's own, in memory only; quant_pack.h makes them) ----
//
// The 32-element types packed eight weight rows at a time: block b of rows 8r..8r+7 interleaves the
// rows by 4-element groups, so one register's eight 32-bit lanes are the eight rows (output
// columns) and one broadcast of four activation bytes meets all of them. Group j is elements
// 4j..4j+3. A packed matrix has the bytes of the plain one: rows 8r.. start at byte 8r · row bytes.

// Q8_0: qs[32j + 4c + e] = row c's qs[4j + e].
struct BlockQ8_0x8 {
  uint16_t d[8];  // f16 scale of each row's block
  int8_t qs[256];
};

// Q4_0: qs[32j + 4c + e] = row c's qs[4j + e] for j < 4, so a 32-byte load holds group j (low
// nibbles) and group j + 4 (high nibbles) of all eight rows.
struct BlockQ4_0x8 {
  uint16_t d[8];
  uint8_t qs[128];
};

// Q5_0: nibbles as BlockQ4_0x8; qh[j] bit 4c + e is row c's fifth bit of element 4j + e.
struct BlockQ5_0x8 {
  uint16_t d[8];
  uint32_t qh[8];
  uint8_t qs[128];
};

// Q4_1 / Q5_1: Q4_0x8 / Q5_0x8 plus each row's offset m.
struct BlockQ4_1x8 {
  uint16_t d[8];
  uint16_t m[8];
  uint8_t qs[128];
};
struct BlockQ5_1x8 {
  uint16_t d[8];
  uint16_t m[8];
  uint32_t qh[8];
  uint8_t qs[128];
};

// IQ4_NL / MXFP4: nibbles (level indices) as BlockQ4_0x8, with each row's scale.
struct BlockIQ4_NLx8 {
  uint16_t d[8];
  uint8_t qs[128];
};
struct BlockMXFP4x8 {
  uint8_t e[8];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ4_1x8) == 8 * 20 && sizeof(BlockQ5_1x8) == 8 * 24 && sizeof(BlockIQ4_NLx8) == 8 * 18 &&
              sizeof(BlockMXFP4x8) == 8 * 17);
// Q4_K: the scales and mins widened to bytes, sc[s][c] / m[s][c] for sub-block s of row c; quants
// by 4-element group: qs[ch][j][4c + e] = row c's qs[32ch + 4j + e], whose low nibble is element
// 4j + e of sub-block 2ch and high nibble that of sub-block 2ch + 1. 32 bytes more than 8 rows.
struct BlockQ4_Kx8 {
  uint16_t d[8];
  uint16_t dmin[8];
  uint8_t sc[8][8];
  uint8_t m[8][8];
  uint8_t qs[4][8][32];
};

// Q5_K: BlockQ4_Kx8 plus the fifth bits by 4-byte group: qh[j][4c + e] = row c's qh[4j + e], whose
// bit s is the fifth bit of element 32s + 4j + e (sub-block s). 32 bytes more than 8 rows.
struct BlockQ5_Kx8 {
  uint16_t d[8];
  uint16_t dmin[8];
  uint8_t sc[8][8];
  uint8_t m[8][8];
  uint8_t qs[4][8][32];
  uint8_t qh[8][32];
};

// Q6_K: each row's scale, its 16 group scales (sc[g][c] for row c), and the quants by 4-byte group:
// ql[h][p][b][4c + e] = row c's ql[64h + 32p + 4b + e], whose low nibble holds the low four bits of
// element 128h + 32p + 4b + e and high nibble those of element 128h + 64 + 32p + 4b + e;
// qh[h][b][4c + e] = row c's qh[32h + 4b + e], whose bits 2j..2j+1 are the high two bits of element
// 128h + 32j + 4b + e. So quarter t = 4h + j (elements 32t..) is nibble j / 2 of ql[h][j % 2] and
// bits 2j of qh[h], Q3_K's arrangement. The same size as 8 rows.
struct BlockQ6_Kx8 {
  uint16_t d[8];
  int8_t sc[16][8];
  uint8_t ql[2][2][8][32];
  uint8_t qh[2][8][32];
};

// IQ4_XS: each row's scale, its 8 sub-block scales ls − 32 as signed bytes (sc[s][c] for row c), and
// the level indices by 4-byte group: qs[s][g][4c + e] = row c's qs[16s + 4g + e], whose low nibble
// indexes element 4g + e of sub-block s and high nibble element 16 + 4g + e. 16 bytes more than 8 rows.
struct BlockIQ4_XSx8 {
  uint16_t d[8];
  int8_t sc[8][8];
  uint8_t qs[8][4][32];
};

// Q2_K: each row's scales and their 16 groups' scale/min bytes (scales[g][c] for row c), and the
// 2-bit quants by 4-byte group: qs[h][b][4c + e] = row c's qs[32h + 4b + e] (bits 2j..2j+1 of that
// byte are element 128h + 32j + 4b + e). The same size as 8 rows.
struct BlockQ2_Kx8 {
  uint16_t d[8];
  uint16_t dmin[8];
  uint8_t scales[16][8];
  uint8_t qs[2][8][32];
};

// Q3_K: each row's scale, its 16 group scales less their bias of 32 as signed bytes (sc[g][c] for
// row c), the low two bits as BlockQ2_Kx8 (qs[h][b][4c + e] = row c's qs[32h + 4b + e]) and the third
// bits by 4-byte group: hmask[b][4c + e] = row c's hmask[4b + e] (bit 4h + j of that byte belongs to
// element 128h + 32j + 4b + e). 32 bytes more than 8 rows.
struct BlockQ3_Kx8 {
  uint16_t d[8];
  int8_t sc[16][8];
  uint8_t qs[2][8][32];
  uint8_t hmask[8][32];
};

static_assert(sizeof(BlockQ4_Kx8) == 8 * sizeof(BlockQ4_K) + 32);
static_assert(sizeof(BlockQ5_Kx8) == 8 * sizeof(BlockQ5_K) + 32 && sizeof(BlockQ6_Kx8) == 8 * sizeof(BlockQ6_K));
static_assert(sizeof(BlockQ2_Kx8) == 8 * sizeof(BlockQ2_K));
static_assert(sizeof(BlockQ3_Kx8) == 8 * sizeof(BlockQ3_K) + 32);
static_assert(sizeof(BlockIQ4_XSx8) == 8 * sizeof(BlockIQ4_XS) + 16);
static_assert(sizeof(BlockQ8_0x8) == 8 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x8) == 8 * sizeof(BlockQ4_0) &&
              sizeof(BlockQ5_0x8) == 8 * sizeof(BlockQ5_0));
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_1) == 24 && sizeof(BlockIQ4_NL) == 18 && sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockIQ4_XS) == 136);
static_assert(offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ3_K, d) == 108 && offsetof(BlockIQ4_XS, qs) == 8);
static_assert(offsetof(BlockQ5_0, qs) == 6 && offsetof(BlockQ4_K, qs) == 16 && offsetof(BlockQ5_K, qh) == 16 &&
              offsetof(BlockQ5_K, qs) == 48 && offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);

// ---- Activation blocks (fak's own, in memory only) ----
//
// Before a quantized matmul every activation row is quantized on its own (so the result for a row
// never depends on the other rows), into the layout ggml pairs with the weight type: for Q8_0,
// Q4_0, Q5_0, IQ4_NL and MXFP4 blocks of 32 with one scale (ggml's Q8_0), for Q4_1 and Q5_1 the same
// plus d·Σq (ggml's Q8_1, for the weights' offset m), for the 256-element types super-blocks of 256
// (ggml's Q8_K, byte-identical layout).
// In both, q = round-half-even(x · 127 / max|x|), so q ∈ [−127, 127], and d = max|x| / 127 — for
// ActQ8_0/ActQ8_1 rounded to the nearest f16 value, as ggml's block_q8_0/q8_1 store it (so products
// agree with llama.cpp's), for ActQ8_K kept in f32 as ggml's block_q8_K does.

// Activation block for the 32-element weight types (d holds an f16 value, widened).
struct ActQ8_0 {
  float d;
  int8_t qs[32];
};

// For Q4_1/Q5_1 weights: s = d·Σqs with the unrounded d, rounded to f16 (ggml's block_q8_1.s).
struct ActQ8_1 {
  float d;
  float s;
  int8_t qs[32];
};

// ggml's block_q8_K: bsums[g] is the sum of qs[16g .. 16g+15].
struct ActQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(ActQ8_0) == 36 && sizeof(ActQ8_1) == 40 && sizeof(ActQ8_K) == 292);

// Which activation layout a weight type is multiplied with.
enum class ActFormat : int { kQ8_0 = 0, kQ8_1 = 1, kQ8_K = 2 };
inline constexpr int kNumActFormats = 3;

// ---- Per-type facts ----

struct QuantFormat {
  QuantType type;
  const char* name;      // "Q4_K"
  uint32_t ggml_type;    // ggml / GGUF tensor type id
  size_t block_elems;    // elements per block
  size_t block_bytes;    // bytes per block
  ActFormat act;           // the activation layout it is multiplied with
  size_t act_block_bytes;  // bytes per activation block of that layout, same block_elems
};

inline constexpr QuantFormat kQuantFormats[kNumQuantTypes] = {
    {QuantType::kQ8_0, "Q8_0", 8, kQK0, sizeof(BlockQ8_0), ActFormat::kQ8_0, sizeof(ActQ8_0)},
    {QuantType::kQ4_0, "Q4_0", 2, kQK0, sizeof(BlockQ4_0), ActFormat::kQ8_0, sizeof(ActQ8_0)},
    {QuantType::kQ5_0, "Q5_0", 6, kQK0, sizeof(BlockQ5_0), ActFormat::kQ8_0, sizeof(ActQ8_0)},
    {QuantType::kQ4_K, "Q4_K", 12, kQKK, sizeof(BlockQ4_K), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kQ5_K, "Q5_K", 13, kQKK, sizeof(BlockQ5_K), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kQ6_K, "Q6_K", 14, kQKK, sizeof(BlockQ6_K), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kQ4_1, "Q4_1", 3, kQK0, sizeof(BlockQ4_1), ActFormat::kQ8_1, sizeof(ActQ8_1)},
    {QuantType::kQ5_1, "Q5_1", 7, kQK0, sizeof(BlockQ5_1), ActFormat::kQ8_1, sizeof(ActQ8_1)},
    {QuantType::kQ2_K, "Q2_K", 10, kQKK, sizeof(BlockQ2_K), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kQ3_K, "Q3_K", 11, kQKK, sizeof(BlockQ3_K), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kIQ4_NL, "IQ4_NL", 20, kQK0, sizeof(BlockIQ4_NL), ActFormat::kQ8_0, sizeof(ActQ8_0)},
    {QuantType::kIQ4_XS, "IQ4_XS", 23, kQKK, sizeof(BlockIQ4_XS), ActFormat::kQ8_K, sizeof(ActQ8_K)},
    {QuantType::kMXFP4, "MXFP4", 39, kQK0, sizeof(BlockMXFP4), ActFormat::kQ8_0, sizeof(ActQ8_0)},
};

constexpr const QuantFormat& FormatOf(QuantType t) { return kQuantFormats[static_cast<int>(t)]; }

// Bytes of one weight row of k elements (k a multiple of block_elems).
constexpr size_t QuantRowBytes(QuantType t, size_t k) { return k / FormatOf(t).block_elems * FormatOf(t).block_bytes; }

// Bytes of one quantized activation row of k elements for weights of type t; quantize_act writes
// m such rows back to back.
constexpr size_t QuantActRowBytes(QuantType t, size_t k) {
  return k / FormatOf(t).block_elems * FormatOf(t).act_block_bytes;
}

}  // namespace fak::kernels

#endif  // FAK_KERNELS_QUANT_FORMAT_H_
