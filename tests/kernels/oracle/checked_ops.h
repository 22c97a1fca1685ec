// Checked kernel entry points: shape validation at the API boundary (architecture §10).
//
// The kernels in KernelTable have no error path; a wrong size there is silent memory corruption.
// Callers that take shapes from outside (files, configs, user calls) go through these wrappers
// once per call: each size is checked against the buffers' spans and a mismatch comes back as
// InvalidArgument naming the buffer, its size and the expected size. The cost is a few integer
// comparisons; the arithmetic is exactly the table's (same bits as calling it directly).
#ifndef FAK_KERNELS_CHECKED_OPS_H_
#define FAK_KERNELS_CHECKED_OPS_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "fak/core/status.h"
#include "kernels/kernel_table.h"
#include "kernels/quant_format.h"

namespace fak::kernels {

// Y[m][n] = X[m][k] · W[n][k]ᵀ over contiguous rows (ldx = ldw = k, ldy = n). x must hold exactly
// m*k floats, w exactly n*k and y exactly m*n.
Status MatMulChecked(const KernelTable& t, std::span<const float> x, std::span<const float> w, std::span<float> y,
                     size_t m, size_t k, size_t n);

// Y[m][n] = X[m][k] · W[n][k]ᵀ with W's n rows stored back to back in quant type wtype (GGUF layout,
// QuantRowBytes(wtype, k) bytes each). x holds exactly m*k floats, w exactly n*QuantRowBytes bytes
// (2-byte aligned), y exactly m*n floats; k is a multiple of the type's block (32 or 256);
// xq_scratch holds at least m*QuantActRowBytes(wtype, k) bytes, 4-byte aligned. Single-threaded;
// the same bits as ParallelMatMulQuant.
Status MatMulQuantChecked(const KernelTable& t, QuantType wtype, std::span<const float> x,
                          std::span<const uint8_t> w, std::span<float> y, size_t m, size_t k, size_t n,
                          std::span<uint8_t> xq_scratch);

// One row of y.size() elements of quant type `type` to f32; src holds exactly QuantRowBytes bytes.
Status DequantizeRowChecked(const KernelTable& t, QuantType type, std::span<const uint8_t> src, std::span<float> y);

// The shape half of AttentionArgs (see kernel_table.h for the layout).
struct AttentionShape {
  size_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  size_t kv_head_stride = 0;            // floats between KV heads; >= key_end * head_dim
  size_t key_begin = 0, key_end = 0;    // keys [key_begin, key_end), non-empty
  size_t head_begin = 0, head_end = 0;  // query heads to compute, within [0, n_heads]
  float scale = 1.0f;
  size_t rows = 1;    // consecutive query rows; row r attends up to key_end + r (kernel_table.h)
  size_t window = 0;  // sliding window, 0: none
};

// Query rows of grouped-query attention, with e = key_end + rows - 1 the last row's key end. q and
// out hold exactly rows*n_heads*head_dim floats; k and v at least (n_kv_heads-1)*kv_head_stride +
// e*head_dim; scratch at least AttentionScratchFloats(rows, e, head_dim) (the contract stated in
// kernel_table.h). n_heads must be a multiple of n_kv_heads.
Status AttentionChecked(const KernelTable& t, std::span<const float> q, std::span<const float> k,
                        std::span<const float> v, std::span<float> out, std::span<float> scratch,
                        const AttentionShape& shape);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_CHECKED_OPS_H_
