// BackfillScheduler: live steps first, backfill prefill in bounded chunks, throttled by a measured
// p99 of live per-token latency (AIMD on the chunk quantum, exponential cooldown on interleaving).
#include "fak/regen/backfill_scheduler.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace fak {
namespace {

constexpr int64_t kMaxCooldownFactor = 64;

}  // namespace

struct BackfillScheduler::LiveEntry {
  std::unique_ptr<LiveTask> task;
  uint64_t seq = 0;
  int64_t ready_ns = 0;
  bool started = false;
};

// Everything the worker, the submitters and RunOnce share; kept out of the public header.
struct BackfillScheduler::State {
  std::mutex run_mu;  // serializes RunOnce
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<LiveEntry> live;                          // GUARDED_BY(mu); front is in flight
  std::deque<std::unique_ptr<BackfillTask>> backfill;  // GUARDED_BY(mu)
  uint64_t next_seq = 1;                               // GUARDED_BY(mu)
  bool chunk_owed = false;                             // GUARDED_BY(mu): a live step ran since the last chunk
  std::vector<int64_t> window;                         // GUARDED_BY(mu): ring of live per-token samples
  std::vector<int64_t> bare;                           // GUARDED_BY(mu): ring of live step run times
  size_t window_next = 0, bare_next = 0, clean_samples = 0;  // GUARDED_BY(mu)
  double ns_per_token = 0;                             // GUARDED_BY(mu): backfill cost, smoothed
  size_t chunk_tokens = 0;                             // GUARDED_BY(mu)
  int64_t throttled_until_ns = 0, cooldown_ns = 0;     // GUARDED_BY(mu)
  BackfillSchedulerStats stats;                        // GUARDED_BY(mu)
  std::thread worker;
  bool stop = false;  // GUARDED_BY(mu)
};


BackfillScheduler::BackfillScheduler(Env* env, BackfillSchedulerOptions options)
    : env_(env != nullptr ? env : Env::Default()), options_(std::move(options)), state_(std::make_unique<State>()) {
  options_.min_chunk_tokens = std::max<size_t>(1, options_.min_chunk_tokens);
  options_.chunk_tokens = std::max(options_.chunk_tokens, options_.min_chunk_tokens);
  options_.window = std::max<size_t>(1, options_.window);
  options_.min_samples = std::clamp<size_t>(options_.min_samples, 1, options_.window);
  state_->chunk_tokens = options_.chunk_tokens;
  state_->cooldown_ns = options_.cooldown_ns;
  state_->window.reserve(options_.window);
  state_->bare.reserve(options_.window);
}

BackfillScheduler::~BackfillScheduler() { Stop(); }

void BackfillScheduler::SubmitLive(std::unique_ptr<LiveTask> task) {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.live.push_back(LiveEntry{std::move(task), st.next_seq++, env_->NowMonotonicNanos(), false});
  }
  st.cv.notify_all();
}

void BackfillScheduler::SubmitBackfill(std::unique_ptr<BackfillTask> task) {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (task == nullptr || task->done()) return;
    st.backfill.push_back(std::move(task));
  }
  st.cv.notify_all();
}

bool BackfillScheduler::Idle() const {
  const State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  return st.live.empty() && st.backfill.empty();
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
  State& st = *state_;
  PushRing(&st.window, &st.window_next, options_.window, latency_ns);
  PushRing(&st.bare, &st.bare_next, options_.window, bare_ns);
  if (options_.slo_p99_ns <= 0 || st.window.size() < options_.min_samples) return;
  if (P99(st.window) > options_.slo_p99_ns) {
    ++st.stats.throttle_events;
    st.chunk_tokens = std::max(options_.min_chunk_tokens, st.chunk_tokens / 2);
    st.throttled_until_ns = now_ns + st.cooldown_ns;
    st.cooldown_ns = std::min(st.cooldown_ns * 2, options_.cooldown_ns * kMaxCooldownFactor);
    st.window.clear();  // judge the next window on samples taken after the adjustment
    st.window_next = 0;
    st.clean_samples = 0;
  } else if (++st.clean_samples >= options_.window) {
    st.chunk_tokens = std::min(options_.chunk_tokens, st.chunk_tokens + std::max<size_t>(1, st.chunk_tokens / 4));
    st.cooldown_ns = options_.cooldown_ns;
    st.clean_samples = 0;
  }
}

// Tokens of one chunk that fit between two live steps without breaking the SLO; 0 = none.
size_t BackfillScheduler::InterleaveTokens() const {
  const State& st = *state_;
  if (options_.slo_p99_ns <= 0) return st.chunk_tokens;
  if (st.ns_per_token <= 0 || st.bare.empty()) return options_.min_chunk_tokens;  // probe once to measure
  const double room_ns = static_cast<double>(options_.slo_p99_ns - P99(st.bare));
  if (room_ns <= 0) return 0;
  const size_t fit = std::min(st.chunk_tokens, static_cast<size_t>(room_ns / st.ns_per_token));
  return fit >= options_.min_chunk_tokens ? fit : 0;
}

