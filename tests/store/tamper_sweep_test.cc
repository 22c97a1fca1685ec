// Tamper sweeps (issue 20): every single-bit flip of a blob-store journal (header and records) and
// of a blob file, and two flips of every byte of a recall image are detected — a typed error, or for
// the journal's last size field the torn-tail report — and never yields a silently different value.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "fak/recall/recall.h"
#include "fak/screen/screen.h"
#include "fak/store/blob_store.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::ReadAll;
using testing::ScopedTempDir;
using testing::WriteAll;

bool IsTypedError(StatusCode code) {
  return code == StatusCode::kCorruption || code == StatusCode::kUnsupported || code == StatusCode::kVerificationFailed ||
         code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound;
}

TEST(TamperSweep, EveryBitFlipOfABlobStoreJournalIsDetected) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s"), journal = dir + "/journal";
  const std::string payload = "an inline payload of the journal";
  const Digest d = Digest::Of(payload);
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(dir));
    ASSERT_OK(store->Put(payload));
    ASSERT_OK(store->Pin(d));
  }
  const std::string good = ReadAll(journal);
  int n_open_refused = 0, n_torn_reported = 0, n_silent = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      WriteAll(journal, bad);
      Result<std::unique_ptr<BlobStore>> store = OpenDirectoryBlobStore(dir);
      if (!store.has_value()) {
        EXPECT_TRUE(IsTypedError(store.error().code())) << "byte " << i << ": " << store.error().ToString();
        ++n_open_refused;
        continue;
      }
      // Opened: only a record that looks cut short may have been dropped, and it is reported.
      Result<std::string> got = (*store)->Get(d);
      if (got.has_value()) {
        EXPECT_EQ(*got, payload) << "byte " << i;  // verified, so never other bytes
      }
      const bool same = got.has_value() && (*store)->Stats().n_pinned == 1;
      if ((*store)->Stats().torn_tail_bytes > 0) {
        ++n_torn_reported;
      } else {
        n_silent += 1;
        ADD_FAILURE() << "flip of byte " << i << " bit " << bit << " went unnoticed (same state: " << same << ")";
      }
    }
  }
  std::cout << "[ tamper   ] journal " << good.size() << " bytes, " << good.size() * 8 << " flips: " << n_open_refused
            << " refused on open, " << n_torn_reported << " reported as a torn tail, " << n_silent << " silent\n";
}

TEST(TamperSweep, EveryBitFlipOfABlobFileIsDetected) {
  ScopedTempDir tmp;
  const std::string dir = tmp.Sub("s");
  const std::string payload = testing::RandomBytes(kInlineMaxBytes + 4, 7);  // just over inline: a file
  const Digest d = Digest::Of(payload);
  BlobStoreOptions no_sync;  // the sweep reopens thousands of times; durability is not what it checks
  no_sync.sync = false;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(dir, no_sync));
    ASSERT_OK(store->Put(payload));
  }
  const std::string path = testing::BlobFilePath(dir, d);
  const std::string good = ReadAll(path);
  ASSERT_EQ(good.size(), payload.size() + 56);
  int n_rejected_on_open = 0, n_refused_on_get = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      WriteAll(path, bad);
      ASSERT_OK_AND_ASSIGN(auto store, OpenDirectoryBlobStore(dir, no_sync));
      const bool rejected_on_open = store->Stats().n_corrupt_files > 0;
      Result<std::string> got = store->Get(d);
      if (got.has_value()) {
        ADD_FAILURE() << "flip of byte " << i << " bit " << bit << " went unnoticed (same bytes: " << (*got == payload) << ")";
        continue;
      }
      EXPECT_TRUE(IsTypedError(got.error().code())) << "byte " << i << ": " << got.error().ToString();
      ++(rejected_on_open ? n_rejected_on_open : n_refused_on_get);
    }
  }
  std::cout << "[ tamper   ] blob file " << good.size() << " bytes, " << good.size() * 8 << " flips: " << n_rejected_on_open
            << " rejected on open, " << n_refused_on_get << " refused by Get, 0 served\n";
}

TEST(TamperSweep, EveryBitFlipOfARecallImageIsDetected) {
  ScopedTempDir tmp;
  ASSERT_OK_AND_ASSIGN(auto store, RecallStore::Open(tmp.Sub("r")));
  const std::vector<RecallSegment> segs = {{"sys", SegmentKind::kSystem, "be brief"},
                                           {"u1", SegmentKind::kUser, "what is 2+2? " + std::string(300, '.')}};
  const ScreenChain chain = ScreenChain::Default();
  ASSERT_OK(store->Save("t", segs, chain));
  const std::string path = tmp.Sub("r/images/t.json");
  const std::string good = ReadAll(path);
  ASSERT_OK_AND_ASSIGN(RecalledTranscript want, store->Load("t", chain));
  int n_refused = 0, n_same = 0, n_different = 0;
  // Every byte, twice: all its bits, and one bit (rotating), which keeps most flips in ASCII.
  for (size_t i = 0; i < good.size(); ++i) {
    for (const int mask : {0xff, 1 << (i % 8)}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      WriteAll(path, bad);
      Result<RecalledTranscript> t = store->Load("t", chain);
      if (!t.has_value()) {
        EXPECT_TRUE(IsTypedError(t.error().code())) << "byte " << i << ": " << t.error().ToString();
        ++n_refused;
        continue;
      }
      // A flip the format cannot see (whitespace becoming whitespace) must not change a value.
      bool same = t->recorded_chain_id == want.recorded_chain_id && t->recorded_chain == want.recorded_chain &&
                  t->segments.size() == want.segments.size();
      for (size_t s = 0; same && s < want.segments.size(); ++s) {
        const RecalledSegment &a = t->segments[s], &b = want.segments[s];
        same = a.id == b.id && a.kind == b.kind && a.text == b.text && a.source_digest == b.source_digest &&
               a.recorded.action == b.recorded.action && a.recorded.reason == b.recorded.reason &&
               a.recorded.detector == b.recorded.detector;
      }
      if (same) {
        ++n_same;
      } else {
        ++n_different;
        ADD_FAILURE() << "flip of byte " << i << " by " << mask << " loaded a different transcript";
      }
    }
  }
  std::cout << "[ tamper   ] recall image " << good.size() << " bytes, " << good.size() * 2 << " flips: " << n_refused
            << " refused, " << n_same << " loaded the same values, " << n_different << " different\n";
}

}  // namespace
}  // namespace fak
