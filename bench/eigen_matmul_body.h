// Body of one tier's Eigen reference product, included by bench/eigen_<tier>.cc with FAK_EIGEN_FN set.
//
// Each tier's Eigen code is built into its own shared library with hidden visibility (see
// bench/CMakeLists.txt), so the linker cannot merge an AVX-512 instantiation of an Eigen template
// into the scalar build of the same template (the ODR trap of docs/style.md).
//
// Threads: with OpenMP (FAK_EIGEN_OPENMP), M > 1 uses Eigen's own parallel GEMM
// (Eigen::setNbThreads); M == 1 is a GEMV, which Eigen never parallelises, so the N columns are
// split into `threads` slabs by an OpenMP loop. Without OpenMP every call runs on one thread.
#include <Eigen/Core>

#ifdef FAK_EIGEN_OPENMP
#include <omp.h>
#endif

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

extern "C++" __attribute__((visibility("default"))) void FAK_EIGEN_FN(const float* x, const float* w, float* y, int m,
                                                                       int k, int n, int threads) {
  Eigen::Map<const RowMajorF> xm(x, m, k);
  Eigen::Map<RowMajorF> ym(y, m, n);
#ifdef FAK_EIGEN_OPENMP
  if (m == 1 && threads > 1) {
    Eigen::setNbThreads(1);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int s = 0; s < threads; ++s) {
      int n0 = n * s / threads, n1 = n * (s + 1) / threads;
      Eigen::Map<const RowMajorF> ws(w + static_cast<size_t>(n0) * k, n1 - n0, k);
      ym.middleCols(n0, n1 - n0).noalias() = xm * ws.transpose();
    }
    return;
  }
  Eigen::setNbThreads(threads);
#endif
  Eigen::Map<const RowMajorF> wm(w, n, k);
  ym.noalias() = xm * wm.transpose();
}

// The SIMD instruction sets this Eigen build uses, for the bench's header.
extern "C++" __attribute__((visibility("default"))) const char* FAK_EIGEN_INFO_FN() {
  return Eigen::SimdInstructionSetsInUse();
}
