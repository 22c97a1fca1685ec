// DirectoryBlobStore: one file per blob in a fan-out tree, inline payloads and pins in a journal,
// the index rebuilt from both on open (format in docs/store.md).
//
// Writes are atomic (temporary file + fsync + rename + directory fsync), so a reader or a reopen
// after process death sees a blob whole or not at all. Reads stream the file through sha256 and
// fail on any mismatch. Open checks each file's header (cheap); Get checks its content.
//
// One opener at a time: Open takes an exclusive lock on <dir>/LOCK for the store's lifetime, so a
// second process (or a second open in this one, fsck included) cannot replay, compact or clean the
// tmp/ of a live store. Remove of an inline blob rewrites the journal without it, so no removed
// plaintext stays in the directory (docs/store.md §1.3).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "fak/store/blob_store.h"
#include "src/store/blob_index.h"
#include "src/store/blob_journal.h"
#include "src/store/store_files.h"
#include "src/store/store_format.h"

namespace fak {
namespace {

using internal::BlobIndex;
using internal::JoinPath;
using internal::RecordType;

std::string EncodeBlobHeader(const Digest& digest, uint64_t size_bytes) {
  std::string h(internal::kBlobMagic, 8);
  for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>((internal::kBlobVersion >> (8 * i)) & 0xff));
  h.append(4, '\0');
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((size_bytes >> (8 * i)) & 0xff));
  h.append(reinterpret_cast<const char*>(digest.bytes.data()), Digest::kSize);
  return h;
}

