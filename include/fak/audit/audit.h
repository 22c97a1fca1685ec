// Audit: a hash-chained, fsync'd journal and ed25519 deletion certificates that fail closed.
//
// "We deleted it" becomes a receipt anyone can re-check (architecture §8, formats in docs/audit.md):
//   - Journal: an append-only file of JSON rows {seq, time, kind, subject, payload, prev_hash, hash},
//     hash = sha256(canonical row without hash); every append is fsync'd before it returns.
//   - DeletionCertificate: binds one exact eviction (span, count, cache digests, the never-saw
//     witness, max|Δ| of next-token logits) to a journal row; signed with ed25519. It is issued only
//     after a witness run proves the evicted cache equals one freshly prefilled from the survivors.
//   - VerifyDeletionCertificate: re-checks signature, trust, witness, journal chain and row, and
//     re-counts the evicted tokens from the journal; each failure has its own reason.
//   - Time anchor: an RFC 3161 timestamp over the certificate digest, verified with OpenSSL's TS API.
// Bounds: a certificate proves removal from one inference working set (a KV cache), not from model
// weights, backups, replicas or logs; it says so in its signed `scope` field.
//
// No OpenSSL or nlohmann type appears here: JSON travels as std::string, keys as bytes.
#ifndef FAK_AUDIT_AUDIT_H_
#define FAK_AUDIT_AUDIT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/session/segment_ledger.h"
#include "fak/model/model.h"
#include "fak/core/status.h"

namespace fak {

// ---------------------------------------------------------------------------------------------
// File and clock seam (leveldb Env style), so crash and fsync-failure tests are real.

// An open file that only grows. Not thread-safe.
class AuditAppendFile {
 public:
  virtual ~AuditAppendFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Makes everything appended so far durable (fsync). After a failure the file's durable state is
  // unknown; callers must not assume earlier unsynced data survived.
  virtual Status Sync() = 0;
};

// Files and clock used by the journal and certificates. Implementations must be thread-safe.
class AuditEnv {
 public:
  virtual ~AuditEnv() = default;
  // POSIX files (fsync, directory fsync on create) and the system clock. Never null; not owned.
  static AuditEnv* Default();

  // The whole file; NotFound when it does not exist.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Opens for appending, creating the file (and making its directory entry durable) if needed.
  virtual Result<std::unique_ptr<AuditAppendFile>> OpenAppendable(const std::string& path) = 0;
  // Cuts the file to `size_bytes` and makes that durable.
  virtual Status Truncate(const std::string& path, uint64_t size_bytes) = 0;
  // Microseconds since the Unix epoch.
  virtual int64_t NowUnixMicros() = 0;
};

// ---------------------------------------------------------------------------------------------
// Journal

struct JournalRow {
  uint64_t seq = 0;            // 1, 2, 3, ... without gaps
  int64_t time_unix_us = 0;    // the env clock at append
  std::string kind;            // e.g. "deletion"
  std::string subject;         // what the row is about, e.g. the hex digest of deleted content
  std::string payload_json;    // a JSON object, in canonical form (sorted keys, no whitespace)
  Digest prev_hash;            // hash of row seq-1; all zero for seq 1
  Digest hash;                 // sha256(canonical row without hash)
};

// Why a journal failed verification. Each tamper the chain can detect has its own value.
enum class JournalFault {
  kNone,
  kMalformedRow,   // a line that is not a row (bad JSON, missing or mistyped field)
  kEditedRow,      // a field changed: the row's hash does not match its contents
  kBadLink,        // prev_hash does not name the previous row's hash
  kMissingRow,     // a seq was skipped (a row deleted)
  kReorderedRow,   // rows out of order (a later seq appears before an earlier one)
  kInsertedRow,    // a seq appears twice (a row inserted)
  kTornTail,       // the last line is incomplete (a crash mid-append; Journal::Open recovers it)
  kTruncated,      // whole rows cut off the end (detectable only against an expected head)
};
std::string_view JournalFaultName(JournalFault fault);

struct JournalCheck {
  JournalFault fault = JournalFault::kNone;
  uint64_t n_rows = 0;     // whole rows that verified before the first fault
  uint64_t bad_line = 0;   // 1-based line of the first fault; 0 when none
  std::string detail;      // names the row and field at fault
  bool ok() const { return fault == JournalFault::kNone; }
  // OK, or VerificationFailed("journal <fault> at line N: detail").
  Status ToStatus() const;
};

// The last row a verifier expects to find (e.g. from a certificate or a remote checkpoint).
struct JournalHead {
  uint64_t seq = 0;
  Digest hash;
};

struct JournalOptions {
  // Files and clock. Default: nullptr = AuditEnv::Default(). Not owned; must outlive the journal.
  AuditEnv* env = nullptr;
  // Cut an incomplete last line (a crash mid-append) on open. Default: true. When false, a torn
  // tail fails Open with Corruption.
  bool recover_torn_tail = true;
};

// Append-only, hash-chained, fsync'd journal file. Rows are kept in memory too (cost: every row's
// bytes) so certificates can be verified without re-reading. Thread-safety: none (wrap it).
// After a failed write or fsync the journal refuses further appends (FailedPrecondition): reopen
// it to recover. A row whose Append failed may or may not be present after a crash, never half.
class Journal {
 public:
  // Opens or creates `path`. Recovers a torn tail (see JournalOptions) and verifies the whole chain;
  // Corruption naming the line on any other fault (a broken chain is never appended to).
  static Result<std::unique_ptr<Journal>> Open(const std::string& path, const JournalOptions& options = {});

