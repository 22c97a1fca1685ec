// FileDenylist: seals that survive a reopen and a power cut; damage refused as Corruption naming
// the file and offset; a torn final record dropped; a failed Add (short write, ENOSPC, EIO, failed
// fsync) leaving the list as it was, in memory and on disk; one opener; concurrent Adds and Screens.
#include "fak/screen/file_denylist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "src/screen/denylist_format.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::EnvOp;
using testing::FaultInjectionEnv;
using testing::FaultKind;
using testing::ReadAll;
using testing::ScopedTempDir;
using testing::WriteAll;

Digest D(int i) { return Digest::Of("sealed text " + std::to_string(i)); }

Verdict ScreenDigest(const Admitter& a, const Digest& d) {
  return a.Screen(ScreenInput{.bytes = "", .kind = SegmentKind::kToolResult, .source_digest = d});
}

std::set<Digest> Listed(const FileDenylist& list) {
  std::set<Digest> out;
  for (const auto& [d, reason] : list.Entries()) out.insert(d);
  return out;
}

TEST(FileDenylist, SealsSurviveAReopenWithTheirReasons) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    EXPECT_EQ(list->size(), 0u);
    ASSERT_OK(list->Add(D(1), "user request: erasure"));
    ASSERT_OK(list->Add(D(2), "prompt_injection: matched 'exfiltrate'"));
    ASSERT_OK(list->Add(D(1), "user request: again"));  // a later reason replaces the earlier one
    EXPECT_EQ(list->size(), 2u);
  }
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(list->torn_tail_bytes(), 0u);
  ASSERT_OK_AND_ASSIGN(bool listed, list->IsQuarantined(D(2)));
  EXPECT_TRUE(listed);
  ASSERT_OK_AND_ASSIGN(bool other, list->IsQuarantined(D(3)));
  EXPECT_FALSE(other);  // control
  // Its verdicts are QuarantineDenylist's, word for word.
  QuarantineDenylist memory;
  ASSERT_OK(memory.Add(D(1), "user request: again"));
  ASSERT_OK(memory.Add(D(2), "prompt_injection: matched 'exfiltrate'"));
  for (int i : {1, 2, 3}) {
    const Verdict got = ScreenDigest(*list, D(i)), want = ScreenDigest(memory, D(i));
    EXPECT_EQ(got.action, want.action) << i;
    EXPECT_EQ(got.detector, want.detector) << i;
    EXPECT_EQ(got.reason, want.reason) << i;
  }
  EXPECT_TRUE(ScreenDigest(*list, D(1)).quarantined());
  EXPECT_NE(ScreenDigest(*list, D(1)).reason.find("user request: again"), std::string::npos);
  // Re-adding with the same reason writes nothing.
  const std::string before = ReadAll(path);
  ASSERT_OK(list->Add(D(2), "prompt_injection: matched 'exfiltrate'"));
  EXPECT_EQ(ReadAll(path), before);
}

TEST(FileDenylist, AsTheChainsDenylistItSealsTextByItsDigest) {
  ScopedTempDir tmp;
  {
    ScreenChain chain = ScreenChain::Default();
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(tmp.Sub("denylist")));
    ASSERT_OK(chain.set_denylist(list));
    ASSERT_OK(chain.denylist().Add(Digest::Of("my card number is 4111"), "user request"));
  }
  ScreenChain restarted = ScreenChain::Default();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(tmp.Sub("denylist")));
  ASSERT_OK(restarted.set_denylist(list));
  const Verdict v = restarted.Screen(ScreenInput{"my card number is 4111", SegmentKind::kUser, std::nullopt});
  EXPECT_TRUE(v.quarantined() && !v.unavailable());
  EXPECT_EQ(v.detector, "denylist");
  EXPECT_FALSE(restarted.Screen(ScreenInput{"my card number is 4112", SegmentKind::kUser, std::nullopt}).quarantined());
}

TEST(FileDenylist, AFileWithNothingInItIsCreatedDurably) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  const std::string path = tmp.Sub("denylist");
  ASSERT_OK(FileDenylist::Open(path, &env).status());
  ASSERT_OK(env.PowerLoss());  // the name and the header were synced before Open returned
  EXPECT_EQ(ReadAll(path), internal::DenylistHeader());
  EXPECT_EQ(env.count(EnvOp::kSyncDir), 1u);
}