// Checks a header against the digest the file is named for; returns the payload size.
Result<uint64_t> CheckBlobHeader(std::string_view h, const Digest& want, uint64_t file_bytes, const std::string& path) {
  if (h.size() < internal::kBlobHeaderBytes || std::memcmp(h.data(), internal::kBlobMagic, 8) != 0) {
    return Corruption("blob file '" + path + "': missing or damaged header");
  }
  uint32_t version = 0;
  for (int i = 3; i >= 0; --i) version = version << 8 | static_cast<uint8_t>(h[8 + i]);
  if (version != internal::kBlobVersion) {
    return Unsupported("blob file '" + path + "': format version " + std::to_string(version) + " is not supported");
  }
  // Version 1 defines no flags: a set bit is damage (or a newer writer), not something to ignore.
  if (std::any_of(h.begin() + 12, h.begin() + 16, [](char c) { return c != 0; })) {
    return Corruption("blob file '" + path + "': reserved flags are not zero");
  }
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = size << 8 | static_cast<uint8_t>(h[16 + i]);
  if (size + internal::kBlobHeaderBytes != file_bytes) {
    return Corruption("blob file '" + path + "': header says " + std::to_string(size) + " payload bytes, file holds " +
                      std::to_string(file_bytes - std::min<uint64_t>(file_bytes, internal::kBlobHeaderBytes)));
  }
  if (std::memcmp(h.data() + 24, want.bytes.data(), Digest::kSize) != 0) {
    return Corruption("blob file '" + path + "': header digest differs from the file name");
  }
  return size;
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

struct ScannedFile {
  int64_t mtime_ns;
  Digest digest;
  uint64_t size_bytes;
};

class DirectoryBlobStore final : public BlobStore {
 public:
  DirectoryBlobStore(std::string dir, const BlobStoreOptions& options)
      : dir_(std::move(dir)), options_(options), env_(options.env != nullptr ? options.env : Env::Default()),
        index_(options.capacity_bytes) {}

  Status Open();

  Result<Digest> Put(std::string_view bytes) override;
  Result<std::string> Get(const Digest& digest) override;
  Result<bool> Contains(const Digest& digest) override {
    std::lock_guard lock(mu_);
    return index_.Find(digest) != nullptr;
  }
  Status Pin(const Digest& digest) override { return AdjustPins(digest, +1); }
  Status Unpin(const Digest& digest) override { return AdjustPins(digest, -1); }
  Status Remove(const Digest& digest) override;
  Result<std::vector<Digest>> List() override {
    std::lock_guard lock(mu_);
    return index_.Digests();
  }
  BlobStoreStats Stats() const override {
    std::lock_guard lock(mu_);
    return index_.stats();
  }
  std::string_view backend() const override { return "directory"; }

 private:
  std::string FanoutDir(const Digest& d) const { return JoinPath(blobs_dir_, d.Hex().substr(0, 2)); }
  std::string BlobPath(const Digest& d) const { return JoinPath(FanoutDir(d), d.Hex()); }
  Status CheckMarker();
  Status ScanBlobs(std::vector<ScannedFile>* files);
  Status ScanFanout(const std::string& sub_dir, std::string_view prefix, std::vector<ScannedFile>* files);
  Status Rebuild(const std::vector<ScannedFile>& files, internal::JournalState& journal);
  // The blob file's payload, verified; `size_bytes` is the size the index holds for it (a file
  // larger than that is refused by its size, unread).
  Result<std::string> ReadVerified(const Digest& digest, const std::string& path, uint64_t size_bytes);
  Status AdjustPins(const Digest& digest, int delta);
  // Drops LRU victims past the capacity (never `keep`). Best effort: a victim whose removal fails
  // stays stored and indexed, and the call that triggered it still succeeds. REQUIRES: mu_ held.
  void EvictLocked(const Digest* keep);
  // Rewrites the journal with every inline payload and pin count except `drop`'s. REQUIRES: mu_.
  Status ScrubJournalLocked(const Digest& drop);
  // Removes the stored copy of `digest` (file or inline record). REQUIRES: mu_ held.
  Status DropStorageLocked(const Digest& digest, bool sync_dir);

  const std::string dir_;
  const BlobStoreOptions options_;
  Env* const env_;
  std::unique_ptr<FileLock> lock_;  // declared before journal_: released after it closes
  std::string blobs_dir_, tmp_dir_;
  mutable std::mutex mu_;
  BlobIndex index_;                                  // GUARDED_BY(mu_)
  std::unique_ptr<internal::BlobJournal> journal_;  // GUARDED_BY(mu_)
  std::unordered_map<Digest, std::string> corrupt_;  // GUARDED_BY(mu_): digest → why its file was rejected
};

Status DirectoryBlobStore::CheckMarker() {
  const std::string marker = JoinPath(dir_, internal::kStoreMarkerFile);
  Result<std::string> text = env_->ReadFile(marker);
  if (!text.has_value() && text.error().code() == StatusCode::kNotFound) {
    // A new store: refuse to adopt a directory that holds anything a store would not have made.
    FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> entries, env_->ListDir(dir_));
    for (const auto& e : entries) {
      if (e.name != internal::kTmpDir && e.name != internal::kBlobsDir && e.name != internal::kJournalFile &&
          e.name != internal::kLockFile) {
        return FailedPrecondition("'" + dir_ + "' is not empty and has no " + std::string(internal::kStoreMarkerFile) +
                                  " marker (found '" + e.name + "'); refusing to use it as a blob store");
      }
    }
    FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, tmp_dir_, options_.sync));
    const std::string line = std::string(internal::kStoreMarkerPrefix) + std::to_string(internal::kStoreFormatVersion) + "\n";
    return internal::AtomicWriteFile(env_, tmp_dir_, marker, {line}, options_.sync);
  }
  if (!text.has_value()) return text.error();
  const std::string_view t = *text;
  if (!t.starts_with(internal::kStoreMarkerPrefix) || !t.ends_with("\n")) {
    return Corruption("store marker '" + marker + "' is not a fak blob store marker");
  }
  const std::string_view ver = t.substr(internal::kStoreMarkerPrefix.size(), t.size() - internal::kStoreMarkerPrefix.size() - 1);
  if (ver != std::to_string(internal::kStoreFormatVersion)) {
    return Unsupported("store '" + dir_ + "' has format version '" + std::string(ver) + "'; this build reads " +
                       std::to_string(internal::kStoreFormatVersion));
  }
  return Status::Ok();
}

