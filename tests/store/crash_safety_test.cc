// Crash safety: a child process writes blobs, pins and recall images and acknowledges each write
// that returned; the parent SIGKILLs it at a random point, reopens the stores and checks that
// every acknowledged write is there and verifies, and that nothing half-written is visible.
//
// The child is this test binary re-executed (fork + exec, so it starts single-threaded and clean)
// running CrashSafetyChild.Writer, which skips itself unless FAK_CRASH_CHILD_DIR is set.
// Default: 10 kill points. FAK_CRASH_TEST_FULL=1: 200. FAK_CRASH_TEST_SEED=<n> reproduces a run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "fak/store/blob_store.h"
#include "fak/recall/recall.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

extern char** environ;

namespace fak {
namespace {

using testing::RandomBytes;

constexpr const char* kChildDirEnv = "FAK_CRASH_CHILD_DIR";
constexpr const char* kChildSeedEnv = "FAK_CRASH_CHILD_SEED";
constexpr const char* kAckFdEnv = "FAK_CRASH_ACK_FD";

void Ack(int fd, const std::string& line) {
  const std::string l = line + "\n";  // < PIPE_BUF: one atomic write
  (void)!::write(fd, l.data(), l.size());
}

// The writer: runs only as the re-executed child.
TEST(CrashSafetyChild, Writer) {
  const char* dir = std::getenv(kChildDirEnv);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the child of CrashSafety tests";
  const int ack = std::atoi(std::getenv(kAckFdEnv));
  const uint32_t seed = static_cast<uint32_t>(std::atoi(std::getenv(kChildSeedEnv)));
  auto blobs = OpenDirectoryBlobStore(std::string(dir) + "/blobs");
  auto recall = RecallStore::Open(std::string(dir) + "/recall");
  if (!blobs.has_value() || !recall.has_value()) {
    Ack(ack, "E open failed");
    return;
  }
  Ack(ack, "R");
  std::mt19937 rng(seed);
  constexpr size_t kSizes[] = {10, 200, 256, 257, 4000, 70000};
  ScreenChain chain = ScreenChain::Default();
  for (uint32_t i = 0; i < 100000; ++i) {
    const std::string payload = RandomBytes(kSizes[rng() % 6], rng());
    Result<Digest> d = (*blobs)->Put(payload);
    if (!d.has_value()) return Ack(ack, "E " + d.error().ToString());
    Ack(ack, "B " + d->Hex());
    if (i % 5 == 0 && (*blobs)->Pin(*d).ok()) Ack(ack, "P " + d->Hex());
    if (i % 7 == 3) {
      const std::string name = "img-" + std::to_string(seed) + "-" + std::to_string(i);
      std::vector<RecallSegment> segs = {{"s", SegmentKind::kSystem, "system " + std::to_string(i)},
                                         {"u", SegmentKind::kUser, RandomBytes(300 + rng() % 700, rng())},
                                         {"t", SegmentKind::kToolResult, "tool said " + std::to_string(rng())}};
      if ((*recall)->Save(name, segs, chain).has_value()) Ack(ack, "I " + name);
    }
  }
}

struct Acks {
  std::set<Digest> blobs, pinned;
  std::set<std::string> images;
  std::vector<std::string> errors;
  // Evidence that kills landed mid-write: leftover temporaries and torn journal tails seen on reopen.
  int n_leftover_tmp = 0, n_torn_tails = 0;
};

int CountEntries(const std::string& dir) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); ++it) ++n;
  return n;
}

// Runs one child and kills it after a random delay; collects its acknowledgements into `acks`.
void RunAndKill(const std::string& dir, uint32_t seed, std::mt19937& rng, Acks* acks) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings = {std::string(kChildDirEnv) + "=" + dir, std::string(kChildSeedEnv) + "=" + std::to_string(seed),
                                          std::string(kAckFdEnv) + "=" + std::to_string(fds[1])};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = "fak_tests", arg1 = "--gtest_filter=CrashSafetyChild.Writer";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(devnull);
  // Usually wait for "ready" so the kill lands among writes (each fsynced write takes milliseconds);
  // sometimes kill during open and its recovery.
  std::string buffer;
  const bool during_open = rng() % 5 == 0;
  char chunk[4096];
  while (!during_open && buffer.find("R\n") == std::string::npos) {
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % (during_open ? 60000 : 200000)));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof(chunk))) > 0;) buffer.append(chunk, static_cast<size_t>(n));
  ::close(fds[0]);
  std::istringstream lines(buffer);
  for (std::string line; std::getline(lines, line);) {  // getline drops an unterminated tail
    if (line.size() > 2 && (line[0] == 'B' || line[0] == 'P')) {
      (line[0] == 'B' ? acks->blobs : acks->pinned).insert(*Digest::FromHex(line.substr(2)));
    } else if (line.size() > 2 && line[0] == 'I') {
      acks->images.insert(line.substr(2));
    } else if (line[0] == 'E') {
      acks->errors.push_back(line);
    }
  }
}

