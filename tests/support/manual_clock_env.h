// ManualClockEnv: an Env whose monotonic clock moves only when a test says so (files and the wall
// clock pass through to Env::Default()). Thread-safe.
#ifndef FAK_TESTS_SUPPORT_MANUAL_CLOCK_ENV_H_
#define FAK_TESTS_SUPPORT_MANUAL_CLOCK_ENV_H_

#include <atomic>
#include <cstdint>

#include "fak/core/env.h"

namespace fak::testing {

class ManualClockEnv final : public EnvWrapper {
 public:
  ManualClockEnv() : EnvWrapper(Env::Default()) {}
  int64_t NowMonotonicNanos() override { return now_ns_.load(std::memory_order_relaxed); }
  void Advance(int64_t ns) { now_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void Set(int64_t ns) { now_ns_.store(ns, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ns_{0};
};

}  // namespace fak::testing

#endif  // FAK_TESTS_SUPPORT_MANUAL_CLOCK_ENV_H_