Status DirectoryBlobStore::Open() {
  blobs_dir_ = JoinPath(dir_, internal::kBlobsDir);
  tmp_dir_ = JoinPath(dir_, internal::kTmpDir);
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, dir_, options_.sync));
  const std::string lock_path = JoinPath(dir_, internal::kLockFile);
  Result<std::unique_ptr<FileLock>> held = env_->LockFile(lock_path);
  if (!held.has_value()) {
    if (held.error().code() != StatusCode::kFailedPrecondition) return held.error();
    return FailedPrecondition("blob store '" + dir_ + "' is in use by another opener (" + std::string(held.error().message()) +
                              "); close it first");
  }
  lock_ = std::move(*held);
  FAK_RETURN_IF_ERROR(CheckMarker());
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, tmp_dir_, options_.sync));
  // Anything left in tmp/ was never renamed into place, so it was never acknowledged.
  FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> leftovers, env_->ListDir(tmp_dir_));
  for (const auto& e : leftovers) {
    FAK_RETURN_IF_ERROR(env_->RemoveFile(JoinPath(tmp_dir_, e.name)));
  }
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, blobs_dir_, options_.sync));
  std::vector<ScannedFile> files;
  FAK_RETURN_IF_ERROR(ScanBlobs(&files));
  internal::JournalState journal;
  FAK_ASSIGN_OR_RETURN(journal_, internal::BlobJournal::Open(env_, JoinPath(dir_, internal::kJournalFile), tmp_dir_,
                                                             options_.sync, options_.salvage_journal, &journal));
  std::lock_guard lock(mu_);
  return Rebuild(files, journal);
}

Status DirectoryBlobStore::ScanBlobs(std::vector<ScannedFile>* files) {
  FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> subs, env_->ListDir(blobs_dir_));
  for (const auto& sub : subs) {
    // A fan-out entry must be a real directory named by two hex digits; a symlink here could lead
    // reads outside the store, so it is rejected, not followed.
    if (!sub.is_dir || sub.name.size() != 2 || !IsLowerHex(sub.name)) {
      ++index_.mutable_stats().n_corrupt_files;
      continue;
    }
    FAK_RETURN_IF_ERROR(ScanFanout(JoinPath(blobs_dir_, sub.name), sub.name, files));
  }
  return Status::Ok();
}

Status DirectoryBlobStore::ScanFanout(const std::string& sub_dir, std::string_view prefix, std::vector<ScannedFile>* files) {
  FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> entries, env_->ListDir(sub_dir));
  for (const auto& e : entries) {
    const std::string path = JoinPath(sub_dir, e.name);
    Result<Digest> digest = Digest::FromHex(e.name);
    if (!digest.has_value() || !IsLowerHex(e.name) || !e.name.starts_with(prefix)) {
      ++index_.mutable_stats().n_corrupt_files;  // not a blob name: left alone, never served
      continue;
    }
    Status bad;
    if (!e.is_regular) {
      bad = Corruption("blob path '" + path + "' is not a regular file (symbolic links are never followed)");
    } else {
      // The header only: open stays cheap however large the blobs are. Unreadable = damaged.
      Result<std::string> header = env_->ReadFilePrefix(path, internal::kBlobHeaderBytes);
      Result<uint64_t> size = CheckBlobHeader(header.has_value() ? *header : std::string(), *digest, e.size_bytes, path);
      if (size.has_value()) {
        files->push_back(ScannedFile{e.mtime_ns, *digest, *size});
        continue;
      }
      bad = size.error();
    }
    ++index_.mutable_stats().n_corrupt_files;
    corrupt_[*digest] = std::string(bad.message());
  }
  return Status::Ok();
}

Status DirectoryBlobStore::Rebuild(const std::vector<ScannedFile>& scanned, internal::JournalState& journal) {
  std::vector<ScannedFile> files = scanned;
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) { return a.mtime_ns < b.mtime_ns; });
  for (const ScannedFile& f : files) index_.Insert(f.digest, f.size_bytes, std::nullopt);  // oldest first = LRU
  std::vector<std::pair<uint64_t, Digest>> order;
  for (const auto& [d, in] : journal.inline_payloads) order.emplace_back(in.seq, d);
  std::sort(order.begin(), order.end());
  for (const auto& [seq, d] : order) {
    if (index_.Find(d) == nullptr) index_.Insert(d, journal.inline_payloads[d].payload.size(), journal.inline_payloads[d].payload);
  }
  std::erase_if(journal.pins, [&](const auto& p) { return index_.Find(p.first) == nullptr; });
  for (const auto& [d, pins] : journal.pins) index_.SetPins(d, pins);
  BlobStoreStats& st = index_.mutable_stats();
  st.n_corrupt_records = journal.n_corrupt_records;
  st.torn_tail_bytes = journal.torn_tail_bytes;
  // Compact when superseded records outnumber live ones.
  const uint64_t live = journal.inline_payloads.size() + journal.pins.size();
  if (journal.n_records > 1024 && journal.n_records > 2 * live) FAK_RETURN_IF_ERROR(journal_->Rewrite(journal));
  EvictLocked(nullptr);
  return Status::Ok();
}

