// Regression tests for the directory store's durability defects (issue 20): a failed journal
// append or fsync is rolled back (D3), a second opener is refused (D4), and Remove leaves no
// plaintext anywhere in the store directory (D7).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fak/recall/recall.h"
#include "fak/store/blob_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

namespace fs = std::filesystem;
using testing::EnvOp;
using testing::FaultInjectionEnv;
using testing::FaultKind;
using testing::RandomBytes;
using testing::ReadAll;
using testing::ScopedTempDir;

Result<std::unique_ptr<BlobStore>> OpenWith(const std::string& dir, Env* env, uint64_t capacity = uint64_t{1} << 30) {
  BlobStoreOptions o;
  o.env = env;
  o.capacity_bytes = capacity;
  return OpenDirectoryBlobStore(dir, o);
}

TEST(StoreDurability, FailedJournalAppendIsRolledBack) {
  for (FaultKind kind : {FaultKind::kShortWrite, FaultKind::kNoSpace, FaultKind::kIOError}) {
    SCOPED_TRACE(static_cast<int>(kind));
    ScopedTempDir tmp;
    FaultInjectionEnv env;
    const std::string dir = tmp.Sub("s");
    const std::string big = RandomBytes(1000, 3);
    {
      ASSERT_OK_AND_ASSIGN(auto store, OpenWith(dir, &env));
      ASSERT_OK(store->Put("first"));
      const BlobStoreStats before = store->Stats();
      env.FailNth(EnvOp::kAppend, 1, kind);
      ASSERT_FALSE(store->Put("lost").has_value());
      EXPECT_FALSE(*store->Contains(Digest::Of("lost")));
      EXPECT_EQ(store->Stats().n_blobs, before.n_blobs);
      // Acknowledged writes after the failure must land on a clean journal.
      ASSERT_OK(store->Put("after"));
      ASSERT_OK(store->Pin(Digest::Of("first")));
      ASSERT_OK(store->Put(big));
    }
    ASSERT_OK_AND_ASSIGN(auto reopened, OpenDirectoryBlobStore(dir));  // no salvage
    EXPECT_EQ(reopened->Stats().torn_tail_bytes, 0u);
    EXPECT_EQ(*reopened->Get(Digest::Of("first")), "first");
    EXPECT_EQ(*reopened->Get(Digest::Of("after")), "after");
    EXPECT_EQ(*reopened->Get(Digest::Of(big)), big);
    EXPECT_EQ(reopened->Remove(Digest::Of("first")).code(), StatusCode::kFailedPrecondition);  // still pinned
    EXPECT_EQ(reopened->Get(Digest::Of("lost")).status().code(), StatusCode::kNotFound);
  }
}

TEST(StoreDurability, FailedJournalSyncChangesNothingEvenAfterReopen) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  const std::string dir = tmp.Sub("s");
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenWith(dir, &env));
    ASSERT_OK(store->Put("kept"));
    env.FailNth(EnvOp::kSync, 1);
    ASSERT_FALSE(store->Put("unsynced").has_value());
    EXPECT_FALSE(*store->Contains(Digest::Of("unsynced")));
    env.FailNth(EnvOp::kSync, 1);
    ASSERT_FALSE(store->Pin(Digest::Of("kept")).ok());
    EXPECT_EQ(store->Stats().n_pinned, 0u);
  }
  ASSERT_OK_AND_ASSIGN(auto reopened, OpenDirectoryBlobStore(dir));
  EXPECT_EQ(reopened->Get(Digest::Of("unsynced")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reopened->Stats().n_pinned, 0u);
  EXPECT_EQ(*reopened->Get(Digest::Of("kept")), "kept");
}

TEST(StoreDurability, PutThatStoredItsBlobSucceedsWhenEvictionFails) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  const std::string dir = tmp.Sub("s");
  const std::string a(200, 'a'), b(200, 'b');
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenWith(dir, &env, /*capacity=*/300));
    ASSERT_OK(store->Put(a));
    env.FailNth(EnvOp::kAppend, 2);  // #1 is b's record, #2 the eviction of a
    ASSERT_OK(store->Put(b));        // b is durable and indexed: the call says so
    EXPECT_TRUE(*store->Contains(Digest::Of(b)));
  }
  ASSERT_OK_AND_ASSIGN(auto reopened, OpenDirectoryBlobStore(dir));
  EXPECT_EQ(*reopened->Get(Digest::Of(b)), b);
}

TEST(StoreDurability, SecondOpenerIsRefusedWithTheLockPath) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(dir));
    Result<std::unique_ptr<BlobStore>> second = OpenDirectoryBlobStore(dir);
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.error().message().find(dir), std::string_view::npos) << second.error().ToString();
    EXPECT_NE(second.error().message().find("in use"), std::string_view::npos) << second.error().ToString();
  }
  ASSERT_OK(OpenDirectoryBlobStore(dir).status());  // released on close

  const std::string rdir = tmp.Sub("r");
  ASSERT_OK_AND_ASSIGN(auto recall, RecallStore::Open(rdir));
  Result<std::unique_ptr<RecallStore>> second = RecallStore::Open(rdir);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.error().message().find("in use"), std::string_view::npos) << second.error().ToString();
}

// Every file under `dir` that holds `needle`.
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && ReadAll(e.path().string()).find(needle) != std::string::npos) out.push_back(e.path().string());
  }
  return out;
}

TEST(StoreDurability, RemoveLeavesNoPlaintextInTheDirectory) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  const std::string inline_secret = "AKIAIOSFODNN7EXAMPLE inline secret";
  const std::string file_secret = "ghp_FILESECRET0123456789abcdefghijklmnopqr " + std::string(400, '.');
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(dir));
  ASSERT_OK(store->Put("neighbour before"));
  ASSERT_OK(store->Put(inline_secret));
  ASSERT_OK(store->Put(file_secret));
  ASSERT_OK(store->Pin(Digest::Of("neighbour before")));
  ASSERT_OK(store->Put("neighbour after"));
  // Control: the test can see the bytes while they are stored.
  EXPECT_FALSE(FilesHolding(dir, "AKIAIOSFODNN7EXAMPLE").empty());
  EXPECT_FALSE(FilesHolding(dir, "ghp_FILESECRET").empty());
  ASSERT_OK(store->Remove(Digest::Of(inline_secret)));
  ASSERT_OK(store->Remove(Digest::Of(file_secret)));
  EXPECT_EQ(FilesHolding(dir, "AKIAIOSFODNN7EXAMPLE"), std::vector<std::string>{});
  EXPECT_EQ(FilesHolding(dir, "ghp_FILESECRET"), std::vector<std::string>{});
  // The neighbours and the pin survived the scrub, in memory and on disk.
  EXPECT_EQ(*store->Get(Digest::Of("neighbour after")), "neighbour after");
  store.reset();
  ASSERT_OK_AND_ASSIGN(auto reopened, OpenDirectoryBlobStore(dir));
  EXPECT_EQ(*reopened->Get(Digest::Of("neighbour before")), "neighbour before");
  EXPECT_EQ(reopened->Stats().n_pinned, 1u);
  EXPECT_EQ(reopened->Get(Digest::Of(inline_secret)).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fak
