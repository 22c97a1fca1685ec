// KVSlabChecksum's pieces, for a reader that hashes a slab's KV as it reads it (kvtier's page-in):
// each of K, Kraw and V is cut into fixed-size chunks, each chunk hashed on its own (many at once,
// on several threads, right behind the read that fills them), and the checksum hashes the chunks'
// digests (docs/manifest.md §1).
#ifndef FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
#define FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "fak/kv/kv_cache.h"

namespace fak::internal {

// Part of the format ("fak.kv_slab.v2"): changing it changes every checksum. Small enough for a
// multi-buffer hasher's lanes (src/core/chunk_hasher.h), large enough that the list of digests
// costs nothing to hash (1/1024 of the bytes).
inline constexpr size_t kSlabChecksumChunkBytes = size_t{32} << 10;
// Chunks one task reads and hashes together (2 MiB): work for every lane, and few hand-offs.
inline constexpr size_t kSlabChunksPerTask = 64;

// Chunks per tensor of `tensor_bytes` bytes (the last one shorter when it does not divide).
inline size_t SlabChunksPerTensor(size_t tensor_bytes) {
  return (tensor_bytes + kSlabChecksumChunkBytes - 1) / kSlabChecksumChunkBytes;
}

// The digests of the chunks of K, Kraw and V (`tensors`, each `tensor_bytes` long), in that order.
// Each task takes up to kSlabChunksPerTask chunks of one tensor: it calls fill(tensor, offset,
// bytes) first when `fill` is set (a reader puts those bytes in place; an error stops the work and
// is returned), then hashes them. Runs on as many threads as the size is worth (ThreadsForBytes).
Result<std::vector<Digest>> SlabChunkDigests(std::array<const std::byte*, 3> tensors, size_t tensor_bytes,
                                             const std::function<Status(size_t tensor, size_t offset, size_t bytes)>& fill);

// The checksum of a slab of `shape`, `start_position` and `tokens` whose chunks hash to
// `chunk_digests` (SlabChunkDigests).
Digest SlabChecksumOfChunks(const KVShape& shape, size_t start_position, std::span<const int32_t> tokens,
                            std::span<const Digest> chunk_digests);

}  // namespace fak::internal

#endif  // FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
