// fak_matmul_exactness: every tier's matmul, for many M, K, column ranges, strides and thread
// counts, must give bit-for-bit the tier's own dot product of the row and column (the M = 1
// arithmetic). Exits non-zero on the first mismatch. Usage: fak_matmul_exactness [--quick]
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "src/core/thread_pool.h"

namespace {

using fak::kernels::KernelTable;

// One case: X [m][k] (stride k + pad), W [n][k] (stride k + pad), outputs [n_begin, n_end).
bool CheckCase(const KernelTable& t, fak::internal::ThreadPool* pool, size_t m, size_t k, size_t n, size_t n_begin,
               size_t n_end, size_t pad, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  size_t ldx = k + pad, ldw = k + pad, ldy = n + pad;
  std::vector<float> x(m * ldx), w(n * ldw), y(m * ldy, -7.0f);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  if (pool != nullptr && n_begin == 0 && n_end == n) {
    fak::kernels::ParallelMatMul(t, pool, x.data(), ldx, w.data(), ldw, y.data(), ldy, m, k, n);
  } else {
    t.matmul(x.data(), ldx, w.data(), ldw, y.data(), ldy, m, k, n_begin, n_end);
  }
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      float got = y[i * ldy + j];
      float want = (j >= n_begin && j < n_end) ? t.dot(x.data() + i * ldx, w.data() + j * ldw, k) : -7.0f;
      if (std::memcmp(&got, &want, 4) != 0) {
        std::printf("MISMATCH tier=%s m=%zu k=%zu n=%zu range=[%zu,%zu) pad=%zu threads=%zu at (%zu,%zu): %.9g vs %.9g\n",
                    t.name, m, k, n, n_begin, n_end, pad, pool ? pool->n_threads() : 1, i, j, got, want);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::mt19937 rng(42);
  fak::internal::ThreadPool pool2(2);
  std::vector<size_t> ms = {1, 2, 3, 5, 8, 17, 64, 65, 130};
  std::vector<size_t> ks = {1, 7, 16, 17, 300, 576, 1000, 5632};
  if (!quick) ms.push_back(512);
  size_t n_cases = 0;
  for (fak::kernels::Tier tier : fak::kernels::SupportedTiers()) {
    const KernelTable& t = **fak::kernels::TableFor(tier);
    for (size_t k : ks) {
      for (size_t m : ms) {
        if (m * k > 512 * 1024 && k > 1000 && m > 130) continue;  // keep the big ones few
        size_t n = m >= 130 ? 61 : 101;
        struct Range { size_t b, e, pad; } ranges[] = {{0, n, 0}, {3, n - 5, 5}, {48, n, 1}, {7, 8, 0}};
        for (const Range& r : ranges) {
          ++n_cases;
          if (!CheckCase(t, nullptr, m, k, n, r.b, r.e, r.pad, rng)) return 1;
        }
        ++n_cases;
        if (!CheckCase(t, &pool2, m, k, n, 0, n, 3, rng)) return 1;
      }
    }
    // One large case through the pool, as the bench shapes.
    ++n_cases;
    if (!quick && !CheckCase(t, &pool2, 512, 576, 1536, 0, 1536, 0, rng)) return 1;
  }
  std::printf("matmul exactness: %zu cases bit-equal to the tier's dot product\n", n_cases);
  return 0;
}
