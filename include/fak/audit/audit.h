// Audit: a hash-chained, fsync'd journal and ed25519 deletion certificates that fail closed.
//
// "We deleted it" becomes a receipt anyone can re-check (architecture §8, formats in docs/audit.md).
// An umbrella over the parts: the journal, signing keys, the certificate format and its
// verification, and RFC 3161 time anchors. Audit is a leaf: it includes nothing above fak/core/.
// Issuing a certificate for an eviction runs the model, so it lives in fak/session/certify_eviction.h.
#ifndef FAK_AUDIT_AUDIT_H_
#define FAK_AUDIT_AUDIT_H_

#include "fak/audit/deletion_certificate.h"
#include "fak/audit/journal.h"
#include "fak/audit/signing_key.h"
#include "fak/audit/time_anchor.h"

#endif  // FAK_AUDIT_AUDIT_H_
