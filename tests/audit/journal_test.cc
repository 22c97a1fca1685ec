// Journal: hash chain, every detectable tamper with its own fault, fsync failure and crash
// recovery through FaultInjectionEnv, and the default POSIX Env.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "fak/audit/audit.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::EnvOp;
using testing::FaultKind;

// A FaultInjectionEnv over a temporary directory holding the journal, with a manual clock.
class JournalEnv : public testing::FaultInjectionEnv {
 public:
  JournalEnv() { UseManualClock(1'700'000'000'000'000, 1000); }
  std::string path() const { return tmp_.Sub("audit.journal"); }

 private:
  testing::ScopedTempDir tmp_;
};

std::unique_ptr<Journal> OpenOrDie(JournalEnv* env) {
  JournalOptions o;
  o.env = env;
  auto j = Journal::Open(env->path(), o);
  EXPECT_TRUE(j.has_value()) << j.error().ToString();
  return j.has_value() ? std::move(*j) : nullptr;
}

// A journal of `n` rows with subjects "subject-1".."subject-n"; returns its file bytes.
std::string MakeJournal(JournalEnv* env, int n) {
  auto j = OpenOrDie(env);
  for (int i = 1; i <= n; ++i) {
    auto r = j->Append("test", "subject-" + std::to_string(i), R"({"i":)" + std::to_string(i) + R"(,"note":"row"})");
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
  }
  return *env->ReadFile(env->path());
}

std::vector<std::string> Lines(const std::string& bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = bytes.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(bytes.substr(at, nl - at));
  return out;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST(Journal, AppendChainsAndReopens) {
  JournalEnv env;
  MakeJournal(&env, 4);
  auto j = OpenOrDie(&env);
  ASSERT_EQ(j->rows().size(), 4u);
  EXPECT_EQ(j->recovered_torn_bytes(), 0u);
  EXPECT_TRUE(j->rows()[0].prev_hash.IsZero());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j->rows()[i].seq, i + 1);
    if (i > 0) {
      EXPECT_EQ(j->rows()[i].prev_hash, j->rows()[i - 1].hash);
    }
    ASSERT_OK_AND_ASSIGN(Digest h, ComputeJournalRowHash(j->rows()[i]));
    EXPECT_EQ(h, j->rows()[i].hash);
  }
  EXPECT_EQ(j->rows()[1].payload_json, R"({"i":2,"note":"row"})");  // canonical: sorted, no spaces
  ASSERT_OK_AND_ASSIGN(JournalRow r5, j->Append("test", "subject-5", R"({ "z": 1, "a": [1, 2] })"));
  EXPECT_EQ(r5.seq, 5u);
  EXPECT_EQ(r5.payload_json, R"({"a":[1,2],"z":1})");
  EXPECT_TRUE(j->Verify().ok()) << j->Verify().detail;
  EXPECT_EQ(j->head().seq, 5u);
  ASSERT_OK_AND_ASSIGN(JournalRow got, j->Row(3));
  EXPECT_EQ(got.subject, "subject-3");
  EXPECT_EQ(j->Row(6).status().code(), StatusCode::kNotFound);
}

TEST(Journal, EveryAppendIsSynced) {
  JournalEnv env;
  auto j = OpenOrDie(&env);
  for (int i = 0; i < 3; ++i) ASSERT_OK(j->Append("k", "s", "{}"));
  EXPECT_EQ(env.count(EnvOp::kSync), 3u);
  j.reset();  // the process dies, and its lock with it
  ASSERT_OK(env.PowerLoss());  // nothing unsynced to lose
  EXPECT_EQ(OpenOrDie(&env)->rows().size(), 3u);
}

TEST(Journal, AppendRejectsBadInput) {
  JournalEnv env;
  auto j = OpenOrDie(&env);
  EXPECT_EQ(j->Append("", "s", "{}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j->Append("k", "s", "[1,2]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j->Append("k", "s", "{not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(j->Append("k", std::string("bad utf8 \xff"), "{}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(j->rows().empty());  // failed calls change nothing
  ASSERT_OK(j->Append("k", "s", "{}"));
  EXPECT_EQ(j->rows()[0].seq, 1u);
}

TEST(Journal, VerifyHonestBytes) {
  JournalEnv env;
  const std::string bytes = MakeJournal(&env, 5);
  JournalCheck c = VerifyJournalBytes(bytes);
  EXPECT_TRUE(c.ok()) << c.detail;
  EXPECT_EQ(c.n_rows, 5u);
  EXPECT_TRUE(VerifyJournalBytes("").ok());
}

TEST(Journal, EditedFieldIsDetected) {
  JournalEnv env;
  auto lines = Lines(MakeJournal(&env, 5));
  const size_t at = lines[1].find("subject-2");
  lines[1].replace(at, 9, "subject-X");
  JournalCheck c = VerifyJournalBytes(Join(lines));
  EXPECT_EQ(c.fault, JournalFault::kEditedRow);
  EXPECT_EQ(c.bad_line, 2u);
  EXPECT_EQ(c.n_rows, 1u);
  EXPECT_EQ(c.ToStatus().code(), StatusCode::kVerificationFailed);
}

TEST(Journal, EditedRowWithRecomputedHashBreaksTheLink) {
  JournalEnv env;
  MakeJournal(&env, 5);
  auto journal = OpenOrDie(&env);
  std::vector<JournalRow> rows(journal->rows().begin(), journal->rows().end());
  rows[1].subject = "relabelled";
  rows[1].hash = *ComputeJournalRowHash(rows[1]);
  std::vector<std::string> lines;
  for (const auto& r : rows) lines.push_back(*EncodeJournalRow(r));
  JournalCheck c = VerifyJournalBytes(Join(lines));
  EXPECT_EQ(c.fault, JournalFault::kBadLink);
  EXPECT_EQ(c.bad_line, 3u);
  // Editing the last row this way is caught only against an expected head (e.g. a certificate's).
  rows = std::vector<JournalRow>(journal->rows().begin(), journal->rows().end());
  const JournalHead head{rows[4].seq, rows[4].hash};
  rows[4].subject = "relabelled";
  rows[4].hash = *ComputeJournalRowHash(rows[4]);
  EXPECT_TRUE(VerifyJournalRows(rows).ok());
  EXPECT_EQ(VerifyJournalRows(rows, head).fault, JournalFault::kEditedRow);
}

TEST(Journal, ReorderedMissingAndInsertedRows) {
  JournalEnv env;
  const auto lines = Lines(MakeJournal(&env, 5));
  auto swapped = lines;
  std::swap(swapped[1], swapped[2]);
  JournalCheck c = VerifyJournalBytes(Join(swapped));
  EXPECT_EQ(c.fault, JournalFault::kReorderedRow) << c.detail;
  EXPECT_EQ(c.bad_line, 2u);

  auto missing = lines;
  missing.erase(missing.begin() + 2);
  c = VerifyJournalBytes(Join(missing));
  EXPECT_EQ(c.fault, JournalFault::kMissingRow) << c.detail;
  EXPECT_EQ(c.bad_line, 3u);

  // A forged row spliced in after row 2 with a correct link and hash: the old row 3 then repeats seq 3.
  auto journal = OpenOrDie(&env);
  auto rows = journal->rows();
  JournalRow forged{3, 1, "test", "forged", "{}", rows[1].hash, {}};
  forged.hash = *ComputeJournalRowHash(forged);
  auto inserted = lines;
  inserted.insert(inserted.begin() + 2, *EncodeJournalRow(forged));
  c = VerifyJournalBytes(Join(inserted));
  EXPECT_EQ(c.fault, JournalFault::kInsertedRow) << c.detail;
  EXPECT_EQ(c.bad_line, 4u);
}

TEST(Journal, TornTailTruncationAndMalformedRows) {
  JournalEnv env;
  const std::string bytes = MakeJournal(&env, 5);
  auto journal = OpenOrDie(&env);
  const auto rows = journal->rows();
  const JournalHead head{5, rows[4].hash};
  JournalCheck c = VerifyJournalBytes(bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(c.fault, JournalFault::kTornTail);
  EXPECT_EQ(c.n_rows, 4u);

  auto lines = Lines(bytes);
  lines.pop_back();
  EXPECT_TRUE(VerifyJournalBytes(Join(lines)).ok());  // whole rows cut off: invisible to the chain alone
  c = VerifyJournalBytes(Join(lines), head);
  EXPECT_EQ(c.fault, JournalFault::kTruncated);

  lines = Lines(bytes);
  lines[2] = "{not json";
  EXPECT_EQ(VerifyJournalBytes(Join(lines)).fault, JournalFault::kMalformedRow);
  lines = Lines(bytes);
  lines[2].insert(1, " ");  // same content, not canonical
  c = VerifyJournalBytes(Join(lines));
  EXPECT_EQ(c.fault, JournalFault::kMalformedRow);
  EXPECT_EQ(c.bad_line, 3u);
  lines = Lines(bytes);
  lines[2].insert(lines[2].size() - 1, R"(,"zz":1)");  // an extra field the hash would not cover
  EXPECT_EQ(VerifyJournalBytes(Join(lines)).fault, JournalFault::kMalformedRow);
}

TEST(Journal, VerifyRereadsTheFile) {
  JournalEnv env;
  const std::string bytes = MakeJournal(&env, 3);
  auto j = OpenOrDie(&env);
  ASSERT_TRUE(j->Verify().ok());
  std::string edited = bytes;
  edited.replace(edited.find("subject-1"), 9, "subject-9");
  ASSERT_OK(env.WriteDurably(env.path(), edited));
  EXPECT_EQ(j->Verify().fault, JournalFault::kEditedRow);
  auto lines = Lines(bytes);
  lines.pop_back();
  ASSERT_OK(env.WriteDurably(env.path(), Join(lines)));
  EXPECT_EQ(j->Verify().fault, JournalFault::kTruncated);  // against the journal's own head
}

TEST(Journal, OpenRefusesABrokenChain) {
  JournalEnv env;
  auto lines = Lines(MakeJournal(&env, 3));
  std::swap(lines[0], lines[1]);
  ASSERT_OK(env.WriteDurably(env.path(), Join(lines)));
  JournalOptions o;
  o.env = &env;
  auto j = Journal::Open(env.path(), o);
  ASSERT_FALSE(j.has_value());
  EXPECT_EQ(j.error().code(), StatusCode::kCorruption);
  EXPECT_NE(j.error().message().find("reordered_row"), std::string_view::npos) << j.error().ToString();
}

TEST(Journal, FsyncFailureThenCrashRecoversTornTail) {
  JournalEnv env;
  MakeJournal(&env, 3);
  auto j = OpenOrDie(&env);
  env.FailNth(EnvOp::kSync, 1);
  auto failed = j->Append("test", "subject-4", R"({"i":4})");
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), StatusCode::kIOError);
  EXPECT_EQ(j->rows().size(), 3u);
  // The durable state is unknown: the journal refuses to go on until it is reopened.
  EXPECT_EQ(j->Append("test", "subject-5", "{}").status().code(), StatusCode::kFailedPrecondition);

  j.reset();  // the process dies, and its lock with it
  ASSERT_OK(env.PowerLoss(/*keep_unsynced_bytes=*/25));  // the power cut left a torn prefix of row 4
  JournalCheck torn = VerifyJournalBytes(*env.ReadFile(env.path()));
  EXPECT_EQ(torn.fault, JournalFault::kTornTail);
  auto reopened = OpenOrDie(&env);
  EXPECT_EQ(reopened->rows().size(), 3u);
  EXPECT_EQ(reopened->recovered_torn_bytes(), 25u);
  EXPECT_NE(reopened->recovery_note().find("recovered to the last whole row"), std::string::npos) << reopened->recovery_note();
  EXPECT_TRUE(reopened->Verify().ok());
  ASSERT_OK_AND_ASSIGN(JournalRow r4, reopened->Append("test", "subject-4", R"({"i":4})"));
  EXPECT_EQ(r4.seq, 4u);
  EXPECT_EQ(r4.prev_hash, reopened->rows()[2].hash);
  EXPECT_TRUE(VerifyJournalBytes(*env.ReadFile(env.path())).ok());
}

TEST(Journal, TornTailWithoutRecoveryIsCorruption) {
  JournalEnv env;
  const std::string bytes = MakeJournal(&env, 2);
  ASSERT_OK(env.WriteDurably(env.path(), bytes + R"({"hash":"ab)"));
  JournalOptions o;
  o.env = &env;
  o.recover_torn_tail = false;
  auto j = Journal::Open(env.path(), o);
  ASSERT_FALSE(j.has_value());
  EXPECT_EQ(j.error().code(), StatusCode::kCorruption);
  EXPECT_EQ(ReadJournalRows(env.path(), &env).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(*env.ReadFile(env.path()), bytes + R"({"hash":"ab)");  // left as it was
}

TEST(Journal, ShortWriteIsAFailedAppendAndRecovers) {
  JournalEnv env;
  MakeJournal(&env, 2);
  auto j = OpenOrDie(&env);
  env.FailNth(EnvOp::kAppend, 1, FaultKind::kShortWrite);
  EXPECT_EQ(j->Append("test", "s", "{}").status().code(), StatusCode::kIOError);
  j.reset();  // the process dies, and its lock with it
  ASSERT_OK(env.PowerLoss(/*keep_unsynced_bytes=*/1000));  // the half-written row survived the crash
  auto reopened = OpenOrDie(&env);
  EXPECT_EQ(reopened->rows().size(), 2u);
  EXPECT_GT(reopened->recovered_torn_bytes(), 0u);
}

TEST(Journal, CrashKeepingAWholeUnsyncedRowKeepsIt) {
  JournalEnv env;
  MakeJournal(&env, 2);
  auto j = OpenOrDie(&env);
  env.FailNth(EnvOp::kSync, 1);
  ASSERT_FALSE(j->Append("test", "subject-3", "{}").has_value());
  j.reset();  // the process dies, and its lock with it
  ASSERT_OK(env.PowerLoss(/*keep_unsynced_bytes=*/1 << 20));
  auto reopened = OpenOrDie(&env);  // a failed append may survive whole; never half
  EXPECT_EQ(reopened->rows().size(), 3u);
  EXPECT_TRUE(reopened->Verify().ok());
}

TEST(Journal, PowerLossAtEveryAppendOrSyncKeepsEveryAcknowledgedRow) {
  for (EnvOp op : {EnvOp::kCreate, EnvOp::kSyncDir, EnvOp::kAppend, EnvOp::kSync}) {
    for (uint64_t i = 1; i <= (op == EnvOp::kCreate || op == EnvOp::kSyncDir ? 1u : 4u); ++i) {
      const std::string where = std::string(EnvOpName(op)) + " #" + std::to_string(i);
      JournalEnv env;
      env.FailNth(op, i, FaultKind::kCrash);
      std::vector<JournalRow> acked;
      {
        JournalOptions o;
        o.env = &env;
        Result<std::unique_ptr<Journal>> j = Journal::Open(env.path(), o);
        for (int k = 1; j.has_value() && k <= 4; ++k) {
          Result<JournalRow> row = (*j)->Append("test", "subject-" + std::to_string(k), "{}");
          if (!row.has_value()) break;
          acked.push_back(*row);
        }
      }
      ASSERT_OK(env.PowerLoss());
      auto reopened = OpenOrDie(&env);
      ASSERT_NE(reopened, nullptr) << where;
      ASSERT_EQ(reopened->rows().size(), acked.size()) << where;
      for (size_t k = 0; k < acked.size(); ++k) EXPECT_EQ(reopened->rows()[k].hash, acked[k].hash) << where;
      EXPECT_TRUE(reopened->Verify().ok()) << where;
    }
  }
}

TEST(Journal, RealFileRoundTrip) {
  char dir_template[] = "/tmp/fak_journal_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string path = std::string(dir_template) + "/audit.journal";
  {
    ASSERT_OK_AND_ASSIGN(auto j, Journal::Open(path));
    ASSERT_OK(j->Append("test", "a", R"({"x":1})"));
    ASSERT_OK(j->Append("test", "b", R"({"x":2})"));
  }
  ASSERT_OK_AND_ASSIGN(auto j, Journal::Open(path));
  EXPECT_EQ(j->rows().size(), 2u);
  EXPECT_TRUE(j->Verify().ok());
  ASSERT_OK_AND_ASSIGN(auto rows, ReadJournalRows(path));
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_TRUE(VerifyJournalRows(rows, j->head()).ok());
  ::unlink(path.c_str());
  ::unlink((path + ".lock").c_str());
  ::rmdir(dir_template);
}

TEST(Journal, SecondOpenerIsRefusedWithTheLockPath) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.Sub("audit.journal");
  {
    ASSERT_OK_AND_ASSIGN(auto writer, Journal::Open(path));
    ASSERT_OK(writer->Append("test", "a", R"({"x":1})"));
    Result<std::unique_ptr<Journal>> second = Journal::Open(path);
    ASSERT_FALSE(second.has_value());
    EXPECT_EQ(second.error().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.error().message().find(path + ".lock"), std::string_view::npos) << second.error().ToString();
    EXPECT_NE(second.error().message().find("in use"), std::string_view::npos) << second.error().ToString();
    // Readers need no lock, and the refused opener wrote nothing.
    ASSERT_OK_AND_ASSIGN(auto rows, ReadJournalRows(path));
    EXPECT_EQ(rows.size(), 1u);
    ASSERT_OK(writer->Append("test", "b", R"({"x":2})"));
  }
  ASSERT_OK_AND_ASSIGN(auto reopened, Journal::Open(path));  // released on close
  EXPECT_EQ(reopened->rows().size(), 2u);
  EXPECT_TRUE(reopened->Verify().ok());
}

}  // namespace
}  // namespace fak
