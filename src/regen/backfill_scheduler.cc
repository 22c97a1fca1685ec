// BackfillScheduler: live steps first, backfill prefill in bounded chunks, throttled by a measured
// p99 of live per-token latency (AIMD on the chunk quantum, exponential cooldown on interleaving).
#include <algorithm>
#include <chrono>

#include "fak/regen/regen.h"

namespace fak {
namespace {

class SteadyClockImpl final : public SchedulerClock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

constexpr int64_t kMaxCooldownFactor = 64;

}  // namespace

SchedulerClock& SteadyClock() {
  static SteadyClockImpl clock;
  return clock;
}

BackfillScheduler::BackfillScheduler(SchedulerClock& clock, BackfillSchedulerOptions options)
    : clock_(&clock), options_(std::move(options)) {
  options_.min_chunk_tokens = std::max<size_t>(1, options_.min_chunk_tokens);
  options_.chunk_tokens = std::max(options_.chunk_tokens, options_.min_chunk_tokens);
  options_.window = std::max<size_t>(1, options_.window);
  options_.min_samples = std::clamp<size_t>(options_.min_samples, 1, options_.window);
  chunk_tokens_ = options_.chunk_tokens;
  cooldown_ns_ = options_.cooldown_ns;
  window_.reserve(options_.window);
  bare_.reserve(options_.window);
}

BackfillScheduler::~BackfillScheduler() { Stop(); }

void BackfillScheduler::SubmitLive(std::unique_ptr<LiveTask> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.push_back(LiveEntry{std::move(task), next_seq_++, clock_->NowNanos(), false});
  }
  cv_.notify_all();
}

void BackfillScheduler::SubmitBackfill(std::unique_ptr<BackfillTask> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (task == nullptr || task->done()) return;
    backfill_.push_back(std::move(task));
  }
  cv_.notify_all();
}

bool BackfillScheduler::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.empty() && backfill_.empty();
}

namespace {

int64_t P99(const std::vector<int64_t>& ring) {
  if (ring.empty()) return 0;
  std::vector<int64_t> v = ring;
  const size_t k = (v.size() * 99 + 99) / 100 - 1;  // ceil(0.99 n) - 1
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void PushRing(std::vector<int64_t>* ring, size_t* next, size_t capacity, int64_t value) {
  if (ring->size() < capacity) {
    ring->push_back(value);
  } else {
    (*ring)[*next] = value;
  }
  *next = (*next + 1) % capacity;
}

}  // namespace

// One live per-token sample: judge the SLO once the window has enough samples.
void BackfillScheduler::RecordLive(int64_t latency_ns, int64_t bare_ns, int64_t now_ns) {
  PushRing(&window_, &window_next_, options_.window, latency_ns);
  PushRing(&bare_, &bare_next_, options_.window, bare_ns);
  if (options_.slo_p99_ns <= 0 || window_.size() < options_.min_samples) return;
  if (P99(window_) > options_.slo_p99_ns) {
    ++stats_.throttle_events;
    chunk_tokens_ = std::max(options_.min_chunk_tokens, chunk_tokens_ / 2);
    throttled_until_ns_ = now_ns + cooldown_ns_;
    cooldown_ns_ = std::min(cooldown_ns_ * 2, options_.cooldown_ns * kMaxCooldownFactor);
    window_.clear();  // judge the next window on samples taken after the adjustment
    window_next_ = 0;
    clean_samples_ = 0;
  } else if (++clean_samples_ >= options_.window) {
    chunk_tokens_ = std::min(options_.chunk_tokens, chunk_tokens_ + std::max<size_t>(1, chunk_tokens_ / 4));
    cooldown_ns_ = options_.cooldown_ns;
    clean_samples_ = 0;
  }
}

// Tokens of one chunk that fit between two live steps without breaking the SLO; 0 = none.
size_t BackfillScheduler::InterleaveTokens() const {
  if (options_.slo_p99_ns <= 0) return chunk_tokens_;
  if (ns_per_token_ <= 0 || bare_.empty()) return options_.min_chunk_tokens;  // probe once to measure
  const double room_ns = static_cast<double>(options_.slo_p99_ns - P99(bare_));
  if (room_ns <= 0) return 0;
  const size_t fit = std::min(chunk_tokens_, static_cast<size_t>(room_ns / ns_per_token_));
  return fit >= options_.min_chunk_tokens ? fit : 0;
}

BackfillScheduler::Ran BackfillScheduler::RunOnce() {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  LiveEntry* entry = nullptr;
  size_t quantum = 0;
  bool interleaved = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool have_backfill = !backfill_.empty();
    if (!live_.empty()) {
      if (have_backfill && options_.interleave && chunk_owed_ && clock_->NowNanos() >= throttled_until_ns_) {
        quantum = InterleaveTokens();
        interleaved = quantum > 0;
      }
      if (!interleaved) entry = &live_.front();  // only this thread pops the front (run_mu_ held)
    } else if (have_backfill) {
      quantum = chunk_tokens_;
    }
  }
  if (entry != nullptr) return RunLiveStep(entry);
  if (quantum > 0) return RunChunk(interleaved, quantum);
  return Ran::kNothing;
}

