// PageInAfterLookup: ask the pager for what the tree lacks, keep it in the tree, leave the last token.
#include "fak/regen/page_in.h"

namespace fak {

PagedPrefix PageInAfterLookup(KVPager& pager, RadixTree& tree, const ResidentClaim& claim,
                              std::span<const int32_t> tokens, std::span<const SourceSpan> sources,
                              LookupResult& lookup, bool insert) {
  PagedPrefix out;
  const size_t n = tokens.size();
  if (lookup.matched_tokens + 1 >= n) return out;
  const size_t resident = lookup.cache.size();
  // Every slab the pager appends passed the gate (axes, checksums, denylist, tenancy).
  PageInResult paged = pager.PageIn(claim, tokens, n, lookup.cache);
  out.failure = paged.failure;
  out.detail = std::move(paged.detail);
  if (lookup.cache.size() <= resident) return out;
  out.paged_tokens = lookup.cache.size() - resident;
  if (insert) out.inserted = tree.Insert(claim.tenant, tokens.first(lookup.cache.size()), lookup.cache, sources);
  // The last token is prefilled by the caller, which needs its logits; truncating a cache is exact.
  if (lookup.cache.size() == n) {
    Status truncated = lookup.cache.Truncate(n - 1);
    if (!truncated.ok()) {
      // Cannot happen for n - 1 < size; if it did, serve nothing paged rather than a wrong length.
      (void)lookup.cache.Truncate(resident);
      out.paged_tokens = 0;
      out.inserted = truncated;
    }
  }
  lookup.matched_tokens = lookup.cache.size();
  return out;
}

}  // namespace fak
