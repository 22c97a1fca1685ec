// ThreadPool: static partition of [0, n) into one contiguous share per thread; a poll-then-wait
// hand-off on two atomics.
#include "src/core/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace fak::internal {
namespace {

// Some tens of microseconds of polling: longer than the gap between two products of one decode
// step, far shorter than the gap between two requests, when sleeping costs nothing. Every
// kYieldEvery polls the thread yields, so that on an oversubscribed machine the thread being
// waited for gets the core instead of a poller.
constexpr int kSpinIterations = 1 << 14;
constexpr int kYieldEvery = 64;

// A spin-wait hint (pause, yield), not a system call: a sched_yield per poll costs a kernel entry
// each on hardware and, under qemu-user (the aarch64 test stage), an emulated system call each.
void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Returns once `value` differs from `old`: polls first, then sleeps in a futex wait.
void AwaitChange(const std::atomic<uint32_t>& value, uint32_t old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (value.load(std::memory_order_acquire) != old) return;
    if (i % kYieldEvery == kYieldEvery - 1) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
  while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
}

}  // namespace

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  try {
    for (size_t i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  } catch (...) {
    // The OS refused a thread (std::system_error): the ones already started must be joined before
    // the exception leaves, or destroying them would call std::terminate.
    StopWorkers();
    throw;
  }
}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::StopWorkers() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
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
  uint32_t seen = 0;
  for (;;) {
    AwaitChange(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    RunShare(worker_index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
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
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  pending_.store(static_cast<uint32_t>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  RunShare(0);
  for (uint32_t left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire)) {
    AwaitChange(pending_, left);
  }
  job_ = nullptr;
}

}  // namespace fak::internal
