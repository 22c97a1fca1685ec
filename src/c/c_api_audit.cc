// The C API's ledger, certified eviction, certificate verification and signing keys.
#include <cstdlib>

#include "fak/audit/deletion_certificate.h"
#include "fak/session/certify_eviction.h"
#include "src/c/c_api_internal.h"

struct fak_auditor {
  std::mutex mu;  // serializes journal appends (Journal is single-threaded)
  std::unique_ptr<fak::Journal> journal;  // GUARDED_BY(mu)
  std::optional<fak::SigningKey> key;
};

struct fak_ledger {
  std::shared_ptr<const fak::capi::LoadedModel> model;  // declared first: outlives the ledger
  std::unique_ptr<fak::SegmentLedger> ledger;
};

namespace fak::capi {
namespace {

// A copy of `ledger` (its cache cloned, its segments as specs), so an eviction can be tried on it
// and kept only when the certificate is issued.
Result<SegmentLedger> CopyLedger(const Model& model, const SegmentLedger& ledger) {
  std::vector<SegmentSpec> specs;
  for (const Segment& s : ledger.segments()) specs.push_back({s.id, s.kind, s.tokens, s.source_digest});
  return SegmentLedger::Adopt(model, ledger.cache().Clone(), std::move(specs));
}

Result<char*> MallocString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return ResourceExhausted("out of memory for a " + std::to_string(s.size()) + "-byte string");
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace
}  // namespace fak::capi

using fak::Status;
using fak::capi::Guard;

extern "C" {

fak_status fak_key_generate(const char* pem_path, char public_key_hex[FAK_DIGEST_HEX_SIZE]) {
  return Guard("fak_key_generate", [&]() -> Status {
    FAK_C_REQUIRE(pem_path);
    FAK_ASSIGN_OR_RETURN(fak::SigningKey key, fak::SigningKey::Generate());
    FAK_RETURN_IF_ERROR(key.SavePem(pem_path));
    if (public_key_hex != nullptr) fak::capi::WriteHex(key.public_key().Hex(), public_key_hex);
    return Status();
  });
}

fak_status fak_auditor_open(const char* journal_path, const char* key_pem_path, fak_auditor** out) {
  return Guard("fak_auditor_open", [&]() -> Status {
    FAK_C_REQUIRE(journal_path);
    FAK_C_REQUIRE(key_pem_path);
    FAK_C_REQUIRE(out);
    auto auditor = std::make_unique<fak_auditor>();
    FAK_ASSIGN_OR_RETURN(auditor->key, fak::SigningKey::LoadPem(key_pem_path));
    FAK_ASSIGN_OR_RETURN(auditor->journal, fak::Journal::Open(journal_path));
    *out = auditor.release();
    return Status();
  });
}

void fak_auditor_free(fak_auditor* auditor) { delete auditor; }

fak_status fak_auditor_public_key(const fak_auditor* auditor, char public_key_hex[FAK_DIGEST_HEX_SIZE]) {
  return Guard("fak_auditor_public_key", [&]() -> Status {
    FAK_C_REQUIRE(auditor);
    FAK_C_REQUIRE(public_key_hex);
    fak::capi::WriteHex(auditor->key->public_key().Hex(), public_key_hex);
    return Status();
  });
}

fak_status fak_ledger_new(const fak_model* model, fak_ledger** out) {
  return Guard("fak_ledger_new", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(out);
    *out = new fak_ledger{model->loaded, std::make_unique<fak::SegmentLedger>(*model->loaded->model)};
    return Status();
  });
}

void fak_ledger_free(fak_ledger* ledger) { delete ledger; }

fak_status fak_ledger_append(fak_ledger* ledger, const char* segment_id, const char* text, size_t text_len,
                             float* logits, size_t capacity) {
  return Guard("fak_ledger_append", [&]() -> Status {
    FAK_C_REQUIRE(ledger);
    FAK_C_REQUIRE(segment_id);
    if (text == nullptr && text_len > 0) return fak::capi::NullArgument("text");
    const fak::capi::LoadedModel& m = *ledger->model;
    const size_t vocab = m.model->config().vocab_size;
    if (logits != nullptr && capacity < vocab)
      return fak::ResourceExhausted("the logits buffer holds " + std::to_string(capacity) +
                                    " floats, the vocabulary needs " + std::to_string(vocab));
    const std::string_view bytes(text == nullptr ? "" : text, text_len);
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, m.tokenizer->Encode(bytes));
    if (tokens.empty()) return fak::InvalidArgument("segment '" + std::string(segment_id) + "': the text makes no tokens");
    FAK_ASSIGN_OR_RETURN(std::vector<float> next,
                         ledger->ledger->Append({segment_id, fak::SegmentKind::kUser, std::move(tokens), fak::Digest::Of(bytes)}));
    if (logits != nullptr) std::memcpy(logits, next.data(), next.size() * sizeof(float));
    return Status();
  });
}

