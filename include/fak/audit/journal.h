// Audit journal: an append-only file of JSON rows {seq, time, kind, subject, payload, prev_hash,
// hash}, hash = sha256(canonical row without hash); every append is fsync'd before it returns
// (architecture §8, format in docs/audit.md). Verification walks the chain and names the first
// tamper it finds. Files and clock come from an Env, so crash and fsync-failure tests are real.
#ifndef FAK_AUDIT_JOURNAL_H_
#define FAK_AUDIT_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

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
FAK_EXPORT std::string_view JournalFaultName(JournalFault fault);

struct FAK_EXPORT JournalCheck {
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
  // Files and clock (row times are Env::NowUnixMicros). Default: nullptr = Env::Default(). Not
  // owned; must outlive the journal.
  Env* env = nullptr;
  // Cut an incomplete last line (a crash mid-append) on open. Default: true. When false, a torn
  // tail fails Open with Corruption.
  bool recover_torn_tail = true;
};

// Append-only, hash-chained, fsync'd journal file. Rows are kept in memory too (cost: every row's
// bytes) so certificates can be verified without re-reading. Thread-safety: none (wrap it).
// One writer: an open Journal holds the Env's exclusive lock on `<path>.lock`, so a second opener
// (another process, or another Journal in this one) gets FailedPrecondition instead of forking the
// chain. Readers (ReadJournalRows, VerifyJournalBytes) take no lock.
// After a failed write or fsync the journal refuses further appends (FailedPrecondition): reopen
// it to recover. A row whose Append failed may or may not be present after a crash, never half.
class FAK_EXPORT Journal {
 public:
  // Opens or creates `path`. Recovers a torn tail (see JournalOptions) and verifies the whole chain;
  // Corruption naming the line on any other fault (a broken chain is never appended to).
  // FailedPrecondition naming the lock file when another opener holds the journal.
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
  Env* env_ = nullptr;
  std::unique_ptr<FileLock> lock_;  // declared before file_: released after it closes
  std::unique_ptr<WritableFile> file_;
  std::vector<JournalRow> rows_;
  uint64_t recovered_torn_bytes_ = 0;
  std::string recovery_note_;
  bool failed_ = false;
};

// Walks a journal's bytes (one row per '\n'-terminated line). `expected_head`, when given, must be
// a row of the chain and the chain must reach it (else kTruncated or kEditedRow).
FAK_EXPORT JournalCheck VerifyJournalBytes(std::string_view bytes, const std::optional<JournalHead>& expected_head = std::nullopt);
// The same walk over rows already parsed.
FAK_EXPORT JournalCheck VerifyJournalRows(std::span<const JournalRow> rows, const std::optional<JournalHead>& expected_head = std::nullopt);
// Parses every row of a journal file without judging the chain. Corruption on a malformed or torn line.
FAK_EXPORT Result<std::vector<JournalRow>> ReadJournalRows(const std::string& path, Env* env = nullptr);
// The canonical JSON line of a row (without the trailing '\n'); its hash field is the stored one.
FAK_EXPORT Result<std::string> EncodeJournalRow(const JournalRow& row);
// sha256 of the canonical row without its hash field.
FAK_EXPORT Result<Digest> ComputeJournalRowHash(const JournalRow& row);

}  // namespace fak

#endif  // FAK_AUDIT_JOURNAL_H_