BackfillScheduler::Ran BackfillScheduler::RunLiveStep(LiveEntry* entry) {
  const int64_t start = clock_->NowNanos();
  Result<bool> step = entry->task->Step();
  const int64_t end = clock_->NowNanos();
  LiveStepRecord record{entry->seq, !entry->started, !step.has_value() || *step, entry->ready_ns, start, end};
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.live_steps;
    chunk_owed_ = true;
    if (entry->started) RecordLive(end - entry->ready_ns, end - start, end);
    entry->started = true;
    entry->ready_ns = end;
    if (!step.has_value()) {
      ++stats_.live_errors;
      stats_.last_error = step.error();
    }
    if (record.last) {
      ++stats_.live_tasks_done;
      live_.pop_front();  // `entry` dangles from here on
    }
  }
  if (options_.on_live_step) options_.on_live_step(record);
  return Ran::kLive;
}

BackfillScheduler::Ran BackfillScheduler::RunChunk(bool interleaved, size_t quantum) {
  BackfillTask* task = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    task = backfill_.front().get();  // only RunOnce (under run_mu_) pops backfill tasks
  }
  const int64_t start = clock_->NowNanos();
  Result<size_t> ran = task->RunChunk(quantum);
  const int64_t elapsed = clock_->NowNanos() - start;
  std::lock_guard<std::mutex> lock(mu_);
  chunk_owed_ = false;
  ++stats_.backfill_chunks;
  if (interleaved) ++stats_.interleaved_chunks;
  if (!ran.has_value()) {
    ++stats_.backfill_errors;
    stats_.last_error = ran.error();
    backfill_.pop_front();
    return Ran::kBackfill;
  }
  if (*ran > 0) {
    const double per_token = static_cast<double>(elapsed) / static_cast<double>(*ran);
    ns_per_token_ = ns_per_token_ <= 0 ? per_token : 0.75 * ns_per_token_ + 0.25 * per_token;
  }
  stats_.backfill_tokens += *ran;
  if (task->done() || *ran == 0) {
    ++stats_.backfill_tasks_done;
    backfill_.pop_front();
  }
  return Ran::kBackfill;
}

size_t BackfillScheduler::RunUntilIdle() {
  size_t n = 0;
  while (RunOnce() != Ran::kNothing) ++n;
  return n;
}

Status BackfillScheduler::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_.joinable()) return FailedPrecondition("BackfillScheduler: worker already started");
  stop_ = false;
  worker_ = std::thread([this] {
    for (;;) {
      if (RunOnce() != Ran::kNothing) continue;
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) return;
      // Wake on a submission, or after a millisecond (a throttle cooldown may have ended).
      cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_ || !live_.empty() || !backfill_.empty(); });
      if (stop_) return;
    }
  });
  return Status::Ok();
}

void BackfillScheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

BackfillSchedulerStats BackfillScheduler::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BackfillSchedulerStats s = stats_;
  s.chunk_tokens = chunk_tokens_;
  s.live_p99_ns = P99(window_);
  s.backfill_ns_per_token = ns_per_token_;
  s.pending_live = live_.size();
  s.pending_backfill = backfill_.size();
  for (const auto& t : backfill_) s.pending_backfill_tokens += t->remaining_tokens();
  return s;
}

}  // namespace fak
