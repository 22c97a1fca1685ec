// The directory backend: durability across reopen, the self-describing layout, journal tail
// handling, leftovers, and refusing directories it did not make.
#include <gtest/gtest.h>

#include <filesystem>

#include "fak/store/blob_store.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::BlobFilePath;
using testing::RandomBytes;
using testing::ReadAll;
using testing::ScopedTempDir;
using testing::WriteAll;
namespace fs = std::filesystem;

std::unique_ptr<BlobStore> MustOpen(const std::string& dir, const BlobStoreOptions& options = {}) {
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(dir, options);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return s.has_value() ? std::move(*s) : nullptr;
}

TEST(BlobStoreDirectory, ReopenKeepsBlobsInlinePayloadsAndPins) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  const std::string big = RandomBytes(70000, 1), small = "inline payload", gone = RandomBytes(100, 2);
  Digest d_big, d_small, d_gone;
  {
    auto store = MustOpen(dir);
    d_big = *store->Put(big);
    d_small = *store->Put(small);
    d_gone = *store->Put(gone);
    ASSERT_OK(store->Pin(d_big));
    ASSERT_OK(store->Pin(d_small));
    ASSERT_OK(store->Pin(d_small));
    ASSERT_OK(store->Remove(d_gone));
  }
  auto store = MustOpen(dir);
  EXPECT_EQ(*store->Get(d_big), big);
  EXPECT_EQ(*store->Get(d_small), small);
  EXPECT_EQ(store->Get(d_gone).error().code(), StatusCode::kNotFound);
  const BlobStoreStats st = store->Stats();
  EXPECT_EQ(st.n_blobs, 2u);
  EXPECT_EQ(st.n_pinned, 2u);
  // The pin counts came back too: two Unpins for the small blob, the second frees it.
  ASSERT_OK(store->Unpin(d_small));
  EXPECT_EQ(store->Remove(d_small).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store->Unpin(d_small));
  ASSERT_OK(store->Remove(d_small));
}

TEST(BlobStoreDirectory, LayoutIsSelfDescribing) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  const std::string payload = RandomBytes(1000, 3);
  Digest d;
  {
    auto store = MustOpen(dir);
    d = *store->Put(payload);
  }
  EXPECT_EQ(ReadAll(dir + "/FAK_BLOBSTORE"), "fak-blobstore 1\n");
  const std::string file = ReadAll(BlobFilePath(dir, d));
  ASSERT_EQ(file.size(), 56 + payload.size());
  EXPECT_EQ(file.substr(0, 8), "FAKBLOB1");
  EXPECT_EQ(file.substr(24, 32), std::string(reinterpret_cast<const char*>(d.bytes.data()), 32));
  EXPECT_EQ(file.substr(56), payload);
  EXPECT_EQ(ReadAll(dir + "/journal").substr(0, 8), "FAKJRNL1");
}

TEST(BlobStoreDirectory, LosingTheJournalLosesNoBlobFile) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  std::vector<std::pair<Digest, std::string>> blobs;
  {
    auto store = MustOpen(dir);
    for (uint32_t i = 0; i < 8; ++i) {
      std::string p = RandomBytes(300 + i * 1000, i);
      blobs.emplace_back(*store->Put(p), p);
    }
  }
  fs::remove(dir + "/journal");
  auto store = MustOpen(dir);
  for (const auto& [d, p] : blobs) EXPECT_EQ(*store->Get(d), p);
  EXPECT_EQ(store->Stats().n_blobs, blobs.size());
}

TEST(BlobStoreDirectory, LeftoverTemporariesAreRemovedOnOpen) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  { auto store = MustOpen(dir); }
  WriteAll(dir + "/tmp/123-4-5.tmp", "half a blob");
  auto store = MustOpen(dir);
  EXPECT_TRUE(fs::is_empty(dir + "/tmp"));
  EXPECT_EQ(store->Stats().n_blobs, 0u);
}

TEST(BlobStoreDirectory, TornJournalTailIsDroppedAndAppendsContinue) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  Digest a;
  {
    auto store = MustOpen(dir);
    a = *store->Put("first inline");
    ASSERT_OK(store->Put("second inline"));
  }
  // Cut the last record in half: what a kill in the middle of an append leaves.
  const std::string journal = ReadAll(dir + "/journal");
  WriteAll(dir + "/journal", journal.substr(0, journal.size() - 20));
  Digest c;
  {
    auto store = MustOpen(dir);
    EXPECT_GT(store->Stats().torn_tail_bytes, 0u);
    EXPECT_EQ(*store->Get(a), "first inline");
    EXPECT_EQ(store->Get(Digest::Of("second inline")).error().code(), StatusCode::kNotFound);
    c = *store->Put("third inline");
  }
  auto store = MustOpen(dir);
  EXPECT_EQ(store->Stats().torn_tail_bytes, 0u);
  EXPECT_EQ(*store->Get(c), "third inline");
  EXPECT_EQ(store->Stats().n_blobs, 2u);
}

TEST(BlobStoreDirectory, JournalIsCompactedWhenMostlySuperseded) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  BlobStoreOptions options;
  options.sync = false;
  Digest keep;
  {
    auto store = MustOpen(dir, options);
    keep = *store->Put("keeper");
    // Pin counts supersede each other (a Remove rewrites the journal at once, so it cannot churn).
    for (uint32_t i = 0; i < 700; ++i) {
      ASSERT_OK(store->Pin(keep));
      ASSERT_OK(store->Unpin(keep));
    }
  }
  const auto before = fs::file_size(dir + "/journal");
  { auto store = MustOpen(dir, options); }
  EXPECT_LT(fs::file_size(dir + "/journal"), before / 10);
  auto store = MustOpen(dir, options);
  EXPECT_EQ(*store->Get(keep), "keeper");
  EXPECT_EQ(store->Stats().n_blobs, 1u);
}

TEST(BlobStoreDirectory, CapacityAppliesOnReopen) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  {
    auto store = MustOpen(dir);
    for (uint32_t i = 0; i < 10; ++i) ASSERT_OK(store->Put(RandomBytes(1000, i)));
  }
  BlobStoreOptions small;
  small.capacity_bytes = 4000;
  auto store = MustOpen(dir, small);
  EXPECT_LE(store->Stats().size_bytes, 4000u);
  EXPECT_EQ(store->Stats().n_evicted, 6u);
}

TEST(BlobStoreDirectory, RefusesADirectoryItDidNotMake) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("home");
  fs::create_directories(dir);
  WriteAll(dir + "/thesis.tex", "precious");
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.error().message().find("thesis.tex"), std::string_view::npos);
  EXPECT_EQ(ReadAll(dir + "/thesis.tex"), "precious");
  EXPECT_EQ(OpenDirectoryBlobStore("").error().code(), StatusCode::kInvalidArgument);
}

TEST(BlobStoreDirectory, NewerFormatVersionIsUnsupported) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  { auto store = MustOpen(dir); }
  WriteAll(dir + "/FAK_BLOBSTORE", "fak-blobstore 2\n");
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kUnsupported);
  WriteAll(dir + "/FAK_BLOBSTORE", "something else");
  EXPECT_EQ(OpenDirectoryBlobStore(dir).error().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace fak
