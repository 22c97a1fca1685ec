// Digest: a sha256 value, the identity of every blob, span, model and certificate in fak.
//
// Values are plain 32-byte arrays; hashing goes through OpenSSL EVP inside the library (no OpenSSL
// type appears here). Digester hashes incrementally; Digest::Of hashes one buffer.
#ifndef FAK_CORE_DIGEST_H_
#define FAK_CORE_DIGEST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

struct FAK_EXPORT Digest {
  static constexpr size_t kSize = 32;
  std::array<uint8_t, kSize> bytes{};

  static Digest Of(const void* data, size_t size_bytes);
  static Digest Of(std::string_view data) { return Of(data.data(), data.size()); }
  // Parses 64 lowercase hex characters (the one spelling Hex() writes).
  static Result<Digest> FromHex(std::string_view hex);
  std::string Hex() const;
  bool IsZero() const;

  friend bool operator==(const Digest&, const Digest&) = default;
  friend auto operator<=>(const Digest&, const Digest&) = default;
};

// Incremental sha256. Not thread-safe; cheap to create.
// Construction throws std::bad_alloc when memory is exhausted, as std::vector would.
class FAK_EXPORT Digester {
 public:
  Digester();
  ~Digester();
  Digester(const Digester&) = delete;
  Digester& operator=(const Digester&) = delete;

  Digester& Update(const void* data, size_t size_bytes);
  Digester& Update(std::string_view data) { return Update(data.data(), data.size()); }
  // Hashes the value's bytes (integers are hashed little-endian as stored on x86-64).
  template <class T>
  Digester& UpdatePod(const T& value) { return Update(&value, sizeof(T)); }
  // Finishes; the Digester must not be updated afterwards.
  Digest Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak

template <>
struct std::hash<fak::Digest> {
  size_t operator()(const fak::Digest& d) const noexcept {
    size_t h;
    std::memcpy(&h, d.bytes.data(), sizeof(h));  // already uniformly distributed
    return h;
  }
};

#endif  // FAK_CORE_DIGEST_H_
