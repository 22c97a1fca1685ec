// ChunkHasher: SHA-256 of many independent chunks at once. Built with Intel's multi-buffer crypto
// library (libipsec-mb, x86-64: FAK_WITH_IPSEC_MB), it hashes up to 16 chunks in lockstep in
// AVX-512 lanes (its AVX2 and SSE managers: 8 lanes, or two streams of SHA-NI): 6.3 GB/s on one Zen 5
// core, where OpenSSL's one stream does 2.2. Without the library, or on a CPU it has no manager
// for, OpenSSL hashes the chunks one by one. The digests are plain SHA-256 either way.
#ifndef FAK_SRC_CORE_CHUNK_HASHER_H_
#define FAK_SRC_CORE_CHUNK_HASHER_H_

#include <cstddef>
#include <span>

#include "fak/core/digest.h"

namespace fak::internal {

class ChunkHasher {
 public:
  // The multi-buffer path takes chunks up to this size (the library's message-length limit);
  // longer ones are hashed by OpenSSL.
  static constexpr size_t kMaxMultiBufferBytes = 65535;

  ChunkHasher() = default;
  ~ChunkHasher();
  ChunkHasher(const ChunkHasher&) = delete;
  ChunkHasher& operator=(const ChunkHasher&) = delete;

  // out[i] = SHA-256 of chunks[i] (out.size() == chunks.size()). Not thread-safe: one per thread.
  // The library's manager (~0.1 ms to make) is made on the first call with several chunks.
  void Hash(std::span<const std::span<const std::byte>> chunks, std::span<Digest> out);

  // Whether chunks are hashed in lanes here (the library is built in and has a manager for this CPU).
  static bool MultiBuffer();

 private:
  void* manager_ = nullptr;  // the library's IMB_MGR, when made
  bool tried_ = false;       // a manager was asked for (it stays null where none fits)
};

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_CHUNK_HASHER_H_