// Reopens both stores and checks every acknowledged write, and that whatever is visible verifies.
void CheckAfterCrash(const std::string& dir, Acks& acks) {
  acks.n_leftover_tmp += CountEntries(dir + "/blobs/tmp") + CountEntries(dir + "/recall/tmp") + CountEntries(dir + "/recall/blobs/tmp");
  ASSERT_OK_AND_ASSIGN(auto blobs, OpenDirectoryBlobStore(dir + "/blobs"));
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/blobs/tmp"));
  const BlobStoreStats st = blobs->Stats();
  acks.n_torn_tails += st.torn_tail_bytes > 0;
  EXPECT_EQ(st.n_corrupt_files, 0u);
  EXPECT_EQ(st.n_corrupt_records, 0u);
  for (const Digest& d : acks.blobs) {
    Result<std::string> got = blobs->Get(d);
    ASSERT_TRUE(got.has_value()) << "acknowledged blob " << d.Hex() << ": " << got.error().ToString();
  }
  for (const Digest& d : acks.pinned) EXPECT_EQ(blobs->Remove(d).code(), StatusCode::kFailedPrecondition) << d.Hex();
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> all, blobs->List());
  for (const Digest& d : all) ASSERT_TRUE(blobs->Get(d).has_value()) << "visible but unreadable: " << d.Hex();
  blobs.reset();

  ASSERT_OK_AND_ASSIGN(auto recall, RecallStore::Open(dir + "/recall"));
  ScreenChain chain = ScreenChain::Default();
  for (const std::string& name : acks.images) {
    Result<RecalledTranscript> t = recall->Load(name, chain);
    ASSERT_TRUE(t.has_value()) << "acknowledged image " << name << ": " << t.error().ToString();
    EXPECT_EQ(t->segments.size(), 3u);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, recall->ListImages());
  for (const std::string& name : names) ASSERT_TRUE(recall->Load(name, chain).has_value()) << "visible but broken image " << name;
}

TEST(CrashSafety, KillDuringWritesLosesNoAcknowledgedWrite) {
  const bool full = std::getenv("FAK_CRASH_TEST_FULL") != nullptr && std::string(std::getenv("FAK_CRASH_TEST_FULL")) == "1";
  const int n_kills = full ? 200 : 10;
  const char* seed_env = std::getenv("FAK_CRASH_TEST_SEED");
  const uint32_t seed = seed_env ? static_cast<uint32_t>(std::atoi(seed_env)) : 20240607u;
  std::printf("crash test: %d kill points, seed %u\n", n_kills, seed);
  std::mt19937 rng(seed);
  testing::ScopedTempDir tmp;
  Acks acks;  // cumulative: every earlier acknowledgement must survive every later crash too
  for (int k = 0; k < n_kills; ++k) {
    RunAndKill(tmp.path(), seed + static_cast<uint32_t>(k), rng, &acks);
    ASSERT_TRUE(acks.errors.empty()) << acks.errors.front();
    CheckAfterCrash(tmp.path(), acks);
    if (HasFatalFailure()) FAIL() << "after kill point " << k;
  }
  std::printf("crash test: %zu blobs, %zu pins, %zu images acknowledged and verified; kills left %d temporaries "
              "and %d torn journal tails behind\n",
              acks.blobs.size(), acks.pinned.size(), acks.images.size(), acks.n_leftover_tmp, acks.n_torn_tails);
  EXPECT_GT(acks.blobs.size(), 0u);
}

}  // namespace
}  // namespace fak
