// PageInAfterLookup: the FAULT step every serving path shares — the regen driver's Materialize, the
// Engine's admission and the Planner's Complete (docs/kv-tier.md §4).
//
// After a radix-tree lookup that matched less than a context, a lower KV tier (KVPager) may hold
// more of it. This asks the pager for the rest, inserts what it verified into the tree as radix
// nodes (so the next lookup — of this request or any other of the tenant — is a HIT), and leaves the
// lookup's cache holding the verified prefix, one token short of the context when the tier held all
// of it (the caller needs that token's logits). Nothing the pager did not verify is ever appended.
//
// Blocking: the pager's reads (a directory listing, a file per slab, or Redis round trips) and two
// SHA-256 passes per slab run on the calling thread.
#ifndef FAK_REGEN_PAGE_IN_H_
#define FAK_REGEN_PAGE_IN_H_

#include <cstddef>
#include <span>
#include <string>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/resident_claim.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"
#include "fak/session/source_span.h"

namespace fak {

struct PagedPrefix {
  size_t paged_tokens = 0;  // read from the tier: appended by the pager (counted before the last token is dropped)
  PageInFailure failure = PageInFailure::kNone;  // why the pager stopped short (kAbsent: nothing stored)
  std::string detail;                            // the pager's words for it
  // The tree's answer to inserting the paged prefix. Not OK: the cache still holds the verified
  // prefix (it is served), but other requests will not find it in the tree.
  Status inserted = Status::Ok();
};

// `lookup` is tree.Lookup(claim, tokens). Only when lookup.matched_tokens + 1 < tokens.size()
// (something beyond the last token is missing) is the pager asked; otherwise nothing happens.
// Afterwards lookup.matched_tokens == lookup.cache.size() <= tokens.size() - 1. `sources` are the
// context's source runs (as RadixTree::Insert takes them); may be empty. `insert` false leaves the
// tree alone (a caller that inserts the whole context itself once it is admitted).
FAK_EXPORT PagedPrefix PageInAfterLookup(KVPager& pager, RadixTree& tree, const ResidentClaim& claim,
                              std::span<const int32_t> tokens, std::span<const SourceSpan> sources,
                              LookupResult& lookup, bool insert = true);

// Whether a page-in that stopped with `failure` was refused (a slab was there and failed a check,
// or the tier could not be asked), as opposed to finding nothing stored.
inline bool IsPageInRefusal(PageInFailure failure) {
  return failure != PageInFailure::kNone && failure != PageInFailure::kAbsent;
}

}  // namespace fak

#endif  // FAK_REGEN_PAGE_IN_H_