BackfillScheduler::Ran BackfillScheduler::RunOnce() {
  State& st = *state_;
  std::lock_guard<std::mutex> run_lock(st.run_mu);
  LiveEntry* entry = nullptr;
  size_t quantum = 0;
  bool interleaved = false;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    const bool have_backfill = !st.backfill.empty();
    if (!st.live.empty()) {
      if (have_backfill && options_.interleave && st.chunk_owed && env_->NowMonotonicNanos() >= st.throttled_until_ns) {
        quantum = InterleaveTokens();
        interleaved = quantum > 0;
      }
      if (!interleaved) entry = &st.live.front();  // only this thread pops the front (run_mu held)
    } else if (have_backfill) {
      quantum = st.chunk_tokens;
    }
  }
  if (entry != nullptr) return RunLiveStep(entry);
  if (quantum > 0) return RunChunk(interleaved, quantum);
  return Ran::kNothing;
}

BackfillScheduler::Ran BackfillScheduler::RunLiveStep(LiveEntry* entry) {
  State& st = *state_;
  const int64_t start = env_->NowMonotonicNanos();
  Result<bool> step = entry->task->Step();
  const int64_t end = env_->NowMonotonicNanos();
  LiveStepRecord record{entry->seq, !entry->started, !step.has_value() || *step, entry->ready_ns, start, end};
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.stats.live_steps;
    st.chunk_owed = true;
    if (entry->started) RecordLive(end - entry->ready_ns, end - start, end);
    entry->started = true;
    entry->ready_ns = end;
    if (!step.has_value()) {
      ++st.stats.live_errors;
      st.stats.last_error = step.error();
    }
    if (record.last) {
      ++st.stats.live_tasks_done;
      st.live.pop_front();  // `entry` dangles from here on
    }
  }
  if (options_.on_live_step) options_.on_live_step(record);
  return Ran::kLive;
}

BackfillScheduler::Ran BackfillScheduler::RunChunk(bool interleaved, size_t quantum) {
  State& st = *state_;
  BackfillTask* task = nullptr;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    task = st.backfill.front().get();  // only RunOnce (under run_mu) pops backfill tasks
  }
  const int64_t start = env_->NowMonotonicNanos();
  Result<size_t> ran = task->RunChunk(quantum);
  const int64_t elapsed = env_->NowMonotonicNanos() - start;
  std::lock_guard<std::mutex> lock(st.mu);
  st.chunk_owed = false;
  ++st.stats.backfill_chunks;
  if (interleaved) ++st.stats.interleaved_chunks;
  if (!ran.has_value()) {
    ++st.stats.backfill_errors;
    st.stats.last_error = ran.error();
    st.backfill.pop_front();
    return Ran::kBackfill;
  }
  if (*ran > 0) {
    const double per_token = static_cast<double>(elapsed) / static_cast<double>(*ran);
    st.ns_per_token = st.ns_per_token <= 0 ? per_token : 0.75 * st.ns_per_token + 0.25 * per_token;
  }
  st.stats.backfill_tokens += *ran;
  if (task->done() || *ran == 0) {
    ++st.stats.backfill_tasks_done;
    st.backfill.pop_front();
  }
  return Ran::kBackfill;
}

size_t BackfillScheduler::RunUntilIdle() {
  size_t n = 0;
  while (RunOnce() != Ran::kNothing) ++n;
  return n;
}

Status BackfillScheduler::Start() {
  State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.worker.joinable()) return FailedPrecondition("BackfillScheduler: worker already started");
  st.stop = false;
  st.worker = std::thread([this, &st] {
    for (;;) {
      if (RunOnce() != Ran::kNothing) continue;
      std::unique_lock<std::mutex> lock(st.mu);
      if (st.stop) return;
      // Wake on a submission, or after a millisecond (a throttle cooldown may have ended).
      st.cv.wait_for(lock, std::chrono::milliseconds(1),
                     [&st] { return st.stop || !st.live.empty() || !st.backfill.empty(); });
      if (st.stop) return;
    }
  });
  return Status::Ok();
}

void BackfillScheduler::Stop() {
  State& st = *state_;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.stop = true;
  }
  st.cv.notify_all();
  if (st.worker.joinable()) st.worker.join();
}

BackfillSchedulerStats BackfillScheduler::Stats() const {
  const State& st = *state_;
  std::lock_guard<std::mutex> lock(st.mu);
  BackfillSchedulerStats s = st.stats;
  s.chunk_tokens = st.chunk_tokens;
  s.live_p99_ns = P99(st.window);
  s.backfill_ns_per_token = st.ns_per_token;
  s.pending_live = st.live.size();
  s.pending_backfill = st.backfill.size();
  for (const auto& t : st.backfill) s.pending_backfill_tokens += t->remaining_tokens();
  return s;
}

}  // namespace fak
