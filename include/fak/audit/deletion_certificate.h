// Deletion certificate: binds one exact eviction (span, count, cache digests, the never-saw
// witness, max|Δ| of next-token logits) to a journal row; signed with ed25519. Verification re-checks
// signature, trust, witness, journal chain and row, and re-counts the evicted tokens from the journal;
// each failure has its own reason. Issuing (which runs the model) lives in the session layer:
// fak/session/certify_eviction.h.
// Bounds: a certificate proves removal from one inference working set (a KV cache), not from model
// weights, backups, replicas or logs; it says so in its signed `scope` field.
#ifndef FAK_AUDIT_DELETION_CERTIFICATE_H_
#define FAK_AUDIT_DELETION_CERTIFICATE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/audit/journal.h"
#include "fak/audit/signing_key.h"
#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

struct FAK_EXPORT DeletionCertificate {
  int version = 1;
  std::string scope;           // the bounds of the claim (fixed text per version, signed)
  Digest subject;              // digest of the deleted content (the segment's source digest)
  std::string segment_id;
  uint64_t span_from = 0, span_len = 0;  // token offsets of the evicted span in the cache
  uint64_t evicted_count = 0;
  Digest cache_digest_before, cache_digest_after;
  Digest never_saw_digest;     // a cache prefilled fresh from the surviving segments
  float max_abs_delta = 0;     // next-token logits, evicted cache vs never-saw cache
  Digest model_digest;         // Model::WeightsDigest() of the witness model
  uint64_t journal_seq = 0;
  Digest journal_row_hash;
  int64_t issued_at_unix_us = 0;
  PublicKey issuer_public_key;
  std::string signature;       // 64 raw bytes over CertificateSigningBytes()
  std::string time_anchor;     // optional DER RFC 3161 TimeStampToken over CertificateDigest()
  // Version 2 only (version 1 has neither): the issuer's fleet announcement of the erasure and
  // the workers that confirmed they removed their copies of the subject within the wait, the
  // issuer first (docs/fleet.md). A worker not named had not confirmed when it was signed.
  std::string fleet_event;
  std::vector<std::string> fleet_confirmed;

  // Canonical JSON (sorted keys; digests and keys hex, signature hex, anchor base64).
  Result<std::string> ToJson() const;
  static Result<DeletionCertificate> FromJson(std::string_view json);
};

// The bytes the issuer signs: a domain tag plus the canonical JSON of every field except
// signature and time_anchor.
FAK_EXPORT Result<std::string> CertificateSigningBytes(const DeletionCertificate& cert);
// sha256 of the canonical JSON of every field except time_anchor (signature included): what the
// RFC 3161 anchor covers.
FAK_EXPORT Result<Digest> CertificateDigest(const DeletionCertificate& cert);
// Sets issuer_public_key and signature and clears time_anchor (it covered the old signature).
// Signs whatever the certificate says: issuing honestly is IssueDeletionCertificate's job
// (fak/session/certify_eviction.h); verification never trusts the content because it is signed.
FAK_EXPORT Status SignCertificate(DeletionCertificate* cert, const SigningKey& key);
// Makes `cert` a version 2 certificate naming the fleet's confirmations and signs it again with
// `key` (which must be its issuer's: FailedPrecondition otherwise). InvalidArgument when
// `confirmed` is empty.
FAK_EXPORT Status AddFleetConfirmations(DeletionCertificate* cert, std::string event, std::vector<std::string> confirmed,
                                        const SigningKey& key);

// A certificate for the erasure of a text however it arrived: an "erasure" journal row (as
// Planner::EraseText journals it — the content sealed, its bytes erased from the text store, the KV
// the issuer's tree held from it evicted). No one cache was cut, so nothing is witnessed: `scope`
// is the erasure statement (docs/audit.md), segment_id and span are empty, the cache, witness and
// model digests are zero and evicted_count is the row's tree_tokens. Version 1, signed with `key`
// (AddFleetConfirmations makes it 2). InvalidArgument when `row` is not an erasure row.
FAK_EXPORT Result<DeletionCertificate> CertifyErasure(const JournalRow& row, const SigningKey& key);
// Whether `cert` states an erasure (CertifyErasure) rather than a witnessed eviction.
FAK_EXPORT bool IsErasureCertificate(const DeletionCertificate& cert);

// Why a certificate failed verification; each tamper case has its own value.
enum class CertificateFault {
  kNone,
  kMalformed,            // unsupported version, wrong scope text, wrong field sizes, fleet fields in v1 / missing in v2,
                         // eviction fields in an erasure certificate
  kUnknownKey,           // issuer key not among the trusted keys
  kBadSignature,         // signature does not verify over the canonical encoding
  kNonZeroDelta,         // max_abs_delta != 0
  kWitnessMismatch,      // cache_digest_after != never_saw_digest
  kJournalBroken,        // the journal's chain fails verification
  kJournalRowAbsent,     // no row with journal_seq
  kJournalRowMismatch,   // the row's hash, kind or recorded digests differ from the certificate
  kSubjectRelabelled,    // the certificate's subject is not the journal's subject
  kCountMismatch,        // evicted_count/span differ from the independent re-count
  kAnchorMissing,        // an anchor was required and is absent
  kAnchorInvalid,        // the RFC 3161 token does not verify against the trusted TSA roots
  kAnchorDigestMismatch, // the token timestamps a different digest
};
FAK_EXPORT std::string_view CertificateFaultName(CertificateFault fault);

struct FAK_EXPORT CertificateCheck {
  CertificateFault fault = CertificateFault::kNone;
  std::string detail;                        // names the field at fault and its values
  std::optional<int64_t> anchored_at_unix_s; // the TSA's genTime when the anchor was verified
  bool ok() const { return fault == CertificateFault::kNone; }
  // OK, or VerificationFailed("deletion certificate <fault>: detail").
  Status ToStatus() const;
};

struct CertificateVerifyOptions {
  // PEM CA certificates trusted to sign time anchors. Default: empty = anchors are not checked.
  std::string tsa_roots_pem;
  // Fail with kAnchorMissing when the certificate has no anchor. Default: false.
  bool require_time_anchor = false;
};

// Fails closed: every check must pass. The journal's chain is verified from its first row; the
// evicted count is re-counted from the journal row's segment record and its two cache sizes.
FAK_EXPORT CertificateCheck VerifyDeletionCertificate(const DeletionCertificate& cert, std::span<const JournalRow> journal,
                                           std::span<const PublicKey> trusted_keys,
                                           const CertificateVerifyOptions& options = {});

}  // namespace fak

#endif  // FAK_AUDIT_DELETION_CERTIFICATE_H_
