// RunTasks: every task runs exactly once, on more than one thread when asked; after a failure no new
// task starts and the lowest-numbered failure is returned; a one-thread call runs them in order.
#include "src/core/run_tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace fak::internal {
namespace {

TEST(RunTasks, RunsEveryTaskOnceOnSeveralThreads) {
  std::vector<std::atomic<int>> hits(1000);
  std::mutex mu;
  std::set<std::thread::id> threads;
  ASSERT_TRUE(RunTasks(hits.size(), 4, [&](size_t i, size_t) {
                hits[i].fetch_add(1);
                std::this_thread::sleep_for(std::chrono::microseconds(20));  // lets the others claim some
                std::lock_guard<std::mutex> lock(mu);
                threads.insert(std::this_thread::get_id());
                return Status::Ok();
              }).ok());
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_GT(threads.size(), 1u);
  EXPECT_TRUE(RunTasks(0, 4, [](size_t, size_t) { return InvalidArgument("never called"); }).ok());
}

TEST(RunTasks, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  ASSERT_TRUE(RunTasks(50, 1, [&](size_t i, size_t) {
                EXPECT_EQ(std::this_thread::get_id(), caller);
                order.push_back(i);
                return Status::Ok();
              }).ok());
  ASSERT_EQ(order.size(), 50u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
}

TEST(RunTasks, AFailureStopsNewTasksAndTheLowestFailureIsReturned) {
  // In order on one thread: tasks after the first failure never start.
  std::atomic<size_t> ran{0};
  Status s = RunTasks(100, 1, [&](size_t i, size_t) {
    ran.fetch_add(1);
    return i == 10 || i == 20 ? NotFound("task " + std::to_string(i)) : Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "task 10");
  EXPECT_EQ(ran.load(), 11u);
  // On several threads every task fails: whichever ran, the lowest-numbered failure is reported, and
  // far fewer than all of them ran.
  ran = 0;
  s = RunTasks(10000, 4, [&](size_t i, size_t) {
    ran.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(i == 0 ? 2000 : 0));
    return Corruption("task " + std::to_string(i));
  });
  EXPECT_EQ(s.message(), "task 0");
  EXPECT_LT(ran.load(), 100u);
}

TEST(RunTasks, ThreadsForBytesStaysOnOneThreadBelowFourMebibytes) {
  EXPECT_EQ(ThreadsForBytes(0), 1u);
  EXPECT_EQ(ThreadsForBytes((size_t{4} << 20) - 1), 1u);
  const size_t big = ThreadsForBytes(size_t{1} << 30);
  EXPECT_GE(big, 1u);
  EXPECT_LE(big, 8u);
  EXPECT_EQ(big, std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8));
}

}  // namespace
}  // namespace fak::internal
