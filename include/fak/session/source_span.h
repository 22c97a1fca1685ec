// SourceSpan: which source text a run of a context's tokens came from, and the digest that binds a
// span's set of sources into its manifest (docs/manifest.md §1, "source_digest").
#ifndef FAK_SESSION_SOURCE_SPAN_H_
#define FAK_SESSION_SOURCE_SPAN_H_

#include <cstddef>
#include <span>

#include "fak/core/digest.h"
#include "fak/core/export.h"

namespace fak {

// Tokens [from, from + n_tokens) of a context were produced from the source text with this
// SourceDigest (e.g. one message). Plain value.
struct SourceSpan {
  size_t from = 0, n_tokens = 0;
  Digest source;
  friend bool operator==(const SourceSpan&, const SourceSpan&) = default;
};

// The source digest a span's manifest binds, given the runs overlapping it (clipped to it, in the
// order recorded): the one text's SourceDigest when a single run covers the whole span
// [from, from + n_tokens); otherwise sha256("fak.sources.v1" || u64le(count) || per run u64le(from)
// || u64le(n_tokens) || digest); with no runs recorded, `fallback` (the span digest: text unknown).
FAK_EXPORT Digest SourceSetDigest(std::span<const SourceSpan> runs, size_t from, size_t n_tokens, const Digest& fallback);

}  // namespace fak

#endif  // FAK_SESSION_SOURCE_SPAN_H_
