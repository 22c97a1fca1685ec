// TranscriptRef: one context named by its source texts, the unit every regen part works on.
//
// A context is ordered source texts (SourceDigests held in a TextCorpus) whose tokens, concatenated,
// form it. It names no tokenizer, so the same ref materializes under any model (architecture §9).
#ifndef FAK_REGEN_TRANSCRIPT_REF_H_
#define FAK_REGEN_TRANSCRIPT_REF_H_

#include <string>
#include <vector>

#include "fak/core/digest.h"
#include "fak/session/radix_tree.h"

namespace fak {

// Plain value; copy freely.
struct TranscriptRef {
  std::string session;           // hot-set key (empty: keyed by the segment digests)
  std::vector<Digest> segments;  // in context order
  // Whose context it is: a rollout backfills it into the new tree under this tenant, so the KV is
  // found (and gated) exactly as the live session's would be.
  std::string tenant = std::string(kDefaultTenant);
};

}  // namespace fak

#endif  // FAK_REGEN_TRANSCRIPT_REF_H_
