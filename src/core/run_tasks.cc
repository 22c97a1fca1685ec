// RunTasks: an atomic counter hands out task numbers; the first failure stops new claims.
#include "src/core/run_tasks.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace fak::internal {

Status RunTasks(size_t n, size_t max_threads, const std::function<Status(size_t, size_t)>& task) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  size_t failed_at = n;  // GUARDED_BY(mu)
  Status error;          // GUARDED_BY(mu)
  const auto work = [&](size_t worker) {
    for (size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      Status s = task(i, worker);
      if (s.ok()) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (i < failed_at) failed_at = i, error = std::move(s);
      failed.store(true, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min(max_threads, n); ++t) {
    try {
      helpers.emplace_back(work, t);
    } catch (const std::system_error&) {
      break;  // the threads already started, and this one, share the rest
    }
  }
  work(0);
  for (std::thread& h : helpers) h.join();
  return failed_at < n ? error : Status::Ok();
}

size_t ThreadsForBytes(size_t bytes) {
  constexpr size_t kMinBytes = size_t{4} << 20, kMaxThreads = 8;
  if (bytes < kMinBytes) return 1;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, kMaxThreads);
}

}  // namespace fak::internal
