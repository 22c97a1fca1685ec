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
#include <span>

#include "fak/status.h"
#include "kernels/kernel_table.h"

namespace fak::kernels {

// Y[m][n] = X[m][k] · W[n][k]ᵀ over contiguous rows (ldx = ldw = k, ldy = n). x must hold exactly
// m*k floats, w exactly n*k and y exactly m*n.
Status MatMulChecked(const KernelTable& t, std::span<const float> x, std::span<const float> w, std::span<float> y,
                     size_t m, size_t k, size_t n);

// The shape half of AttentionArgs (see kernel_table.h for the layout).
struct AttentionShape {
  size_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  size_t kv_head_stride = 0;            // floats between KV heads; >= key_end * head_dim
  size_t key_begin = 0, key_end = 0;    // keys [key_begin, key_end), non-empty
  size_t head_begin = 0, head_end = 0;  // query heads to compute, within [0, n_heads]
  float scale = 1.0f;
};

// One query row of grouped-query attention. q and out hold exactly n_heads*head_dim floats;
// k and v at least (n_kv_heads-1)*kv_head_stride + key_end*head_dim; scratch at least key_end
// (the contract stated in kernel_table.h). n_heads must be a multiple of n_kv_heads.
Status AttentionChecked(const KernelTable& t, std::span<const float> q, std::span<const float> k,
                        std::span<const float> v, std::span<float> out, std::span<float> scratch,
                        const AttentionShape& shape);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_CHECKED_OPS_H_
