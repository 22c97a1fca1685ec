// DeletionCertificate: canonical encoding and signing (issuing is src/session/certify_eviction.cc).
#include <string>

#include "src/audit/audit_internal.h"
#include "src/audit/journal_format.h"

namespace fak {

namespace fmt = internal::audit_format;
using internal::Json;

namespace {

constexpr size_t kMaxFleetWorkers = 4096;  // names a certificate may carry (it is untrusted input)

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
  // Present whenever set, whatever the version says, so it is always signed (verification
  // refuses it in a version 1 certificate).
  if (!c.fleet_event.empty() || !c.fleet_confirmed.empty()) j["fleet"] = Json{{"event", c.fleet_event}, {"confirmed", c.fleet_confirmed}};
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
  if (auto fleet = j.find("fleet"); fleet != j.end()) {
    if (!fleet->is_object()) return Corruption("deletion certificate: field 'fleet' is not an object");
    FAK_ASSIGN_OR_RETURN(c->fleet_event, internal::GetString(*fleet, "event", "deletion certificate fleet"));
    auto confirmed = fleet->find("confirmed");
    if (confirmed == fleet->end() || !confirmed->is_array() || confirmed->size() > kMaxFleetWorkers)
      return Corruption("deletion certificate: field 'fleet.confirmed' is not an array of at most " +
                        std::to_string(kMaxFleetWorkers) + " worker names");
    for (const Json& w : *confirmed) {
      if (!w.is_string()) return Corruption("deletion certificate: field 'fleet.confirmed' holds a non-string");
      c->fleet_confirmed.push_back(w.get<std::string>());
    }
  }
  if (j.contains("time_anchor")) {
    FAK_ASSIGN_OR_RETURN(std::string b64, internal::GetString(j, "time_anchor", kWhat));
    Result<std::string> der = internal::Base64Decode(b64, "deletion certificate: field 'time_anchor'");
    if (!der.has_value()) return Corruption(std::string(der.error().message()));
    c->time_anchor = std::move(*der);
  }
  return Status::Ok();
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

Result<DeletionCertificate> CertifyErasure(const JournalRow& row, const SigningKey& key) {
  if (row.kind != fmt::kKindErasure)
    return InvalidArgument("CertifyErasure: journal row " + std::to_string(row.seq) + " is a '" + row.kind + "' row, not an erasure");
  constexpr std::string_view kWhat = "journal erasure payload";
  FAK_ASSIGN_OR_RETURN(Json payload, internal::ParseJson(row.payload_json, kWhat));
  DeletionCertificate c;
  c.scope = std::string(fmt::kErasureScope);
  FAK_ASSIGN_OR_RETURN(c.subject, Digest::FromHex(row.subject));
  FAK_ASSIGN_OR_RETURN(c.evicted_count, internal::GetUint(payload, fmt::kPTreeTokens, kWhat));
  c.journal_seq = row.seq;
  c.journal_row_hash = row.hash;
  c.issued_at_unix_us = row.time_unix_us;
  FAK_RETURN_IF_ERROR(SignCertificate(&c, key));
  return c;
}

bool IsErasureCertificate(const DeletionCertificate& cert) { return cert.scope == fmt::kErasureScope; }

Status AddFleetConfirmations(DeletionCertificate* cert, std::string event, std::vector<std::string> confirmed,
                             const SigningKey& key) {
  if (confirmed.empty()) return InvalidArgument("AddFleetConfirmations: no worker confirmed (the issuer at least must)");
  if (confirmed.size() > kMaxFleetWorkers)
    return InvalidArgument("AddFleetConfirmations: " + std::to_string(confirmed.size()) + " workers, more than " +
                           std::to_string(kMaxFleetWorkers));
  if (!(cert->issuer_public_key == key.public_key()))
    return FailedPrecondition("AddFleetConfirmations: the key is not the certificate's issuer's");
  DeletionCertificate updated = *cert;
  updated.version = fmt::kCertificateFleetVersion;
  updated.fleet_event = std::move(event);
  updated.fleet_confirmed = std::move(confirmed);
  FAK_RETURN_IF_ERROR(SignCertificate(&updated, key));
  *cert = std::move(updated);  // a failed signing leaves the certificate as it was
  return Status::Ok();
}

}  // namespace fak
