// ThreadPool: a small fixed-size pool whose only job is ParallelFor over output ranges.
//
// Kernels split outputs across threads, never a reduction (architecture §2.1), so results do not
// depend on the thread count. The calling thread takes part in the work. One ParallelFor runs at a
// time per pool (calls are serialised by a mutex); the pool is safe to share between threads.
//
// A decode step issues a few hundred products of ~10-100 µs each, so the hand-off must cost far less
// than that: idle workers poll an atomic for a short while before they sleep in a futex wait
// (std::atomic::wait), and the caller waits the same way for the last share to finish.
// ParallelForBalanced lets a thread that is done take the rest of another's share, a grain at a
// time, so a thread that runs late (still waking, or its core lent to another process) delays the
// job by one grain rather than by its whole share.
#ifndef FAK_SRC_CORE_THREAD_POOL_H_
#define FAK_SRC_CORE_THREAD_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fak::internal {

class ThreadPool {
 public:
  // n_threads == 0 means one per hardware thread. Throws std::system_error (having joined the
  // threads it started) when the OS refuses a thread; Model checks the count first (NewThreadPool).
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t n_threads() const { return workers_.size() + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each chunk a multiple of `grain`
  // (except the last). Returns when every chunk has run.
  void ParallelFor(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

  // Calls fn(begin, end) on disjoint chunks of whole grains covering [0, n) (the last grain may be
  // shorter). Each thread starts on its own contiguous share, front to back, a grain per call; one
  // that runs out takes grains from the back of the shares still running. Which thread runs a
  // grain depends on timing, so fn's results must not.
  void ParallelForBalanced(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  // The grains of one share not yet taken: [front, back) packed as front | back << 32, so that
  // the owner (front) and a helper (back) claim grains with one compare-and-swap each. One cache
  // line per share: the owner's claims do not contend with the other shares'.
  struct alignas(64) ShareGrains {
    std::atomic<uint64_t> range{0};
  };
  // Takes one grain of `share` (its front when `own`, else its back); false when none is left.
  bool ClaimGrain(size_t share, bool own, uint32_t* grain);
  void RunBalancedShare(size_t share);
  void Run(size_t n, size_t grain, bool balanced, const std::function<void(size_t, size_t)>& fn);

  void StopWorkers();
  void WorkerLoop(size_t worker_index);
  void RunShare(size_t share);

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // serialises ParallelFor calls, and so guards the job fields
  // Written by the caller before it publishes a new generation (release), read by workers after
  // they observe it (acquire).
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_grain_ = 1;
  bool job_balanced_ = false;
  std::unique_ptr<ShareGrains[]> share_grains_;  // one per thread, for balanced jobs
  std::atomic<uint32_t> generation_{0};  // bumped once per job; workers wait for a change
  std::atomic<uint32_t> pending_{0};     // workers still running the current job
  std::atomic<bool> stop_{false};
};

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_THREAD_POOL_H_
