// Little-endian u32 fields in the record formats fak writes itself (the blob-store journal, the
// file denylist): appended to a string, read back from bytes the caller has bounds-checked.
#ifndef FAK_SRC_CORE_LE_BYTES_H_
#define FAK_SRC_CORE_LE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fak::internal {

inline void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// `s` holds at least off + 4 bytes.
inline uint32_t GetU32(std::string_view s, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(s[off + i]);
  return v;
}

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_LE_BYTES_H_
