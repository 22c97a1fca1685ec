// ThreadPool::ParallelFor and ParallelForBalanced: every index in [0, n) runs exactly once, chunks
// respect the grain, a late thread's grains are taken by the others, and the pool is safe to share
// between calling threads.
#include "src/core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fak::internal {
namespace {

struct Coverage {
  std::vector<std::atomic<int>> hits;
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> chunks;  // GUARDED_BY(mu)
  explicit Coverage(size_t n) : hits(n) {}
};

// Runs one ParallelFor and checks exact coverage and the chunk contract.
void CheckParallelFor(ThreadPool& pool, size_t n, size_t grain) {
  Coverage cov(n);
  pool.ParallelFor(n, grain, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) cov.hits[i].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(cov.mu);
    cov.chunks.emplace_back(begin, end);
  });
  SCOPED_TRACE(::testing::Message() << "threads=" << pool.n_threads() << " n=" << n << " grain=" << grain);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(cov.hits[i].load(), 1) << "index " << i;
  if (n == 0) {
    EXPECT_TRUE(cov.chunks.empty());
    return;
  }
  EXPECT_LE(cov.chunks.size(), pool.n_threads());
  const size_t g = grain == 0 ? 1 : grain;
  for (auto [begin, end] : cov.chunks) {
    EXPECT_LT(begin, end);  // no empty calls
    EXPECT_LE(end, n);
    EXPECT_EQ(begin % g, 0u) << "chunk [" << begin << ", " << end << ")";
    if (end != n) {
      EXPECT_EQ((end - begin) % g, 0u) << "chunk [" << begin << ", " << end << ")";
    }
  }
}

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  for (size_t threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.n_threads(), threads);
    for (size_t n : {0, 1, 2, 5, 7, 47, 48, 49, 100, 1000, 1001, 4097}) {
      for (size_t grain : {0, 1, 3, 16, 48, 1000, 5000}) {
        CheckParallelFor(pool, n, grain);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(ThreadPoolTest, SingleThreadRunsInlineAsOneChunk) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.n_threads(), 1u);
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  pool.ParallelFor(1000, 1, [&](size_t begin, size_t end) {
    ++calls;
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 1000u);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, DefaultUsesAtLeastOneThread) {
  ThreadPool pool;
  EXPECT_GE(pool.n_threads(), 1u);
  CheckParallelFor(pool, 123, 5);
}

TEST(ThreadPoolTest, WorkIsActuallySpreadAcrossThreads) {
  // Non-vacuity for the multi-thread cases: with several threads and enough grains, more than one
  // thread takes part (shares are assigned statically, one per thread).
  ThreadPool pool(4);
  std::mutex mu;
  std::vector<std::thread::id> ids;
  pool.ParallelFor(4, 1, [&](size_t, size_t) {
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ids.size(), 4u);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()) - ids.begin(), 4);
}

TEST(ThreadPoolTest, ManySequentialJobs) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  for (int job = 0; job < 2000; ++job) {
    pool.ParallelFor(17, 2, [&](size_t begin, size_t end) { total.fetch_add(end - begin); });
  }
  EXPECT_EQ(total.load(), 2000u * 17u);
}

// Back-to-back tiny jobs exercise the spin hand-off (a worker may still be leaving job g when job
// g + 1 is published); pauses long enough for the workers to fall asleep exercise the futex wake.
TEST(ThreadPoolTest, RapidJobsAndSleepingWorkers) {
  ThreadPool pool(3);
  std::atomic<size_t> total{0};
  for (int round = 0; round < 3; ++round) {
    for (int job = 0; job < 20000; ++job) {
      pool.ParallelFor(3, 1, [&](size_t begin, size_t end) { total.fetch_add(end - begin); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(total.load(), 3u * 20000u * 3u);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSafe) {
  // Several threads share one pool; each job must still be covered exactly once and jobs must not
  // see each other's ranges (ParallelFor serialises callers).
  ThreadPool pool(4);
  constexpr int kCallers = 6, kJobsPerCaller = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < kJobsPerCaller; ++job) {
        const size_t n = 50 + static_cast<size_t>((c * 31 + job * 7) % 200);
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, 1 + static_cast<size_t>(job % 5), [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
        });
        for (size_t i = 0; i < n; ++i)
          if (hits[i].load() != 1) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// ParallelForBalanced: exact coverage, one grain per call (the last may be shorter) once the job is
// split at all, across thread counts, sizes and grains.
TEST(ThreadPoolTest, BalancedCoversRangeExactlyOnceInGrains) {
  for (size_t threads : {1, 2, 3, 7}) {
    ThreadPool pool(threads);
    for (size_t n : {0, 1, 2, 7, 48, 49, 1000, 4097}) {
      for (size_t grain : {0, 1, 3, 48, 5000}) {
        Coverage cov(n);
        pool.ParallelForBalanced(n, grain, [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) cov.hits[i].fetch_add(1, std::memory_order_relaxed);
          std::lock_guard<std::mutex> lock(cov.mu);
          cov.chunks.emplace_back(begin, end);
        });
        SCOPED_TRACE(::testing::Message() << "threads=" << threads << " n=" << n << " grain=" << grain);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(cov.hits[i].load(), 1) << "index " << i;
        const size_t g = grain == 0 ? 1 : grain;
        if (threads == 1 || n <= g) {  // not split: one call
          EXPECT_EQ(cov.chunks.size(), n == 0 ? 0u : 1u);
          continue;
        }
        for (auto [begin, end] : cov.chunks) {
          EXPECT_EQ(begin % g, 0u);
          EXPECT_EQ(end, std::min(n, begin + g)) << "chunk [" << begin << ", " << end << ")";
        }
      }
    }
  }
}

// A thread stuck on one grain does not hold up the rest of its share: the grain that starts the
// second share waits for all the grains after it, which only another thread can run while it waits.
// Control: ParallelFor, whose shares are fixed, leaves them to the stuck thread (the wait times out).
TEST(ThreadPoolTest, BalancedHandsAStuckThreadsShareToTheOthers) {
  ThreadPool pool(2);
  constexpr size_t kGrains = 64, kFirst = kGrains / 2;
  auto rest_done_while_stuck = [&](bool balanced, std::chrono::milliseconds timeout) {
    std::atomic<size_t> after_done{0};
    std::atomic<bool> rest_done{false};
    auto body = [&](size_t begin, size_t end) {
      for (size_t g = begin; g < end; ++g) {
        if (g > kFirst) after_done.fetch_add(1);
        if (g != kFirst) continue;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (after_done.load() < kGrains - 1 - kFirst && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        rest_done = after_done.load() == kGrains - 1 - kFirst;
      }
    };
    if (balanced) pool.ParallelForBalanced(kGrains, 1, body); else pool.ParallelFor(kGrains, 1, body);
    return rest_done.load();
  };
  EXPECT_FALSE(rest_done_while_stuck(false, std::chrono::milliseconds(100)));
  EXPECT_TRUE(rest_done_while_stuck(true, std::chrono::seconds(30)));
}

TEST(ThreadPoolTest, DestroyWithoutJobs) {
  for (int i = 0; i < 20; ++i) ThreadPool pool(3);  // workers start and stop cleanly
}

}  // namespace
}  // namespace fak::internal
