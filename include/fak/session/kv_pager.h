// KVPager: the way into a radix tree from a lower KV tier (disk, remote), beside SpillSink, the way
// out (spill_sink.h). A tree given a pager (RadixTree::SetPager) pages a prompt's missing prefix in
// on RadixTree::LookupOrPageIn — the FAULT step every serving path shares (the engine's admission,
// the regen driver's Materialize; docs/kv-tier.md §4) — so no caller runs a page-in step of its own.
// kvtier/tier_pager.h is the directory/Redis implementation.
#ifndef FAK_SESSION_KV_PAGER_H_
#define FAK_SESSION_KV_PAGER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/resident_claim.h"
#include "fak/kv/kv_cache.h"

namespace fak {

// Why a lower tier served less than asked (kNone: it served something, or was not asked). Every
// failure falls back to recompute from text; nothing unverified is attended to.
enum class PageInFailure : int {
  kNone = 0,
  kAbsent,       // the tier holds no slab for the next span
  kAxis,         // a slab's manifest differs from the claim on a binding axis (MISS{axis})
  kChecksum,     // a section or the slab's bytes do not match their checksums (or the manifest's)
  kDenied,       // a source text the slab came from is on the quarantine denylist
  kTenant,       // the tenant may not see the slab (REFUSE{reason})
  kTruncated,    // the stored slab is shorter than its header says
  kMalformed,    // not a slab file of a version this build reads, or of another shape
  kUnavailable,  // the tier or the denylist cannot be asked now (fail closed)
  kOversized,    // the stored entry is larger than any slab of the serving shape could be (not read)
};
inline constexpr int kNumPageInFailures = 10;
FAK_EXPORT std::string_view PageInFailureName(PageInFailure failure);  // "none", "absent", "axis", ...

// Whether a page-in that stopped with `failure` was refused (a slab was there and failed a check,
// or the tier could not be asked), as opposed to finding nothing stored.
inline bool IsPageInRefusal(PageInFailure failure) {
  return failure != PageInFailure::kNone && failure != PageInFailure::kAbsent;
}

struct PageInResult {
  size_t paged_tokens = 0;  // tokens appended to the cache
  size_t paged_bytes = 0;   // slab bytes read for them
  PageInFailure failure = PageInFailure::kNone;  // why the page-in stopped short (the last refusal)
  std::string detail;                            // which span, axis or check
};

// A lower KV tier. Implementations must be thread-safe.
class FAK_EXPORT KVPager {
 public:
  virtual ~KVPager() = default;
  // Extends `cache` — a session cache of the serving model holding tokens[0, cache.size()) (what the
  // tree served) — with the longest run of tokens[cache.size(), limit) the tier holds and that
  // passes the gate for `claim` (every axis, checksums, denylist, tenancy). On any failure the
  // cache keeps what was verified so far and the result says why it stopped.
  virtual PageInResult PageIn(const ResidentClaim& claim, std::span<const int32_t> tokens, size_t limit,
                              KVCache& cache) = 0;
};

// What RadixTree::LookupOrPageIn's pager supplied.
struct PagedPrefix {
  size_t paged_tokens = 0;  // read from the tier: appended by the pager (counted before the last token is dropped)
  PageInFailure failure = PageInFailure::kNone;  // why the pager stopped short (kAbsent: nothing stored)
  std::string detail;                            // the pager's words for it
  bool asked = false;                            // the pager was asked (the tree held too little)
  // The tree's answer to inserting the paged prefix. Not OK: the cache still holds the verified
  // prefix (it is served), but other requests will not find it in the tree.
  Status inserted = Status::Ok();
};

}  // namespace fak

#endif  // FAK_SESSION_KV_PAGER_H_
