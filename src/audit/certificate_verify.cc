// VerifyDeletionCertificate: every check must pass; each failure names its own fault.
#include <algorithm>
#include <string>

#include "src/audit/audit_internal.h"
#include "src/audit/journal_format.h"

namespace fak {

namespace fmt = internal::audit_format;
using internal::Json;

namespace {

CertificateCheck Fail(CertificateFault fault, std::string detail) { return CertificateCheck{fault, std::move(detail), {}}; }

std::string Mismatch(std::string_view field, const std::string& cert, const std::string& journal) {
  return std::string(field) + ": certificate says " + cert + ", journal says " + journal;
}

CertificateCheck CheckSelf(const DeletionCertificate& c, std::span<const PublicKey> trusted) {
  if (c.version != fmt::kCertificateVersion && c.version != fmt::kCertificateFleetVersion)
    return Fail(CertificateFault::kMalformed, "version " + std::to_string(c.version) + " is not supported");
  const bool fleet = !c.fleet_event.empty() || !c.fleet_confirmed.empty();
  if (c.version == fmt::kCertificateVersion && fleet)
    return Fail(CertificateFault::kMalformed, "a version 1 certificate carries fleet confirmations");
  if (c.version == fmt::kCertificateFleetVersion && (c.fleet_event.empty() || c.fleet_confirmed.empty()))
    return Fail(CertificateFault::kMalformed, "a version 2 certificate names no fleet event or no confirming worker");
  if (c.scope != fmt::kCertificateScope && c.scope != fmt::kErasureScope)
    return Fail(CertificateFault::kMalformed, "scope is neither the eviction nor the erasure statement of bounds");
  if (IsErasureCertificate(c) && (!c.segment_id.empty() || c.span_from != 0 || c.span_len != 0 || !c.cache_digest_before.IsZero() ||
                                  !c.cache_digest_after.IsZero() || !c.never_saw_digest.IsZero() || !c.model_digest.IsZero()))
    return Fail(CertificateFault::kMalformed, "an erasure certificate carries a segment, a span or cache digests (it witnesses no cache)");
  if (c.signature.size() != 64) return Fail(CertificateFault::kMalformed, "signature has " + std::to_string(c.signature.size()) + " bytes, want 64");
  if (std::find(trusted.begin(), trusted.end(), c.issuer_public_key) == trusted.end()) {
    return Fail(CertificateFault::kUnknownKey, "issuer_public_key " + c.issuer_public_key.Hex() + " is not trusted");
  }
  Result<std::string> bytes = CertificateSigningBytes(c);
  if (!bytes.has_value()) return Fail(CertificateFault::kMalformed, std::string(bytes.error().message()));
  if (!c.issuer_public_key.VerifySignature(*bytes, c.signature)) {
    return Fail(CertificateFault::kBadSignature, "signature does not verify under issuer_public_key " + c.issuer_public_key.Hex());
  }
  if (!(c.max_abs_delta == 0.0f)) {
    return Fail(CertificateFault::kNonZeroDelta, "max_abs_delta is " + std::to_string(c.max_abs_delta) + ", want 0");
  }
  if (c.cache_digest_after != c.never_saw_digest) {
    return Fail(CertificateFault::kWitnessMismatch,
                "cache_digest_after " + c.cache_digest_after.Hex() + " != never_saw_digest " + c.never_saw_digest.Hex());
  }
  return {};
}

// The certificate's digests against the ones journaled with the row.
CertificateCheck CheckRecordedDigests(const DeletionCertificate& c, const Json& p) {
  const std::pair<std::string_view, const Digest*> fields[] = {
      {fmt::kPDigestBefore, &c.cache_digest_before}, {fmt::kPDigestAfter, &c.cache_digest_after},
      {fmt::kPNeverSaw, &c.never_saw_digest},        {fmt::kPModel, &c.model_digest}};
  for (const auto& [key, want] : fields) {
    Result<Digest> got = internal::GetDigest(p, key, "journal deletion payload");
    if (!got.has_value()) return Fail(CertificateFault::kJournalRowMismatch, std::string(got.error().message()));
    if (*got != *want) return Fail(CertificateFault::kJournalRowMismatch, Mismatch(key, want->Hex(), got->Hex()));
  }
  return {};
}

// Re-counts the evicted tokens from the journal alone: the segment record's n_tokens and the
// difference of the two cache sizes must agree, and the certificate must state exactly that.
CertificateCheck Recount(const DeletionCertificate& c, const Json& seg, const Json& p) {
  constexpr std::string_view kWhat = "journal deletion payload";
  Result<uint64_t> n = internal::GetUint(seg, fmt::kPSegTokens, kWhat), from = internal::GetUint(seg, fmt::kPSegFrom, kWhat);
  Result<uint64_t> before = internal::GetUint(p, fmt::kPTokensBefore, kWhat), after = internal::GetUint(p, fmt::kPTokensAfter, kWhat);
  for (const Result<uint64_t>* r : {&n, &from, &before, &after}) {
    if (!r->has_value()) return Fail(CertificateFault::kJournalRowMismatch, std::string(r->error().message()));
  }
  if (*after > *before || *before - *after != *n) {
    return Fail(CertificateFault::kCountMismatch, "journal segment record has " + std::to_string(*n) + " tokens but the cache went from " +
                                                      std::to_string(*before) + " to " + std::to_string(*after) + " tokens");
  }
  if (c.evicted_count != *n) return Fail(CertificateFault::kCountMismatch, Mismatch("evicted_count", std::to_string(c.evicted_count), std::to_string(*n)));
  if (c.span_len != *n) return Fail(CertificateFault::kCountMismatch, Mismatch("span.len", std::to_string(c.span_len), std::to_string(*n)));
  if (c.span_from != *from) return Fail(CertificateFault::kCountMismatch, Mismatch("span.from", std::to_string(c.span_from), std::to_string(*from)));
  return {};
}

// An erasure's count is the tree tokens its row journaled.
CertificateCheck RecountErasure(const DeletionCertificate& c, const Json& p) {
  Result<uint64_t> n = internal::GetUint(p, fmt::kPTreeTokens, "journal erasure payload");
  if (!n.has_value()) return Fail(CertificateFault::kJournalRowMismatch, std::string(n.error().message()));
  if (c.evicted_count != *n) return Fail(CertificateFault::kCountMismatch, Mismatch("evicted_count", std::to_string(c.evicted_count), std::to_string(*n)));
  return {};
}

CertificateCheck CheckJournal(const DeletionCertificate& c, std::span<const JournalRow> journal) {
  const JournalCheck chain = VerifyJournalRows(journal);
  if (!chain.ok()) return Fail(CertificateFault::kJournalBroken, std::string(chain.ToStatus().message()));
  if (c.journal_seq < 1 || c.journal_seq > journal.size()) {
    return Fail(CertificateFault::kJournalRowAbsent, "journal has no row seq " + std::to_string(c.journal_seq) + " (it has " +
                                                         std::to_string(journal.size()) + " rows)");
  }
  const JournalRow& row = journal[c.journal_seq - 1];
  if (row.hash != c.journal_row_hash) return Fail(CertificateFault::kJournalRowMismatch, Mismatch("journal_row_hash", c.journal_row_hash.Hex(), row.hash.Hex()));
  const std::string_view kind = IsErasureCertificate(c) ? fmt::kKindErasure : fmt::kKindDeletion;
  if (row.kind != kind) return Fail(CertificateFault::kJournalRowMismatch, Mismatch("row kind", std::string(kind), row.kind));
  if (row.subject != c.subject.Hex()) return Fail(CertificateFault::kSubjectRelabelled, Mismatch("subject", c.subject.Hex(), row.subject));
  Result<Json> p = internal::ParseJson(row.payload_json, "journal deletion payload");
  if (!p.has_value()) return Fail(CertificateFault::kJournalRowMismatch, std::string(p.error().message()));
  if (IsErasureCertificate(c)) return RecountErasure(c, *p);
  auto seg = p->find(fmt::kPSegment);
  if (seg == p->end() || !seg->is_object()) return Fail(CertificateFault::kJournalRowMismatch, "journal deletion payload has no segment record");
  Result<Digest> source = internal::GetDigest(*seg, fmt::kPSegSource, "journal segment record");
  if (!source.has_value()) return Fail(CertificateFault::kJournalRowMismatch, std::string(source.error().message()));
  if (*source != c.subject) return Fail(CertificateFault::kSubjectRelabelled, Mismatch("subject vs segment source_digest", c.subject.Hex(), source->Hex()));
  Result<std::string> id = internal::GetString(*seg, fmt::kPSegId, "journal segment record");
  if (!id.has_value() || *id != c.segment_id) {
    return Fail(CertificateFault::kJournalRowMismatch, Mismatch("segment_id", c.segment_id, id.has_value() ? *id : "(absent)"));
  }
  if (CertificateCheck d = CheckRecordedDigests(c, *p); !d.ok()) return d;
  return Recount(c, *seg, *p);
}

CertificateCheck CheckAnchor(const DeletionCertificate& c, const CertificateVerifyOptions& options) {
  if (c.time_anchor.empty()) {
    if (options.require_time_anchor) return Fail(CertificateFault::kAnchorMissing, "time_anchor is absent and one is required");
    return {};
  }
  if (options.tsa_roots_pem.empty()) {
    if (options.require_time_anchor) return Fail(CertificateFault::kAnchorInvalid, "no TSA roots given to verify time_anchor against");
    return {};  // present but not checked: anchored_at stays empty
  }
  Result<Digest> digest = CertificateDigest(c);
  if (!digest.has_value()) return Fail(CertificateFault::kMalformed, std::string(digest.error().message()));
  internal::AnchorResult a = internal::CheckTimeAnchor(c.time_anchor, *digest, options.tsa_roots_pem);
  if (a.failure == internal::AnchorFailure::kImprint) return Fail(CertificateFault::kAnchorDigestMismatch, a.detail);
  if (a.failure != internal::AnchorFailure::kNone) return Fail(CertificateFault::kAnchorInvalid, a.detail);
  CertificateCheck ok;
  ok.anchored_at_unix_s = a.anchor.gen_time_unix_s;
  return ok;
}

}  // namespace

std::string_view CertificateFaultName(CertificateFault fault) {
  switch (fault) {
    case CertificateFault::kNone: return "none";
    case CertificateFault::kMalformed: return "malformed";
    case CertificateFault::kUnknownKey: return "unknown_key";
    case CertificateFault::kBadSignature: return "bad_signature";
    case CertificateFault::kNonZeroDelta: return "non_zero_delta";
    case CertificateFault::kWitnessMismatch: return "witness_mismatch";
    case CertificateFault::kJournalBroken: return "journal_broken";
    case CertificateFault::kJournalRowAbsent: return "journal_row_absent";
    case CertificateFault::kJournalRowMismatch: return "journal_row_mismatch";
    case CertificateFault::kSubjectRelabelled: return "subject_relabelled";
    case CertificateFault::kCountMismatch: return "count_mismatch";
    case CertificateFault::kAnchorMissing: return "anchor_missing";
    case CertificateFault::kAnchorInvalid: return "anchor_invalid";
    case CertificateFault::kAnchorDigestMismatch: return "anchor_digest_mismatch";
  }
  return "unknown";
}

Status CertificateCheck::ToStatus() const {
  if (ok()) return Status::Ok();
  return VerificationFailed("deletion certificate " + std::string(CertificateFaultName(fault)) + ": " + detail);
}

CertificateCheck VerifyDeletionCertificate(const DeletionCertificate& cert, std::span<const JournalRow> journal,
                                           std::span<const PublicKey> trusted_keys, const CertificateVerifyOptions& options) {
  if (CertificateCheck s = CheckSelf(cert, trusted_keys); !s.ok()) return s;
  if (CertificateCheck j = CheckJournal(cert, journal); !j.ok()) return j;
  return CheckAnchor(cert, options);
}

}  // namespace fak