Result<Digest> DirectoryBlobStore::Put(std::string_view bytes) {
  const Digest digest = Digest::Of(bytes);
  {
    std::lock_guard lock(mu_);
    ++index_.mutable_stats().n_puts;
    if (index_.Find(digest) != nullptr) {
      ++index_.mutable_stats().n_dedup_hits;
      index_.Touch(digest);
      return digest;
    }
    if (bytes.size() <= kInlineMaxBytes) {
      FAK_RETURN_IF_ERROR(journal_->Append(RecordType::kInlinePut, digest, bytes));
      index_.Insert(digest, bytes.size(), std::string(bytes));
      EvictLocked(&digest);  // the blob is durable and indexed: the Put has happened
      return digest;
    }
  }
  // Large blob: write outside the lock. Two racing writers of one digest rename identical files.
  FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, FanoutDir(digest), options_.sync));
  FAK_RETURN_IF_ERROR(internal::AtomicWriteFile(env_, tmp_dir_, BlobPath(digest), {EncodeBlobHeader(digest, bytes.size()), bytes},
                                                options_.sync));
  std::lock_guard lock(mu_);
  corrupt_.erase(digest);
  if (index_.Find(digest) == nullptr) index_.Insert(digest, bytes.size(), std::nullopt);
  EvictLocked(&digest);
  return digest;
}

Result<std::string> DirectoryBlobStore::Get(const Digest& digest) {
  uint64_t size_bytes = 0;  // what the index recorded for the blob's file
  {
    std::lock_guard lock(mu_);
    ++index_.mutable_stats().n_gets;
    const BlobIndex::Entry* e = index_.Find(digest);
    if (e == nullptr) {
      auto bad = corrupt_.find(digest);
      if (bad != corrupt_.end()) return Corruption(bad->second);
      return NotFound("blob " + digest.Hex() + " is not in the store at '" + dir_ + "'");
    }
    index_.Touch(digest);
    size_bytes = e->size_bytes;
    if (e->has_payload) {
      std::string payload = e->payload;
      if (Digest::Of(payload) == digest) return payload;
      ++index_.mutable_stats().n_verify_failures;
      return VerificationFailed("inline blob " + digest.Hex() + " does not hash to its digest");
    }
  }
  Result<std::string> payload = ReadVerified(digest, BlobPath(digest), size_bytes);
  const StatusCode code = payload.has_value() ? StatusCode::kOk : payload.error().code();
  if (code == StatusCode::kCorruption || code == StatusCode::kVerificationFailed) {
    std::lock_guard lock(mu_);
    ++index_.mutable_stats().n_verify_failures;
    // Take it out of service; a Put of the true bytes rewrites the file.
    if (const BlobIndex::Entry* e = index_.Find(digest); e != nullptr && e->pins == 0 && !e->has_payload) {
      index_.Erase(digest);
      corrupt_[digest] = std::string(payload.error().message());
    }
  }
  return payload;
}

Result<std::string> DirectoryBlobStore::ReadVerified(const Digest& digest, const std::string& path, uint64_t size_bytes) {
  // Replaced since it was indexed (a file's size is its writer's word): a larger file is not read.
  Result<std::string> file = internal::ReadFileAtMost(env_, path, internal::kBlobHeaderBytes + size_bytes, StatusCode::kCorruption);
  if (!file.has_value()) {
    if (file.error().code() == StatusCode::kNotFound) return NotFound("blob " + digest.Hex() + " was removed from '" + dir_ + "'");
    return file.error();
  }
  // The header's size must match the file's length, so what follows it is the whole payload.
  FAK_RETURN_IF_ERROR(CheckBlobHeader(*file, digest, file->size(), path).status());
  std::string out = std::move(*file);
  out.erase(0, internal::kBlobHeaderBytes);
  if (Digest::Of(out) != digest) return VerificationFailed("blob file '" + path + "': content does not hash to " + digest.Hex());
  return out;
}

