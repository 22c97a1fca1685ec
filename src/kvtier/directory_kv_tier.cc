// The directory KV tier: one slab file per entry, written atomically and durably through the Env.
//
// Layout (docs/kv-tier.md §3): <dir>/slabs/<end>-<key id>.kvslab, temporaries in <dir>/tmp/. The
// end in the name lets Ends() and Get work from a listing without reading any entry.
//
// Capacity (max_bytes, max_bytes_per_namespace): an in-memory LRU of the entries — size, namespace
// and a recency tick, seeded at open from the files' mtimes (the Env cannot set an mtime on read,
// so reads are remembered in memory only) — trimmed after each Put.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <span>

#include "fak/kvtier/kv_tier_store.h"
#include "fak/gate/kv_manifest.h"
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

// What the directory tier indexes of an entry, read from its slab file's first sections: the
// source digests (the checksummed sources section) and the namespace (the manifest's tenant; ""
// for a public prefix). Damaged sections give no sources (the entry is then never served: page-in
// re-verifies everything) and the namespace "" (it counts against no tenant's share).
struct EntryHead {
  std::vector<Digest> sources;
  std::string ns;
};

// Section lengths bounded before anything is read past the header.
constexpr uint64_t kMaxManifestSection = uint64_t{1} << 20, kMaxSourcesSection = uint64_t{1} << 24;

// `bytes`: at least the header; the head is read from as much of the sections as it holds.
EntryHead ParseEntryHead(std::string_view bytes) {
  EntryHead head;
  if (bytes.size() < kSlabFileHeaderBytes) return head;
  uint64_t len[2];
  std::memcpy(len, bytes.data() + 16, sizeof(len));  // manifest and sources lengths
  if (len[0] > kMaxManifestSection || len[1] > kMaxSourcesSection) return head;
  if (bytes.size() < kSlabFileHeaderBytes + len[0] + len[1]) return head;
  if (Result<KVManifest> m = KVManifest::FromJson(bytes.substr(kSlabFileHeaderBytes, len[0]))) {
    if (m->sharing != Sharing::kPublicPrefix) head.ns = m->tenant;
  }
  Digest want;
  std::memcpy(want.bytes.data(), bytes.data() + 16 + 4 * 8 + Digest::kSize, Digest::kSize);
  const std::string_view sec = bytes.substr(kSlabFileHeaderBytes + len[0], len[1]);
  if (Digest::Of(sec) != want || sec.size() < 8) return head;
  for (size_t at = 8; at + 16 + Digest::kSize <= sec.size(); at += 16 + Digest::kSize) {
    Digest d;
    std::memcpy(d.bytes.data(), sec.data() + at + 16, Digest::kSize);
    head.sources.push_back(d);
  }
  return head;
}

