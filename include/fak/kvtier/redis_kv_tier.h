// The Redis KV tier: slab files shared by a fleet through the existing Redis connection code (only
// in builds with FAK_WITH_REDIS; docs/kv-tier.md §3).
#ifndef FAK_KVTIER_REDIS_KV_TIER_H_
#define FAK_KVTIER_REDIS_KV_TIER_H_

#include <cstddef>
#include <memory>

#include "fak/core/export.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/store/redis_store.h"

namespace fak {

// A KVTierStore on Redis (keys under options.prefix + ":kvt:"): values are split into chunks of at
// most chunk_bytes (Redis caps one value at 512 MB; smaller chunks bound each round trip). A Get
// receives the chunks straight into the result (one copy out of the socket).
// options.ttl_seconds > 0: an entry expires that many seconds after its last Put or Get (every key
// of it gets an expiry; a Get refreshes them) and is then NotFound; the tier's sets drop members of
// expired entries lazily (docs/kv-tier.md §3). 0: entries live until removed.
// InvalidArgument for bad options; Unavailable when the server cannot be reached (then and later).
FAK_EXPORT Result<std::unique_ptr<KVTierStore>> OpenRedisKVTier(const RedisOptions& options, size_t chunk_bytes = size_t{4} << 20);

}  // namespace fak

#endif  // FAK_KVTIER_REDIS_KV_TIER_H_