TEST(FileDenylist, DamageIsCorruptionNamingTheFileAndOffset) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    for (int i = 0; i < 3; ++i) ASSERT_OK(list->Add(D(i), "reason " + std::to_string(i)));
  }
  const std::string good = ReadAll(path);
  const size_t record = internal::EncodeDenylistRecord(D(0), "reason 0").size();
  const size_t second = internal::kDenylistHeaderBytes + record;
  struct Case {
    std::string what;
    std::string bytes;
    StatusCode code;
    std::string names;  // a part of the message
  };
  std::string flipped_digest = good, flipped_check = good, bad_size = good, bad_type = good, bad_version = good;
  flipped_digest[second + 10] ^= 0x01;
  flipped_check[second + record - 1] ^= 0x80;
  bad_size[second + 3] = '\x7f';  // an impossible body size in a middle record
  // A record whose check covers a type no writer produces.
  bad_type = good.substr(0, second);
  {
    std::string rec = internal::EncodeDenylistRecord(D(1), "x");
    rec[4] = 9;
    rec = rec.substr(0, rec.size() - internal::kDenylistCheckBytes);
    const Digest check = Digest::Of(rec);
    rec.append(reinterpret_cast<const char*>(check.bytes.data()), internal::kDenylistCheckBytes);
    bad_type += rec;
  }
  bad_version[8] = 2;
  const std::vector<Case> cases = {
      {"flipped digest", flipped_digest, StatusCode::kCorruption, "offset " + std::to_string(second)},
      {"flipped check", flipped_check, StatusCode::kCorruption, "offset " + std::to_string(second)},
      {"impossible size", bad_size, StatusCode::kCorruption, "offset " + std::to_string(second)},
      {"unknown type", bad_type, StatusCode::kCorruption, "offset " + std::to_string(second)},
      {"short header", good.substr(0, 10), StatusCode::kCorruption, "header"},
      {"other magic", "FAKJRNL1" + good.substr(8), StatusCode::kCorruption, "header"},
      {"other version", bad_version, StatusCode::kUnsupported, "version 2"},
  };
  for (const Case& c : cases) {
    WriteAll(path, c.bytes);
    Result<std::shared_ptr<FileDenylist>> opened = FileDenylist::Open(path);
    ASSERT_FALSE(opened.has_value()) << c.what;
    EXPECT_EQ(opened.error().code(), c.code) << c.what << ": " << opened.error().ToString();
    EXPECT_NE(opened.error().message().find(path), std::string::npos) << c.what << ": " << opened.error().ToString();
    EXPECT_NE(opened.error().message().find(c.names), std::string::npos) << c.what << ": " << opened.error().ToString();
    EXPECT_EQ(ReadAll(path), c.bytes) << c.what;  // a damaged file is left as it is, for inspection
  }
  WriteAll(path, good);  // control: the undamaged file opens
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
  EXPECT_EQ(list->size(), 3u);
}

TEST(FileDenylist, ATornFinalRecordIsDroppedAndCutOff) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    ASSERT_OK(list->Add(D(1), "kept"));
  }
  const std::string good = ReadAll(path);
  const std::string next = internal::EncodeDenylistRecord(D(2), "never acknowledged");
  // Every cut of the next record: a crash mid-Add may leave any prefix of it.
  for (size_t cut : {size_t{1}, size_t{3}, size_t{4}, size_t{20}, next.size() - 1}) {
    WriteAll(path, good + next.substr(0, cut));
    {
      ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
      EXPECT_EQ(list->torn_tail_bytes(), cut) << cut;
      EXPECT_EQ(Listed(*list), std::set<Digest>{D(1)}) << cut;
      EXPECT_EQ(ReadAll(path), good) << cut;  // cut off before anything is appended after it
      ASSERT_OK(list->Add(D(3), "after the tear"));
    }
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    EXPECT_EQ(list->torn_tail_bytes(), 0u) << cut;
    EXPECT_EQ(Listed(*list), (std::set<Digest>{D(1), D(3)})) << cut;
    WriteAll(path, good);
  }
}

TEST(FileDenylist, AFailedAddLeavesTheListAsItWas) {
  struct Fault {
    EnvOp op;
    FaultKind kind;
  };
  for (const Fault& f : {Fault{EnvOp::kAppend, FaultKind::kShortWrite}, Fault{EnvOp::kAppend, FaultKind::kNoSpace},
                         Fault{EnvOp::kAppend, FaultKind::kIOError}, Fault{EnvOp::kSync, FaultKind::kIOError}}) {
    const std::string what = std::string(testing::EnvOpName(f.op)) + "/" + std::to_string(static_cast<int>(f.kind));
    SCOPED_TRACE(what);
    ScopedTempDir tmp;
    FaultInjectionEnv env;
    const std::string path = tmp.Sub("denylist");
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path, &env));
    ASSERT_OK(list->Add(D(1), "acknowledged"));
    const std::string before = ReadAll(path);
    env.FailNth(f.op, 1, f.kind);
    const Status failed = list->Add(D(2), "fails");
    ASSERT_FALSE(failed.ok()) << what;
    EXPECT_NE(failed.message().find(path), std::string::npos) << what << ": " << failed.ToString();
    EXPECT_FALSE(list->Contains(D(2))) << what;
    EXPECT_FALSE(ScreenDigest(*list, D(2)).quarantined()) << what;
    EXPECT_EQ(ReadAll(path), before) << what;  // rolled back, not left as a torn record
    // Not poisoned: the next Add lands on a clean tail.
    ASSERT_OK(list->Add(D(3), "after the failure"));
    list.reset();
    // Even a power cut that keeps every unsynced byte brings back no trace of the failed Add.
    ASSERT_OK(env.PowerLoss(/*keep_unsynced_bytes=*/1 << 20));
    ASSERT_OK_AND_ASSIGN(list, FileDenylist::Open(path, &env));
    EXPECT_EQ(Listed(*list), (std::set<Digest>{D(1), D(3)})) << what;
    EXPECT_EQ(list->torn_tail_bytes(), 0u) << what;
  }
}

