// TierSpiller: bounded write-behind queue from a radix tree's evictions to a KV tier store.
#include "fak/kvtier/tier_spiller.h"

#include <algorithm>

#include "fak/kvtier/slab_file.h"

namespace fak {

Status SpillToTier(KVTierStore& tier, const SpillItem& item) {
  if (item.slab == nullptr) return InvalidArgument("SpillToTier: no slab");
  const KVManifest& m = item.manifest;
  const std::string ns = m.sharing == Sharing::kPublicPrefix ? std::string() : m.tenant;
  const TierKey key = TierKeyFor(m.binding, ns, m.binding.span_digest, m.binding.tokens.end());
  FAK_ASSIGN_OR_RETURN(std::string bytes, EncodeSlabFile(m, item.sources, *item.slab));
  std::vector<Digest> sources;
  for (const SourceSpan& r : item.sources)
    if (std::find(sources.begin(), sources.end(), r.source) == sources.end()) sources.push_back(r.source);
  return tier.Put(key, bytes, sources);
}

TierSpiller::TierSpiller(KVTierStore& tier, TierSpillerOptions options)
    : tier_(tier), options_(options), worker_([this] { Run(); }) {}

TierSpiller::~TierSpiller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void TierSpiller::Offer(SpillItem item, SpillReason) {
  const size_t bytes = item.slab ? item.slab->size_bytes() : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.offered;
    if (stop_ || queue_.size() >= options_.max_queue_items || queued_bytes_ + bytes > options_.max_queue_bytes) {
      ++stats_.dropped;
      return;
    }
    queue_.push_back(std::move(item));
    queued_bytes_ += bytes;
  }
  wake_.notify_one();
}

void TierSpiller::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

TierSpillerStats TierSpiller::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void TierSpiller::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    SpillItem item = std::move(queue_.front());
    queue_.pop_front();
    const size_t bytes = item.slab ? item.slab->size_bytes() : 0;
    queued_bytes_ -= bytes;
    busy_ = true;
    lock.unlock();
    const Status s = SpillToTier(tier_, item);  // encode, checksum and write outside the lock
    item = SpillItem{};
    lock.lock();
    busy_ = false;
    if (s.ok()) {
      ++stats_.written;
      stats_.written_bytes += bytes;
    } else {
      ++stats_.failed;
      stats_.last_error = s.ToString();
    }
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace fak
