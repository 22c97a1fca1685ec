// KVCacheAccess: the way into a KVCache's storage for the layers that may write it — the model's
// forward pass (K/Kraw/V rows, commit) and the session layer (splicing slabs the manifest gate has
// passed). Not public: a host that spliced keys computed under another context would get an
// approximate cache that looks exact (architecture §3, "no ungated splice").
#ifndef FAK_SRC_KV_KV_CACHE_ACCESS_H_
#define FAK_SRC_KV_KV_CACHE_ACCESS_H_

#include <memory>
#include <span>
#include <vector>

#include "fak/kv/kv_cache.h"

namespace fak::internal {

class KVCacheAccess {
 public:
  static KVCache Make(const KVShape& shape, std::shared_ptr<const RopeBinding> rope) { return KVCache(shape, std::move(rope)); }
  // A cache whose layer l keeps only its last windows[l] rows (0: all), given that one forward step
  // writes at most step_rows rows.
  static KVCache MakeWindowed(const KVShape& shape, std::shared_ptr<const RopeBinding> rope, std::vector<size_t> windows,
                              size_t step_rows) {
    return KVCache(shape, std::move(rope), std::move(windows), step_rows);
  }
  static const RopeBinding& Rope(const KVCache& c) { return *c.rope_; }
  // The own rows of one layer and KV head: [capacity][head_dim] elements of the shape's dtype.
  static std::byte* K(KVCache& c, size_t layer, size_t head) { return c.mutable_k(layer, head); }
  static std::byte* Kraw(KVCache& c, size_t layer, size_t head) { return c.mutable_kraw(layer, head); }
  static std::byte* V(KVCache& c, size_t layer, size_t head) { return c.mutable_v(layer, head); }
  // Token t's row in those (t held by the layer).
  static std::byte* KRow(KVCache& c, size_t layer, size_t head, size_t t) { return c.mutable_k(layer, head) + c.RowOffset(layer, t); }
  static std::byte* KrawRow(KVCache& c, size_t layer, size_t head, size_t t) {
    return c.mutable_kraw(layer, head) + c.RowOffset(layer, t);
  }
  static std::byte* VRow(KVCache& c, size_t layer, size_t head, size_t t) { return c.mutable_v(layer, head) + c.RowOffset(layer, t); }
  // Before a forward step writes `rows` tokens (after Reserve).
  static void MakeRoom(KVCache& c, size_t rows) { c.MakeRoom(rows); }
  static void CommitAppended(KVCache& c, std::span<const int32_t> ids) { c.CommitAppended(ids); }
  static Status AppendFrom(KVCache& c, const KVCache& src, size_t src_from, size_t n) { return c.AppendFrom(src, src_from, n); }
  static Status AppendSlab(KVCache& c, const KVSlab& slab) { return c.AppendSlab(slab); }
  static Status AppendShared(KVCache& c, std::shared_ptr<const KVSlab> slab) { return c.AppendShared(std::move(slab)); }
};

}  // namespace fak::internal

#endif  // FAK_SRC_KV_KV_CACHE_ACCESS_H_
