// RunTasks: n independent tasks on the calling thread and a few threads started for the call —
// for jobs too large for one core and too rare to keep a pool for (hashing and reading a KV slab's
// chunks), and from callers that may not borrow a model's pool (it runs one job at a time).
#ifndef FAK_SRC_CORE_RUN_TASKS_H_
#define FAK_SRC_CORE_RUN_TASKS_H_

#include <cstddef>
#include <functional>

#include "fak/core/status.h"

namespace fak::internal {

// Calls task(i, worker) for each i in [0, n), claimed in order by the calling thread (worker 0) and
// by up to max_threads - 1 threads it starts (workers 1, 2, …; fewer when n is small, none when a
// thread cannot start: the calling thread then runs them all). `worker` lets a task use per-thread
// state (a hasher) without a lock. Once a task fails, no further task starts; the result is the
// error of the lowest-numbered task that failed, else Ok. Returns after every started task ended.
Status RunTasks(size_t n, size_t max_threads, const std::function<Status(size_t task, size_t worker)>& task);

// The threads a job of `bytes` bytes of memory-speed work (hashing, copying) is worth: 1 below
// 4 MiB (a thread's start costs more than it saves), else one per hardware thread, at most 8.
size_t ThreadsForBytes(size_t bytes);

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_RUN_TASKS_H_
