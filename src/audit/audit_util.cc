// Canonical JSON, hex/base64 and OpenSSL error text for the audit sources.
#include <openssl/err.h>
#include <openssl/evp.h>

#include "src/audit/audit_internal.h"

namespace fak::internal {

Result<Json> ParseJson(std::string_view text, std::string_view what) {
  Json value = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return InvalidArgument(std::string(what) + ": not valid JSON");
  return value;
}

Result<std::string> CanonicalJson(const Json& value, std::string_view what) {
  try {
    // nlohmann's object is a std::map: keys come out sorted. Numbers are integers or shortest
    // round-trip doubles, so parse-then-dump is stable.
    return value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string(what) + ": cannot encode as JSON (" + e.what() + ")");
  }
}

static Status Missing(const Json& obj, std::string_view key, std::string_view what, std::string_view type) {
  if (!obj.is_object() || !obj.contains(key)) {
    return Corruption(std::string(what) + ": missing field '" + std::string(key) + "'");
  }
  return Corruption(std::string(what) + ": field '" + std::string(key) + "' is not " + std::string(type));
}

Result<std::string> GetString(const Json& obj, std::string_view key, std::string_view what) {
  if (obj.is_object()) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_string()) return it->get<std::string>();
  }
  return Missing(obj, key, what, "a string");
}

Result<uint64_t> GetUint(const Json& obj, std::string_view key, std::string_view what) {
  if (obj.is_object()) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_number_unsigned()) return it->get<uint64_t>();
  }
  return Missing(obj, key, what, "an unsigned integer");
}

Result<int64_t> GetInt(const Json& obj, std::string_view key, std::string_view what) {
  if (obj.is_object()) {
    auto it = obj.find(key);
    if (it != obj.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return Missing(obj, key, what, "an integer");
}

Result<Digest> GetDigest(const Json& obj, std::string_view key, std::string_view what) {
  FAK_ASSIGN_OR_RETURN(std::string hex, GetString(obj, key, what));
  Result<Digest> d = Digest::FromHex(hex);
  if (!d.has_value()) {
    return Corruption(std::string(what) + ": field '" + std::string(key) + "': " + std::string(d.error().message()));
  }
  return *d;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

static int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> HexDecode(std::string_view hex, std::string_view what) {
  if (hex.size() % 2 != 0) return InvalidArgument(std::string(what) + ": hex has an odd length");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = HexNibble(hex[2 * i]), lo = HexNibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument(std::string(what) + ": non-hex character near offset " + std::to_string(2 * i));
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

Result<std::string> Base64Decode(std::string_view text, std::string_view what) {
  if (text.size() % 4 != 0) return InvalidArgument(std::string(what) + ": base64 length is not a multiple of 4");
  std::string out(text.size() / 4 * 3 + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument(std::string(what) + ": not valid base64");
  size_t pad = 0;  // EVP_DecodeBlock counts padding as zero bytes
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string OpenSslErrors() {
  std::string out;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL error queued" : out;
}

}  // namespace fak::internal
