// BlobJournal: record encoding, replay with torn-tail and corruption handling, append, rewrite.
#include "src/store/blob_journal.h"

#include <algorithm>
#include <cstring>

#include "fak/store/blob_store.h"
#include "src/core/le_bytes.h"
#include "src/store/store_files.h"

namespace fak::internal {
namespace {

constexpr size_t kDigestBytes = Digest::kSize;
constexpr size_t kMinBody = 1 + kDigestBytes;

std::string Check(std::string_view covered) {
  const Digest d = Digest::Of(covered);
  return std::string(reinterpret_cast<const char*>(d.bytes.data()), kRecordCheckBytes);
}

// Applies one checked record; false when its type or payload is not one a writer produces.
bool Apply(uint64_t seq, std::string_view body, JournalState* st) {
  const auto type = static_cast<RecordType>(static_cast<uint8_t>(body[0]));
  Digest digest;
  std::memcpy(digest.bytes.data(), body.data() + 1, kDigestBytes);
  const std::string_view payload = body.substr(kMinBody);
  switch (type) {
    case RecordType::kInlinePut:
      if (payload.size() > kInlineMaxBytes || Digest::Of(payload) != digest) return false;
      st->inline_payloads[digest] = JournalState::Inline{seq, std::string(payload)};
      return true;
    case RecordType::kRemove:
      if (!payload.empty()) return false;
      st->inline_payloads.erase(digest);
      st->pins.erase(digest);
      return true;
    case RecordType::kPinCount: {
      if (payload.size() != 4) return false;
      const uint32_t pins = GetU32(payload, 0);
      if (pins == 0) st->pins.erase(digest);
      else st->pins[digest] = pins;
      return true;
    }
  }
  return false;
}

// Replays `data`; sets *valid_end to the end of the last whole record. *damaged when salvage
// skipped anything.
Status Replay(const std::string& path, std::string_view data, bool salvage, JournalState* st, size_t* valid_end,
              bool* damaged) {
  if (data.size() < kJournalHeaderBytes || std::memcmp(data.data(), kJournalMagic, 8) != 0) {
    return Corruption("journal '" + path + "': missing or damaged header (" + std::to_string(data.size()) + " bytes)");
  }
  if (GetU32(data, 8) != kJournalVersion) {
    return Unsupported("journal '" + path + "': format version " + std::to_string(GetU32(data, 8)) +
                       " is not supported (this build reads " + std::to_string(kJournalVersion) + ")");
  }
  if (GetU32(data, 12) != 0) return Corruption("journal '" + path + "': reserved header bytes are not zero");
  size_t off = kJournalHeaderBytes;
  while (off < data.size()) {
    const size_t remaining = data.size() - off;
    const size_t body = remaining >= kRecordPrefixBytes ? GetU32(data, off) : 0;
    const size_t total = kRecordPrefixBytes + body + kRecordCheckBytes;
    if (remaining < kRecordPrefixBytes || (body >= kMinBody && body <= kMinBody + kInlineMaxBytes && total > remaining)) {
      st->torn_tail_bytes = remaining;  // a record cut short by a crash mid-append: never acknowledged
      break;
    }
    const std::string where = "journal '" + path + "' record at offset " + std::to_string(off);
    if (body < kMinBody || body > kMinBody + kInlineMaxBytes || total > remaining) {
      if (!salvage) return Corruption(where + ": impossible record size " + std::to_string(body));
      ++st->n_corrupt_records;  // no way to find the next boundary: drop the rest
      *damaged = true;
      break;
    }
    const std::string_view covered = data.substr(off, kRecordPrefixBytes + body);
    const bool good = data.substr(off + kRecordPrefixBytes + body, kRecordCheckBytes) == Check(covered) &&
                      Apply(st->n_records, covered.substr(kRecordPrefixBytes), st);
    if (!good) {
      if (!salvage) return Corruption(where + ": checksum, type or payload does not verify");
      ++st->n_corrupt_records;
      *damaged = true;
    }
    ++st->n_records;
    off += total;
  }
  *valid_end = off;
  return Status::Ok();
}

}  // namespace

std::string JournalHeader() {
  std::string h(kJournalMagic, 8);
  PutU32(&h, kJournalVersion);
  PutU32(&h, 0);
  return h;
}

std::string EncodeJournalRecord(RecordType type, const Digest& digest, std::string_view payload) {
  std::string rec;
  rec.reserve(kRecordPrefixBytes + kMinBody + payload.size() + kRecordCheckBytes);
  PutU32(&rec, static_cast<uint32_t>(kMinBody + payload.size()));
  rec.push_back(static_cast<char>(type));
  rec.append(reinterpret_cast<const char*>(digest.bytes.data()), kDigestBytes);
  rec.append(payload);
  rec += Check(rec);
  return rec;
}

Status BlobJournal::Reopen() {
  file_.reset();
  FAK_ASSIGN_OR_RETURN(file_, env_->NewAppendableFile(path_));
  return Status::Ok();
}

Result<std::unique_ptr<BlobJournal>> BlobJournal::Open(Env* env, const std::string& path, const std::string& tmp_dir,
                                                       bool sync, bool salvage, JournalState* state) {
  std::unique_ptr<BlobJournal> j(new BlobJournal(env, path, tmp_dir, sync));
  Result<std::string> data = env->ReadFile(path);
  if (!data.has_value() && data.error().code() == StatusCode::kNotFound) {
    FAK_RETURN_IF_ERROR(AtomicWriteFile(env, tmp_dir, path, {JournalHeader()}, sync));
    FAK_RETURN_IF_ERROR(j->Reopen());
    j->good_end_ = kJournalHeaderBytes;
    return j;
  }
  if (!data.has_value()) return data.error();
  size_t valid_end = 0;
  bool damaged = false;
  Status replay = Replay(path, *data, salvage, state, &valid_end, &damaged);
  if (!replay.ok() && !(salvage && replay.code() == StatusCode::kCorruption)) return replay;
  if (!replay.ok() || damaged) {
    // Salvage: keep the damaged file for inspection, continue with what verified.
    if (!replay.ok()) ++state->n_corrupt_records;
    FAK_RETURN_IF_ERROR(env->RenameFile(path, path + ".corrupt").WithContext("setting the damaged journal aside"));
    FAK_RETURN_IF_ERROR(j->Rewrite(*state));
    return j;
  }
  if (valid_end < data->size()) {  // drop the torn tail before appending after it
    FAK_RETURN_IF_ERROR(env->TruncateFile(path, valid_end).WithContext("cutting the torn journal tail"));
  }
  FAK_RETURN_IF_ERROR(j->Reopen());
  if (sync && valid_end < data->size()) FAK_RETURN_IF_ERROR(j->file_->Sync());
  j->good_end_ = valid_end;
  return j;
}

Status BlobJournal::Append(RecordType type, const Digest& digest, std::string_view payload) {
  if (!poisoned_.ok()) return poisoned_;
  const std::string record = EncodeJournalRecord(type, digest, payload);
  Status s = file_->Append(record);
  if (s.ok() && sync_) s = file_->Sync();
  if (!s.ok()) return RollBack(std::move(s));
  good_end_ += record.size();
  return Status::Ok();
}

Status BlobJournal::RollBack(Status cause) {
  // After a failed write or fdatasync the tail is unknown: part of the record may be in the file
  // or in the page cache. Cutting it off (durably) makes the failed call a no-op, also on reopen.
  Status undo = env_->TruncateFile(path_, good_end_);
  if (undo.ok()) undo = Reopen();
  if (undo.ok() && sync_) undo = file_->Sync();
  if (!undo.ok()) {
    poisoned_ = FailedPrecondition("journal '" + path_ + "' refuses writes until the store is reopened: an append failed (" +
                                   cause.ToString() + ") and cutting it back failed (" + undo.ToString() + ")");
  }
  return cause;
}

Status BlobJournal::Rewrite(const JournalState& live) {
  std::vector<std::pair<uint64_t, Digest>> order;
  for (const auto& [d, in] : live.inline_payloads) order.emplace_back(in.seq, d);
  std::sort(order.begin(), order.end());
  std::string out = JournalHeader();
  for (const auto& [seq, d] : order) out += EncodeJournalRecord(RecordType::kInlinePut, d, live.inline_payloads.at(d).payload);
  for (const auto& [d, pins] : live.pins) {
    std::string count;
    PutU32(&count, pins);
    out += EncodeJournalRecord(RecordType::kPinCount, d, count);
  }
  bool renamed = false;
  Status s = AtomicReplaceFile(env_, tmp_dir_, path_, out, sync_, &renamed);
  if (!renamed) return s;  // the old journal and its handle are untouched
  // The new file is in place: later appends must go to it, not to the unlinked old one.
  if (Status reopened = Reopen(); s.ok()) s = reopened;
  if (!s.ok()) {
    poisoned_ = FailedPrecondition("journal '" + path_ + "' refuses writes until the store is reopened: it was rewritten but " +
                                   s.ToString());
    return s;
  }
  good_end_ = out.size();
  poisoned_ = Status::Ok();  // a whole new journal is a clean tail
  return Status::Ok();
}

}  // namespace fak::internal