fak_status fak_ledger_evict(fak_ledger* ledger, const char* segment_id, fak_auditor* auditor, const char* reason,
                            char** certificate_json) {
  return Guard("fak_ledger_evict", [&]() -> Status {
    FAK_C_REQUIRE(ledger);
    FAK_C_REQUIRE(segment_id);
    FAK_C_REQUIRE(auditor);
    FAK_C_REQUIRE(certificate_json);
    const fak::Model& model = *ledger->model->model;
    const fak::Segment* segment = ledger->ledger->Find(segment_id);
    if (segment == nullptr) return fak::NotFound("no segment '" + std::string(segment_id) + "' in the ledger");
    const fak::SegmentSpec evicted{segment->id, segment->kind, segment->tokens, segment->source_digest};
    // Evict on a copy: the ledger changes only once the certificate is issued.
    FAK_ASSIGN_OR_RETURN(fak::SegmentLedger copy, fak::capi::CopyLedger(model, *ledger->ledger));
    FAK_ASSIGN_OR_RETURN(fak::EvictionReport report, copy.Evict(segment_id, fak::Repair::kRecomputeTail));
    fak::IssueOptions issue;
    if (reason != nullptr) issue.reason = reason;
    std::lock_guard<std::mutex> lock(auditor->mu);
    FAK_ASSIGN_OR_RETURN(fak::DeletionCertificate cert, fak::IssueDeletionCertificate(model, copy, evicted, report,
                                                                                      auditor->journal.get(), *auditor->key, issue));
    FAK_ASSIGN_OR_RETURN(std::string json, cert.ToJson());
    FAK_ASSIGN_OR_RETURN(char* out, fak::capi::MallocString(json));
    *ledger->ledger = std::move(copy);
    *certificate_json = out;
    return Status();
  });
}

fak_status fak_ledger_session(const fak_ledger* ledger, fak_session** out) {
  return Guard("fak_ledger_session", [&]() -> Status {
    FAK_C_REQUIRE(ledger);
    FAK_C_REQUIRE(out);
    *out = new fak_session{ledger->model, nullptr, ledger->ledger->cache().Clone(), fak::Lease(), {}};
    return Status();
  });
}

fak_status fak_certificate_verify(const char* certificate_json, size_t json_len, const char* journal_path,
                                  const char* const* trusted_public_keys_hex, size_t n_keys) {
  return Guard("fak_certificate_verify", [&]() -> Status {
    FAK_C_REQUIRE(certificate_json);
    FAK_C_REQUIRE(journal_path);
    if (trusted_public_keys_hex == nullptr && n_keys > 0) return fak::capi::NullArgument("trusted_public_keys_hex");
    fak::Result<fak::DeletionCertificate> cert =
        fak::DeletionCertificate::FromJson(std::string_view(certificate_json, json_len));
    if (!cert) return fak::InvalidArgument("malformed certificate: " + std::string(cert.error().message()));
    std::vector<fak::PublicKey> keys;
    for (size_t i = 0; i < n_keys; ++i) {
      if (trusted_public_keys_hex[i] == nullptr)
        return fak::InvalidArgument("trusted_public_keys_hex[" + std::to_string(i) + "] is NULL");
      fak::Result<fak::PublicKey> key = fak::PublicKey::FromHex(trusted_public_keys_hex[i]);
      if (!key)
        return fak::InvalidArgument("trusted_public_keys_hex[" + std::to_string(i) + "]: " + std::string(key.error().message()));
      keys.push_back(*key);
    }
    FAK_ASSIGN_OR_RETURN(std::vector<fak::JournalRow> rows, fak::ReadJournalRows(journal_path));
    return fak::VerifyDeletionCertificate(*cert, rows, keys).ToStatus();
  });
}

}  // extern "C"
