// Certifying an eviction: runs the witness (a cache freshly prefilled from the surviving segments
// must equal the evicted ledger's, next-token logits at max|Δ| == 0), journals the deletion and
// signs a DeletionCertificate. It sits in the session layer because it runs the model over a
// SegmentLedger; the certificate format and its verification are audit's (a leaf below).
#ifndef FAK_SESSION_CERTIFY_EVICTION_H_
#define FAK_SESSION_CERTIFY_EVICTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fak/audit/deletion_certificate.h"
#include "fak/audit/journal.h"
#include "fak/audit/signing_key.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/model/model.h"
#include "fak/session/segment_ledger.h"

namespace fak {

struct IssueOptions {
  // Tokens fed after both caches to compare next-token logits. Default: empty = the model's BOS id
  // when it has one, else token 0.
  std::vector<int32_t> probe;
  // Why the segment was evicted (e.g. the quarantine verdict), recorded in the journal. Default: "".
  std::string reason;
};

// Issues a certificate for an eviction that already happened in `ledger`:
//   `evicted` is the segment as it was appended (its tokens and source digest), `report` what
//   SegmentLedger::Evict or AppendScreened returned, and the ledger must not have changed since.
// The witness run prefills a fresh cache from the surviving segments; its digest must equal the
// ledger's cache and the next-token logits must match at max|Δ| == 0. Then a "deletion" row is
// appended to `journal` and the certificate is signed. On a failed witness a "deletion.refused" row
// is journaled and VerificationFailed returned: no certificate. FailedPrecondition when the report
// is inexact, stale or does not describe `evicted`.
FAK_EXPORT Result<DeletionCertificate> IssueDeletionCertificate(const Model& model, const SegmentLedger& ledger,
                                                     const SegmentSpec& evicted, const EvictionReport& report,
                                                     Journal* journal, const SigningKey& key,
                                                     const IssueOptions& options = {});

}  // namespace fak

#endif  // FAK_SESSION_CERTIFY_EVICTION_H_
