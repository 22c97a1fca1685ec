// PackForMatMul: loaded quantized weights repacked once into the layouts the kernels read faster.
#include "kernels/quant_pack.h"
#include "src/model/weights.h"

namespace fak::internal {
namespace {

void Pack(WeightTensor* t, std::vector<AlignedArray<uint8_t>>* storage) {
  if (t->empty() || !IsQuantized(t->dtype) || !kernels::IsPackable(QuantOf(t->dtype)) || t->rows % 8 != 0 ||
      t->packed != nullptr) {
    return;
  }
  const kernels::QuantType q = QuantOf(t->dtype);
  AlignedArray<uint8_t>& out = storage->emplace_back(t->rows * kernels::PackedRowBytes(q, t->cols));
  kernels::PackRows(q, t->data, t->rows, t->cols, out.data());
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
  if (weights->output.data != weights->token_embedding.data) Pack(&weights->output, &weights->packed_storage);
}

}  // namespace fak::internal
