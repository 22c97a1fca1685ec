// Helpers shared by the audit sources: canonical JSON, hex/base64, OpenSSL ownership and errors.
// Internal: nlohmann and OpenSSL types may appear here, never in include/fak/.
#ifndef FAK_SRC_AUDIT_AUDIT_INTERNAL_H_
#define FAK_SRC_AUDIT_AUDIT_INTERNAL_H_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fak/audit/time_anchor.h"
#include "fak/core/digest.h"
#include "fak/core/status.h"

namespace fak::internal {

using Json = nlohmann::json;

// Parses without throwing; InvalidArgument naming `what` on bad JSON.
Result<Json> ParseJson(std::string_view text, std::string_view what);
// Canonical form: sorted keys, no whitespace, UTF-8 checked. InvalidArgument on invalid UTF-8.
Result<std::string> CanonicalJson(const Json& value, std::string_view what);

// Typed field readers: Corruption naming `what` and the key when absent or of another type.
Result<std::string> GetString(const Json& obj, std::string_view key, std::string_view what);
Result<uint64_t> GetUint(const Json& obj, std::string_view key, std::string_view what);
Result<int64_t> GetInt(const Json& obj, std::string_view key, std::string_view what);
Result<Digest> GetDigest(const Json& obj, std::string_view key, std::string_view what);

std::string HexEncode(std::string_view bytes);
Result<std::string> HexDecode(std::string_view hex, std::string_view what);
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
