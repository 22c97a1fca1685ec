// Bad input to the directory store: corrupt journal records and headers, random bytes and
// truncation in blob files, swapped files, symlinks and foreign files in the fan-out tree. Each
// is a clear error naming the file, and nothing else stored is lost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "fak/store/blob_store.h"
#include "src/store/blob_journal.h"
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

struct Fixture {
  ScopedTempDir tmp;
  std::string dir = tmp.Sub("s");
  std::vector<std::pair<Digest, std::string>> small, large;

  Fixture() {
    auto store = *OpenDirectoryBlobStore(dir);
    for (uint32_t i = 0; i < 5; ++i) {
      std::string s = "inline payload " + std::to_string(i), l = RandomBytes(2000 + i, i);
      small.emplace_back(*store->Put(s), s);
      large.emplace_back(*store->Put(l), l);
    }
  }
  void ExpectLargeIntact(BlobStore& store) const {
    for (const auto& [d, p] : large) EXPECT_EQ(*store.Get(d), p);
  }
};

TEST(BlobStoreBadInput, CorruptJournalRecordFailsOpenNamingFileAndOffset) {
  Fixture f;
  std::string journal = ReadAll(f.dir + "/journal");
  journal[16 + 4 + 33 + 3] ^= 0x40;  // a payload byte of the first record
  WriteAll(f.dir + "/journal", journal);
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(f.dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kCorruption);
  EXPECT_NE(s.error().message().find("journal"), std::string_view::npos) << s.error().ToString();
  EXPECT_NE(s.error().message().find("offset 16"), std::string_view::npos) << s.error().ToString();

  // Salvage opens with everything that verifies and keeps the damaged journal aside.
  BlobStoreOptions salvage;
  salvage.salvage_journal = true;
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir, salvage));
  EXPECT_EQ(store->Stats().n_corrupt_records, 1u);
  EXPECT_EQ(store->Get(f.small[0].first).error().code(), StatusCode::kNotFound);
  for (size_t i = 1; i < f.small.size(); ++i) EXPECT_EQ(*store->Get(f.small[i].first), f.small[i].second);
  f.ExpectLargeIntact(*store);
  EXPECT_TRUE(fs::exists(f.dir + "/journal.corrupt"));
  store.reset();
  ASSERT_OK_AND_ASSIGN(auto reopened, OpenDirectoryBlobStore(f.dir));  // the rewritten journal is clean
  EXPECT_EQ(reopened->Stats().n_blobs, 9u);
}

TEST(BlobStoreBadInput, ImpossibleRecordSizeIsCorruption) {
  Fixture f;
  std::string journal = ReadAll(f.dir + "/journal");
  journal[16 + 3] = '\x7f';  // the first record claims ~2 GiB
  WriteAll(f.dir + "/journal", journal);
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(f.dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kCorruption);
  EXPECT_NE(s.error().message().find("record size"), std::string_view::npos) << s.error().ToString();
}

TEST(BlobStoreBadInput, GarbageJournalHeaderIsCorruption) {
  Fixture f;
  WriteAll(f.dir + "/journal", RandomBytes(300, 5));
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(f.dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kCorruption);
  EXPECT_NE(s.error().message().find("header"), std::string_view::npos);
  BlobStoreOptions salvage;
  salvage.salvage_journal = true;
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir, salvage));
  f.ExpectLargeIntact(*store);  // blob files never depended on the journal
}

TEST(BlobStoreBadInput, RandomBytesInABlobFileFailVerification) {
  Fixture f;
  const std::string path = BlobFilePath(f.dir, f.large[2].first);
  std::string file = ReadAll(path);
  const std::string noise = RandomBytes(64, 9);
  file.replace(500, noise.size(), noise);  // same size, header intact, payload wrong
  WriteAll(path, file);
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir));
  Result<std::string> got = store->Get(f.large[2].first);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kVerificationFailed);
  EXPECT_NE(got.error().message().find(path), std::string_view::npos);
  EXPECT_EQ(store->Stats().n_verify_failures, 1u);
  // The damaged blob is out of service (still an error, not silent) and a Put of the true bytes repairs it.
  EXPECT_FALSE(store->Get(f.large[2].first).has_value());
  ASSERT_OK(store->Put(f.large[2].second));
  EXPECT_EQ(*store->Get(f.large[2].first), f.large[2].second);
  for (size_t i = 0; i < f.large.size(); ++i) EXPECT_EQ(*store->Get(f.large[i].first), f.large[i].second);
}

