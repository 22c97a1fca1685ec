// Base64 and OpenSSL error text for the audit sources.
#include <openssl/err.h>
#include <openssl/evp.h>

#include "src/audit/audit_internal.h"

namespace fak::internal {

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
