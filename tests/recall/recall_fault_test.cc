// RecallStore under FaultInjectionEnv: a failed image write is an error that leaves the old image,
// and after a power loss at any fsync or rename every saved image loads and verifies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fak/recall/recall.h"
#include "fak/screen/screen.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::EnvOp;
using testing::FaultInjectionEnv;
using testing::FaultKind;
using testing::ScopedTempDir;

std::vector<RecallSegment> Segments(const std::string& tag) {
  const std::string pad(300, '.');  // above the inline bound: each text gets a blob file
  return {{"sys", SegmentKind::kSystem, "system " + tag + pad}, {"u1", SegmentKind::kUser, "user " + tag + pad}};
}

// Saves images "a" and "b" through `env` until the first error; returns the names saved.
std::vector<std::string> RunWorkload(Env* env, const std::string& dir) {
  std::vector<std::string> saved;
  RecallStoreOptions o;
  o.env = env;
  Result<std::unique_ptr<RecallStore>> store = RecallStore::Open(dir, o);
  if (!store.has_value()) return saved;
  for (const std::string name : {"a", "b"}) {
    if (!(*store)->Save(name, Segments(name), ScreenChain()).has_value()) break;
    saved.push_back(name);
  }
  return saved;
}

TEST(RecallFaults, FailedImageRenameKeepsTheOldImage) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  RecallStoreOptions o;
  o.env = &env;
  ASSERT_OK_AND_ASSIGN(auto store, RecallStore::Open(tmp.Sub("r"), o));
  ASSERT_OK(store->Save("s", Segments("v1"), ScreenChain()).status());
  // Blob files are renamed into place first; fail the rename of the image itself (the last one).
  const uint64_t renames_before = env.count(EnvOp::kRename);
  ASSERT_OK(store->Save("probe", Segments("v1"), ScreenChain()).status());  // texts exist: only the image renames
  ASSERT_EQ(env.count(EnvOp::kRename), renames_before + 1);
  env.FailNth(EnvOp::kRename, 1, FaultKind::kIOError);
  Result<Digest> failed = store->Save("s", Segments("v1"), ScreenChain());
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), StatusCode::kIOError);
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, store->Load("s", ScreenChain()));
  EXPECT_EQ(t.segments[0].text, Segments("v1")[0].text);
}

TEST(RecallFaults, PowerLossAtEveryPointKeepsEverySavedImage) {
  for (EnvOp op : {EnvOp::kSync, EnvOp::kRename, EnvOp::kSyncDir}) {
    uint64_t n_points = 0;
    {
      ScopedTempDir tmp;
      FaultInjectionEnv env;
      ASSERT_EQ(RunWorkload(&env, tmp.Sub("r")).size(), 2u);
      n_points = env.count(op);
    }
    for (uint64_t i = 1; i <= n_points; ++i) {
      const std::string where = std::string(EnvOpName(op)) + " #" + std::to_string(i);
      ScopedTempDir tmp;
      FaultInjectionEnv env;
      env.FailNth(op, i, FaultKind::kCrash);
      const std::vector<std::string> saved = RunWorkload(&env, tmp.Sub("r"));
      ASSERT_OK(env.PowerLoss());
      Result<std::unique_ptr<RecallStore>> store = RecallStore::Open(tmp.Sub("r"));
      ASSERT_TRUE(store.has_value()) << where << ": " << store.error().ToString();
      for (const std::string& name : saved) {
        Result<RecalledTranscript> t = (*store)->Load(name, ScreenChain());
        ASSERT_TRUE(t.has_value()) << where << " image " << name << ": " << t.error().ToString();
        EXPECT_EQ(t->segments[1].text, Segments(name)[1].text) << where;
      }
    }
  }
}

}  // namespace
}  // namespace fak
