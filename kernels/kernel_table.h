// KernelTable: every arithmetic op fak performs, as plain function pointers for one tier.
//
// One table per registered tier (tier_registry.h), filled by that tier's translation unit and picked
// once at start (dispatch.h). Only raw pointers and sizes cross this boundary, so no SIMD type or
// flag leaks out of a tier TU. Shapes are validated by callers; kernels have no error path.
#ifndef FAK_KERNELS_KERNEL_TABLE_H_
#define FAK_KERNELS_KERNEL_TABLE_H_

#include <cstddef>
#include <cstdint>

#include "fak/kernels/kv_dtype.h"
#include "fak/kernels/rope_pairing.h"
#include "kernels/quant_format.h"

namespace fak::kernels {

// A registered kernel tier: its index in RegisteredTiers() (tier_registry.h), slowest first. Every
// architecture registers scalar first; the other tiers are found by name (dispatch.h ParseTier).
enum class Tier : int { kScalar = 0 };

// Keys [first, first + n) of one sequence, stored contiguously per KV head as elements of the
// attention call's kv_dtype: key first + t of KV head h is element h * kv_head_stride + t * head_dim
// from k, its value the same element from v.
struct KeyRun {
  const void* k;
  const void* v;
  size_t kv_head_stride;  // elements between KV heads
  size_t n;               // keys in the run
};

// Attention runs up to this many query heads of one KV head together (they share K and V loads);
// its scratch holds one score row per head.
inline constexpr size_t kAttentionHeadsAtOnce = 4;

// Prefill hands attention up to this many consecutive query rows of a sequence at once: their
// scores over the shared keys are one small matmul, each key row loaded once for every row and head.
inline constexpr size_t kAttentionRowsAtOnce = 8;

// Scratch floats one attention call needs (per calling thread): `rows` query rows whose last row
// attends keys below `last_key_end`.
inline constexpr size_t AttentionScratchFloats(size_t rows, size_t last_key_end, size_t head_dim) {
  return kAttentionHeadsAtOnce * (rows == 1 ? last_key_end : rows * (last_key_end + head_dim));
}

// Query rows over a sequence's keys, grouped-query heads. The keys may lie in several runs (a
// session reads a shared prefix in place from radix-tree slabs, then its own rows): the runs, in
// order, hold keys 0, 1, 2, ..., and where one run ends and the next begins does not change a bit.
// Row r is the query at position key_end - 1 + r (causal): it attends keys [b_r, key_end + r), where
// b_r = max(key_begin, key_end + r - window) with a sliding window (window > 0), else key_begin.
// Every row gets the bits a call with that row alone gives: how rows are grouped changes nothing.
// Keys and values stored as f16 or bf16 are widened exactly as they are read, so the result equals
// the f32 call on the widened values, bit for bit.
struct AttentionArgs {
  const float* q;          // [rows][n_heads][head_dim], already rotated
  const KeyRun* runs;      // covering at least keys [0, key_end + rows - 1)
  size_t n_runs;
  float* out;              // [rows][n_heads][head_dim]
  float* scratch;          // >= AttentionScratchFloats(rows, key_end + rows - 1, head_dim), per calling thread
  size_t n_heads, n_kv_heads, head_dim;
  size_t key_begin, key_end;  // row 0 attends keys [key_begin, key_end) (a sliding window starts late)
  float scale;             // multiplies q·k before softmax
  size_t head_begin, head_end;  // query heads to compute (lets callers split heads across threads)
  size_t rows = 1;
  size_t window = 0;       // 0: no sliding window
  float softcap = 0.0f;    // > 0: each scaled score s becomes softcap · tanh(s / softcap) (Gemma 2)
  // [n_heads] or null: head h's sink logit joins its softmax's maximum and denominator and takes
  // probability mass without a value (gpt-oss's attention sinks).
  const float* sinks = nullptr;
  KVDtype kv_dtype = KVDtype::kF32;  // the element type of the runs' keys and values
};

struct KernelTable {
  Tier tier;
  const char* name;

  // sum_i a[i] * b[i] in the tier's fixed order.
  float (*dot)(const float* a, const float* b, size_t n);

