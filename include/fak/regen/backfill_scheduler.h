// BackfillScheduler: live decode first, regeneration prefill behind it in bounded chunks.
//
// Eager regen (architecture §9) must not cost live requests their latency: the scheduler runs two
// classes of work on one executor and throttles the low-priority one against a measured p99 of
// live per-token latency. The tasks are interfaces so the engine's requests and RegenDriver's
// backfill tasks plug in alike; time comes from an Env's monotonic clock, so tests drive it by hand.
#ifndef FAK_REGEN_BACKFILL_SCHEDULER_H_
#define FAK_REGEN_BACKFILL_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// One live request: a first step (lookup + prefill: the first token), then one decode step per token.
class FAK_EXPORT LiveTask {
 public:
  virtual ~LiveTask() = default;
  // Runs the next step; true when the request is finished. An error ends the request.
  virtual Result<bool> Step() = 0;
};

// Low-priority prefill work, done in bounded chunks.
class FAK_EXPORT BackfillTask {
 public:
  virtual ~BackfillTask() = default;
  // Prefills up to `max_tokens` (> 0) more tokens; returns how many (0 only when done).
  virtual Result<size_t> RunChunk(size_t max_tokens) = 0;
  virtual size_t remaining_tokens() const = 0;
  bool done() const { return remaining_tokens() == 0; }
};

// What the scheduler observed about one live step (for metrics: TTFT, per-token latency).
struct LiveStepRecord {
  uint64_t task_seq = 0;  // submission order, from 1
  bool first = false;     // the request's first step (its end - ready is the TTFT)
  bool last = false;
  int64_t ready_ns = 0;   // submission (first step) or the previous step's end
  int64_t start_ns = 0, end_ns = 0;
};

struct BackfillSchedulerOptions {
  // Backfill quantum: tokens per chunk at start and at most. Default: 64.
  size_t chunk_tokens = 64;
  // The quantum never shrinks below this. Default: 4.
  size_t min_chunk_tokens = 4;
  // Target p99 of live per-token decode latency (end - ready of each non-first step); 0 = none.
  // Default: 0.
  int64_t slo_p99_ns = 0;
  // Live samples in the sliding p99 window; the p99 is judged once min_samples are in. Default: 256, 32.
  size_t window = 256;
  size_t min_samples = 32;
  // Pause of interleaving after a violation; doubles on each consecutive violation up to 64x.
  // Default: 20 ms.
  int64_t cooldown_ns = 20'000'000;
  // Whether one chunk may run between two live steps when not throttled (otherwise backfill runs
  // only when no live step is ready). Default: true.
  bool interleave = true;
  // Called after every live step (on the thread that ran it). Default: none.
  std::function<void(const LiveStepRecord&)> on_live_step;
};

struct BackfillSchedulerStats {
  uint64_t live_steps = 0, live_tasks_done = 0, live_errors = 0;
  uint64_t backfill_chunks = 0, interleaved_chunks = 0, backfill_tokens = 0;
  uint64_t backfill_tasks_done = 0, backfill_errors = 0;
  uint64_t throttle_events = 0;
  size_t chunk_tokens = 0;            // the current quantum
  int64_t live_p99_ns = 0;            // p99 of the current window (0 when empty)
  double backfill_ns_per_token = 0;   // measured, smoothed
  size_t pending_live = 0, pending_backfill = 0;
  size_t pending_backfill_tokens = 0;
  Status last_error;
};

// Two classes of work on one executor. Live work always goes first: at every decision a ready live
// step wins, except that one bounded backfill chunk may run between two live steps when the SLO
// leaves room for it — the chunk is sized so that (p99 of bare live step time) + (chunk tokens x
// measured backfill ns per token) stays within slo_p99_ns, and skipped when fewer than
// min_chunk_tokens fit. When no live step is ready, backfill runs chunk after chunk at the full
// quantum. Feedback backstop: when the measured p99 of live per-token latency (end - ready of each
// non-first step, so it includes any chunk run before it) exceeds the SLO, the quantum halves and
// interleaving pauses for a cooldown (doubling while violations repeat); a full window within the
// SLO grows the quantum by a quarter. Live requests run to completion in submission order.
// Thread-safety: Submit* and Stats may be called from any thread; RunOnce calls are serialized
// (either drive it yourself or Start a worker thread, not both). Owns the submitted tasks.
class FAK_EXPORT BackfillScheduler {
 public:
  enum class Ran { kNothing, kLive, kBackfill };

  // Times (latencies, throttle cooldowns) come from env->NowMonotonicNanos(); nullptr means
  // Env::Default(). Not owned; must outlive the scheduler.
  explicit BackfillScheduler(Env* env = nullptr, BackfillSchedulerOptions options = {});
  ~BackfillScheduler();  // stops the worker, drops unfinished tasks
  BackfillScheduler(const BackfillScheduler&) = delete;
  BackfillScheduler& operator=(const BackfillScheduler&) = delete;

  void SubmitLive(std::unique_ptr<LiveTask> task);
  void SubmitBackfill(std::unique_ptr<BackfillTask> task);
  // Runs one live step or one backfill chunk, as the policy above picks.
  Ran RunOnce();
  // Runs until nothing is left (live and backfill). Returns the steps run.
  size_t RunUntilIdle();
  // A worker thread running RunOnce, sleeping when idle. FailedPrecondition when already started.
  Status Start();
  void Stop();
  // Whether no live or backfill work is pending.
  bool Idle() const;
  BackfillSchedulerStats Stats() const;
  Env* env() const { return env_; }

 private:
  struct State;      // queues, locks, the worker thread and the throttle's measurements
  struct LiveEntry;  // one queued live task
  Ran RunLiveStep(LiveEntry* entry);
  Ran RunChunk(bool interleaved, size_t quantum);
  void RecordLive(int64_t latency_ns, int64_t bare_ns, int64_t now_ns);  // REQUIRES: state_->mu
  size_t InterleaveTokens() const;                                        // REQUIRES: state_->mu

  Env* env_;
  BackfillSchedulerOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace fak

#endif  // FAK_REGEN_BACKFILL_SCHEDULER_H_
