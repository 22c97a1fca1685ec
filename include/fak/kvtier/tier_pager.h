// TierPager: the FAULT path — Materialize's KVPager over a KV tier store (docs/kv-tier.md §4).
//
// A miss in the radix tree asks the pager for the rest of the context. It walks the context from
// what the tree served: at each point it tries the tier's entries ending furthest ahead (its own
// tenant's namespace, then the public one), and appends a slab only after every check passed —
// the slab file's section checksums, the slab's tokens and position against the context, the
// manifest gate for the claim (tenancy first, then all nine axes, the integrity checksum over the
// slab's actual bytes), the manifest's source digest against the slab's recorded source runs, and
// the denylist for each source text. A candidate that fails is skipped with a typed reason (the
// walk then tries a shorter entry); nothing unverified is ever appended, so nothing unverified is
// ever attended to. The driver inserts what was paged in as radix nodes (FAULT, then HIT).
//
// Thread-safety: PageIn may run concurrently (the store is thread-safe; counters are atomic).
// Cost per page-in: one key digest per candidate end (over the context up to it), one read and one
// SHA-256 pass over each slab served (the tree takes the verified checksum of a slab it inserts
// whole). The read of the next slab overlaps the verification of the current one (one helper
// thread per page-in while a chain of slabs is walked; docs/kv-tier.md §4).
#ifndef FAK_KVTIER_TIER_PAGER_H_
#define FAK_KVTIER_TIER_PAGER_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "fak/core/export.h"
#include "fak/gate/resident_claim.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/regen/regen_driver.h"
#include "fak/screen/screen.h"

namespace fak {

struct TierPagerStats {
  uint64_t page_ins = 0;        // calls
  uint64_t served_slabs = 0;    // slabs appended
  uint64_t paged_tokens = 0, paged_bytes = 0;
  uint64_t refused[kNumPageInFailures] = {};  // candidates refused, by reason (kAbsent: nothing stored)
  uint64_t count(PageInFailure f) const { return refused[static_cast<int>(f)]; }
};

class FAK_EXPORT TierPager final : public KVPager {
 public:
  // `tier`, `access` and `denylist` must outlive the pager; `denylist` null = no text is denied
  // (a deployment always passes its ScreenChain's denylist). `access` is the serving tree's
  // tenancy rules (RadixTree::access_policy()).
  TierPager(KVTierStore& tier, const AccessPolicy& access, const Denylist* denylist);

  PageInResult PageIn(const ResidentClaim& claim, std::span<const int32_t> tokens, size_t limit, KVCache& cache) override;
  TierPagerStats Stats() const;

 private:
  struct Candidate;
  struct Fetched;
  // Reads and decodes candidates in the walk's order at `pos` (ends furthest first, the tenant's
  // namespace then the public one), from the `from_index`-th on, until one exists and starts at or
  // before pos (or fails to read or decode).
  // An entry larger than a slab of `shape` ending there could be is refused unread (kOversized).
  Fetched Fetch(const ResidentClaim& claim, std::span<const int32_t> tokens, std::span<const uint64_t> ends,
                const KVShape& shape, size_t pos, size_t limit, size_t from_index) const;
  // Verifies a fetched candidate (tokens [.., end)) given `pos` tokens are held: a slab starting at
  // pos (sliced when it started before), or the failure.
  PageInFailure Verify(const ResidentClaim& claim, std::span<const int32_t> tokens, const KVShape& shape, size_t pos,
                       Fetched& fetched, Candidate* out, std::string* detail);

  KVTierStore& tier_;
  const AccessPolicy& access_;
  const Denylist* denylist_;
  std::atomic<uint64_t> page_ins_{0}, served_slabs_{0}, paged_tokens_{0}, paged_bytes_{0};
  std::atomic<uint64_t> refused_[kNumPageInFailures] = {};
};

}  // namespace fak

#endif  // FAK_KVTIER_TIER_PAGER_H_
