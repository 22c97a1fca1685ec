// SourceSetDigest: the source digest a radix node's manifest binds.
#include "fak/session/source_span.h"

namespace fak {

Digest SourceSetDigest(std::span<const SourceSpan> runs, size_t from, size_t n_tokens, const Digest& fallback) {
  if (runs.empty()) return fallback;
  if (runs.size() == 1 && runs[0].from == from && runs[0].n_tokens == n_tokens) return runs[0].source;
  Digester d;
  d.Update("fak.sources.v1");
  d.UpdatePod(static_cast<uint64_t>(runs.size()));
  for (const SourceSpan& r : runs) {
    d.UpdatePod(static_cast<uint64_t>(r.from)).UpdatePod(static_cast<uint64_t>(r.n_tokens));
    d.Update(r.source.bytes.data(), r.source.bytes.size());
  }
  return d.Finish();
}

}  // namespace fak
