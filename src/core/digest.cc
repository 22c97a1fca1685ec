// Digest: sha256 through OpenSSL EVP, and hex encoding.
#include "fak/core/digest.h"

#include <openssl/evp.h>

#include <new>

namespace fak {

struct Digester::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Digester::Digester() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  // Only allocation can fail here (sha256 is built into every libcrypto): report it as the
  // allocation failure it is, like any container would, never by ending the host process.
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(impl_->ctx);
    throw std::bad_alloc();
  }
}

Digester::~Digester() { EVP_MD_CTX_free(impl_->ctx); }

Digester& Digester::Update(const void* data, size_t size_bytes) {
  if (size_bytes > 0) EVP_DigestUpdate(impl_->ctx, data, size_bytes);
  return *this;
}

Digest Digester::Finish() {
  Digest d;
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, d.bytes.data(), &len);
  return d;
}

Digest Digest::Of(const void* data, size_t size_bytes) { return Digester().Update(data, size_bytes).Finish(); }

std::string Digest::Hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kSize * 2, '0');
  for (size_t i = 0; i < kSize; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<Digest> Digest::FromHex(std::string_view hex) {
  if (hex.size() != kSize * 2) {
    return InvalidArgument("digest hex must be 64 characters, got " + std::to_string(hex.size()));
  }
  Digest d;
  for (size_t i = 0; i < kSize; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument("digest hex has a non-hex character at offset " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
    d.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

bool Digest::IsZero() const {
  for (uint8_t b : bytes) if (b != 0) return false;
  return true;
}

}  // namespace fak
