// Threaded kernel entry points: split outputs (never a reduction) over a ThreadPool.
#ifndef FAK_KERNELS_PARALLEL_H_
#define FAK_KERNELS_PARALLEL_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/kernel_table.h"
#include "src/core/thread_pool.h"

namespace fak::kernels {

// Y[M][N] = X[M][K] · W[N][K]ᵀ with the N columns split across the pool's threads. Bit-identical
// to a single-threaded call, whatever the thread count.
void ParallelMatMul(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, const float* w,
                    size_t ldw, float* y, size_t ldy, size_t m, size_t k, size_t n);

// Y[M][N] = X[M][K] · W[N][K]ᵀ with W's rows stored in quant type wtype, w_row_bytes apart. First
// quantizes X's rows into xq_scratch (QuantActRowBytes(wtype, k) * m bytes, 4-byte aligned; rows
// split across threads), then splits the N columns across threads (table.matmul_q). Bit-identical
// to a single-threaded call, whatever the thread count; k is a multiple of the type's block.
void ParallelMatMulQuant(const KernelTable& t, internal::ThreadPool* pool, QuantType wtype, const float* x, size_t ldx,
                         const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k, size_t n,
                         void* xq_scratch);

// The elements of an unquantized weight matrix: f32, or 16-bit floats widened as they are read
// (KernelTable::matmul_f16 / matmul_bf16).
enum class FloatWeights : uint8_t { kF32, kF16, kBF16 };

// One product of a group: n weight rows of K elements, floats (of kind `floats`) or of quant type
// wtype, w_row_bytes apart; outputs go to Y[M][n] with row stride ldy.
struct WeightProduct {
  bool quantized = false;
  QuantType wtype = QuantType::kQ8_0;  // when quantized
  const void* w = nullptr;
  size_t w_row_bytes = 0;
  float* y = nullptr;
  size_t ldy = 0, n = 0;
  bool packed = false;  // packed eight rows at a time (quant_pack.h; n a multiple of 8)
  FloatWeights floats = FloatWeights::kF32;  // when not quantized
};

// Several products of the same input rows X[M][K] (the q/k/v projections; gate and up), their output
// columns split across the pool in one hand-off, so a decode step wakes the workers once per group
// instead of once per matrix. For one row (decode) the columns go out in pieces of about equal W
// bytes, balanced as the threads run (ThreadPool::ParallelForBalanced), so a thread whose core is
// busy elsewhere holds the product up by one piece, not half of it. Each output has the bits
// ParallelMatMul / ParallelMatMulQuant give it (one thread computes it, in the fixed order).
void ParallelMatMuls(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, size_t m, size_t k,
                     std::span<const WeightProduct> products);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_PARALLEL_H_
