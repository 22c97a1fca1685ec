// Packing quantized weights into the layouts the kernels read faster (done once, at model load;
// the packed blocks are in quant_format.h).
#ifndef FAK_KERNELS_QUANT_PACK_H_
#define FAK_KERNELS_QUANT_PACK_H_

#include <cstddef>

#include "kernels/quant_format.h"

namespace fak::kernels {

// Types with a packed layout (KernelTable::matmul_q_packed): Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL,
// MXFP4, Q4_K, IQ4_XS, Q2_K and Q3_K.
bool IsPackable(QuantType t);

// Bytes per row of k elements once packed: eight rows take 8 times this, from row 8r at
// 8r · PackedRowBytes. The plain row bytes, except for Q4_K, IQ4_XS and Q3_K (scales widened to bytes).
size_t PackedRowBytes(QuantType t, size_t k);

// Packs `rows` rows (a multiple of 8) of type-t weights, k elements each, eight rows at a time
// into rows · PackedRowBytes(t, k) bytes at `out`. t must be packable.
void PackRows(QuantType t, const void* w, size_t rows, size_t k, void* out);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_QUANT_PACK_H_
