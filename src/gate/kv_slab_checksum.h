// KVSlabChecksum in two steps, for a reader that hashes a slab's KV bytes as it reads them
// (kvtier's page-in) instead of after.
#ifndef FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
#define FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"

namespace fak::internal {

// Feeds `d` the checksum's prefix: everything but the K, Kraw and V bytes. Those bytes, fed next
// in that order, complete KVSlabChecksum (fak/gate/binding_tuple.h) of the slab.
void BeginSlabChecksum(Digester& d, const KVShape& shape, size_t start_position, std::span<const int32_t> tokens);

}  // namespace fak::internal

#endif  // FAK_SRC_GATE_KV_SLAB_CHECKSUM_H_
