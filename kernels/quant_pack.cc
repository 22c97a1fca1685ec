// Packing quantized weights: see quant_pack.h.
#include "kernels/quant_pack.h"

#include <cstring>

#include "kernels/quant_format.h"

namespace fak::kernels {

void PackQ8_0x8(const void* w, size_t rows, size_t k, void* out) {
  const size_t n_blocks = k / kQK0;
  const auto* in = static_cast<const BlockQ8_0*>(w);
  auto* packed = static_cast<BlockQ8_0x8*>(out);
  for (size_t g = 0; g < rows / 8; ++g) {
    for (size_t b = 0; b < n_blocks; ++b) {
      BlockQ8_0x8& o = packed[g * n_blocks + b];
      for (size_t c = 0; c < 8; ++c) {
        const BlockQ8_0& src = in[(g * 8 + c) * n_blocks + b];
        o.d[c] = src.d;
        for (size_t j = 0; j < 8; ++j) std::memcpy(o.qs + 32 * j + 4 * c, src.qs + 4 * j, 4);
      }
    }
  }
}

}  // namespace fak::kernels
