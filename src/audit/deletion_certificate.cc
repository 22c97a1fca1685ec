// DeletionCertificate: canonical encoding, signing, and issuing after a witness run.
#include <cmath>
#include <string>

#include "src/audit/audit_internal.h"
#include "src/audit/journal_format.h"

namespace fak {

namespace fmt = internal::audit_format;
using internal::Json;

namespace {

Json CertToJson(const DeletionCertificate& c, bool with_signature, bool with_anchor) {
  Json j = Json::object();
  j["version"] = c.version;
  j["scope"] = c.scope;
  j["subject"] = c.subject.Hex();
  j["segment_id"] = c.segment_id;
  j["span"] = Json{{"from", c.span_from}, {"len", c.span_len}};
  j["evicted_count"] = c.evicted_count;
  j["cache_digest_before"] = c.cache_digest_before.Hex();
  j["cache_digest_after"] = c.cache_digest_after.Hex();
  j["never_saw_digest"] = c.never_saw_digest.Hex();
  j["max_abs_delta"] = static_cast<double>(c.max_abs_delta);
  j["model_digest"] = c.model_digest.Hex();
  j["journal_seq"] = c.journal_seq;
  j["journal_row_hash"] = c.journal_row_hash.Hex();
  j["issued_at"] = c.issued_at_unix_us;
  j["issuer_public_key"] = c.issuer_public_key.Hex();
  if (with_signature) j["signature"] = internal::HexEncode(c.signature);
  if (with_anchor && !c.time_anchor.empty()) j["time_anchor"] = internal::Base64Encode(c.time_anchor);
  return j;
}

Status ReadDigests(const Json& j, DeletionCertificate* c) {
  constexpr std::string_view kWhat = "deletion certificate";
  FAK_ASSIGN_OR_RETURN(c->subject, internal::GetDigest(j, "subject", kWhat));
  FAK_ASSIGN_OR_RETURN(c->cache_digest_before, internal::GetDigest(j, "cache_digest_before", kWhat));
  FAK_ASSIGN_OR_RETURN(c->cache_digest_after, internal::GetDigest(j, "cache_digest_after", kWhat));
  FAK_ASSIGN_OR_RETURN(c->never_saw_digest, internal::GetDigest(j, "never_saw_digest", kWhat));
  FAK_ASSIGN_OR_RETURN(c->model_digest, internal::GetDigest(j, "model_digest", kWhat));
  FAK_ASSIGN_OR_RETURN(c->journal_row_hash, internal::GetDigest(j, "journal_row_hash", kWhat));
  FAK_ASSIGN_OR_RETURN(std::string key_hex, internal::GetString(j, "issuer_public_key", kWhat));
  Result<PublicKey> key = PublicKey::FromHex(key_hex);
  if (!key.has_value()) return Corruption("deletion certificate: field 'issuer_public_key': " + std::string(key.error().message()));
  c->issuer_public_key = *key;
  return Status::Ok();
}

Status ReadScalars(const Json& j, DeletionCertificate* c) {
  constexpr std::string_view kWhat = "deletion certificate";
  FAK_ASSIGN_OR_RETURN(int64_t version, internal::GetInt(j, "version", kWhat));
  c->version = static_cast<int>(version);
  FAK_ASSIGN_OR_RETURN(c->scope, internal::GetString(j, "scope", kWhat));
  FAK_ASSIGN_OR_RETURN(c->segment_id, internal::GetString(j, "segment_id", kWhat));
  auto span = j.find("span");
  if (span == j.end() || !span->is_object()) return Corruption("deletion certificate: field 'span' is not an object");
  FAK_ASSIGN_OR_RETURN(c->span_from, internal::GetUint(*span, "from", "deletion certificate span"));
  FAK_ASSIGN_OR_RETURN(c->span_len, internal::GetUint(*span, "len", "deletion certificate span"));
  FAK_ASSIGN_OR_RETURN(c->evicted_count, internal::GetUint(j, "evicted_count", kWhat));
  auto delta = j.find("max_abs_delta");
  if (delta == j.end() || !delta->is_number()) return Corruption("deletion certificate: field 'max_abs_delta' is not a number");
  c->max_abs_delta = static_cast<float>(delta->get<double>());
  FAK_ASSIGN_OR_RETURN(c->journal_seq, internal::GetUint(j, "journal_seq", kWhat));
  FAK_ASSIGN_OR_RETURN(c->issued_at_unix_us, internal::GetInt(j, "issued_at", kWhat));
  FAK_ASSIGN_OR_RETURN(std::string sig_hex, internal::GetString(j, "signature", kWhat));
  Result<std::string> sig = internal::HexDecode(sig_hex, "deletion certificate: field 'signature'");
  if (!sig.has_value()) return Corruption(std::string(sig.error().message()));
  c->signature = std::move(*sig);
  if (j.contains("time_anchor")) {
    FAK_ASSIGN_OR_RETURN(std::string b64, internal::GetString(j, "time_anchor", kWhat));
    Result<std::string> der = internal::Base64Decode(b64, "deletion certificate: field 'time_anchor'");
    if (!der.has_value()) return Corruption(std::string(der.error().message()));
    c->time_anchor = std::move(*der);
  }
  return Status::Ok();
}

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

Result<std::string> DeletionCertificate::ToJson() const {
  return internal::CanonicalJson(CertToJson(*this, true, true), "deletion certificate");
}

Result<DeletionCertificate> DeletionCertificate::FromJson(std::string_view json) {
  Result<Json> j = internal::ParseJson(json, "deletion certificate");
  if (!j.has_value()) return Corruption(std::string(j.error().message()));
  if (!j->is_object()) return Corruption("deletion certificate: not a JSON object");
  DeletionCertificate c;
  FAK_RETURN_IF_ERROR(ReadScalars(*j, &c));
  FAK_RETURN_IF_ERROR(ReadDigests(*j, &c));
  return c;
}

Result<std::string> CertificateSigningBytes(const DeletionCertificate& cert) {
  FAK_ASSIGN_OR_RETURN(std::string body, internal::CanonicalJson(CertToJson(cert, false, false), "deletion certificate"));
  return std::string(fmt::kCertificateSigningDomain) + body;
}

Result<Digest> CertificateDigest(const DeletionCertificate& cert) {
  FAK_ASSIGN_OR_RETURN(std::string body, internal::CanonicalJson(CertToJson(cert, true, false), "deletion certificate"));
  return Digest::Of(body);
}

Status SignCertificate(DeletionCertificate* cert, const SigningKey& key) {
  cert->issuer_public_key = key.public_key();
  FAK_ASSIGN_OR_RETURN(std::string bytes, CertificateSigningBytes(*cert));
  FAK_ASSIGN_OR_RETURN(cert->signature, key.Sign(bytes));
  cert->time_anchor.clear();  // an anchor covers the old signature; re-anchor after signing
  return Status::Ok();
}

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
