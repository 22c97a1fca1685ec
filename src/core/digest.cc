// Digest: sha256 through OpenSSL EVP; its hex form through src/core/hex.h.
#include "fak/core/digest.h"

#include <openssl/evp.h>

#include <cstring>
#include <new>

#include "src/core/hex.h"

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
  return internal::HexEncode(bytes.data(), kSize);
}

Result<Digest> Digest::FromHex(std::string_view hex) {
  if (hex.size() != kSize * 2) {
    return InvalidArgument("digest hex must be 64 characters, got " + std::to_string(hex.size()));
  }
  FAK_ASSIGN_OR_RETURN(std::string raw, internal::HexDecode(hex, "digest hex"));
  Digest d;
  std::memcpy(d.bytes.data(), raw.data(), kSize);
  return d;
}

bool Digest::IsZero() const {
  for (uint8_t b : bytes) if (b != 0) return false;
  return true;
}

}  // namespace fak
