// Little-endian loads and GGUF scalar widths shared by the GGUF reader and its value accessors.
#ifndef FAK_SRC_IO_LE_H_
#define FAK_SRC_IO_LE_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fak/io/gguf.h"

namespace fak::internal {

static_assert(std::endian::native == std::endian::little, "fak's file readers assume a little-endian host");

// Zero-extended little-endian integer of `width` (1, 2, 4 or 8) bytes at `p`.
inline uint64_t LoadLe(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  std::memcpy(&v, p, width);
  return v;
}

inline float BitsToF32(uint32_t bits) { return std::bit_cast<float>(bits); }
inline double BitsToF64(uint64_t bits) { return std::bit_cast<double>(bits); }

// Bytes of one scalar of `type`; 0 for STRING, ARRAY and unknown ids.
inline size_t GgufScalarSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 0;
  }
}

}  // namespace fak::internal

#endif  // FAK_SRC_IO_LE_H_
