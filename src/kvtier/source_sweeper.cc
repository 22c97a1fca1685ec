// SourceSweeper: erase a text's KV from the tree and the tiers; poll the denylist.
#include "fak/kvtier/source_sweeper.h"

#include <algorithm>
#include <set>

namespace fak {

SourceSweeper::SourceSweeper(RadixTree& tree, std::vector<KVTierStore*> tiers, const Denylist& denylist)
    : tree_(tree), tiers_(std::move(tiers)), denylist_(denylist) {}

SourceSweeper::~SourceSweeper() { Stop(); }

Result<SweepReport> SourceSweeper::EraseSource(const Digest& source) {
  SweepReport r;
  r.tree_tokens = tree_.EvictSource(source).n_tokens;
  Status first_error = Status::Ok();
  for (KVTierStore* tier : tiers_) {
    Result<size_t> n = tier->EraseSource(source);
    if (n.has_value()) r.tier_entries += *n;
    else if (first_error.ok()) first_error = n.error().WithContext(std::string(tier->name()) + " tier");
  }
  r.sources_erased = 1;
  if (!first_error.ok()) return first_error;
  return r;
}

Result<SweepReport> SourceSweeper::SweepOnce() {
  std::set<Digest> known;
  for (const Digest& d : tree_.Sources()) known.insert(d);
  Status first_error = Status::Ok();
  for (KVTierStore* tier : tiers_) {
    Result<std::vector<Digest>> s = tier->Sources();
    if (s.has_value()) known.insert(s->begin(), s->end());
    else if (first_error.ok()) first_error = s.error();
  }
  SweepReport total;
  for (const Digest& d : known) {
    Result<bool> listed = denylist_.IsQuarantined(d);
    if (!listed.has_value() || !*listed) continue;
    Result<SweepReport> r = EraseSource(d);
    if (!r.has_value()) {
      if (first_error.ok()) first_error = r.error();
      continue;
    }
    total.sources_erased += 1;
    total.tree_tokens += r->tree_tokens;
    total.tier_entries += r->tier_entries;
  }
  if (!first_error.ok()) return first_error;
  return total;
}

void SourceSweeper::Record(const Result<SweepReport>& r) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.sweeps;
  if (r.has_value()) {
    stats_.sources_erased += r->sources_erased;
    stats_.tree_tokens += r->tree_tokens;
    stats_.tier_entries += r->tier_entries;
  } else {
    ++stats_.errors;
    stats_.last_error = r.error().ToString();
  }
}

Status SourceSweeper::Start(std::chrono::milliseconds interval) {
  std::lock_guard<std::mutex> lock(mu_);
  if (poller_.joinable()) return FailedPrecondition("SourceSweeper::Start: already running");
  if (interval.count() <= 0) return InvalidArgument("SourceSweeper::Start: interval must be positive");
  stop_ = false;
  poller_ = std::thread([this, interval] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      l.unlock();
      Record(SweepOnce());
      l.lock();
      wake_.wait_for(l, interval, [&] { return stop_; });
    }
  });
  return Status::Ok();
}

void SourceSweeper::Stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    t = std::move(poller_);
  }
  wake_.notify_all();
  if (t.joinable()) t.join();
}

SourceSweeperStats SourceSweeper::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace fak
