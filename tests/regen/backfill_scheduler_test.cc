// The backfill scheduler on a manual clock: live work first, bounded chunks between live steps,
// chunks sized to the SLO, and a throttle when the measured p99 breaks it. Fully deterministic:
// fake tasks advance the clock by a fixed cost per step and per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <string>
#include <vector>

#include "fak/regen/backfill_scheduler.h"
#include "tests/test_util.h"
#include "src/core/str_cat.h"
#include "tests/support/manual_clock_env.h"

namespace fak {
namespace {

constexpr int64_t kMs = 1'000'000;

struct Log {
  std::vector<std::string> events;  // "L1", "B8" (a chunk of 8 tokens), ...
};

class FakeLive final : public LiveTask {
 public:
  FakeLive(testing::ManualClockEnv* clock, Log* log, int steps, int64_t step_ns) : clock_(clock), log_(log), left_(steps), step_ns_(step_ns) {}
  Result<bool> Step() override {
    clock_->Advance(step_ns_);
    log_->events.push_back("L");
    return --left_ == 0;
  }

 private:
  testing::ManualClockEnv* clock_;
  Log* log_;
  int left_;
  int64_t step_ns_;
};

class FakeBackfill final : public BackfillTask {
 public:
  FakeBackfill(testing::ManualClockEnv* clock, Log* log, size_t tokens, int64_t ns_per_token)
      : clock_(clock), log_(log), left_(tokens), ns_per_token_(ns_per_token) {}
  Result<size_t> RunChunk(size_t max_tokens) override {
    const size_t n = std::min(max_tokens, left_);
    clock_->Advance(static_cast<int64_t>(n) * ns_per_token_);
    left_ -= n;
    log_->events.push_back(internal::StrCat("B", std::to_string(n)));
    return n;
  }
  size_t remaining_tokens() const override { return left_; }
  void set_ns_per_token(int64_t ns) { ns_per_token_ = ns; }

 private:
  testing::ManualClockEnv* clock_;
  Log* log_;
  size_t left_;
  int64_t ns_per_token_;
};

TEST(BackfillScheduler, LiveAlwaysFirstWithoutInterleave) {
  testing::ManualClockEnv clock;
  Log log;
  BackfillSchedulerOptions opt;
  opt.interleave = false;
  opt.chunk_tokens = 16;
  BackfillScheduler s(&clock, opt);
  s.SubmitBackfill(std::make_unique<FakeBackfill>(&clock, &log, 40, 1000));
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 3, kMs));
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 2, kMs));
  EXPECT_EQ(s.RunUntilIdle(), 5u + 3u);
  EXPECT_EQ(log.events, (std::vector<std::string>{"L", "L", "L", "L", "L", "B16", "B16", "B8"}));
  BackfillSchedulerStats st = s.Stats();
  EXPECT_EQ(st.live_tasks_done, 2u);
  EXPECT_EQ(st.backfill_tokens, 40u);
  EXPECT_EQ(st.backfill_tasks_done, 1u);
  EXPECT_EQ(st.interleaved_chunks, 0u);
  EXPECT_TRUE(s.Idle());
}

TEST(BackfillScheduler, BackfillYieldsToLiveWorkBetweenChunks) {
  testing::ManualClockEnv clock;
  Log log;
  BackfillSchedulerOptions opt;
  opt.interleave = false;
  opt.chunk_tokens = 10;
  BackfillScheduler s(&clock, opt);
  s.SubmitBackfill(std::make_unique<FakeBackfill>(&clock, &log, 100, 1000));
  EXPECT_EQ(s.RunOnce(), BackfillScheduler::Ran::kBackfill);
  EXPECT_EQ(s.RunOnce(), BackfillScheduler::Ran::kBackfill);
  // A live request arrives mid-backfill: the very next unit of work is its step, and it waited at
  // most one chunk (10 tokens x 1 us).
  std::vector<LiveStepRecord> records;
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 2, kMs));
  EXPECT_EQ(s.RunOnce(), BackfillScheduler::Ran::kLive);
  EXPECT_EQ(s.RunOnce(), BackfillScheduler::Ran::kLive);
  EXPECT_EQ(s.RunOnce(), BackfillScheduler::Ran::kBackfill);
  EXPECT_EQ(log.events, (std::vector<std::string>{"B10", "B10", "L", "L", "B10"}));
  EXPECT_EQ(s.Stats().pending_backfill_tokens, 70u);
}

