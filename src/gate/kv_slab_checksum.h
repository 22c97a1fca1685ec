// KVSlabChecksum over a slab's parts as they lie in a slab file, for a reader that hashes the KV
// bytes while it copies them out (kvtier's page-in) instead of after.
#ifndef FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
#define FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"

namespace fak::internal {

// KVSlabChecksum (fak/gate/binding_tuple.h) of the slab with this shape, start position and token
// ids whose K, Kraw and V lie end to end in `kv`: the same digest, the bytes read once in order.
Digest KVSlabChecksumOfParts(const KVShape& shape, size_t start_position, std::span<const int32_t> tokens,
                             std::string_view kv);

}  // namespace fak::internal

#endif  // FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
