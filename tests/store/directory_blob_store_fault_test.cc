// DirectoryBlobStore under FaultInjectionEnv: failed fsyncs and renames are errors, and after a
// power loss at any write, fsync or rename point every acknowledged Put is still there, verified.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fak/store/blob_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::EnvOp;
using testing::FaultInjectionEnv;
using testing::FaultKind;
using testing::RandomBytes;
using testing::ScopedTempDir;

// Three file blobs and three inline ones, interleaved.
std::vector<std::string> Payloads() {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < 3; ++i) {
    out.push_back(RandomBytes(1000 + i, i));
    out.push_back("inline-" + std::to_string(i));
  }
  return out;
}

// Opens a store at `dir` through `env` and puts Payloads() until the first error; returns what
// was acknowledged.
std::vector<std::string> RunWorkload(Env* env, const std::string& dir) {
  std::vector<std::string> acked;
  BlobStoreOptions o;
  o.env = env;
  Result<std::unique_ptr<BlobStore>> store = OpenDirectoryBlobStore(dir, o);
  if (!store.has_value()) return acked;
  for (const std::string& p : Payloads()) {
    if (!(*store)->Put(p).has_value()) break;
    acked.push_back(p);
  }
  return acked;
}

void ExpectAllPresent(const std::string& dir, const std::vector<std::string>& acked, const std::string& where) {
  Result<std::unique_ptr<BlobStore>> store = OpenDirectoryBlobStore(dir);
  ASSERT_TRUE(store.has_value()) << where << ": " << store.error().ToString();
  for (const std::string& p : acked) {
    Result<std::string> got = (*store)->Get(Digest::Of(p));
    ASSERT_TRUE(got.has_value()) << where << ": " << got.error().ToString();
    EXPECT_EQ(*got, p) << where;
  }
}

TEST(DirectoryBlobStoreFaults, FailedRenameOrSyncIsAnErrorAndChangesNothing) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  BlobStoreOptions o;
  o.env = &env;
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(tmp.Sub("s"), o));
  const std::string big = RandomBytes(2000, 7);
  env.FailNth(EnvOp::kRename, 1, FaultKind::kNoSpace);
  Result<Digest> put = store->Put(big);
  ASSERT_FALSE(put.has_value());
  EXPECT_EQ(put.error().code(), StatusCode::kIOError);
  EXPECT_EQ(store->Get(Digest::Of(big)).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(env.ListDir(tmp.Sub("s/tmp"))->empty());  // the temporary was removed

  env.FailNth(EnvOp::kSync, 1);  // the journal's fdatasync of an inline put
  EXPECT_FALSE(store->Put("small").has_value());
  ASSERT_OK(store->Put(big).status());  // the store goes on after a failed call
  EXPECT_EQ(*store->Get(Digest::Of(big)), big);
}

TEST(DirectoryBlobStoreFaults, PowerLossAtEveryPointKeepsEveryAcknowledgedPut) {
  for (EnvOp op : {EnvOp::kAppend, EnvOp::kSync, EnvOp::kRename, EnvOp::kSyncDir, EnvOp::kCreate, EnvOp::kCreateDir}) {
    uint64_t n_points = 0;
    {
      ScopedTempDir tmp;
      FaultInjectionEnv env;
      ASSERT_EQ(RunWorkload(&env, tmp.Sub("s")).size(), Payloads().size());
      n_points = env.count(op);
    }
    ASSERT_GT(n_points, 0u) << EnvOpName(op);
    for (uint64_t i = 1; i <= n_points; ++i) {
      const std::string where = std::string(EnvOpName(op)) + " #" + std::to_string(i);
      ScopedTempDir tmp;
      FaultInjectionEnv env;
      env.FailNth(op, i, FaultKind::kCrash);
      const std::vector<std::string> acked = RunWorkload(&env, tmp.Sub("s"));
      EXPECT_LT(acked.size(), Payloads().size()) << where;  // the crash stopped the workload
      ASSERT_OK(env.PowerLoss());
      ExpectAllPresent(tmp.Sub("s"), acked, where);
    }
  }
}

}  // namespace
}  // namespace fak
