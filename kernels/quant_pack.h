// Packing quantized weights into the layouts the kernels read faster (done once, at model load;
// the packed blocks are in quant_format.h). Every QuantType has one (KernelTable::matmul_q_packed).
#ifndef FAK_KERNELS_QUANT_PACK_H_
#define FAK_KERNELS_QUANT_PACK_H_

#include <cstddef>

#include "kernels/quant_format.h"

namespace fak::kernels {

// Bytes per row of k elements once packed: eight rows take 8 times this, from row 8r at
// 8r · PackedRowBytes. The plain row bytes, except for Q3_K, Q4_K, Q5_K and IQ4_XS (scales widened to
// bytes).
size_t PackedRowBytes(QuantType t, size_t k);

// Packs `rows` rows (a multiple of 8) of type-t weights, k elements each, eight rows at a time
// into rows · PackedRowBytes(t, k) bytes at `out`.
void PackRows(QuantType t, const void* w, size_t rows, size_t k, void* out);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_QUANT_PACK_H_