TEST(BlobStoreBadInput, TruncatedOrSwappedBlobFilesAreCorruption) {
  Fixture f;
  const std::string p0 = BlobFilePath(f.dir, f.large[0].first), p1 = BlobFilePath(f.dir, f.large[1].first);
  WriteAll(p0, ReadAll(p0).substr(0, 1000));
  const std::string p3 = BlobFilePath(f.dir, f.large[3].first), p4 = BlobFilePath(f.dir, f.large[4].first);
  const std::string b3 = ReadAll(p3), b4 = ReadAll(p4);
  WriteAll(p3, b4);
  WriteAll(p4, b3);
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir));
  EXPECT_EQ(store->Stats().n_corrupt_files, 3u);
  for (size_t i : {0, 3, 4}) {
    Result<std::string> got = store->Get(f.large[i].first);
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code(), StatusCode::kCorruption) << got.error().ToString();
  }
  EXPECT_NE(store->Get(f.large[0].first).error().message().find(p0), std::string_view::npos);
  EXPECT_EQ(*store->Get(f.large[1].first), f.large[1].second);
  EXPECT_EQ(ReadAll(p1).size(), 56 + f.large[1].second.size());
}

TEST(BlobStoreBadInput, SymlinksAreNeverFollowedOutOfTheStore) {
  Fixture f;
  // An attacker replaces a blob file with a link to a file outside the store that even holds the
  // right bytes, and links a whole fan-out directory elsewhere.
  const std::string outside = f.tmp.Sub("outside");
  fs::create_directories(outside);
  const std::string victim = BlobFilePath(f.dir, f.large[1].first);
  fs::copy_file(victim, outside + "/copy");
  fs::remove(victim);
  fs::create_symlink(outside + "/copy", victim);
  fs::create_directory_symlink(outside, f.dir + "/blobs/zz");
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir));
  Result<std::string> got = store->Get(f.large[1].first);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption);
  EXPECT_NE(got.error().message().find("symbolic link"), std::string_view::npos) << got.error().ToString();
  EXPECT_EQ(store->Stats().n_corrupt_files, 2u);
  EXPECT_EQ(*store->Get(f.large[0].first), f.large[0].second);
}

TEST(BlobStoreBadInput, ForeignFilesAreIgnoredAndKept) {
  Fixture f;
  const std::string fanout = fs::path(BlobFilePath(f.dir, f.large[0].first)).parent_path();
  WriteAll(fanout + "/notes.txt", "not a blob");
  WriteAll(f.dir + "/blobs/README", "not a fan-out dir");
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir));
  EXPECT_EQ(store->Stats().n_blobs, 10u);
  EXPECT_EQ(store->Stats().n_corrupt_files, 2u);
  EXPECT_EQ(ReadAll(fanout + "/notes.txt"), "not a blob");
  f.ExpectLargeIntact(*store);
}

TEST(BlobStoreBadInput, JournalRecordForTheWrongDigestIsRejected) {
  Fixture f;
  // A record whose own checksum is right but whose payload is not the digest's preimage: caught
  // by the payload check, so a forged journal cannot plant bytes under another digest.
  const std::string forged = internal::EncodeJournalRecord(internal::RecordType::kInlinePut, f.small[0].first, "forged bytes");
  WriteAll(f.dir + "/journal", ReadAll(f.dir + "/journal") + forged + ReadAll(f.dir + "/journal").substr(16, 60));
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(f.dir);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kCorruption) << s.error().ToString();
  BlobStoreOptions salvage;
  salvage.salvage_journal = true;
  ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(f.dir, salvage));
  EXPECT_EQ(*store->Get(f.small[0].first), f.small[0].second);  // the genuine record still stands
}

}  // namespace
}  // namespace fak
