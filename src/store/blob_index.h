// BlobIndex: the bookkeeping shared by the BlobStore backends — which digests are held, their
// sizes, pin counts, inline payloads and least-recently-used order, and the eviction choice.
//
// Thread-safety: none; each backend guards its index with its own mutex. Cost: one hash-map node
// and (while unpinned) one list node per blob.
#ifndef FAK_SRC_STORE_BLOB_INDEX_H_
#define FAK_SRC_STORE_BLOB_INDEX_H_

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fak/store/blob_store.h"
#include "fak/core/digest.h"

namespace fak::internal {

class BlobIndex {
 public:
  struct Entry {
    uint64_t size_bytes = 0;
    uint32_t pins = 0;
    bool has_payload = false;  // payload held here (inline, or every blob of the memory backend)
    std::string payload;
    std::list<Digest>::iterator lru;  // valid while pins == 0
  };

  explicit BlobIndex(uint64_t capacity_bytes) { stats_.capacity_bytes = capacity_bytes; }

  Entry* Find(const Digest& digest);
  const Entry* Find(const Digest& digest) const;
  // Makes `digest` the most recently used (no-op while pinned).
  void Touch(const Digest& digest);
  // Adds a new, unpinned, most recently used entry (the digest must not be held).
  Entry& Insert(const Digest& digest, uint64_t size_bytes, std::optional<std::string> payload);
  void Erase(const Digest& digest);
  // Sets the pin count (0 unpins), keeping the LRU list and stats in step.
  void SetPins(const Digest& digest, uint32_t pins);

  // Unpinned digests to evict, least recently used first, until size_bytes() ≤ capacity; never
  // `keep`. The caller removes them from storage and then calls Erase + CountEviction.
  std::vector<Digest> EvictionVictims(const Digest* keep) const;
  void CountEviction(uint64_t size_bytes) {
    ++stats_.n_evicted;
    stats_.evicted_bytes += size_bytes;
  }

  std::vector<Digest> Digests() const;
  // Every digest: pinned ones first, then the unpinned ones least recently used first (the order
  // a rewritten journal keeps, so a reopen rebuilds the same recency).
  std::vector<Digest> RecencyOrder() const;
  uint64_t size_bytes() const { return stats_.size_bytes; }
  // Counters the backends bump directly (puts, gets, dedup hits, verify failures, open results).
  BlobStoreStats& mutable_stats() { return stats_; }
  const BlobStoreStats& stats() const { return stats_; }

 private:
  std::unordered_map<Digest, Entry> entries_;
  std::list<Digest> lru_;  // unpinned digests, least recently used at the front
  BlobStoreStats stats_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_BLOB_INDEX_H_
