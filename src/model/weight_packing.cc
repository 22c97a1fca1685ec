// PackForMatMul: loaded quantized weights repacked once into the layouts the kernels read faster.
#include <sys/mman.h>

#include <cstdint>

#include "kernels/quant_pack.h"
#include "src/model/weights.h"

namespace fak::internal {
namespace {

// Decode streams each packed matrix from DRAM once per token. On 4 KiB pages a one-row pass over
// Gemma 3's packed 178 MB head ran 1.6x slower than over the mapped file (whose page cache is in
// large folios); on 2 MiB pages it ran faster than that. The buffer is already written, so the
// pages are collapsed now, not at fault time. Hints only: a kernel without THP or
// MADV_COLLAPSE (Linux 6.1) refuses them and nothing else changes.
void AskForHugePages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  constexpr int kCollapse = 25;  // MADV_COLLAPSE, which older libc headers lack
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end <= begin) return;
  void* range = reinterpret_cast<void*>(begin);
  if (madvise(range, end - begin, MADV_HUGEPAGE) == 0) madvise(range, end - begin, kCollapse);
}

void Pack(WeightTensor* t, std::vector<AlignedArray<uint8_t>>* storage) {
  if (t->empty() || !IsQuantized(t->dtype) || t->rows % 8 != 0 ||
      t->packed != nullptr) {
    return;
  }
  const kernels::QuantType q = QuantOf(t->dtype);
  AlignedArray<uint8_t>& out = storage->emplace_back(t->rows * kernels::PackedRowBytes(q, t->cols));
  kernels::PackRows(q, t->data, t->rows, t->cols, out.data());
  AskForHugePages(out.data(), out.size());
  t->packed = out.data();
  t->packed_row_bytes = kernels::PackedRowBytes(q, t->cols);
}

}  // namespace

void PackForMatMul(ModelWeights* weights) {
  for (LayerWeights& l : weights->layers) {
    for (WeightTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) Pack(t, &weights->packed_storage);
    for (ExpertWeights& e : l.experts)
      for (WeightTensor* t : {&e.gate, &e.up, &e.down}) Pack(t, &weights->packed_storage);
  }
  Pack(&weights->output, &weights->packed_storage);  // tied or not: `data` stays for the embedding lookup
}

}  // namespace fak::internal
