// ParallelMatMul: column shares in multiples of 48 (a multiple of every tier's register tile).
#include "kernels/parallel.h"

namespace fak::kernels {

void ParallelMatMul(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, const float* w,
                    size_t ldw, float* y, size_t ldy, size_t m, size_t k, size_t n) {
  if (pool == nullptr) {
    t.matmul(x, ldx, w, ldw, y, ldy, m, k, 0, n);
    return;
  }
  pool->ParallelFor(n, 48, [&](size_t begin, size_t end) { t.matmul(x, ldx, w, ldw, y, ldy, m, k, begin, end); });
}

}  // namespace fak::kernels
