// The fleet tier across processes and failures, against a real redis-server:
//  - two processes share one corpus and one denylist: a child (this binary re-executed, running
//    RedisFleetChild.Worker) writes text, pins and a denylist entry; the parent reads them, and
//    its screen chain blocks (for backfill) the text the child listed; an entry the parent adds is
//    seen by the child.
//  - Redis SIGKILLed under load: every call fails with a clear Unavailable in bounded time, and no read
//    ever returns wrong bytes; after a restart on the same AOF every acknowledged write, pin and
//    listing is back and the same handles work again (an idle one included).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "fak/store/redis_store.h"
#include "fak/store/text_corpus.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

extern char** environ;

namespace fak {
namespace {

using testing::RandomBytes;
using testing::RedisServer;

constexpr const char* kChildPortEnv = "FAK_REDIS_CHILD_PORT";
constexpr const char* kChildAckFdEnv = "FAK_REDIS_CHILD_ACK_FD";
constexpr int kChildTexts = 40;

std::string ChildText(int i) { return "child text " + std::to_string(i) + " " + RandomBytes(200 + i * 37, i); }
const std::string kChildPoison = "text the child quarantined";
const std::string kParentPoison = "text the parent quarantined";

void Ack(int fd, const std::string& line) {
  const std::string l = line + "\n";
  (void)!::write(fd, l.data(), l.size());
}

// The child: runs only when re-executed by SharedCorpusAndDenylistAcrossProcesses.
TEST(RedisFleetChild, Worker) {
  const char* port = std::getenv(kChildPortEnv);
  if (port == nullptr) GTEST_SKIP() << "runs only as the child of RedisFleet tests";
  const int ack = std::atoi(std::getenv(kChildAckFdEnv));
  RedisOptions o;
  o.port = std::atoi(port);
  o.prefix = "faktest";
  auto store = OpenRedisBlobStore(o);
  auto denylist = RedisDenylist::Open(o);
  if (!store.has_value() || !denylist.has_value()) return Ack(ack, "E open failed");
  TextCorpus corpus(**store);
  for (int i = 0; i < kChildTexts; ++i) {
    Result<Digest> d = corpus.PutSource(ChildText(i));
    if (!d.has_value()) return Ack(ack, "E " + d.error().ToString());
    if (i % 4 == 0 && !corpus.PinSource(*d).ok()) return Ack(ack, "E pin failed");
  }
  if (!(*denylist)->Add(Digest::Of(kChildPoison), "child: injection found").ok()) return Ack(ack, "E add failed");
  Ack(ack, "DONE");
  for (int i = 0; i < 1000; ++i) {  // up to 10 s for the parent's listing
    Result<bool> q = (*denylist)->IsQuarantined(Digest::Of(kParentPoison));
    if (q.has_value() && *q) return Ack(ack, "SAW");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Ack(ack, "E never saw the parent's listing");
}

// Reads lines from `fd` until one starts with `want` or 'E', or EOF.
std::string ReadUntil(int fd, const std::string& want, std::string* buffer) {
  char chunk[512];
  for (;;) {
    std::istringstream lines(*buffer);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(want, 0) == 0 || line.rfind("E", 0) == 0) return line;
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) return "EOF";
    buffer->append(chunk, static_cast<size_t>(n));
  }
}

pid_t SpawnChild(int port, int ack_fd) {
  std::vector<std::string> env = {std::string(kChildPortEnv) + "=" + std::to_string(port),
                                  std::string(kChildAckFdEnv) + "=" + std::to_string(ack_fd)};
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string arg0 = "fak_tests", arg1 = "--gtest_filter=RedisFleetChild.Worker";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  ::close(devnull);
  return pid;
}

TEST(RedisFleetTest, SharedCorpusAndDenylistAcrossProcesses) {
  FAK_REQUIRE_REDIS();
  testing::ScopedTempDir tmp;
  RedisServer server(tmp.path());
  ASSERT_TRUE(server.Start());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = SpawnChild(server.port(), fds[1]);
  ASSERT_GT(pid, 0);
  ::close(fds[1]);
  std::string buffer;
  ASSERT_EQ(ReadUntil(fds[0], "DONE", &buffer), "DONE");

  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(server.Options()));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<RedisDenylist> fleet, RedisDenylist::Open(server.Options()));
  TextCorpus corpus(*store);
  for (int i = 0; i < kChildTexts; ++i) {
    const Digest d = Digest::Of(ChildText(i));
    ASSERT_OK_AND_ASSIGN(std::string text, corpus.GetSource(d));
    EXPECT_EQ(text, ChildText(i));
    EXPECT_EQ(store->Remove(d).code(), i % 4 == 0 ? StatusCode::kFailedPrecondition : StatusCode::kOk) << i;
  }
  // Backfill consults the chain (or IsQuarantined) before prefilling: the child's listing blocks it here.
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK(chain.Add(fleet));
  const Verdict v = chain.Screen({kChildPoison, SegmentKind::kToolResult, std::nullopt});
  EXPECT_TRUE(v.quarantined());
  EXPECT_NE(v.reason.find("child: injection found"), std::string::npos) << v.reason;
  ASSERT_OK(fleet->Add(Digest::Of(kParentPoison), "parent: secrets found"));
  EXPECT_EQ(ReadUntil(fds[0], "SAW", &buffer), "SAW");
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