  // Appends one row and fsyncs. `payload_json` must be a JSON object; kind must be non-empty.
  Result<JournalRow> Append(std::string_view kind, std::string_view subject, std::string_view payload_json);

  std::span<const JournalRow> rows() const { return rows_; }
  // The row with `seq`; NotFound when absent.
  Result<JournalRow> Row(uint64_t seq) const;
  JournalHead head() const;  // {0, zero} when empty
  const std::string& path() const { return path_; }
  // Bytes of a torn last row cut on open (0 when the file was whole), and a sentence saying so.
  uint64_t recovered_torn_bytes() const { return recovered_torn_bytes_; }
  const std::string& recovery_note() const { return recovery_note_; }
  // Re-reads the file and walks the chain (the file may have been edited since Open).
  JournalCheck Verify(const std::optional<JournalHead>& expected_head = std::nullopt) const;

 private:
  Journal() = default;
  std::string path_;
  AuditEnv* env_ = nullptr;
  std::unique_ptr<AuditAppendFile> file_;
  std::vector<JournalRow> rows_;
  uint64_t recovered_torn_bytes_ = 0;
  std::string recovery_note_;
  bool failed_ = false;
};

// Walks a journal's bytes (one row per '\n'-terminated line). `expected_head`, when given, must be
// a row of the chain and the chain must reach it (else kTruncated or kEditedRow).
JournalCheck VerifyJournalBytes(std::string_view bytes, const std::optional<JournalHead>& expected_head = std::nullopt);
// The same walk over rows already parsed.
JournalCheck VerifyJournalRows(std::span<const JournalRow> rows, const std::optional<JournalHead>& expected_head = std::nullopt);
// Parses every row of a journal file without judging the chain. Corruption on a malformed or torn line.
Result<std::vector<JournalRow>> ReadJournalRows(const std::string& path, AuditEnv* env = nullptr);
// The canonical JSON line of a row (without the trailing '\n'); its hash field is the stored one.
Result<std::string> EncodeJournalRow(const JournalRow& row);
// sha256 of the canonical row without its hash field.
Result<Digest> ComputeJournalRowHash(const JournalRow& row);

// ---------------------------------------------------------------------------------------------
// Keys

// An ed25519 public key (raw 32 bytes).
struct PublicKey {
  std::array<uint8_t, 32> bytes{};
  std::string Hex() const;
  static Result<PublicKey> FromHex(std::string_view hex);
  // True when `signature` (64 raw bytes) is a valid ed25519 signature of `message` by this key.
  bool VerifySignature(std::string_view message, std::string_view signature) const;
  friend bool operator==(const PublicKey&, const PublicKey&) = default;
};

// An ed25519 private key. Immutable and thread-safe; copies share the key.
class SigningKey {
 public:
  static Result<SigningKey> Generate();
  // Loads a PKCS#8 PEM private key. FailedPrecondition when the file is readable or writable by
  // group or others (mode & 077), or is not a regular file; InvalidArgument when not ed25519.
  static Result<SigningKey> LoadPem(const std::string& path);
  static Result<SigningKey> FromPem(std::string_view pem);
  // Writes the key as PKCS#8 PEM with mode 0600, fsync'd. Refuses to overwrite an existing file.
  Status SavePem(const std::string& path) const;
  PublicKey public_key() const { return public_key_; }
  // The 64-byte ed25519 signature of `message`.
  Result<std::string> Sign(std::string_view message) const;