TEST(FileDenylist, AFailedRollbackRefusesAddsUntilReopened) {
  ScopedTempDir tmp;
  FaultInjectionEnv env;
  const std::string path = tmp.Sub("denylist");
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path, &env));
  ASSERT_OK(list->Add(D(1), "acknowledged"));
  env.FailNth(EnvOp::kAppend, 1, FaultKind::kShortWrite);
  env.FailNth(EnvOp::kTruncate, 1);
  EXPECT_FALSE(list->Add(D(2), "fails").ok());
  const Status refused = list->Add(D(3), "refused");
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_FALSE(list->Contains(D(2)) || list->Contains(D(3)));
  EXPECT_TRUE(list->Contains(D(1)));  // reads go on
  list.reset();
  // The reopen finds the half record the failed Add left: a torn tail, dropped.
  ASSERT_OK_AND_ASSIGN(list, FileDenylist::Open(path, &env));
  EXPECT_GT(list->torn_tail_bytes(), 0u);
  EXPECT_EQ(Listed(*list), std::set<Digest>{D(1)});
  ASSERT_OK(list->Add(D(3), "after the reopen"));
}

// A crash at every append and fsync of a run of Adds, then a power cut (keeping a torn piece of
// what was unsynced): every acknowledged seal is there after the reopen, and nothing else but the
// one Add in flight.
TEST(FileDenylist, PowerLossAtEveryPointKeepsEveryAcknowledgedSeal) {
  for (EnvOp op : {EnvOp::kAppend, EnvOp::kSync}) {
    for (uint64_t nth = 1; nth <= 6; ++nth) {
      for (size_t keep : {size_t{0}, size_t{9}, size_t{1} << 20}) {
        const std::string what = std::string(testing::EnvOpName(op)) + " #" + std::to_string(nth) + " keep " +
                                 std::to_string(keep);
        SCOPED_TRACE(what);
        ScopedTempDir tmp;
        FaultInjectionEnv env;
        const std::string path = tmp.Sub("denylist");
        std::set<Digest> acknowledged;
        std::optional<Digest> in_flight;
        {
          ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path, &env));
          env.ResetCounts();
          env.FailNth(op, nth, FaultKind::kCrash);
          for (int i = 0; i < 5; ++i) {
            if (list->Add(D(i), "reason " + std::to_string(i)).ok()) {
              acknowledged.insert(D(i));
            } else if (!in_flight) {
              in_flight = D(i);
            }
          }
        }
        ASSERT_OK(env.PowerLoss(keep));
        ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path, &env));
        std::set<Digest> allowed = acknowledged;
        if (in_flight) allowed.insert(*in_flight);
        const std::set<Digest> got = Listed(*list);
        EXPECT_TRUE(std::includes(got.begin(), got.end(), acknowledged.begin(), acknowledged.end())) << what;
        EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), got.begin(), got.end())) << what;
        EXPECT_EQ(acknowledged.size(), nth <= 5 ? nth - 1 : 5u) << what;  // non-vacuous: the crash hit
      }
    }
  }
}

TEST(FileDenylist, OneOpenerAtATime) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> first, FileDenylist::Open(path));
  Result<std::shared_ptr<FileDenylist>> second = FileDenylist::Open(path);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), StatusCode::kFailedPrecondition) << second.error().ToString();
  first.reset();
  EXPECT_OK(FileDenylist::Open(path).status());
}

TEST(FileDenylist, LongReasonsAreCutTheSameInMemoryAndOnDisk) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  const std::string reason(FileDenylist::kMaxReasonBytes + 100, 'r');
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    ASSERT_OK(list->Add(D(1), reason));
    EXPECT_EQ(list->Entries()[0].second, reason.substr(0, FileDenylist::kMaxReasonBytes));
  }
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
  EXPECT_EQ(list->Entries()[0].second, reason.substr(0, FileDenylist::kMaxReasonBytes));
}

TEST(FileDenylist, ConcurrentAddsAndScreensLoseNothing) {
  ScopedTempDir tmp;
  const std::string path = tmp.Sub("denylist");
  constexpr int kThreads = 4, kPerThread = 25;
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
    std::atomic<bool> done{false};
    std::atomic<int> failures{0};
    std::thread reader([&] {
      while (!done.load()) {
        for (int i = 0; i < kThreads * kPerThread; ++i) (void)ScreenDigest(*list, D(i));
      }
    });
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          if (!list->Add(D(i), "thread " + std::to_string(t)).ok()) failures.fetch_add(1);
          // Acknowledged means visible at once.
          if (!list->Contains(D(i))) failures.fetch_add(1);
        }
      });
    }
    for (std::thread& w : writers) w.join();
    done.store(true);
    reader.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(list->size(), size_t{kThreads * kPerThread});
  }
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<FileDenylist> list, FileDenylist::Open(path));
  EXPECT_EQ(list->size(), size_t{kThreads * kPerThread});
  EXPECT_EQ(list->torn_tail_bytes(), 0u);
}

}  // namespace
}  // namespace fak