  // Y[m][n] = sum_k X[m][k] * W[n][k] for m in [0, M), n in [n_begin, n_end). X is [M][K] with row
  // stride ldx, W is [N][K] row-major (as GGUF stores it) with row stride ldw, Y has row stride ldy.
  // Each output is reduced over K in one order that does not depend on M, the n range or blocking.
  void (*matmul)(const float* x, size_t ldx, const float* w, size_t ldw, float* y, size_t ldy, size_t m,
                 size_t k, size_t n_begin, size_t n_end);
  // matmul with W stored as IEEE half (matmul_f16) or bfloat16 (matmul_bf16) bit patterns, ldw in
  // elements. W is widened exactly (a batch of rows at a time) before the f32 arithmetic, so Y has the
  // bits matmul gives on the widened W: the regime of f32 weights, at half the bytes read.
  void (*matmul_f16)(const float* x, size_t ldx, const uint16_t* w, size_t ldw, float* y, size_t ldy, size_t m,
                     size_t k, size_t n_begin, size_t n_end);
  void (*matmul_bf16)(const float* x, size_t ldx, const uint16_t* w, size_t ldw, float* y, size_t ldy, size_t m,
                      size_t k, size_t n_begin, size_t n_end);

  // y = x / rms(x) * w (or * (1 + w) when one_plus_weight), n elements.
  void (*rmsnorm)(const float* x, const float* w, float* y, size_t n, float eps, bool one_plus_weight);

  // In place, numerically stable softmax over n elements.
  void (*softmax)(float* x, size_t n);
  // y[i] = exp((x[i] - shift) * scale), n elements; -inf gives 0. Lanes do not interact, so an
  // element's bits do not depend on n or its position (a sampler weighs one token or all alike).
  void (*exp_scaled)(const float* x, float shift, float scale, float* y, size_t n);

  void (*attention)(const AttentionArgs& args);

  // In place activations.
  void (*silu)(float* x, size_t n);
  void (*gelu_tanh)(float* x, size_t n);
  // y[i] = act(gate[i]) * up[i]: the gated FFN in one pass (y may alias gate).
  void (*silu_mul)(const float* gate, const float* up, float* y, size_t n);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* y, size_t n);
  // gpt-oss: y[i] = x · sigmoid(alpha · x) · (u + 1), x = min(gate[i], limit), u = clamp(up[i], ±limit).
  void (*clamped_swiglu_mul)(const float* gate, const float* up, float* y, size_t n, float alpha, float limit);

  // Elementwise; y may alias a.
  void (*add)(const float* a, const float* b, float* y, size_t n);
  void (*mul)(const float* a, const float* b, float* y, size_t n);
  void (*scale)(const float* a, float s, float* y, size_t n);

  void (*f16_to_f32)(const uint16_t* x, float* y, size_t n);
  void (*bf16_to_f32)(const uint16_t* x, float* y, size_t n);

  // ---- Quantized weights (quant_format.h) ----

  // dequantize[int(t)](src, y, k): k elements (whole blocks of t) of one row of type t to f32,
  // computed as the spec's formula in float (the same bits in every tier).
  void (*dequantize[kNumQuantTypes])(const void* src, float* y, size_t k);

  // Quantizes m activation rows X[m][k] (row stride ldx floats) for a matmul against weights of type
  // wtype: row i goes to xq + i * QuantActRowBytes(wtype, k) (blocks of the layout
  // FormatOf(wtype).act: ActQ8_0, ActQ8_1 or ActQ8_K). Each row's bytes depend only on that row. k
  // is a multiple of the type's block; xq is 4-byte aligned.
  void (*quantize_act)(QuantType wtype, const float* x, size_t ldx, size_t m, size_t k, void* xq);

  // Y[i][n] = sum_k X[i][k] * W[n][k] for i in [0, m), n in [n_begin, n_end), with X given as m rows
  // from quantize_act and W row n at (const uint8_t*)w + n * w_row_bytes (k elements of wtype; w and
  // w_row_bytes even, except for MXFP4, whose blocks are bytes). Per block an exact integer dot
  // product, then float accumulation over the blocks in one fixed order per output that does not
  // depend on m, the n range or the thread.
  void (*matmul_q)(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                   size_t m, size_t k, size_t n_begin, size_t n_end);

  // matmul_q for Q8_0, Q4_0, Q5_0 or Q4_K weights packed eight rows at a time (quant_pack.h;
  // w_row_bytes is PackedRowBytes, so rows 8r.. start at w + 8r * w_row_bytes), n_begin and n_end
  // multiples of 8. Per block and output the exact integer sum over the block, then one float step, in block
  // order.
  void (*matmul_q_packed)(QuantType wtype, const void* xq, const void* w, size_t w_row_bytes, float* y, size_t ldy,
                          size_t m, size_t k, size_t n_begin, size_t n_end);
};

// Filled by kernels/arch/<tier>.cc through its registry entry (tier_registry.h). The RoPE routine is
// not in the table: it is one pinned routine shared by every tier (rope.h).

}  // namespace fak::kernels

#endif  // FAK_KERNELS_KERNEL_TABLE_H_
