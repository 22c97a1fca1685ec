// VerifiedSlab: a slab carrying the integrity checksum the manifest gate verified over its bytes, so
// the radix tree, inserting that very slab whole, binds it with that checksum instead of hashing the
// same hundreds of MB again (a page-in from a KV tier: docs/kv-tier.md §4).
//
// Not public, and only the tier pager makes one, right after CheckResidentClaim passed the slab
// against its manifest: a host that could attach a checksum of its choosing would insert
// unverified KV that the tree then vouches for (architecture §3, "no ungated splice"). The
// checksum rides in the shared_ptr's deleter: a slab is immutable behind shared_ptr<const>, so it
// stays true for as long as the pointer lives, and a slice or copy (a new object) carries none.
#ifndef FAK_SRC_SESSION_VERIFIED_SLAB_H_
#define FAK_SRC_SESSION_VERIFIED_SLAB_H_

#include <memory>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"

namespace fak::internal {

struct VerifiedSlabDeleter {
  Digest checksum;               // KVSlabChecksum(*slab), as the gate computed and checked it
  const KVSlab* slab = nullptr;  // the object it covers (an aliasing pointer to another is not it)
  void operator()(const KVSlab* s) const { delete s; }
};

// `slab`, owned, with the checksum the gate just verified over exactly these bytes.
inline std::shared_ptr<const KVSlab> MakeVerifiedSlab(KVSlab slab, const Digest& checksum) {
  KVSlab* owned = new KVSlab(std::move(slab));
  return std::shared_ptr<const KVSlab>(owned, VerifiedSlabDeleter{checksum, owned});
}

// The verified checksum of `slab`, or null when it was not made by MakeVerifiedSlab.
inline const Digest* VerifiedChecksumOf(const std::shared_ptr<const KVSlab>& slab) {
  const VerifiedSlabDeleter* d = std::get_deleter<VerifiedSlabDeleter>(slab);
  return d != nullptr && d->slab == slab.get() ? &d->checksum : nullptr;
}

}  // namespace fak::internal

#endif  // FAK_SRC_SESSION_VERIFIED_SLAB_H_
