// FaultInjectionEnv: fault counters, per-file synced lengths and the undo log of directory changes.
#include "tests/support/fault_injection_env.h"

#include <algorithm>

#include "src/core/path.h"

namespace fak::testing {
namespace {

// One spelling per path, so "d/" and "d" and "d//x" meet in the maps.
std::string Normalize(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string DirOf(std::string_view path) { return internal::ParentDir(Normalize(path)); }

}  // namespace

std::string_view EnvOpName(EnvOp op) {
  switch (op) {
    case EnvOp::kAppend: return "append";
    case EnvOp::kSync: return "sync";
    case EnvOp::kRename: return "rename";
    case EnvOp::kSyncDir: return "syncdir";
    case EnvOp::kCreate: return "create";
    case EnvOp::kRemove: return "remove";
    case EnvOp::kTruncate: return "truncate";
    case EnvOp::kCreateDir: return "createdir";
    case EnvOp::kRemoveDir: return "removedir";
  }
  return "?";
}

// A file handed out by the env: faults its Append and Sync, records its synced length.
class FaultInjectionEnv::File final : public WritableFile {
 public:
  File(FaultInjectionEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}

  Status Append(std::string_view data) override {
    std::lock_guard lock(env_->mu_);
    if (std::optional<FaultKind> fault = env_->CountAndCheckLocked(EnvOp::kAppend)) {
      if (*fault == FaultKind::kShortWrite) (void)base_->Append(data.substr(0, data.size() / 2));
      return env_->InjectedError(*fault, EnvOp::kAppend, path_);
    }
    return base_->Append(data);
  }

  Status Sync() override {
    std::lock_guard lock(env_->mu_);
    if (std::optional<FaultKind> fault = env_->CountAndCheckLocked(EnvOp::kSync)) {
      return env_->InjectedError(*fault, EnvOp::kSync, path_);
    }
    FAK_RETURN_IF_ERROR(base_->Sync());
    return env_->AfterSync(path_);
  }

  Status Close() override { return base_->Close(); }

 private:
  FaultInjectionEnv* const env_;
  const std::string path_;
  std::unique_ptr<WritableFile> base_;
};

void FaultInjectionEnv::FailNth(EnvOp op, uint64_t nth, FaultKind kind) {
  std::lock_guard lock(mu_);
  faults_.push_back(Fault{op, counts_[static_cast<size_t>(op)] + std::max<uint64_t>(nth, 1), kind});
}

void FaultInjectionEnv::ClearFaults() {
  std::lock_guard lock(mu_);
  faults_.clear();
}

uint64_t FaultInjectionEnv::count(EnvOp op) const {
  std::lock_guard lock(mu_);
  return counts_[static_cast<size_t>(op)];
}

void FaultInjectionEnv::ResetCounts() {
  std::lock_guard lock(mu_);
  counts_.fill(0);
  faults_.clear();  // their positions were counted from the old origin
}

bool FaultInjectionEnv::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

void FaultInjectionEnv::UseManualClock(int64_t start_us, int64_t step_us) {
  std::lock_guard lock(mu_);
  manual_clock_ = true;
  now_us_ = start_us;
  step_us_ = step_us;
}

int64_t FaultInjectionEnv::NowUnixMicros() {
  std::lock_guard lock(mu_);
  if (!manual_clock_) return target()->NowUnixMicros();
  return now_us_ += step_us_;
}

std::optional<FaultKind> FaultInjectionEnv::CountAndCheckLocked(EnvOp op) {
  const uint64_t n = ++counts_[static_cast<size_t>(op)];
  if (crashed_) return FaultKind::kCrash;
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->op != op || it->at_count != n) continue;
    const FaultKind kind = it->kind;
    faults_.erase(it);
    if (kind == FaultKind::kCrash) crashed_ = true;
    // A short write is an Append fault; elsewhere it degrades to ENOSPC.
    return kind == FaultKind::kShortWrite && op != EnvOp::kAppend ? FaultKind::kNoSpace : kind;
  }
  return std::nullopt;
}

Status FaultInjectionEnv::InjectedError(FaultKind kind, EnvOp op, const std::string& path) const {
  const bool no_space = kind == FaultKind::kNoSpace || kind == FaultKind::kShortWrite;
  return IOError(std::string(EnvOpName(op)) + " '" + path + "': " +
                 (no_space ? "No space left on device" : "Input/output error") +
                 (kind == FaultKind::kCrash ? " (injected crash)" : " (injected)"));
}

