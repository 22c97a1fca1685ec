// Tree publication (src/server/tree_publication.h).
#include "src/server/tree_publication.h"

#include <algorithm>
#include <iterator>

namespace fak {

Digest PrefixDigest(std::span<const Digest> texts) {
  std::string bytes = "fak.prefix.v1\n";
  for (const Digest& d : texts) bytes.append(reinterpret_cast<const char*>(d.bytes.data()), d.bytes.size());
  return Digest::Of(bytes);
}

std::vector<PublishedPrefix> PublishedPrefixes(std::span<const HeldPath> paths) {
  std::vector<PublishedPrefix> out;
  for (const HeldPath& p : paths) {
    for (size_t k = 1; k <= p.sources.size(); ++k)
      out.push_back({p.tenant, PrefixDigest(std::span<const Digest>(p.sources).first(k)), k, p.ends[k - 1]});
  }
  // Deepest first within one identity, so unique keeps it.
  std::sort(out.begin(), out.end(), [](const PublishedPrefix& a, const PublishedPrefix& b) {
    return a < b || (a == b && a.tokens > b.tokens);
  });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

TreeChanges DiffPrefixes(std::span<const PublishedPrefix> before, std::span<const PublishedPrefix> after) {
  TreeChanges c;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(c.inserted));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(), std::back_inserter(c.evicted));
  return c;
}

}  // namespace fak
