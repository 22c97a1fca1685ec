// FileDenylist: open (lock, replay, drop a torn tail), durable Add with rollback; and the record
// format of src/screen/denylist_format.h.
#include "fak/screen/file_denylist.h"

#include <cstring>

#include "src/core/le_bytes.h"
#include "src/core/path.h"
#include "src/screen/denylist_format.h"

namespace fak {
namespace internal {
namespace {

static_assert(kDenylistMaxReasonBytes == FileDenylist::kMaxReasonBytes);
constexpr size_t kMaxBody = kDenylistMinBody + kDenylistMaxReasonBytes;

std::string Check(std::string_view covered) {
  const Digest d = Digest::Of(covered);
  return std::string(reinterpret_cast<const char*>(d.bytes.data()), kDenylistCheckBytes);
}

}  // namespace

std::string DenylistHeader() {
  std::string h(kDenylistMagic, sizeof(kDenylistMagic));
  PutU32(&h, kDenylistVersion);
  PutU32(&h, 0);
  return h;
}

std::string EncodeDenylistRecord(const Digest& digest, std::string_view reason) {
  std::string rec;
  rec.reserve(kDenylistSizeBytes + kDenylistMinBody + reason.size() + kDenylistCheckBytes);
  PutU32(&rec, static_cast<uint32_t>(kDenylistMinBody + reason.size()));
  rec.push_back(static_cast<char>(kDenylistAdd));
  rec.append(reinterpret_cast<const char*>(digest.bytes.data()), Digest::kSize);
  rec.append(reason);
  rec += Check(rec);
  return rec;
}

Result<DenylistReplay> ReplayDenylist(std::string_view data, const std::string& path) {
  // The header is written whole before the file has its name (an atomic create), so a short one
  // is damage, not a crash.
  if (data.size() < kDenylistHeaderBytes || std::memcmp(data.data(), kDenylistMagic, sizeof(kDenylistMagic)) != 0) {
    return Corruption("denylist '" + path + "': missing or damaged header (" + std::to_string(data.size()) + " bytes)");
  }
  if (GetU32(data, 8) != kDenylistVersion) {
    return Unsupported("denylist '" + path + "': format version " + std::to_string(GetU32(data, 8)) +
                       " is not supported (this build reads " + std::to_string(kDenylistVersion) + ")");
  }
  if (GetU32(data, 12) != 0) return Corruption("denylist '" + path + "': reserved header bytes are not zero");
  DenylistReplay out;
  size_t off = kDenylistHeaderBytes;
  while (off < data.size()) {
    const size_t remaining = data.size() - off;
    const size_t body = remaining >= kDenylistSizeBytes ? GetU32(data, off) : 0;
    const size_t total = kDenylistSizeBytes + body + kDenylistCheckBytes;
    const bool plausible = body >= kDenylistMinBody && body <= kMaxBody;
    if (remaining < kDenylistSizeBytes || (plausible && total > remaining)) {
      out.torn_tail_bytes = remaining;  // a record cut short by a crash mid-Add: never acknowledged
      break;
    }
    const std::string where = "denylist '" + path + "' record at offset " + std::to_string(off);
    if (!plausible) return Corruption(where + ": impossible record size " + std::to_string(body));
    const std::string_view covered = data.substr(off, kDenylistSizeBytes + body);
    if (data.substr(off + kDenylistSizeBytes + body, kDenylistCheckBytes) != Check(covered)) {
      return Corruption(where + ": checksum does not match (damaged or edited)");
    }
    if (static_cast<uint8_t>(covered[kDenylistSizeBytes]) != kDenylistAdd) {
      return Corruption(where + ": unknown record type " + std::to_string(static_cast<uint8_t>(covered[kDenylistSizeBytes])));
    }
    Digest digest;
    std::memcpy(digest.bytes.data(), covered.data() + kDenylistSizeBytes + 1, Digest::kSize);
    out.adds.emplace_back(digest, std::string(covered.substr(kDenylistSizeBytes + kDenylistMinBody)));
    off += total;
  }
  out.valid_end = off;
  return out;
}

}  // namespace internal

Result<std::shared_ptr<FileDenylist>> FileDenylist::Open(const std::string& path, Env* env) {
  if (path.empty()) return InvalidArgument("FileDenylist::Open: path is empty");
  if (env == nullptr) env = Env::Default();
  std::shared_ptr<FileDenylist> list(new FileDenylist(env, path));
  // Two appenders would each roll back over the other's acknowledged records.
  const std::string lock_path = path + std::string(internal::kDenylistLockSuffix);
  Result<std::unique_ptr<FileLock>> held = env->LockFile(lock_path);
  if (!held.has_value()) {
    if (held.error().code() != StatusCode::kFailedPrecondition) return held.error();
    return FailedPrecondition("denylist '" + path + "' is in use by another opener (" +
                              std::string(held.error().message()) + "); close it first");
  }
  list->lock_ = std::move(*held);

  Result<std::string> data = env->ReadFile(path);
  if (!data.has_value() && data.error().code() == StatusCode::kNotFound) {
    // Created whole under its name (and the name made durable) before the first Add can be
    // acknowledged: a reopen after a crash finds the header or no file, never a part of one.
    const std::string header = internal::DenylistHeader();
    const std::string_view parts[] = {header};
    FAK_RETURN_IF_ERROR(WriteFileAtomically(env, path + ".tmp", path, internal::ParentDir(path), parts)
                            .WithContext("creating denylist '" + path + "'"));
    data = header;
  }
  if (!data.has_value()) return data.error().WithContext("opening denylist '" + path + "'");
  FAK_ASSIGN_OR_RETURN(internal::DenylistReplay replay, internal::ReplayDenylist(*data, path));
  for (auto& [digest, reason] : replay.adds) (void)list->memory_.Add(digest, std::move(reason));  // never fails
  list->torn_tail_bytes_ = replay.torn_tail_bytes;
  if (replay.valid_end < data->size()) {
    // Cut before anything is appended after it, or the next record would follow garbage.
    FAK_RETURN_IF_ERROR(env->TruncateFile(path, replay.valid_end).WithContext("cutting the torn denylist tail"));
  }
  FAK_ASSIGN_OR_RETURN(list->file_, env->NewAppendableFile(path));
  if (replay.valid_end < data->size()) FAK_RETURN_IF_ERROR(list->file_->Sync());
  list->good_end_ = replay.valid_end;
  return list;
}

FileDenylist::~FileDenylist() = default;

Status FileDenylist::Add(const Digest& digest, std::string reason) {
  if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!poisoned_.ok()) return poisoned_;
  // Already durable with this reason: nothing to write (one text may be sealed twice).
  if (memory_.Reason(digest) == reason) return Status::Ok();
  const std::string record = internal::EncodeDenylistRecord(digest, reason);
  Status s = file_->Append(record);
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) return RollBack(s.WithContext("denylist '" + path_ + "': sealing " + digest.Hex()));
  good_end_ += record.size();
  // Listed in memory only once durable: a reader never sees a seal that a crash could take back.
  return memory_.Add(digest, std::move(reason));
}

Status FileDenylist::RollBack(Status cause) {
  // After a failed write or fdatasync the tail is unknown: part of the record may be in the file or
  // in the page cache. Cutting it off (durably) makes the failed Add a no-op, also after a reopen.
  file_.reset();
  Status undo = env_->TruncateFile(path_, good_end_);
  if (undo.ok()) {
    Result<std::unique_ptr<WritableFile>> reopened = env_->NewAppendableFile(path_);
    if (reopened.has_value()) file_ = std::move(*reopened);
    else undo = reopened.error();
  }
  if (undo.ok()) undo = file_->Sync();
  if (!undo.ok()) {
    poisoned_ = FailedPrecondition("denylist '" + path_ + "' refuses new entries until it is reopened: an append failed (" +
                                   cause.ToString() + ") and cutting it back failed (" + undo.ToString() + ")");
  }
  return cause;
}

}  // namespace fak