TEST(BackfillScheduler, InterleavedChunksAreSizedToTheSlo) {
  testing::ManualClockEnv clock;
  Log log;
  BackfillSchedulerOptions opt;
  opt.chunk_tokens = 64;
  opt.min_chunk_tokens = 2;
  opt.slo_p99_ns = 2 * kMs;  // a live decode step costs 1 ms, a backfill token 0.1 ms
  opt.min_samples = 8;
  std::vector<LiveStepRecord> records;
  opt.on_live_step = [&](const LiveStepRecord& r) { records.push_back(r); };
  BackfillScheduler s(&clock, opt);
  s.SubmitBackfill(std::make_unique<FakeBackfill>(&clock, &log, 10000, kMs / 10));
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 200, kMs));
  for (int i = 0; i < 400 && !s.Stats().live_tasks_done; ++i) s.RunOnce();
  ASSERT_EQ(s.Stats().live_tasks_done, 1u);
  // The first interleave probes with the minimum chunk; after it every chunk fills the room the SLO
  // leaves (2 ms - 1 ms = 10 tokens) and no live per-token latency ever exceeds the SLO.
  EXPECT_EQ(log.events[0], "L");
  EXPECT_EQ(log.events[1], "B2");
  EXPECT_EQ(log.events[3], "B10");
  int64_t worst = 0;
  for (const LiveStepRecord& r : records) {
    if (!r.first) worst = std::max(worst, r.end_ns - r.ready_ns);
  }
  EXPECT_EQ(worst, 2 * kMs);
  BackfillSchedulerStats st = s.Stats();
  EXPECT_EQ(st.throttle_events, 0u);
  EXPECT_EQ(st.interleaved_chunks, 199u);
  EXPECT_LE(st.live_p99_ns, opt.slo_p99_ns);
}

TEST(BackfillScheduler, ThrottlesWhenMeasuredP99BreaksTheSlo) {
  testing::ManualClockEnv clock;
  Log log;
  BackfillSchedulerOptions opt;
  opt.chunk_tokens = 64;
  opt.min_chunk_tokens = 2;
  opt.slo_p99_ns = 2 * kMs;
  opt.min_samples = 8;
  opt.cooldown_ns = 20 * kMs;
  std::vector<LiveStepRecord> records;
  opt.on_live_step = [&](const LiveStepRecord& r) { records.push_back(r); };
  BackfillScheduler s(&clock, opt);
  auto task = std::make_unique<FakeBackfill>(&clock, &log, 100000, kMs / 10);
  FakeBackfill* backfill = task.get();
  s.SubmitBackfill(std::move(task));
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 400, kMs));
  for (int i = 0; i < 40; ++i) s.RunOnce();  // steady: 10-token chunks within the SLO
  ASSERT_EQ(s.Stats().throttle_events, 0u);
  backfill->set_ns_per_token(kMs);  // backfill suddenly costs 10x: the estimate is now wrong
  const size_t chunk_before = s.Stats().chunk_tokens;
  while (s.Stats().throttle_events == 0) ASSERT_NE(s.RunOnce(), BackfillScheduler::Ran::kNothing);
  const int64_t throttled_at = clock.NowMonotonicNanos();
  EXPECT_EQ(s.Stats().chunk_tokens, chunk_before / 2);
  // During the cooldown no chunk runs between live steps: every live step is back to 1 ms.
  const size_t mark = records.size();
  while (clock.NowMonotonicNanos() < throttled_at + opt.cooldown_ns) ASSERT_EQ(s.RunOnce(), BackfillScheduler::Ran::kLive);
  for (size_t i = mark; i < records.size(); ++i) EXPECT_EQ(records[i].end_ns - records[i].ready_ns, kMs);
  // After it, the measured cost leaves no room for even the minimum chunk: backfill waits for idle time.
  for (int i = 0; i < 50; ++i) s.RunOnce();
  EXPECT_GE(s.Stats().throttle_events, 1u);
  s.RunUntilIdle();
  EXPECT_EQ(s.Stats().live_tasks_done, 1u);
  EXPECT_EQ(s.Stats().backfill_tasks_done, 1u);
}

TEST(BackfillScheduler, WorkerThreadRunsLiveAndBackfill) {
  Log log;  // only touched by the worker thread
  testing::ManualClockEnv clock;
  BackfillScheduler s(nullptr, {});  // the default Env: real time
  ASSERT_OK(s.Start());
  EXPECT_FALSE(s.Start().ok());
  s.SubmitBackfill(std::make_unique<FakeBackfill>(&clock, &log, 1000, 0));
  s.SubmitLive(std::make_unique<FakeLive>(&clock, &log, 5, 0));
  for (int i = 0; i < 5000 && !s.Idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.Stop();
  EXPECT_TRUE(s.Idle());
  EXPECT_EQ(s.Stats().backfill_tokens, 1000u);
  EXPECT_EQ(s.Stats().live_tasks_done, 1u);
}

}  // namespace
}  // namespace fak
