// Ed25519 keys for deletion certificates: generate, load and save PEM key files (owner-only,
// never overwritten), sign, verify. No OpenSSL type appears here: keys travel as bytes.
#ifndef FAK_AUDIT_SIGNING_KEY_H_
#define FAK_AUDIT_SIGNING_KEY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// An ed25519 public key (raw 32 bytes).
struct FAK_EXPORT PublicKey {
  std::array<uint8_t, 32> bytes{};
  std::string Hex() const;
  static Result<PublicKey> FromHex(std::string_view hex);
  // True when `signature` (64 raw bytes) is a valid ed25519 signature of `message` by this key.
  bool VerifySignature(std::string_view message, std::string_view signature) const;
  friend bool operator==(const PublicKey&, const PublicKey&) = default;
};

// An ed25519 private key. Immutable and thread-safe; copies share the key.
class FAK_EXPORT SigningKey {
 public:
  static Result<SigningKey> Generate();
  // Loads a PKCS#8 PEM private key. FailedPrecondition when the file is readable or writable by
  // group or others (mode & 077), or is not a regular file; InvalidArgument when not ed25519.
  // Files through `env` (nullptr = Env::Default()).
  static Result<SigningKey> LoadPem(const std::string& path, Env* env = nullptr);
  static Result<SigningKey> FromPem(std::string_view pem);
  // Writes the key as PKCS#8 PEM with mode 0600, fsync'd. Refuses to overwrite an existing file.
  Status SavePem(const std::string& path, Env* env = nullptr) const;
  PublicKey public_key() const { return public_key_; }
  // The 64-byte ed25519 signature of `message`.
  Result<std::string> Sign(std::string_view message) const;

 private:
  struct Impl;
  explicit SigningKey(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  PublicKey public_key_;
};

}  // namespace fak

#endif  // FAK_AUDIT_SIGNING_KEY_H_
