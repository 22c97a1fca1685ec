// ThreadPool: static partition of [0, n) into one contiguous share per thread.
#include "src/core/thread_pool.h"

#include <algorithm>

namespace fak::internal {

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  for (size_t i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunShare(size_t share) {
  // Shares are whole grains so that blocked kernels see aligned chunks.
  size_t n_grains = (job_n_ + job_grain_ - 1) / job_grain_;
  size_t n_shares = n_threads();
  size_t g_begin = n_grains * share / n_shares, g_end = n_grains * (share + 1) / n_shares;
  size_t begin = g_begin * job_grain_, end = std::min(job_n_, g_end * job_grain_);
  if (begin < end) (*job_)(begin, end);
}

void ThreadPool::WorkerLoop(size_t worker_index) {
  size_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunShare(worker_index);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_ = workers_.size();
    ++generation_;
  }
  wake_.notify_all();
  RunShare(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

}  // namespace fak::internal
