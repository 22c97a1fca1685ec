// KVSlabChecksum's pieces, for a reader that hashes a slab's KV as it reads it (kvtier's page-in):
// each of K, Kraw and V is cut into fixed-size chunks, each chunk hashed on its own (in parallel,
// and right behind the read that fills it), and the checksum hashes the chunks' digests.
#ifndef FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
#define FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"

namespace fak::internal {

// Part of the format ("fak.kv_slab.v2", docs/manifest.md §1): changing it changes every checksum.
inline constexpr size_t kSlabChecksumChunkBytes = size_t{1} << 20;

// Chunks per tensor of `tensor_bytes` bytes (the last one shorter when it does not divide).
inline size_t SlabChunksPerTensor(size_t tensor_bytes) {
  return (tensor_bytes + kSlabChecksumChunkBytes - 1) / kSlabChecksumChunkBytes;
}

// The checksum of a slab of `shape`, `start_position` and `tokens` whose K, then Kraw, then V
// chunks hash to `chunk_digests` (3 × SlabChunksPerTensor of one tensor's bytes, in that order).
Digest SlabChecksumOfChunks(const KVShape& shape, size_t start_position, std::span<const int32_t> tokens,
                            std::span<const Digest> chunk_digests);

}  // namespace fak::internal

#endif  // FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
