// RecallStore under concurrency (issue 20, D5): CollectGarbage running beside Saves must never
// delete the texts of an image that is being saved or was just acknowledged. TSan runs this file
// (the test names carry "Concurrent").
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fak/recall/recall.h"
#include "fak/screen/screen.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::ScopedTempDir;

std::vector<RecallSegment> Segments(int thread, int i) {
  const std::string tag = std::to_string(thread) + "/" + std::to_string(i);
  return {{"sys", SegmentKind::kSystem, "system " + tag},                         // inline
          {"u1", SegmentKind::kUser, "user " + tag + " " + std::string(300, 'u')}};  // a blob file
}

TEST(RecallStoreConcurrent, CollectGarbageBesideSavesKeepsEveryAcknowledgedImage) {
  ScopedTempDir tmp;
  RecallStoreOptions o;
  o.sync = false;  // the race is in the logic, not the disk: keep it fast
  ASSERT_OK_AND_ASSIGN(auto store, RecallStore::Open(tmp.Sub("r"), o));
  constexpr int kThreads = 3, kSaves = 40;
  std::atomic<int> savers_left{kThreads};
  std::mutex mu;
  std::vector<std::pair<std::string, std::vector<RecallSegment>>> acked;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kSaves; ++i) {
        const std::string name = "img-" + std::to_string(t) + "-" + std::to_string(i);
        std::vector<RecallSegment> segs = Segments(t, i);
        if (store->Save(name, segs, ScreenChain()).has_value()) {
          std::lock_guard lock(mu);
          acked.emplace_back(name, std::move(segs));
        }
      }
      --savers_left;
    });
  }
  std::atomic<int> gc_errors{0}, gc_runs{0};
  std::thread gc([&] {
    while (savers_left.load() > 0) {
      if (!store->CollectGarbage().has_value()) ++gc_errors;
      ++gc_runs;
    }
  });
  for (auto& th : threads) th.join();
  gc.join();
  EXPECT_EQ(gc_errors.load(), 0);
  ASSERT_EQ(acked.size(), size_t{kThreads * kSaves});
  ASSERT_OK(store->CollectGarbage());  // nothing is unreferenced now
  int lost = 0;
  for (const auto& [name, segs] : acked) {
    Result<RecalledTranscript> t = store->Load(name, ScreenChain());
    if (!t.has_value() || t->segments[1].text != segs[1].text) ++lost;
  }
  EXPECT_EQ(lost, 0) << "of " << acked.size() << " acknowledged images (" << gc_runs.load() << " collections)";
}

}  // namespace
}  // namespace fak
