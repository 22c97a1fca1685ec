// Packing quantized weights into the layouts the kernels read fastest (done once, at model load).
#ifndef FAK_KERNELS_QUANT_PACK_H_
#define FAK_KERNELS_QUANT_PACK_H_

#include <cstddef>

namespace fak::kernels {

// Packs `rows` rows (a multiple of 8) of Q8_0 weights, k elements each, into BlockQ8_0x8 groups
// (quant_format.h). `out` holds as many bytes as `w`.
void PackQ8_0x8(const void* w, size_t rows, size_t k, void* out);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_QUANT_PACK_H_
