// The directory KV tier: one slab file per entry, written atomically and durably through the Env.
//
// Layout (docs/kv-tier.md §3): <dir>/slabs/<end>-<key id>.kvslab, temporaries in <dir>/tmp/. The
// end in the name lets Ends() and Get work from a listing without reading any entry.
//
// Capacity (max_bytes): an in-memory LRU of the entries — size and a recency tick, seeded at open
// from the files' mtimes (the Env cannot set an mtime on read, so reads are remembered in memory
// only) — trimmed after each Put.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/slab_file.h"
#include "src/store/store_files.h"

namespace fak {
namespace {

constexpr std::string_view kSuffix = ".kvslab";

std::string FileName(const TierKey& key) { return std::to_string(key.end) + "-" + key.id + std::string(kSuffix); }

// Parses "<end>-<64 hex>.kvslab"; false for anything else (temporaries, strays).
bool ParseName(const std::string& name, TierKey* key) {
  if (name.size() < kSuffix.size() + 66 || name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return false;
  const size_t dash = name.find('-');
  if (dash == std::string::npos || dash == 0 || dash > 20 || name.size() - kSuffix.size() - dash - 1 != 64) return false;
  uint64_t end = 0;
  for (size_t i = 0; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    end = end * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  const std::string id = name.substr(dash + 1, 64);
  if (!Digest::FromHex(id).has_value()) return false;
  *key = TierKey{id, end};
  return true;
}

// The source digests recorded in a slab file's (checksummed) sources section, read from its first
// bytes; empty when the file is damaged (it is then never served: page-in re-verifies everything).
std::vector<Digest> ReadSources(Env* env, const std::string& path) {
  Result<std::string> head = env->ReadFilePrefix(path, kSlabFileHeaderBytes);
  if (!head.has_value() || head->size() < kSlabFileHeaderBytes) return {};
  uint64_t len[2];
  std::memcpy(len, head->data() + 16, sizeof(len));  // manifest and sources lengths
  if (len[0] > (uint64_t{1} << 20) || len[1] > (uint64_t{1} << 24)) return {};
  Result<std::string> bytes = env->ReadFilePrefix(path, kSlabFileHeaderBytes + len[0] + len[1]);
  if (!bytes.has_value() || bytes->size() != kSlabFileHeaderBytes + len[0] + len[1]) return {};
  Digest want;
  std::memcpy(want.bytes.data(), head->data() + 16 + 4 * 8 + Digest::kSize, Digest::kSize);
  const std::string_view sec = std::string_view(*bytes).substr(kSlabFileHeaderBytes + len[0]);
  if (Digest::Of(sec) != want || sec.size() < 8) return {};
  std::vector<Digest> out;
  for (size_t at = 8; at + 16 + Digest::kSize <= sec.size(); at += 16 + Digest::kSize) {
    Digest d;
    std::memcpy(d.bytes.data(), sec.data() + at + 16, Digest::kSize);
    out.push_back(d);
  }
  return out;
}

class DirectoryKVTier final : public KVTierStore {
 public:
  DirectoryKVTier(Env* env, std::string dir, const DirectoryKVTierOptions& options)
      : env_(env), dir_(std::move(dir)), slabs_(dir_ + "/slabs"), tmp_(dir_ + "/tmp"), options_(options) {}

  Status Open() {
    FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, dir_, true));
    FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, slabs_, true));
    FAK_RETURN_IF_ERROR(internal::EnsureDir(env_, tmp_, true));
    FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> files, env_->ListDir(slabs_));
    for (const FileInfo& f : files) {
      TierKey key;
      if (!f.is_regular || !ParseName(f.name, &key)) continue;
      for (const Digest& s : ReadSources(env_, slabs_ + "/" + f.name)) by_source_[s].insert(key);
      Track(key, f.size_bytes, f.mtime_ns);
    }
    return Status::Ok();
  }

  std::string_view name() const override { return "directory"; }

  Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_RETURN_IF_ERROR(internal::AtomicWriteFile(env_, tmp_, Path(key), {bytes}, /*sync=*/true));
    std::lock_guard<std::mutex> lock(mu_);
    for (const Digest& s : sources) by_source_[s].insert(key);
    Track(key, bytes.size(), next_tick_++);
    return EvictToBound(key);
  }

  using KVTierStore::Get;
  Result<std::string> Get(const TierKey& key, uint64_t max_bytes) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    max_bytes = std::min(max_bytes, kMaxTierEntryBytes);
    // The file's size is checked before a byte is read: a sparse file can claim any size for free.
    FAK_ASSIGN_OR_RETURN(FileInfo info, env_->GetFileInfo(Path(key)));
    if (info.size_bytes > max_bytes) {
      return ResourceExhausted("directory kv tier: entry " + FileName(key) + " is " + std::to_string(info.size_bytes) +
                               " bytes, more than the " + std::to_string(max_bytes) + " a reader accepts; not read");
    }
    // Bounded again: the file may have grown since (a longer read would be refused by its header).
    Result<std::string> bytes = env_->ReadFilePrefix(Path(key), static_cast<size_t>(max_bytes));
    if (bytes.has_value()) {
      std::lock_guard<std::mutex> lock(mu_);
      Track(key, bytes->size(), next_tick_++);
    }
    return bytes;
  }

  Result<std::vector<uint64_t>> Ends() override {
    // A listing, so entries another process (or a restart) wrote are found too.
    FAK_ASSIGN_OR_RETURN(std::vector<FileInfo> files, env_->ListDir(slabs_));
    std::set<uint64_t> ends;
    for (const FileInfo& f : files) {
      TierKey key;
      if (f.is_regular && ParseName(f.name, &key)) ends.insert(key.end);
    }
    return std::vector<uint64_t>(ends.begin(), ends.end());
  }

  Status Remove(const TierKey& key) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_RETURN_IF_ERROR(env_->RemoveFile(Path(key)));
    FAK_RETURN_IF_ERROR(env_->SyncDir(slabs_));
    std::lock_guard<std::mutex> lock(mu_);
    Forget(key);
    return Status::Ok();
  }

  Result<std::vector<TierKey>> KeysFromSource(const Digest& source) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_source_.find(source);
    if (it == by_source_.end()) return std::vector<TierKey>{};
    return std::vector<TierKey>(it->second.begin(), it->second.end());
  }

  Result<std::vector<Digest>> Sources() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Digest> out;
    for (const auto& [source, keys] : by_source_)
      if (!keys.empty()) out.push_back(source);
    return out;
  }

  Result<size_t> EraseSource(const Digest& source) override {
    FAK_ASSIGN_OR_RETURN(std::vector<TierKey> keys, KeysFromSource(source));
    size_t removed = 0;
    for (const TierKey& key : keys) {
      Status s = Remove(key);
      if (s.ok()) ++removed;
      else if (s.code() != StatusCode::kNotFound) return s;
    }
    std::lock_guard<std::mutex> lock(mu_);
    by_source_.erase(source);
    return removed;
  }

 private:
  std::string Path(const TierKey& key) const { return slabs_ + "/" + FileName(key); }

  struct Tracked {
    uint64_t bytes = 0;
    int64_t tick = 0;  // recency: larger = more recent
  };

  // Records (or refreshes) an entry's size and recency. REQUIRES(mu_)
  void Track(const TierKey& key, uint64_t bytes, int64_t tick) {
    auto [it, added] = entries_.try_emplace(key);
    if (!added) {
      total_bytes_ -= it->second.bytes;
      by_recency_.erase({it->second.tick, key});
    }
    it->second = {bytes, tick};
    total_bytes_ += bytes;
    by_recency_.insert({tick, key});
    next_tick_ = std::max(next_tick_, tick + 1);
  }

  // Drops an entry from the LRU and the source index. REQUIRES(mu_)
  void Forget(const TierKey& key) {
    if (auto it = entries_.find(key); it != entries_.end()) {
      total_bytes_ -= it->second.bytes;
      by_recency_.erase({it->second.tick, key});
      entries_.erase(it);
    }
    for (auto& [source, keys] : by_source_) keys.erase(key);
  }

  // Removes least recently used entries other than `keep` until the rest fit max_bytes. REQUIRES(mu_)
  // (the removals are a few unlinks and one directory fsync; holding the lock keeps the index and
  // the files in step).
  Status EvictToBound(const TierKey& keep) {
    if (options_.max_bytes == 0) return Status::Ok();
    bool removed = false;
    Status failed;
    for (auto it = by_recency_.begin(); total_bytes_ > options_.max_bytes && it != by_recency_.end();) {
      const TierKey victim = it->second;
      if (victim == keep) {
        ++it;
        continue;
      }
      Status s = env_->RemoveFile(Path(victim));
      if (!s.ok() && s.code() != StatusCode::kNotFound) {  // gone already (another process) is fine
        failed = IOError("directory kv tier: stored " + FileName(keep) + ", but could not evict " + FileName(victim) +
                         " to stay under max_bytes " + std::to_string(options_.max_bytes) + ": " + s.ToString());
        break;
      }
      ++it;
      Forget(victim);
      removed = true;
    }
    if (removed) {
      if (Status s = env_->SyncDir(slabs_); !s.ok() && failed.ok()) failed = s;
    }
    return failed;
  }

  Env* const env_;
  const std::string dir_, slabs_, tmp_;
  const DirectoryKVTierOptions options_;
  std::mutex mu_;
  std::map<Digest, std::set<TierKey>> by_source_;  // GUARDED_BY(mu_)
  std::map<TierKey, Tracked> entries_;             // GUARDED_BY(mu_)
  std::set<std::pair<int64_t, TierKey>> by_recency_;  // GUARDED_BY(mu_): (tick, key), oldest first
  uint64_t total_bytes_ = 0;                          // GUARDED_BY(mu_)
  int64_t next_tick_ = 1;                             // GUARDED_BY(mu_)
};

}  // namespace

Result<std::unique_ptr<KVTierStore>> OpenDirectoryKVTier(const std::string& dir, Env* env) {
  return OpenDirectoryKVTier(dir, DirectoryKVTierOptions{}, env);
}

Result<std::unique_ptr<KVTierStore>> OpenDirectoryKVTier(const std::string& dir, const DirectoryKVTierOptions& options, Env* env) {
  if (dir.empty()) return InvalidArgument("OpenDirectoryKVTier: empty directory path");
  auto tier = std::make_unique<DirectoryKVTier>(env != nullptr ? env : Env::Default(), dir, options);
  FAK_RETURN_IF_ERROR(tier->Open());
  return std::unique_ptr<KVTierStore>(std::move(tier));
}

}  // namespace fak
