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
  share_grains_ = std::make_unique<ShareGrains[]>(n_threads);
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
  if (job_balanced_) {
    RunBalancedShare(share);
    return;
  }
  // Shares are whole grains so that blocked kernels see aligned chunks.
  size_t n_grains = (job_n_ + job_grain_ - 1) / job_grain_;
  size_t n_shares = n_threads();
  size_t g_begin = n_grains * share / n_shares, g_end = n_grains * (share + 1) / n_shares;
  size_t begin = g_begin * job_grain_, end = std::min(job_n_, g_end * job_grain_);
  if (begin < end) (*job_)(begin, end);
}

bool ThreadPool::ClaimGrain(size_t share, bool own, uint32_t* grain) {
  std::atomic<uint64_t>& range = share_grains_[share].range;
  // Relaxed: the job was published by the generation counter and its results are handed back by
  // pending_; the compare-and-swap only has to give each grain to one thread.
  uint64_t r = range.load(std::memory_order_relaxed);
  for (;;) {
    const auto front = static_cast<uint32_t>(r), back = static_cast<uint32_t>(r >> 32);
    if (front >= back) return false;
    const uint64_t next = own ? r + 1 : r - (uint64_t{1} << 32);
    if (range.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
      *grain = own ? front : back - 1;
      return true;
    }
  }
}

void ThreadPool::RunBalancedShare(size_t share) {
  auto run = [this](uint32_t g) {
    const size_t begin = size_t{g} * job_grain_;
    (*job_)(begin, std::min(job_n_, begin + job_grain_));
  };
  uint32_t g;
  while (ClaimGrain(share, true, &g)) run(g);
  const size_t n = n_threads();
  for (size_t k = 1; k < n; ++k) {
    while (ClaimGrain((share + k) % n, false, &g)) run(g);
  }
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
  Run(n, grain, false, fn);
}

void ThreadPool::ParallelForBalanced(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  Run(n, grain, true, fn);
}

void ThreadPool::Run(size_t n, size_t grain, bool balanced, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  const size_t n_grains = (n + grain - 1) / grain;
  if (n_grains > UINT32_MAX) balanced = false;  // grain indices are 32-bit in ShareGrains
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_balanced_ = balanced;
  if (balanced) {
    const size_t shares = n_threads();
    for (size_t s = 0; s < shares; ++s) {
      const uint64_t front = n_grains * s / shares, back = n_grains * (s + 1) / shares;
      share_grains_[s].range.store(front | back << 32, std::memory_order_relaxed);
    }
  }
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
