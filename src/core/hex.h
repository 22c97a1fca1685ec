// Internal hex: the one encoder and decoder behind Digest::Hex/FromHex and the audit's keys and
// signatures, so every hex string fak writes or reads follows the same rules.
#ifndef FAK_SRC_CORE_HEX_H_
#define FAK_SRC_CORE_HEX_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "fak/core/status.h"

namespace fak::internal {

// Two lowercase hex digits per byte.
std::string HexEncode(const void* data, size_t size_bytes);
inline std::string HexEncode(std::string_view bytes) { return HexEncode(bytes.data(), bytes.size()); }
// The bytes of `hex`, lowercase digits only: fak writes lowercase, and accepting both cases would
// let one signed value travel as many different byte strings (issue 20). A `code` error
// "<what>: hex has an odd length" or "<what>: non-hex character at offset N" (an uppercase digit
// is one).
Result<std::string> HexDecode(std::string_view hex, std::string_view what,
                              StatusCode code = StatusCode::kInvalidArgument);

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_HEX_H_