struct Acked {
  std::mutex mu;
  std::vector<std::pair<Digest, std::string>> blobs;  // GUARDED_BY(mu)
};

// Puts and reads back in a loop until `stop`; counts failures; any wrong bytes fail the test.
void LoadLoop(BlobStore* store, Acked* acked, std::atomic<bool>* stop, std::atomic<int>* n_errors,
              std::atomic<int>* n_bad_errors, std::atomic<double>* worst_call_s, const std::string& endpoint) {
  for (uint32_t i = 0; !*stop; ++i) {
    const std::string payload = RandomBytes(64 + i % 3000, 1000 + i);
    const auto start = std::chrono::steady_clock::now();
    Result<Digest> d = store->Put(payload);
    Result<std::string> back = d.has_value() ? store->Get(*d) : Result<std::string>(d.error());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > *worst_call_s) *worst_call_s = s;
    if (d.has_value()) {
      std::lock_guard lock(acked->mu);
      acked->blobs.emplace_back(*d, payload);
    }
    if (back.has_value()) {
      EXPECT_EQ(*back, payload) << "a read returned wrong bytes";
    } else {
      ++*n_errors;
      const Status e = back.error();
      if (e.code() != StatusCode::kUnavailable || e.message().find(endpoint) == std::string_view::npos) {
        ++*n_bad_errors;
        ADD_FAILURE() << "unclear error: " << e.ToString();
      }
    }
  }
}

TEST(RedisFleetTest, KillMidOperationThenRestartRecovers) {
  FAK_REQUIRE_REDIS();
  testing::ScopedTempDir tmp;
  RedisServer server(tmp.path());
  ASSERT_TRUE(server.Start());
  RedisOptions o = server.Options();
  o.max_retries = 2;
  o.breaker_cooldown_ms = 100;  // the load opens the breaker; it must let a probe through soon after
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(o));
  ASSERT_OK_AND_ASSIGN(auto idle, OpenRedisBlobStore(o));  // untouched until after the restart
  ASSERT_OK_AND_ASSIGN(auto fleet, RedisDenylist::Open(o));
  ASSERT_OK_AND_ASSIGN(Digest pinned, store->Put("pinned before the crash"));
  ASSERT_OK(store->Pin(pinned));
  ASSERT_OK(fleet->Add(Digest::Of("listed before the crash"), "pre-crash"));

  Acked acked;
  std::atomic<bool> stop{false};
  std::atomic<int> n_errors{0}, n_bad_errors{0};
  std::atomic<double> worst_call_s{0};
  const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
  std::thread load(LoadLoop, store.get(), &acked, &stop, &n_errors, &n_bad_errors, &worst_call_s, endpoint);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  stop = true;
  load.join();
  EXPECT_GT(n_errors.load(), 0) << "the kill landed after the load stopped";
  EXPECT_EQ(n_bad_errors.load(), 0);
  EXPECT_LT(worst_call_s.load(), 3.0) << "a call hung";
  const Status down = store->Contains(pinned).error();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_NE(down.message().find(endpoint), std::string_view::npos) << down.ToString();

  ASSERT_TRUE(server.Restart());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the breaker's cool-down
  std::lock_guard lock(acked.mu);
  ASSERT_GT(acked.blobs.size(), 0u);
  for (const auto& [d, payload] : acked.blobs) {
    Result<std::string> back = store->Get(d);
    ASSERT_TRUE(back.has_value()) << "acknowledged " << d.Hex() << ": " << back.error().ToString();
    EXPECT_EQ(*back, payload);
  }
  // An idle handle notices the restart before sending, so even a non-idempotent call succeeds.
  EXPECT_OK(idle->Pin(pinned));
  EXPECT_EQ(idle->Remove(pinned).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(idle->Unpin(pinned));
  ASSERT_OK(store->Unpin(pinned));
  ASSERT_OK(store->Remove(pinned));
  ASSERT_OK_AND_ASSIGN(bool q, fleet->IsQuarantined(Digest::Of("listed before the crash")));
  EXPECT_TRUE(q);
  std::printf("redis kill test: %zu acknowledged writes survived; %d calls failed cleanly while down; worst call %.3f s\n",
              acked.blobs.size(), n_errors.load(), worst_call_s.load());
}

}  // namespace
}  // namespace fak
