// Tree publication: what a worker's trees hold, as prefix digests a cache-aware router computes
// from a chat's messages alone (no tokenizer), and the changes between two looks at it
// (docs/fleet.md, "Tree publication"). A worker serves the whole list at GET /fak/v1/tree and, in a
// fleet, streams the changes (RedisFleet::PublishTree).
#ifndef FAK_SRC_SERVER_TREE_PUBLICATION_H_
#define FAK_SRC_SERVER_TREE_PUBLICATION_H_

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "fak/core/digest.h"
#include "fak/session/radix_tree.h"

namespace fak {

// One run of whole texts from a tree's root: the digest of texts 1..messages, for a tenant.
struct PublishedPrefix {
  std::string tenant;    // "" = the shared public prefixes (every tenant's requests may reuse them)
  Digest digest;         // PrefixDigest of the texts' digests
  size_t messages = 0;   // how many texts
  size_t tokens = 0;     // tokens from the root through the last of them
  // Identity is (tenant, digest): the same texts held twice are one prefix.
  friend bool operator<(const PublishedPrefix& a, const PublishedPrefix& b) {
    return a.tenant != b.tenant ? a.tenant < b.tenant : a.digest < b.digest;
  }
  friend bool operator==(const PublishedPrefix& a, const PublishedPrefix& b) {
    return a.tenant == b.tenant && a.digest == b.digest;
  }
};

// sha256("fak.prefix.v1\n" || the 32 raw bytes of each text's sha256, in order): a router hashes
// each message's content (sha256 of its UTF-8 bytes) and chains them the same way.
Digest PrefixDigest(std::span<const Digest> texts);

// Every prefix of every path (texts 1..k for each k), sorted by (tenant, digest), each once (the
// deepest token count kept).
std::vector<PublishedPrefix> PublishedPrefixes(std::span<const HeldPath> paths);

struct TreeChanges {
  std::vector<PublishedPrefix> inserted;  // in `after`, not in `before`
  std::vector<PublishedPrefix> evicted;   // in `before`, not in `after`
};
// Both inputs sorted as PublishedPrefixes returns them.
TreeChanges DiffPrefixes(std::span<const PublishedPrefix> before, std::span<const PublishedPrefix> after);

}  // namespace fak

#endif  // FAK_SRC_SERVER_TREE_PUBLICATION_H_
