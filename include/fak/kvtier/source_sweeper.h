// SourceSweeper: from a text's SourceDigest to every KV span derived from it — resident in a radix
// tree and stored in KV tiers — so that quarantining or erasing the text removes all of its KV
// (docs/kv-tier.md §6).
//
// The tree indexes its nodes by source (RadixTree::EvictSource, Sources) and each tier records its
// entries' sources (KVTierStore::EraseSource, Sources); the sweeper joins the two. EraseSource acts
// at once (a text is erased); SweepOnce asks the denylist about every known source and erases each
// listed one; Start runs SweepOnce every poll interval on its own thread, so a text added to a
// (fleet) denylist loses its KV everywhere within one interval. Page-in re-checks the denylist
// anyway, so between sweeps a denied slab is held but never served.
//
// Thread-safety: all methods may be called concurrently. The tree, tiers and denylist must outlive
// the sweeper; the destructor stops the poller.
#ifndef FAK_KVTIER_SOURCE_SWEEPER_H_
#define FAK_KVTIER_SOURCE_SWEEPER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fak/core/export.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/screen/screen.h"
#include "fak/session/radix_tree.h"

namespace fak {

struct SweepReport {
  size_t sources_erased = 0;  // distinct texts whose KV was removed
  size_t tree_tokens = 0;     // resident tokens evicted
  size_t tier_entries = 0;    // tier entries removed
};

struct SourceSweeperStats {
  uint64_t sweeps = 0, sources_erased = 0, tree_tokens = 0, tier_entries = 0, errors = 0;
  std::string last_error;
};

class FAK_EXPORT SourceSweeper {
 public:
  SourceSweeper(RadixTree& tree, std::vector<KVTierStore*> tiers, const Denylist& denylist);
  ~SourceSweeper();
  SourceSweeper(const SourceSweeper&) = delete;
  SourceSweeper& operator=(const SourceSweeper&) = delete;

  // Removes every span derived from `source` from the tree and every tier. An unreachable tier is
  // an error (the rest is still done; run it again).
  Result<SweepReport> EraseSource(const Digest& source);
  // EraseSource for each source the tree or a tier knows that the denylist lists. A source the
  // denylist cannot be asked about now is left for the next sweep (and is never served meanwhile:
  // page-in fails closed).
  Result<SweepReport> SweepOnce();
  // Runs SweepOnce every `interval` until Stop (or destruction). FailedPrecondition when running.
  Status Start(std::chrono::milliseconds interval);
  void Stop();
  SourceSweeperStats Stats() const;

 private:
  void Record(const Result<SweepReport>& r);

  RadixTree& tree_;
  const std::vector<KVTierStore*> tiers_;
  const Denylist& denylist_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  SourceSweeperStats stats_;  // GUARDED_BY(mu_)
  std::thread poller_;
};

}  // namespace fak

#endif  // FAK_KVTIER_SOURCE_SWEEPER_H_