Status FaultInjectionEnv::AfterSync(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(FileInfo info, target()->GetFileInfo(path));
  synced_bytes_[Normalize(path)] = info.size_bytes;
  return Status::Ok();
}

std::optional<std::string> FaultInjectionEnv::DurableContentLocked(const std::string& path) {
  Result<std::string> bytes = target()->ReadFile(path);
  if (!bytes.has_value()) return std::nullopt;
  auto it = synced_bytes_.find(Normalize(path));
  if (it != synced_bytes_.end() && bytes->size() > it->second) bytes->resize(it->second);
  return std::move(*bytes);
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::Create(const std::string& path, int how) {
  constexpr int kTruncating = 0, kAppending = 1;
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kCreate)) return InjectedError(*fault, EnvOp::kCreate, path);
  Result<FileInfo> before = target()->GetFileInfo(path);
  Result<std::unique_ptr<WritableFile>> base = how == kTruncating ? target()->NewWritableFile(path)
                                               : how == kAppending ? target()->NewAppendableFile(path)
                                                                   : target()->NewPrivateFile(path);
  if (!base.has_value()) return base.error();
  const std::string key = Normalize(path);
  if (!before.has_value()) {
    changes_.push_back(DirChange{DirChange::kCreateFile, ++seq_, DirOf(path), key, "", std::nullopt, std::nullopt});
    synced_bytes_[key] = 0;
  } else if (how == kTruncating) {
    synced_bytes_[key] = 0;  // the old bytes are gone at once; the new ones need a Sync
  } else if (!synced_bytes_.contains(key)) {
    synced_bytes_[key] = before->size_bytes;  // untouched until now: durable as it was
  }
  return std::unique_ptr<WritableFile>(new File(this, path, std::move(*base)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(const std::string& path) { return Create(path, 0); }
Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewAppendableFile(const std::string& path) { return Create(path, 1); }
Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewPrivateFile(const std::string& path) { return Create(path, 2); }

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kRename)) return InjectedError(*fault, EnvOp::kRename, from);
  std::optional<std::string> saved = DurableContentLocked(to);
  FAK_RETURN_IF_ERROR(target()->RenameFile(from, to));
  const std::string from_key = Normalize(from), to_key = Normalize(to);
  changes_.push_back(DirChange{DirChange::kRename, ++seq_, DirOf(to), to_key, from_key, std::move(saved), std::nullopt});
  // The synced length travels with the file.
  auto it = synced_bytes_.find(from_key);
  if (it != synced_bytes_.end()) {
    synced_bytes_[to_key] = it->second;
    synced_bytes_.erase(from_key);
  } else {
    synced_bytes_.erase(to_key);
  }
  return Status::Ok();
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kRemove)) return InjectedError(*fault, EnvOp::kRemove, path);
  std::optional<std::string> saved = DurableContentLocked(path);
  FAK_RETURN_IF_ERROR(target()->RemoveFile(path));
  const std::string key = Normalize(path);
  changes_.push_back(DirChange{DirChange::kRemoveFile, ++seq_, DirOf(path), key, "", std::move(saved), std::nullopt});
  synced_bytes_.erase(key);
  return Status::Ok();
}

Status FaultInjectionEnv::TruncateFile(const std::string& path, uint64_t size_bytes) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kTruncate)) return InjectedError(*fault, EnvOp::kTruncate, path);
  Result<FileInfo> before = target()->GetFileInfo(path);
  FAK_RETURN_IF_ERROR(target()->TruncateFile(path, size_bytes));
  // Pessimistic: bytes cut are gone at once; bytes added (zeros) need a Sync.
  const std::string key = Normalize(path);
  auto it = synced_bytes_.find(key);
  const uint64_t durable = it != synced_bytes_.end() ? it->second : (before.has_value() ? before->size_bytes : 0);
  synced_bytes_[key] = std::min(durable, size_bytes);
  return Status::Ok();
}

