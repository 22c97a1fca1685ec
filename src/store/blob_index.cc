// BlobIndex: entries, pin counts and LRU order; the default batch calls of BlobStore.
#include "src/store/blob_index.h"

namespace fak {

Result<std::vector<Digest>> BlobStore::PutMany(std::span<const std::string_view> payloads) {
  std::vector<Digest> out;
  out.reserve(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    Result<Digest> d = Put(payloads[i]);
    if (!d.has_value()) return d.error().WithContext("PutMany: payload " + std::to_string(i));
    out.push_back(*d);
  }
  return out;
}

std::vector<Result<std::string>> BlobStore::GetMany(std::span<const Digest> digests) {
  std::vector<Result<std::string>> out;
  out.reserve(digests.size());
  for (const Digest& d : digests) out.push_back(Get(d));
  return out;
}

}  // namespace fak

namespace fak::internal {

BlobIndex::Entry* BlobIndex::Find(const Digest& digest) {
  auto it = entries_.find(digest);
  return it == entries_.end() ? nullptr : &it->second;
}

const BlobIndex::Entry* BlobIndex::Find(const Digest& digest) const {
  auto it = entries_.find(digest);
  return it == entries_.end() ? nullptr : &it->second;
}

void BlobIndex::Touch(const Digest& digest) {
  Entry* e = Find(digest);
  if (e == nullptr || e->pins > 0) return;
  lru_.splice(lru_.end(), lru_, e->lru);
}

BlobIndex::Entry& BlobIndex::Insert(const Digest& digest, uint64_t size_bytes, std::optional<std::string> payload) {
  Entry& e = entries_[digest];
  e.size_bytes = size_bytes;
  e.has_payload = payload.has_value();
  if (payload) e.payload = std::move(*payload);
  e.lru = lru_.insert(lru_.end(), digest);
  ++stats_.n_blobs;
  if (size_bytes <= kInlineMaxBytes) ++stats_.n_inline;
  stats_.size_bytes += size_bytes;
  return e;
}

void BlobIndex::Erase(const Digest& digest) {
  auto it = entries_.find(digest);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  if (e.pins > 0) {
    --stats_.n_pinned;
    stats_.pinned_bytes -= e.size_bytes;
  } else {
    lru_.erase(e.lru);
  }
  --stats_.n_blobs;
  if (e.size_bytes <= kInlineMaxBytes) --stats_.n_inline;
  stats_.size_bytes -= e.size_bytes;
  entries_.erase(it);
}

void BlobIndex::SetPins(const Digest& digest, uint32_t pins) {
  Entry* e = Find(digest);
  if (e == nullptr || e->pins == pins) return;
  if (e->pins == 0) {  // becoming pinned: leave the LRU list
    lru_.erase(e->lru);
    ++stats_.n_pinned;
    stats_.pinned_bytes += e->size_bytes;
  } else if (pins == 0) {  // becoming unpinned: most recently used
    e->lru = lru_.insert(lru_.end(), digest);
    --stats_.n_pinned;
    stats_.pinned_bytes -= e->size_bytes;
  }
  e->pins = pins;
}

std::vector<Digest> BlobIndex::EvictionVictims(const Digest* keep) const {
  std::vector<Digest> victims;
  uint64_t held = stats_.size_bytes;
  for (auto it = lru_.begin(); it != lru_.end() && held > stats_.capacity_bytes; ++it) {
    if (keep != nullptr && *it == *keep) continue;
    held -= entries_.at(*it).size_bytes;
    victims.push_back(*it);
  }
  return victims;
}

std::vector<Digest> BlobIndex::Digests() const {
  std::vector<Digest> out;
  out.reserve(entries_.size());
  for (const auto& [d, e] : entries_) out.push_back(d);
  return out;
}

std::vector<Digest> BlobIndex::RecencyOrder() const {
  std::vector<Digest> out;
  out.reserve(entries_.size());
  for (const auto& [d, e] : entries_) {
    if (e.pins > 0) out.push_back(d);
  }
  out.insert(out.end(), lru_.begin(), lru_.end());
  return out;
}

}  // namespace fak::internal
