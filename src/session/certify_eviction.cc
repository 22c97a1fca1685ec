// IssueDeletionCertificate: the witness run over a SegmentLedger, the journal row, the signature.
// Session code: it runs the model; the certificate format belongs to audit (src/audit/).
#include "fak/session/certify_eviction.h"

#include <cmath>
#include <span>
#include <string>

#include "src/audit/audit_internal.h"
#include "src/audit/journal_format.h"

namespace fak {
namespace {

namespace fmt = internal::audit_format;
using internal::Json;

struct WitnessResult {
  Digest never_saw;
  float max_abs_delta = 0;
};

// Prefills a fresh cache from the surviving segments' token ids and compares it, and the next-token
// logits after `probe`, with the ledger's evicted cache.
Result<WitnessResult> RunWitness(const Model& model, const SegmentLedger& ledger, std::span<const int32_t> probe) {
  KVCache fresh = model.NewCache();
  for (const Segment& s : ledger.segments()) {
    FAK_RETURN_IF_ERROR(model.Prefill(&fresh, s.tokens, LogitsMode::kNone).status().WithContext("witness prefill"));
  }
  WitnessResult w;
  w.never_saw = fresh.ComputeDigest();
  KVCache evicted = ledger.cache().Clone();
  FAK_ASSIGN_OR_RETURN(std::vector<float> a, model.Prefill(&evicted, probe, LogitsMode::kLast));
  FAK_ASSIGN_OR_RETURN(std::vector<float> b, model.Prefill(&fresh, probe, LogitsMode::kLast));
  if (a.size() != b.size()) return FailedPrecondition("witness: logits sizes differ");
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= w.max_abs_delta)) w.max_abs_delta = std::isnan(d) ? INFINITY : d;
  }
  return w;
}

Status CheckIssueInputs(const SegmentLedger& ledger, const SegmentSpec& evicted, const EvictionReport& report) {
  if (report.segment_id != evicted.id) {
    return FailedPrecondition("IssueDeletionCertificate: report is for segment '" + report.segment_id + "', evicted spec is '" + evicted.id + "'");
  }
  if (report.n_evicted != evicted.tokens.size()) {
    return FailedPrecondition("IssueDeletionCertificate: report.n_evicted " + std::to_string(report.n_evicted) +
                              " != evicted.tokens.size() " + std::to_string(evicted.tokens.size()));
  }
  if (!report.exact) return FailedPrecondition("IssueDeletionCertificate: eviction of '" + evicted.id + "' is not exact; no certificate");
  if (ledger.Find(evicted.id) != nullptr) return FailedPrecondition("IssueDeletionCertificate: segment '" + evicted.id + "' is still in the ledger");
  if (ledger.cache().size() != report.cache_tokens_after || ledger.cache().ComputeDigest() != report.cache_digest_after) {
    return FailedPrecondition("IssueDeletionCertificate: the ledger's cache changed since the eviction of '" + evicted.id + "'");
  }
  return Status::Ok();
}

Json SegmentRecord(const SegmentSpec& s, const EvictionReport& r) {
  const Digest tokens = Digest::Of(s.tokens.data(), s.tokens.size() * sizeof(int32_t));
  return Json{{fmt::kPSegId, s.id},         {fmt::kPSegKind, SegmentKindName(s.kind)},
              {fmt::kPSegFrom, r.from},     {fmt::kPSegTokens, s.tokens.size()},
              {fmt::kPSegSource, s.source_digest.Hex()}, {fmt::kPSegTokenDigest, tokens.Hex()}};
}

Json DeletionPayload(const Model& model, const SegmentSpec& s, const EvictionReport& r, const WitnessResult& w,
                     const std::string& reason) {
  return Json{{fmt::kPSegment, SegmentRecord(s, r)},
              {fmt::kPTokensBefore, r.cache_tokens_before},
              {fmt::kPTokensAfter, r.cache_tokens_after},
              {fmt::kPDigestBefore, r.cache_digest_before.Hex()},
              {fmt::kPDigestAfter, r.cache_digest_after.Hex()},
              {fmt::kPNeverSaw, w.never_saw.Hex()},
              {fmt::kPMaxAbsDelta, static_cast<double>(w.max_abs_delta)},
              {fmt::kPModel, model.WeightsDigest().Hex()},
              {fmt::kPRerotated, r.n_rerotated},
              {fmt::kPRecomputed, r.n_recomputed},
              {fmt::kPReason, reason}};
}

}  // namespace

Result<DeletionCertificate> IssueDeletionCertificate(const Model& model, const SegmentLedger& ledger,
                                                     const SegmentSpec& evicted, const EvictionReport& report,
                                                     Journal* journal, const SigningKey& key, const IssueOptions& options) {
  if (journal == nullptr) return InvalidArgument("IssueDeletionCertificate: journal is null");
  FAK_RETURN_IF_ERROR(CheckIssueInputs(ledger, evicted, report));
  std::vector<int32_t> probe = options.probe;
  if (probe.empty()) probe.push_back(model.config().bos_id >= 0 ? model.config().bos_id : 0);
  FAK_ASSIGN_OR_RETURN(WitnessResult w, RunWitness(model, ledger, probe));
  const Json payload = DeletionPayload(model, evicted, report, w, options.reason);
  const std::string subject = evicted.source_digest.Hex();
  if (w.never_saw != report.cache_digest_after || w.max_abs_delta != 0.0f) {
    const std::string why = "witness failed for segment '" + evicted.id + "': cache after eviction " +
                            report.cache_digest_after.Hex() + ", never-saw " + w.never_saw.Hex() +
                            ", max|delta| of next-token logits " + std::to_string(w.max_abs_delta);
    Json refused = payload;
    refused[fmt::kPRefusal] = why;
    FAK_ASSIGN_OR_RETURN(std::string text, internal::CanonicalJson(refused, "refusal payload"));
    FAK_RETURN_IF_ERROR(journal->Append(fmt::kKindDeletionRefused, subject, text).status());
    return VerificationFailed("IssueDeletionCertificate: " + why + "; no certificate issued");
  }
  FAK_ASSIGN_OR_RETURN(std::string text, internal::CanonicalJson(payload, "deletion payload"));
  FAK_ASSIGN_OR_RETURN(JournalRow row, journal->Append(fmt::kKindDeletion, subject, text));

  DeletionCertificate c;
  c.version = fmt::kCertificateVersion;
  c.scope = std::string(fmt::kCertificateScope);
  c.subject = evicted.source_digest;
  c.segment_id = evicted.id;
  c.span_from = report.from;
  c.span_len = report.n_evicted;
  c.evicted_count = report.n_evicted;
  c.cache_digest_before = report.cache_digest_before;
  c.cache_digest_after = report.cache_digest_after;
  c.never_saw_digest = w.never_saw;
  c.max_abs_delta = w.max_abs_delta;
  c.model_digest = model.WeightsDigest();
  c.journal_seq = row.seq;
  c.journal_row_hash = row.hash;
  c.issued_at_unix_us = row.time_unix_us;
  FAK_RETURN_IF_ERROR(SignCertificate(&c, key));
  return c;
}

}  // namespace fak