Status FaultInjectionEnv::CreateDir(const std::string& path) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kCreateDir)) return InjectedError(*fault, EnvOp::kCreateDir, path);
  const bool existed = target()->GetFileInfo(path).has_value();
  FAK_RETURN_IF_ERROR(target()->CreateDir(path));
  if (!existed) changes_.push_back(DirChange{DirChange::kCreateDir, ++seq_, DirOf(path), Normalize(path), "", std::nullopt, std::nullopt});
  return Status::Ok();
}

Status FaultInjectionEnv::RemoveDir(const std::string& path) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kRemoveDir)) return InjectedError(*fault, EnvOp::kRemoveDir, path);
  FAK_RETURN_IF_ERROR(target()->RemoveDir(path));
  changes_.push_back(DirChange{DirChange::kRemoveDir, ++seq_, DirOf(path), Normalize(path), "", std::nullopt, std::nullopt});
  return Status::Ok();
}

Status FaultInjectionEnv::SyncDir(const std::string& path) {
  std::lock_guard lock(mu_);
  if (std::optional<FaultKind> fault = CountAndCheckLocked(EnvOp::kSyncDir)) return InjectedError(*fault, EnvOp::kSyncDir, path);
  FAK_RETURN_IF_ERROR(target()->SyncDir(path));
  dir_synced_seq_[Normalize(path)] = ++seq_;
  return Status::Ok();
}

Status FaultInjectionEnv::Restore(const std::string& path, const std::string& content) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, target()->NewWritableFile(path));
  FAK_RETURN_IF_ERROR(f->Append(content));
  FAK_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

namespace {

// Removes `path` and everything under it through `env` (an unsynced mkdir takes its contents).
Status RemoveTree(Env* env, const std::string& path) {
  Result<std::vector<FileInfo>> entries = env->ListDir(path);
  if (!entries.has_value()) return entries.error().code() == StatusCode::kNotFound ? Status::Ok() : entries.error();
  for (const FileInfo& e : *entries) {
    const std::string child = internal::JoinPath(path, e.name);
    FAK_RETURN_IF_ERROR(e.is_dir ? RemoveTree(env, child) : env->RemoveFile(child));
  }
  return env->RemoveDir(path);
}

}  // namespace

Status FaultInjectionEnv::PowerLoss(size_t keep_unsynced_bytes) {
  std::lock_guard lock(mu_);
  Status first;
  auto note = [&first](Status s) {
    if (first.ok() && !s.ok() && s.code() != StatusCode::kNotFound) first = std::move(s);
  };
  // 1. File contents: back to the synced length (plus a torn prefix of what followed).
  for (const auto& [path, synced] : synced_bytes_) {
    Result<FileInfo> info = target()->GetFileInfo(path);
    if (!info.has_value() || info->size_bytes <= synced) continue;
    note(target()->TruncateFile(path, synced + std::min<uint64_t>(keep_unsynced_bytes, info->size_bytes - synced)));
  }
  // 2. Directory entries: undo what no SyncDir covered, newest first.
  for (auto it = changes_.rbegin(); it != changes_.rend(); ++it) {
    const DirChange& c = *it;
    auto synced = dir_synced_seq_.find(c.dir);
    if (synced != dir_synced_seq_.end() && synced->second > c.seq) continue;
    switch (c.type) {
      case DirChange::kCreateFile: note(target()->RemoveFile(c.path)); break;
      case DirChange::kCreateDir: note(RemoveTree(target(), c.path)); break;
      case DirChange::kRemoveDir: note(target()->CreateDir(c.path)); break;
      case DirChange::kRemoveFile:
        if (c.saved.has_value()) note(Restore(c.path, *c.saved));
        break;
      case DirChange::kRename:
        note(target()->RenameFile(c.path, c.from));
        if (c.saved.has_value()) note(Restore(c.path, *c.saved));
        break;
    }
  }
  // 3. A fresh boot: what is on disk now is what is durable.
  synced_bytes_.clear();
  changes_.clear();
  dir_synced_seq_.clear();
  faults_.clear();
  crashed_ = false;
  return first;
}

Status FaultInjectionEnv::WriteDurably(const std::string& path, std::string_view content) {
  std::lock_guard lock(mu_);
  FAK_RETURN_IF_ERROR(Restore(path, std::string(content)));
  const std::string key = Normalize(path);
  synced_bytes_.erase(key);
  std::erase_if(changes_, [&](const DirChange& c) { return c.type == DirChange::kCreateFile && c.path == key; });
  return Status::Ok();
}

}  // namespace fak::testing
