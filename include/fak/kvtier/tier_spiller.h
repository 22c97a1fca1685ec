// TierSpiller: the write-behind path from a radix tree to a KV tier store (docs/kv-tier.md §5).
//
// Plugged in as RadixTreeOptions::spill, it takes the nodes the tree evicts under its memory budget
// (and, with write_through, the nodes it adds) into a bounded queue — under the tree's lock, so it
// only queues — and one worker thread encodes each as a slab file and puts it in the tier. When
// the queue is full the item is dropped and counted: a lost spill costs a recompute from text
// later, never a wrong answer, and never blocks serving.
//
// Thread-safety: Offer, Flush and Stats may be called concurrently. The destructor drains the queue
// (so a clean shutdown keeps what was evicted) and joins the worker.
#ifndef FAK_KVTIER_TIER_SPILLER_H_
#define FAK_KVTIER_TIER_SPILLER_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "fak/core/export.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/session/spill_sink.h"

namespace fak {

struct TierSpillerOptions {
  // Items and slab bytes queued at most; an Offer past either is dropped. Defaults: 64, 1 GiB.
  size_t max_queue_items = 64;
  size_t max_queue_bytes = size_t{1} << 30;
};

struct TierSpillerStats {
  uint64_t offered = 0, written = 0, dropped = 0, failed = 0;
  uint64_t written_bytes = 0;
  std::string last_error;  // of the latest failed write
};

class FAK_EXPORT TierSpiller final : public SpillSink {
 public:
  // `tier` must outlive the spiller.
  explicit TierSpiller(KVTierStore& tier, TierSpillerOptions options = {});
  ~TierSpiller() override;
  TierSpiller(const TierSpiller&) = delete;
  TierSpiller& operator=(const TierSpiller&) = delete;

  void Offer(SpillItem item, SpillReason reason) override;
  // Waits until everything offered so far is written (or failed).
  void Flush();
  TierSpillerStats Stats() const;

 private:
  void Run();

  KVTierStore& tier_;
  const TierSpillerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<SpillItem> queue_;  // GUARDED_BY(mu_)
  size_t queued_bytes_ = 0;      // GUARDED_BY(mu_)
  bool busy_ = false, stop_ = false;
  TierSpillerStats stats_;       // GUARDED_BY(mu_)
  std::thread worker_;           // last: starts after everything above exists
};

// Stores one tree node in `tier` as a slab file under its key (what TierSpiller does per item).
FAK_EXPORT Status SpillToTier(KVTierStore& tier, const SpillItem& item);

}  // namespace fak

#endif  // FAK_KVTIER_TIER_SPILLER_H_
