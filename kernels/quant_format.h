// Quantized block formats: the byte layouts of GGUF's Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K weight
// blocks (../shared/docs/model-formats.md §3, which restates ggml-common.h), and the two layouts fak
// quantizes activation rows into before a quantized matmul.
//
// Only constants, plain structs and constexpr helpers live here. The helpers are for code outside
// the tier TUs: kernels/arch/*.cc never call them at run time, because an inline function compiled
// there with -mavx512f could be merged by the linker with a baseline copy (the ODR trap in
// docs/style.md).
//
// All multi-byte fields are little-endian; `uint16_t d` fields hold IEEE binary16 bits. Blocks of a
// row follow each other without padding, so a weight row of k elements is k / kBlockElems blocks.
// Every struct has 2-byte alignment at most (weights) or 4 (activations); GGUF tensor data is
// 32-byte aligned and every block size is even, so a block pointer is always suitably aligned.
#ifndef FAK_KERNELS_QUANT_FORMAT_H_
#define FAK_KERNELS_QUANT_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace fak::kernels {

// Weight quant types fak computes with. The value indexes KernelTable::dequantize.
enum class QuantType : int { kQ8_0 = 0, kQ4_0 = 1, kQ5_0 = 2, kQ4_K = 3, kQ5_K = 4, kQ6_K = 5 };
inline constexpr int kNumQuantTypes = 6;

inline constexpr size_t kQK0 = 32;   // elements per "legacy" block (Q8_0, Q4_0, Q5_0)
inline constexpr size_t kQKK = 256;  // elements per K-quant super-block (Q4_K, Q5_K, Q6_K)
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

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ5_0) == 22);
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

static_assert(sizeof(BlockQ4_Kx8) == 8 * sizeof(BlockQ4_K) + 32);
static_assert(sizeof(BlockQ8_0x8) == 8 * sizeof(BlockQ8_0) && sizeof(BlockQ4_0x8) == 8 * sizeof(BlockQ4_0) &&
              sizeof(BlockQ5_0x8) == 8 * sizeof(BlockQ5_0));
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);
static_assert(offsetof(BlockQ5_0, qs) == 6 && offsetof(BlockQ4_K, qs) == 16 && offsetof(BlockQ5_K, qh) == 16 &&
              offsetof(BlockQ5_K, qs) == 48 && offsetof(BlockQ6_K, scales) == 192 && offsetof(BlockQ6_K, d) == 208);

// ---- Activation blocks (fak's own, in memory only) ----
//
// Before a quantized matmul every activation row is quantized on its own (so the result for a row
// never depends on the other rows): for Q8_0/Q4_0/Q5_0 weights into blocks of 32 with one f32
// scale, for K-quant weights into super-blocks of 256 (ggml's Q8_K, byte-identical layout).
// In both, q = round-half-even(x · 127 / max|x|), so q ∈ [−127, 127], and d = max|x| / 127 — for
// ActQ8_0 rounded to the nearest f16 value, as ggml's block_q8_0 stores it (so products agree with
// llama.cpp's), for ActQ8_K kept in f32 as ggml's block_q8_K does.

// Activation block for the 32-element weight types (d holds an f16 value, widened).
struct ActQ8_0 {
  float d;
  int8_t qs[32];
};

// ggml's block_q8_K: bsums[g] is the sum of qs[16g .. 16g+15].
struct ActQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(ActQ8_0) == 36 && sizeof(ActQ8_K) == 292);

// ---- Per-type facts ----

struct QuantFormat {
  QuantType type;
  const char* name;      // "Q4_K"
  uint32_t ggml_type;    // ggml / GGUF tensor type id
  size_t block_elems;    // elements per block
  size_t block_bytes;    // bytes per block
  size_t act_block_bytes;  // bytes per activation block (ActQ8_0 or ActQ8_K), same block_elems
};

inline constexpr QuantFormat kQuantFormats[kNumQuantTypes] = {
    {QuantType::kQ8_0, "Q8_0", 8, kQK0, sizeof(BlockQ8_0), sizeof(ActQ8_0)},
    {QuantType::kQ4_0, "Q4_0", 2, kQK0, sizeof(BlockQ4_0), sizeof(ActQ8_0)},
    {QuantType::kQ5_0, "Q5_0", 6, kQK0, sizeof(BlockQ5_0), sizeof(ActQ8_0)},
    {QuantType::kQ4_K, "Q4_K", 12, kQKK, sizeof(BlockQ4_K), sizeof(ActQ8_K)},
    {QuantType::kQ5_K, "Q5_K", 13, kQKK, sizeof(BlockQ5_K), sizeof(ActQ8_K)},
    {QuantType::kQ6_K, "Q6_K", 14, kQKK, sizeof(BlockQ6_K), sizeof(ActQ8_K)},
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