EntryHead ReadEntryHead(Env* env, const std::string& path) {
  Result<std::string> header = env->ReadFilePrefix(path, kSlabFileHeaderBytes);
  if (!header.has_value() || header->size() < kSlabFileHeaderBytes) return {};
  uint64_t len[2];
  std::memcpy(len, header->data() + 16, sizeof(len));
  if (len[0] > kMaxManifestSection || len[1] > kMaxSourcesSection) return {};
  Result<std::string> bytes = env->ReadFilePrefix(path, kSlabFileHeaderBytes + len[0] + len[1]);
  return bytes.has_value() ? ParseEntryHead(*bytes) : EntryHead{};
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
      EntryHead head = ReadEntryHead(env_, slabs_ + "/" + f.name);
      for (const Digest& s : head.sources) by_source_[s].insert(key);
      Track(key, f.size_bytes, f.mtime_ns, std::move(head.ns));
    }
    return Status::Ok();
  }

  std::string_view name() const override { return "directory"; }

  Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_RETURN_IF_ERROR(internal::AtomicWriteFile(env_, tmp_, Path(key), {bytes}, /*sync=*/true));
    std::lock_guard<std::mutex> lock(mu_);
    for (const Digest& s : sources) by_source_[s].insert(key);
    Track(key, bytes.size(), next_tick_++, ParseEntryHead(bytes).ns);
    return EvictToBound(key);
  }

  using KVTierStore::Get;
  Result<std::string> Get(const TierKey& key, uint64_t max_bytes) override {
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, Open(key, max_bytes));
    std::string bytes;
    try {
      bytes.resize(file->size());
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("directory kv tier: entry " + FileName(key) + ": cannot allocate " + std::to_string(file->size()) + " bytes");
    }
    FAK_RETURN_IF_ERROR(file->ReadAt(0, std::as_writable_bytes(std::span(bytes))));
    return bytes;
  }

  Result<std::unique_ptr<RandomAccessFile>> Open(const TierKey& key, uint64_t max_bytes) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    max_bytes = std::min(max_bytes, kMaxTierEntryBytes);
    // The size is the open file's, checked before a byte is read: a sparse file can claim any size
    // for free, and a file renamed over this one later does not change what this one holds.
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env_->NewRandomAccessFile(Path(key)));
    if (file->size() > max_bytes) {
      return ResourceExhausted("directory kv tier: entry " + FileName(key) + " is " + std::to_string(file->size()) +
                               " bytes, more than the " + std::to_string(max_bytes) + " a reader accepts; not read");
    }
    std::lock_guard<std::mutex> lock(mu_);
    Track(key, file->size(), next_tick_++, std::nullopt);
    return file;
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
    std::string ns;    // the tenant whose share it counts against ("" for a public prefix)
  };

  // Records (or refreshes) an entry's size, recency and namespace (nullopt: keep the one known; an
  // entry first seen by a Get, written by another process, counts against "" until a Put). REQUIRES(mu_)
  void Track(const TierKey& key, uint64_t bytes, int64_t tick, std::optional<std::string> ns) {
    auto [it, added] = entries_.try_emplace(key);
    if (!added) {
      total_bytes_ -= it->second.bytes;
      ns_bytes_[it->second.ns] -= it->second.bytes;
      by_recency_.erase({it->second.tick, key});
    }
    it->second.bytes = bytes;
    it->second.tick = tick;
    if (ns) it->second.ns = std::move(*ns);
    total_bytes_ += bytes;
    ns_bytes_[it->second.ns] += bytes;
    by_recency_.insert({tick, key});
    next_tick_ = std::max(next_tick_, tick + 1);
  }

  // Drops an entry from the LRU and the source index. REQUIRES(mu_)
  void Forget(const TierKey& key) {
    if (auto it = entries_.find(key); it != entries_.end()) {
      total_bytes_ -= it->second.bytes;
      if ((ns_bytes_[it->second.ns] -= it->second.bytes) == 0) ns_bytes_.erase(it->second.ns);
      by_recency_.erase({it->second.tick, key});
      entries_.erase(it);
    }
    for (auto& [source, keys] : by_source_) keys.erase(key);
  }

  // Removes least recently used entries other than `keep` until the rest fit max_bytes, and those
  // of keep's namespace until it fits max_bytes_per_namespace (one tenant's spills evict its own
  // entries, never another's). REQUIRES(mu_) (the removals are a few unlinks and one directory
  // fsync; holding the lock keeps the index and the files in step).
  Status EvictToBound(const TierKey& keep) {
    const std::string ns = entries_.at(keep).ns;
    const auto over = [&] {
      return (options_.max_bytes != 0 && total_bytes_ > options_.max_bytes) ||
             (options_.max_bytes_per_namespace != 0 && ns_bytes_[ns] > options_.max_bytes_per_namespace);
    };
    bool removed = false;
    Status failed;
    for (auto it = by_recency_.begin(); over() && it != by_recency_.end();) {
      const TierKey victim = it->second;
      const bool global = options_.max_bytes != 0 && total_bytes_ > options_.max_bytes;
      if (victim == keep || (!global && entries_.at(victim).ns != ns)) {
        ++it;
        continue;
      }
      Status s = env_->RemoveFile(Path(victim));
      if (!s.ok() && s.code() != StatusCode::kNotFound) {  // gone already (another process) is fine
        failed = IOError("directory kv tier: stored " + FileName(keep) + ", but could not evict " + FileName(victim) +
                         " to stay under its bound: " + s.ToString());
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
  std::map<std::string, uint64_t> ns_bytes_;          // GUARDED_BY(mu_): bytes per namespace
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
