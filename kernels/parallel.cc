// ParallelMatMul: column shares in multiples of 48 (a multiple of every tier's register tile).
// ParallelMatMulQuant: activation rows quantized in parallel, then column shares of 16.
#include "kernels/parallel.h"

#include <cstdint>

namespace fak::kernels {
namespace {

// Below this many multiply-adds a product finishes before a sleeping worker wakes (measured: a
// 576x1536 decode matvec ran at half speed on 2 threads), so it stays on the calling thread. Which
// thread computes an output never changes its value.
constexpr size_t kMinParallelMacs = size_t{1} << 20;

}  // namespace

void ParallelMatMul(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, const float* w,
                    size_t ldw, float* y, size_t ldy, size_t m, size_t k, size_t n) {
  if (pool == nullptr || m * n * k < kMinParallelMacs) {
    t.matmul(x, ldx, w, ldw, y, ldy, m, k, 0, n);
    return;
  }
  pool->ParallelFor(n, 48, [&](size_t begin, size_t end) { t.matmul(x, ldx, w, ldw, y, ldy, m, k, begin, end); });
}

void ParallelMatMulQuant(const KernelTable& t, internal::ThreadPool* pool, QuantType wtype, const float* x, size_t ldx,
                         const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k, size_t n,
                         void* xq_scratch) {
  const size_t act_row_bytes = QuantActRowBytes(wtype, k);
  auto* xq = static_cast<uint8_t*>(xq_scratch);
  if (pool == nullptr || pool->n_threads() == 1) {
    t.quantize_act(wtype, x, ldx, m, k, xq);
    t.matmul_q(wtype, xq, w, w_row_bytes, y, ldy, m, k, 0, n);
    return;
  }
  pool->ParallelFor(m, 1, [&](size_t begin, size_t end) {
    t.quantize_act(wtype, x + begin * ldx, ldx, end - begin, k, xq + begin * act_row_bytes);
  });
  // Column shares in multiples of 16 (the kernels' column strip).
  pool->ParallelFor(n, 16, [&](size_t begin, size_t end) {
    t.matmul_q(wtype, xq, w, w_row_bytes, y, ldy, m, k, begin, end);
  });
}

}  // namespace fak::kernels
