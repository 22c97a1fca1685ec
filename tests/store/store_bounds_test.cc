// Files whose size is a lie (issue 31): a blob file or a recall image replaced by a sparse 1 TiB
// file is refused as Corruption by its size, before a byte is read or allocated, and the store
// goes on serving everything else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "fak/recall/recall.h"
#include "fak/store/blob_store.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// Makes `path` a sparse file of 1 TiB (costs no disk), fsync'd.
void MakeTerabyte(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
}

TEST(StoreBounds, ABlobFileGrownToATerabyteIsRefusedUnread) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("store");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BlobStore> store, OpenDirectoryBlobStore(dir));
  const std::string text(1000, 'a'), other(1000, 'b');  // above the inline bound: files of their own
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put(text));
  ASSERT_OK_AND_ASSIGN(Digest keep, store->Put(other));
  MakeTerabyte(testing::BlobFilePath(dir, d));
  Result<std::string> got = store->Get(d);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption) << got.error().ToString();
  EXPECT_NE(got.error().message().find("1099511627776 bytes, more than the 1056"), std::string::npos) << got.error().ToString();
  EXPECT_EQ(*store->Get(keep), other);
  ASSERT_OK(store->Put(text));  // a Put of the true bytes repairs it
  EXPECT_EQ(*store->Get(d), text);
}

TEST(StoreBounds, ARecallImageGrownToATerabyteIsRefusedUnread) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("recall");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecallStore> store, RecallStore::Open(dir));
  ScreenChain chain = ScreenChain::Default();
  const std::vector<RecallSegment> segments{{"u1", SegmentKind::kUser, "user: hello"}};
  ASSERT_OK(store->Save("big", segments, chain));
  ASSERT_OK(store->Save("good", segments, chain));
  MakeTerabyte(dir + "/images/big.json");
  Result<RecalledTranscript> t = store->Load("big", chain);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kCorruption) << t.error().ToString();
  EXPECT_NE(t.error().message().find("1099511627776 bytes, more than the 268435456 its reader accepts"), std::string::npos)
      << t.error().ToString();
  ASSERT_OK(store->Load("good", chain));
}

}  // namespace
}  // namespace fak
