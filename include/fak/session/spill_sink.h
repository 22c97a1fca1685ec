// SpillSink: where a radix tree hands the nodes it lets go of under memory pressure (and, with
// write-through, the nodes it adds), so a lower KV tier can keep them (docs/kv-tier.md).
//
// The tree calls Offer under its lock: an implementation must only queue the item (no I/O, no
// blocking, no call back into the tree) and may drop it when full; a dropped spill only costs a
// recompute later. Policy evictions (EvictNode, EvictSource: quarantine) are never offered, so a
// denied span is never written to a tier.
#ifndef FAK_SESSION_SPILL_SINK_H_
#define FAK_SESSION_SPILL_SINK_H_

#include <memory>
#include <vector>

#include "fak/core/export.h"
#include "fak/gate/kv_manifest.h"
#include "fak/kv/kv_cache.h"
#include "fak/session/source_span.h"

namespace fak {

// One node as the tree held it: its manifest (binding of the edge's span, source digest, tenant,
// sharing), its slab (shared, immutable) and the source runs over its edge.
struct SpillItem {
  KVManifest manifest;
  std::shared_ptr<const KVSlab> slab;
  std::vector<SourceSpan> sources;
};

enum class SpillReason { kEvicted, kWriteThrough };

class FAK_EXPORT SpillSink {
 public:
  virtual ~SpillSink() = default;
  // Called under the tree's lock: queue or drop, never block. Must be thread-safe.
  virtual void Offer(SpillItem item, SpillReason reason) = 0;
};

}  // namespace fak

#endif  // FAK_SESSION_SPILL_SINK_H_
