// fak_head_bench: Gemma 3's tied output head alone (Q8_0, K = 640, N = 262144 — 178 MB), one thread,
// in the active kernel tier: the plain rows (read from a mapped GGUF file when one is given, as the
// model reads them), the packed copy on 4 KiB pages, and the packed copy on 2 MiB pages (what
// PackForMatMul asks for), each at M = 1 (a decode step of one session); then the packed copy at
// M = 16 (a step of 16 sessions). Rounds interleave the cases; prints min and median ms per call.
//
//   fak_head_bench [ROUNDS] [GGUF TENSOR_OFFSET]   (the offset of token_embd.weight's bytes in the file)
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "src/core/aligned_buffer.h"

using namespace fak::kernels;

int main(int argc, char** argv) {
  constexpr size_t k = 640, n = 262144, kHuge = size_t{2} << 20;
  constexpr int kCollapse = 25;  // MADV_COLLAPSE
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const QuantType q = QuantType::kQ8_0;
  const size_t row_bytes = QuantRowBytes(q, k), packed_row_bytes = PackedRowBytes(q, k);
  std::mt19937 rng(1);
  std::vector<uint8_t> random_rows(argc > 3 ? 0 : n * row_bytes);
  for (size_t r = 0; r < random_rows.size() / row_bytes; ++r) {
    auto* b = reinterpret_cast<BlockQ8_0*>(random_rows.data() + r * row_bytes);
    for (size_t j = 0; j < k / kQK0; ++j) {
      b[j].d = static_cast<uint16_t>(0x2000 + (rng() & 0xFF));
      for (auto& v : b[j].qs) v = static_cast<int8_t>(rng());
    }
  }
  const uint8_t* plain = random_rows.data();
  if (argc > 3) {
    const int fd = open(argv[2], O_RDONLY);
    const size_t offset = std::strtoul(argv[3], nullptr, 10), page = offset / 4096 * 4096;
    void* map = fd < 0 ? MAP_FAILED : mmap(nullptr, offset - page + n * row_bytes, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(page));
    if (map == MAP_FAILED) {
      std::fprintf(stderr, "cannot map %s\n", argv[2]);
      return 1;
    }
    plain = static_cast<const uint8_t*>(map) + (offset - page);
  }
  fak::internal::AlignedArray<uint8_t> small_pages(n * packed_row_bytes), huge_pages(n * packed_row_bytes + kHuge);
  PackRows(q, plain, n, k, small_pages.data());
  uint8_t* huge = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(huge_pages.data()) + kHuge - 1) & ~(kHuge - 1));
  PackRows(q, plain, n, k, huge);
  const size_t huge_bytes = n * packed_row_bytes / kHuge * kHuge;
  if (madvise(huge, huge_bytes, MADV_HUGEPAGE) != 0 || madvise(huge, huge_bytes, kCollapse) != 0)
    std::printf("(the OS gave no 2 MiB pages: the last two cases run on 4 KiB pages)\n");

  const KernelTable& t = Active();
  std::vector<float> x(16 * k), y(16 * n);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<uint8_t> xq(16 * QuantActRowBytes(q, k));
  t.quantize_act(q, x.data(), k, 16, k, xq.data());
  auto ms = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const char* names[] = {"plain, M = 1", "packed 4 KiB pages, M = 1", "packed 2 MiB pages, M = 1", "packed 2 MiB pages, M = 16"};
  std::vector<double> times[4];
  for (int r = 0; r < rounds; ++r) {
    times[0].push_back(ms([&] { t.matmul_q(q, xq.data(), plain, row_bytes, y.data(), n, 1, k, 0, n); }));
    times[1].push_back(ms([&] { t.matmul_q_packed(q, xq.data(), small_pages.data(), packed_row_bytes, y.data(), n, 1, k, 0, n); }));
    times[2].push_back(ms([&] { t.matmul_q_packed(q, xq.data(), huge, packed_row_bytes, y.data(), n, 1, k, 0, n); }));
    times[3].push_back(ms([&] { t.matmul_q_packed(q, xq.data(), huge, packed_row_bytes, y.data(), n, 16, k, 0, n); }));
  }
  std::printf("tier %s, %d rounds: ms per call, min / median\n", t.name, rounds);
  for (int c = 0; c < 4; ++c) {
    std::sort(times[c].begin(), times[c].end());
    std::printf("  %-28s %7.1f / %7.1f\n", names[c], times[c].front(), times[c][times[c].size() / 2]);
  }
}