 private:
  struct Impl;
  explicit SigningKey(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
  PublicKey public_key_;
};

// ---------------------------------------------------------------------------------------------
// Deletion certificate

struct DeletionCertificate {
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

  // Canonical JSON (sorted keys; digests and keys hex, signature hex, anchor base64).
  Result<std::string> ToJson() const;
  static Result<DeletionCertificate> FromJson(std::string_view json);
};

// The bytes the issuer signs: a domain tag plus the canonical JSON of every field except
// signature and time_anchor.
Result<std::string> CertificateSigningBytes(const DeletionCertificate& cert);
// sha256 of the canonical JSON of every field except time_anchor (signature included): what the
// RFC 3161 anchor covers.
Result<Digest> CertificateDigest(const DeletionCertificate& cert);
// Sets issuer_public_key and signature and clears time_anchor (it covered the old signature).
// Signs whatever the certificate says: issuing honestly is
// IssueDeletionCertificate's job; verification never trusts the content because it is signed.
Status SignCertificate(DeletionCertificate* cert, const SigningKey& key);

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
Result<DeletionCertificate> IssueDeletionCertificate(const Model& model, const SegmentLedger& ledger,
                                                     const SegmentSpec& evicted, const EvictionReport& report,
                                                     Journal* journal, const SigningKey& key,
                                                     const IssueOptions& options = {});

// Why a certificate failed verification; each tamper case has its own value.
enum class CertificateFault {
  kNone,
  kMalformed,            // unsupported version, wrong scope text, wrong field sizes
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
std::string_view CertificateFaultName(CertificateFault fault);

struct CertificateCheck {
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
CertificateCheck VerifyDeletionCertificate(const DeletionCertificate& cert, std::span<const JournalRow> journal,
                                           std::span<const PublicKey> trusted_keys,
                                           const CertificateVerifyOptions& options = {});

// ---------------------------------------------------------------------------------------------
// RFC 3161 time anchor

// A time-stamp authority: takes a DER TimeStampReq and returns a DER TimeStampResp. Hosts wrap
// their HTTP client here (POST application/timestamp-query); fak has no network code.
class TimestampAuthority {
 public:
  virtual ~TimestampAuthority() = default;
  virtual Result<std::string> Respond(std::string_view request_der) = 0;
};

// An in-process TSA (OpenSSL TS_RESP_CTX) signing with `cert_pem` (which must carry the critical
// timeStamping extended key usage) and `key_pem`, under `policy_oid` (dotted). Thread-safe.
// `chain_pem` (optional) adds intermediate certificates to each token.
Result<std::unique_ptr<TimestampAuthority>> MakeLocalTimestampAuthority(std::string_view cert_pem,
                                                                        std::string_view key_pem,
                                                                        std::string_view policy_oid,
                                                                        std::string_view chain_pem = {});

struct TimeAnchor {
  int64_t gen_time_unix_s = 0;
  std::string policy_oid;
  std::string serial_hex;
};

// A DER TimeStampReq whose sha256 imprint is `digest`, with a random nonce, asking for the TSA cert.
Result<std::string> MakeTimestampRequest(const Digest& digest);
// Requests a timestamp over CertificateDigest(*cert), checks the response (granted, same imprint,
// same nonce) and stores the token in cert->time_anchor.
Status AnchorCertificate(DeletionCertificate* cert, TimestampAuthority& tsa);
// Verifies a DER TimeStampToken: signature chains to `tsa_roots_pem`, signer has timeStamping
// usage, and the imprint (sha256) is `digest`. VerificationFailed naming what failed.
Result<TimeAnchor> VerifyTimeAnchor(std::string_view token_der, const Digest& digest, std::string_view tsa_roots_pem);

}  // namespace fak

#endif  // FAK_AUDIT_AUDIT_H_
