// Journal: canonical JSON rows, hash chain, fsync'd appends, torn-tail recovery, verification.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "src/audit/audit_internal.h"
#include "src/audit/journal_format.h"
#include "src/core/path.h"

namespace fak {

namespace fmt = internal::audit_format;
using internal::Json;

namespace {

Result<Json> RowToJson(const JournalRow& row, bool with_hash) {
  FAK_ASSIGN_OR_RETURN(Json payload, internal::ParseJson(row.payload_json, "journal row payload"));
  if (!payload.is_object()) return InvalidArgument("journal row payload: not a JSON object");
  Json j = Json::object();
  j[fmt::kSeq] = row.seq;
  j[fmt::kTime] = row.time_unix_us;
  j[fmt::kKind] = row.kind;
  j[fmt::kSubject] = row.subject;
  j[fmt::kPayload] = std::move(payload);
  j[fmt::kPrevHash] = row.prev_hash.Hex();
  if (with_hash) j[fmt::kHash] = row.hash.Hex();
  return j;
}

// Parses one line strictly: exactly the seven fields, right types, canonical bytes.
Result<JournalRow> ParseRowLine(std::string_view line) {
  FAK_ASSIGN_OR_RETURN(Json j, internal::ParseJson(line, "journal row"));
  if (!j.is_object()) return Corruption("journal row: not a JSON object");
  if (j.size() != 7) return Corruption("journal row: has " + std::to_string(j.size()) + " fields, want 7");
  JournalRow row;
  FAK_ASSIGN_OR_RETURN(row.seq, internal::GetUint(j, fmt::kSeq, "journal row"));
  FAK_ASSIGN_OR_RETURN(row.time_unix_us, internal::GetInt(j, fmt::kTime, "journal row"));
  FAK_ASSIGN_OR_RETURN(row.kind, internal::GetString(j, fmt::kKind, "journal row"));
  FAK_ASSIGN_OR_RETURN(row.subject, internal::GetString(j, fmt::kSubject, "journal row"));
  FAK_ASSIGN_OR_RETURN(row.prev_hash, internal::GetDigest(j, fmt::kPrevHash, "journal row"));
  FAK_ASSIGN_OR_RETURN(row.hash, internal::GetDigest(j, fmt::kHash, "journal row"));
  auto payload = j.find(fmt::kPayload);
  if (payload == j.end() || !payload->is_object()) return Corruption("journal row: field 'payload' is not an object");
  FAK_ASSIGN_OR_RETURN(row.payload_json, internal::CanonicalJson(*payload, "journal row payload"));
  FAK_ASSIGN_OR_RETURN(std::string canonical, internal::CanonicalJson(j, "journal row"));
  if (canonical != line) return Corruption("journal row: not in canonical form (sorted keys, no whitespace)");
  return row;
}

struct ParsedJournal {
  std::vector<JournalRow> rows;  // the rows before the first malformed line
  uint64_t malformed_line = 0;   // 0 when every whole line parsed
  std::string malformed_detail;
  uint64_t whole_bytes = 0;      // bytes up to and including the last '\n'
  uint64_t torn_bytes = 0;       // bytes after it
};

ParsedJournal ParseJournal(std::string_view bytes) {
  ParsedJournal out;
  const size_t last_nl = bytes.rfind(fmt::kRowTerminator);
  out.whole_bytes = last_nl == std::string_view::npos ? 0 : last_nl + 1;
  out.torn_bytes = bytes.size() - out.whole_bytes;
  size_t at = 0;
  while (at < out.whole_bytes) {
    const size_t nl = bytes.find(fmt::kRowTerminator, at);
    Result<JournalRow> row = ParseRowLine(bytes.substr(at, nl - at));
    if (!row.has_value()) {
      out.malformed_line = out.rows.size() + 1;
      out.malformed_detail = std::string(row.error().message());
      break;
    }
    out.rows.push_back(std::move(*row));
    at = nl + 1;
  }
  return out;
}

JournalCheck Fault(JournalFault fault, uint64_t n_rows, uint64_t line, std::string detail) {
  return JournalCheck{fault, n_rows, line, std::move(detail)};
}

// Classifies a seq that is not the expected one: moved (it appears later), deleted, or repeated.
JournalCheck SeqFault(std::span<const JournalRow> rows, size_t i, uint64_t expected) {
  const std::string where = "row seq " + std::to_string(rows[i].seq) + " where seq " + std::to_string(expected) + " belongs";
  if (rows[i].seq < expected) return Fault(JournalFault::kInsertedRow, i, i + 1, where + " (seq repeats)");
  const bool later = std::any_of(rows.begin() + i + 1, rows.end(), [&](const JournalRow& r) { return r.seq == expected; });
  if (later) return Fault(JournalFault::kReorderedRow, i, i + 1, where + " (seq " + std::to_string(expected) + " comes later)");
  return Fault(JournalFault::kMissingRow, i, i + 1, where + " (seq " + std::to_string(expected) + " is missing)");
}

}  // namespace

std::string_view JournalFaultName(JournalFault fault) {
  switch (fault) {
    case JournalFault::kNone: return "none";
    case JournalFault::kMalformedRow: return "malformed_row";
    case JournalFault::kEditedRow: return "edited_row";
    case JournalFault::kBadLink: return "bad_link";
    case JournalFault::kMissingRow: return "missing_row";
    case JournalFault::kReorderedRow: return "reordered_row";
    case JournalFault::kInsertedRow: return "inserted_row";
    case JournalFault::kTornTail: return "torn_tail";
    case JournalFault::kTruncated: return "truncated";
  }
  return "unknown";
}

Status JournalCheck::ToStatus() const {
  if (ok()) return Status::Ok();
  return VerificationFailed("journal " + std::string(JournalFaultName(fault)) + " at line " + std::to_string(bad_line) +
                            ": " + detail);
}

Result<Digest> ComputeJournalRowHash(const JournalRow& row) {
  FAK_ASSIGN_OR_RETURN(Json j, RowToJson(row, /*with_hash=*/false));
  FAK_ASSIGN_OR_RETURN(std::string canonical, internal::CanonicalJson(j, "journal row"));
  return Digest::Of(canonical);
}

Result<std::string> EncodeJournalRow(const JournalRow& row) {
  FAK_ASSIGN_OR_RETURN(Json j, RowToJson(row, /*with_hash=*/true));
  return internal::CanonicalJson(j, "journal row");
}

JournalCheck VerifyJournalRows(std::span<const JournalRow> rows, const std::optional<JournalHead>& expected_head) {
  Digest prev;  // all zero: the genesis link
  uint64_t expected = fmt::kFirstSeq;
  for (size_t i = 0; i < rows.size(); ++i, ++expected) {
    const JournalRow& row = rows[i];
    Result<Digest> hash = ComputeJournalRowHash(row);
    if (!hash.has_value()) return Fault(JournalFault::kMalformedRow, i, i + 1, std::string(hash.error().message()));
    if (*hash != row.hash) {
      return Fault(JournalFault::kEditedRow, i, i + 1,
                   "row seq " + std::to_string(row.seq) + ": stored hash " + row.hash.Hex() + " but contents hash to " + hash->Hex());
    }
    if (row.seq != expected) return SeqFault(rows, i, expected);
    if (row.prev_hash != prev) {
      return Fault(JournalFault::kBadLink, i, i + 1,
                   "row seq " + std::to_string(row.seq) + ": prev_hash " + row.prev_hash.Hex() + " but the previous row's hash is " + prev.Hex());
    }
    prev = row.hash;
  }
  if (expected_head.has_value() && expected_head->seq > 0) {
    if (expected_head->seq > rows.size()) {
      return Fault(JournalFault::kTruncated, rows.size(), rows.size() + 1,
                   "the chain ends at seq " + std::to_string(rows.size()) + " but seq " + std::to_string(expected_head->seq) + " was expected");
    }
    const JournalRow& at = rows[expected_head->seq - 1];
    if (at.hash != expected_head->hash) {
      return Fault(JournalFault::kEditedRow, rows.size(), expected_head->seq,
                   "row seq " + std::to_string(at.seq) + " has hash " + at.hash.Hex() + " but " + expected_head->hash.Hex() + " was expected");
    }
  }
  return JournalCheck{JournalFault::kNone, rows.size(), 0, ""};
}

JournalCheck VerifyJournalBytes(std::string_view bytes, const std::optional<JournalHead>& expected_head) {
  ParsedJournal parsed = ParseJournal(bytes);
  JournalCheck chain = VerifyJournalRows(parsed.rows, parsed.malformed_line == 0 && parsed.torn_bytes == 0
                                                          ? expected_head : std::nullopt);
  if (!chain.ok()) return chain;
  if (parsed.malformed_line != 0) {
    return Fault(JournalFault::kMalformedRow, parsed.rows.size(), parsed.malformed_line, parsed.malformed_detail);
  }
  if (parsed.torn_bytes != 0) {
    return Fault(JournalFault::kTornTail, parsed.rows.size(), parsed.rows.size() + 1,
                 std::to_string(parsed.torn_bytes) + " bytes after the last whole row at offset " + std::to_string(parsed.whole_bytes));
  }
  return chain;
}

Result<std::vector<JournalRow>> ReadJournalRows(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  FAK_ASSIGN_OR_RETURN(std::string bytes, env->ReadFile(path));
  ParsedJournal parsed = ParseJournal(bytes);
  if (parsed.malformed_line != 0) {
    return Corruption(path + " line " + std::to_string(parsed.malformed_line) + ": " + parsed.malformed_detail);
  }
  if (parsed.torn_bytes != 0) {
    return Corruption(path + ": torn last row (" + std::to_string(parsed.torn_bytes) + " bytes after offset " +
                      std::to_string(parsed.whole_bytes) + "); open it with Journal::Open to recover");
  }
  return std::move(parsed.rows);
}

Result<std::unique_ptr<Journal>> Journal::Open(const std::string& path, const JournalOptions& options) {
  std::unique_ptr<Journal> j(new Journal());
  j->path_ = path;
  j->env_ = options.env != nullptr ? options.env : Env::Default();
  // Two appenders would each extend their own in-memory head: two rows with one seq, a forked chain.
  const std::string lock_path = path + std::string(fmt::kLockSuffix);
  Result<std::unique_ptr<FileLock>> held = j->env_->LockFile(lock_path);
  if (!held.has_value()) {
    if (held.error().code() != StatusCode::kFailedPrecondition) return held.error();
    return FailedPrecondition("journal " + path + " is in use by another opener (" + std::string(held.error().message()) +
                              "); close it first");
  }
  j->lock_ = std::move(*held);
  Result<std::string> bytes = j->env_->ReadFile(path);
  if (!bytes.has_value() && bytes.error().code() != StatusCode::kNotFound) return bytes.error();
  ParsedJournal parsed = ParseJournal(bytes.has_value() ? *bytes : std::string());
  JournalCheck check = VerifyJournalRows(parsed.rows);
  if (!check.ok()) return Corruption("journal " + path + ": " + std::string(check.ToStatus().message()));
  if (parsed.malformed_line != 0) {
    return Corruption("journal " + path + " line " + std::to_string(parsed.malformed_line) + ": " + parsed.malformed_detail);
  }
  if (parsed.torn_bytes != 0) {
    const std::string what = std::to_string(parsed.torn_bytes) + " bytes of a torn last row after offset " +
                             std::to_string(parsed.whole_bytes) + " (a crash mid-append)";
    if (!options.recover_torn_tail) return Corruption("journal " + path + ": " + what);
    // Cut, then make the cut durable before anything is appended after it.
    FAK_RETURN_IF_ERROR(j->env_->TruncateFile(path, parsed.whole_bytes).WithContext("recovering journal " + path));
    FAK_ASSIGN_OR_RETURN(j->file_, j->env_->NewAppendableFile(path));
    FAK_RETURN_IF_ERROR(j->file_->Sync().WithContext("recovering journal " + path));
    j->recovered_torn_bytes_ = parsed.torn_bytes;
    j->recovery_note_ = "journal " + path + ": recovered to the last whole row (seq " + std::to_string(parsed.rows.size()) +
                        "), cut " + what;
  }
  if (j->file_ == nullptr) {
    FAK_ASSIGN_OR_RETURN(j->file_, j->env_->NewAppendableFile(path));
    // A new journal's directory entry must be durable before its first row is acknowledged.
    if (!bytes.has_value()) FAK_RETURN_IF_ERROR(j->env_->SyncDir(internal::ParentDir(path)));
  }
  j->rows_ = std::move(parsed.rows);
  return j;
}

Result<JournalRow> Journal::Append(std::string_view kind, std::string_view subject, std::string_view payload_json) {
  if (failed_) return FailedPrecondition("journal " + path_ + ": an earlier write or fsync failed; reopen to recover");
  if (kind.empty()) return InvalidArgument("Journal::Append: kind is empty");
  FAK_ASSIGN_OR_RETURN(Json payload, internal::ParseJson(payload_json, "Journal::Append: payload_json"));
  if (!payload.is_object()) return InvalidArgument("Journal::Append: payload_json is not a JSON object");
  JournalRow row;
  row.seq = rows_.size() + fmt::kFirstSeq;
  row.time_unix_us = env_->NowUnixMicros();
  row.kind = std::string(kind);
  row.subject = std::string(subject);
  FAK_ASSIGN_OR_RETURN(row.payload_json, internal::CanonicalJson(payload, "Journal::Append: payload_json"));
  row.prev_hash = head().hash;
  Result<Digest> hash = ComputeJournalRowHash(row);
  if (!hash.has_value()) return InvalidArgument("Journal::Append: " + std::string(hash.error().message()));
  row.hash = *hash;
  FAK_ASSIGN_OR_RETURN(std::string line, EncodeJournalRow(row));
  line.push_back(fmt::kRowTerminator);
  Status s = file_->Append(line);
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) {
    failed_ = true;  // the durable state is unknown until the file is re-read
    return s.WithContext("journal " + path_ + " appending seq " + std::to_string(row.seq));
  }
  rows_.push_back(row);
  return row;
}

Result<JournalRow> Journal::Row(uint64_t seq) const {
  if (seq < fmt::kFirstSeq || seq > rows_.size()) {
    return NotFound("journal " + path_ + ": no row seq " + std::to_string(seq) + " (last is " + std::to_string(rows_.size()) + ")");
  }
  return rows_[seq - fmt::kFirstSeq];
}

JournalHead Journal::head() const {
  if (rows_.empty()) return JournalHead{};
  return JournalHead{rows_.back().seq, rows_.back().hash};
}

JournalCheck Journal::Verify(const std::optional<JournalHead>& expected_head) const {
  Result<std::string> bytes = env_->ReadFile(path_);
  if (!bytes.has_value()) {
    return Fault(JournalFault::kTruncated, 0, 1, "cannot read " + path_ + ": " + std::string(bytes.error().message()));
  }
  return VerifyJournalBytes(*bytes, expected_head.has_value() ? expected_head : std::optional<JournalHead>(head()));
}

}  // namespace fak
