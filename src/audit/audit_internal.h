// Helpers shared by the audit sources: canonical JSON, hex/base64, OpenSSL ownership and errors.
// Internal: nlohmann and OpenSSL types may appear here, never in include/fak/.
#ifndef FAK_SRC_AUDIT_AUDIT_INTERNAL_H_
#define FAK_SRC_AUDIT_AUDIT_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fak/audit/time_anchor.h"
#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "src/core/hex.h"
#include "src/core/json.h"

namespace fak::internal {

// JSON (ParseJson, CanonicalJson, GetString, ...) comes from src/core/json.h, hex from
// src/core/hex.h.

std::string Base64Encode(std::string_view bytes);
Result<std::string> Base64Decode(std::string_view text, std::string_view what);

// The OpenSSL error queue as text (and cleared), for messages.
std::string OpenSslErrors();

// Anchor verification with the failure kind kept apart (certificate faults need it).
enum class AnchorFailure { kNone, kInvalid, kImprint };
struct AnchorResult {
  AnchorFailure failure = AnchorFailure::kNone;
  std::string detail;
  TimeAnchor anchor;
};
AnchorResult CheckTimeAnchor(std::string_view token_der, const Digest& digest, std::string_view tsa_roots_pem);

}  // namespace fak::internal

#endif  // FAK_SRC_AUDIT_AUDIT_INTERNAL_H_