Status DirectoryBlobStore::AdjustPins(const Digest& digest, int delta) {
  const char* what = delta > 0 ? "Pin" : "Unpin";
  std::lock_guard lock(mu_);
  const BlobIndex::Entry* e = index_.Find(digest);
  if (e == nullptr) return NotFound(std::string(what) + ": blob " + digest.Hex() + " is not in the store");
  if (delta < 0 && e->pins == 0) return FailedPrecondition("Unpin: blob " + digest.Hex() + " is not pinned");
  const uint32_t pins = e->pins + delta;
  std::string count;
  for (int i = 0; i < 4; ++i) count.push_back(static_cast<char>((pins >> (8 * i)) & 0xff));
  FAK_RETURN_IF_ERROR(journal_->Append(RecordType::kPinCount, digest, count));
  index_.SetPins(digest, pins);
  return Status::Ok();
}

Status DirectoryBlobStore::Remove(const Digest& digest) {
  std::lock_guard lock(mu_);
  const BlobIndex::Entry* e = index_.Find(digest);
  if (e == nullptr) return NotFound("Remove: blob " + digest.Hex() + " is not in the store");
  if (e->pins > 0) return FailedPrecondition("Remove: blob " + digest.Hex() + " is pinned");
  // An inline payload lives in the journal among others: a removal record would leave its bytes
  // there, so the journal is rewritten without them (cost: the live inline bytes, per Remove).
  FAK_RETURN_IF_ERROR(e->has_payload ? ScrubJournalLocked(digest) : DropStorageLocked(digest, options_.sync));
  index_.Erase(digest);
  return Status::Ok();
}

Status DirectoryBlobStore::ScrubJournalLocked(const Digest& drop) {
  internal::JournalState live;
  uint64_t seq = 0;
  for (const Digest& d : index_.RecencyOrder()) {
    if (d == drop) continue;
    const BlobIndex::Entry* e = index_.Find(d);
    if (e->has_payload) live.inline_payloads[d] = internal::JournalState::Inline{seq++, e->payload};
    if (e->pins > 0) live.pins[d] = e->pins;
  }
  return journal_->Rewrite(live);
}

Status DirectoryBlobStore::DropStorageLocked(const Digest& digest, bool sync_dir) {
  const BlobIndex::Entry* e = index_.Find(digest);
  if (e->has_payload) return journal_->Append(RecordType::kRemove, digest, {});
  const std::string path = BlobPath(digest);
  Status removed = env_->RemoveFile(path);
  if (!removed.ok() && removed.code() != StatusCode::kNotFound) return removed;
  return sync_dir ? env_->SyncDir(FanoutDir(digest)) : Status::Ok();
}

void DirectoryBlobStore::EvictLocked(const Digest* keep) {
  for (const Digest& victim : index_.EvictionVictims(keep)) {
    // An eviction need not be durable: a victim that reappears after a crash is merely cached.
    // A failed one leaves the victim whole (the journal rolls back), so stop and keep it.
    if (!DropStorageLocked(victim, /*sync_dir=*/false).ok()) return;
    index_.CountEviction(index_.Find(victim)->size_bytes);
    index_.Erase(victim);
  }
}

}  // namespace

Result<std::unique_ptr<BlobStore>> OpenDirectoryBlobStore(const std::string& dir, const BlobStoreOptions& options) {
  if (dir.empty()) return InvalidArgument("OpenDirectoryBlobStore: dir is empty");
  auto store = std::make_unique<DirectoryBlobStore>(dir, options);
  FAK_RETURN_IF_ERROR(store->Open().WithContext("opening blob store '" + dir + "'"));
  return std::unique_ptr<BlobStore>(std::move(store));
}

}  // namespace fak
