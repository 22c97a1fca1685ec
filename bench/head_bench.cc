// fak_head_bench: the Gemma 3 tied head's shape (Q8_0, K = 640, N = 262144) through the plain and the
// packed Q8_0 kernels at M = 1 and M = 16, one thread, in the active kernel tier: ms per call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#include "kernels/dispatch.h"
#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "src/core/aligned_buffer.h"

using namespace fak;
using namespace fak::kernels;
using fak::internal::AlignedArray;

int main(int argc, char** argv) {
  const size_t k = 640, n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 262144;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const QuantType q = QuantType::kQ8_0;
  const size_t rb = QuantRowBytes(q, k);
  std::vector<uint8_t> w(n * rb);
  std::mt19937 rng(1);
  for (size_t r = 0; r < n; ++r) {
    auto* b = reinterpret_cast<BlockQ8_0*>(w.data() + r * rb);
    for (size_t j = 0; j < k / 32; ++j) {
      b[j].d = 0x2000 + (rng() & 0xFF);
      for (auto& v : b[j].qs) v = static_cast<int8_t>(rng());
    }
  }
  const uint8_t* plain_w = w.data();
  if (argc > 4) {  // a GGUF file and the tensor's byte offset: the mapped bytes, as the model reads them
    const int fd = open(argv[3], O_RDONLY);
    const size_t off = std::strtoul(argv[4], nullptr, 10), page = off / 4096 * 4096;
    auto* base = static_cast<uint8_t*>(mmap(nullptr, off - page + n * rb, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(page)));
    plain_w = base + (off - page);
  }
  const size_t packed_bytes = (n * PackedRowBytes(q, k) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  auto* packed_p = static_cast<uint8_t*>(std::aligned_alloc(2u << 20, packed_bytes));
  struct { uint8_t* p; uint8_t* data() { return p; } } packed{packed_p};
  PackRows(q, plain_w, n, k, packed.data());
  AlignedArray<uint8_t> packed4k(n * PackedRowBytes(q, k));
  PackRows(q, plain_w, n, k, packed4k.data());
  std::printf("collapse %d %d\n", madvise(packed_p, packed_bytes, MADV_HUGEPAGE), madvise(packed_p, packed_bytes, MADV_COLLAPSE));
  const KernelTable& t = Active();
  std::vector<float> x(16 * k);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<uint8_t> xq(16 * QuantActRowBytes(q, k));
  t.quantize_act(q, x.data(), k, 16, k, xq.data());
  std::vector<float> y(16 * n);
  auto time = [&](auto&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> a, b, c, d;
  for (int r = 0; r < rounds; ++r) {
    d.push_back(time([&] { t.matmul_q_packed(q, xq.data(), packed.data(), PackedRowBytes(q, k), y.data(), n, 16, k, 0, n); }));
    a.push_back(time([&] { t.matmul_q(q, xq.data(), plain_w, rb, y.data(), n, 1, k, 0, n); }));
    b.push_back(time([&] { t.matmul_q_packed(q, xq.data(), packed4k.data(), PackedRowBytes(q, k), y.data(), n, 1, k, 0, n); }));
    c.push_back(time([&] { t.matmul_q_packed(q, xq.data(), packed.data(), PackedRowBytes(q, k), y.data(), n, 1, k, 0, n); }));
  }
  for (auto* v : {&a, &b, &c, &d}) {
    std::sort(v->begin(), v->end());
    std::printf("min %7.1f  median %7.1f ms\n", v->front(), (*v)[v->size() / 2]);
  }
  return 0;
}
