// Helpers for the Redis tests: a real redis-server started on a free loopback port in a temporary
// directory (AOF persistence, fsync always) and stopped with the test, and a raw RESP client for
// surgery behind the library's back (tampering, cluster setup). Tests call FAK_REQUIRE_REDIS(),
// which skips them loudly only when no redis-server binary exists (scripts/setup installs it).
#ifndef FAK_TESTS_STORE_REDIS_TEST_UTIL_H_
#define FAK_TESTS_STORE_REDIS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fak/store/redis_store.h"
#include "src/core/str_cat.h"

namespace fak::testing {

// The redis-server binary: $FAK_REDIS_SERVER, else the first found on PATH, /usr/bin, /usr/sbin.
inline std::string RedisServerBinary() {
  if (const char* env = std::getenv("FAK_REDIS_SERVER"); env && *env) return ::access(env, X_OK) == 0 ? env : "";
  std::string dirs = std::getenv("PATH") ? std::getenv("PATH") : "";
  dirs += ":/usr/bin:/usr/sbin:/usr/local/bin";
  for (size_t b = 0; b <= dirs.size();) {
    size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    const std::string candidate = dirs.substr(b, e - b) + "/redis-server";
    if (e > b && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    b = e + 1;
  }
  return "";
}

#define FAK_REQUIRE_REDIS()                                                                                 \
  do {                                                                                                      \
    if (::fak::testing::RedisServerBinary().empty()) {                                                      \
      std::fprintf(stderr, "\n**********************************************************************\n"  \
                           "*** SKIPPING REDIS TEST: no redis-server binary (run scripts/setup) ***\n"     \
                           "**********************************************************************\n\n"); \
      GTEST_SKIP() << "redis-server not installed";                                                         \
    }                                                                                                       \
  } while (0)

// A loopback port nothing listens on right now (bound, read back, released).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A minimal blocking RESP client: one command, one reply, returned as its raw text ("+OK",
// ":3", "$-1", or the bulk string's bytes prefixed with '$'). Not for the library's own use.
class RawRedis {
 public:
  explicit RawRedis(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawRedis() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return fd_ >= 0; }

  std::string Command(const std::vector<std::string>& argv) {
    std::string req = fak::internal::StrCat("*", std::to_string(argv.size()), "\r\n");
    for (const std::string& a : argv) req += fak::internal::StrCat("$", std::to_string(a.size()), "\r\n", a, "\r\n");
    if (fd_ < 0 || ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return "!send";
    std::string line = ReadLine();
    if (line.size() > 1 && line[0] == '$' && line != "$-1") {
      const size_t n = std::stoul(line.substr(1));
      std::string body = ReadN(n + 2);
      body.resize(std::min(body.size(), n));
      return body.insert(0, 1, '$');  // (not "$" + body: GCC 12 warns falsely on that, -Wrestrict)
    }
    if (line.size() > 1 && line[0] == '*') {  // arrays: element count only, elements discarded
      const long n = std::stol(line.substr(1));
      for (long i = 0; i < n; ++i) {
        const std::string el = ReadLine();
        if (el.size() > 1 && el[0] == '$' && el != "$-1") ReadN(std::stoul(el.substr(1)) + 2);
      }
    }
    return line;
  }

 private:
  std::string ReadN(size_t n) {
    std::string s;
    char buf[4096];
    while (s.size() < n) {
      const ssize_t got = ::recv(fd_, buf, std::min(sizeof(buf), n - s.size()), 0);
      if (got <= 0) break;
      s.append(buf, static_cast<size_t>(got));
    }
    return s;
  }
  std::string ReadLine() {
    std::string s;
    char c;
    while (::recv(fd_, &c, 1, 0) == 1) {
      if (c == '\n') break;
      if (c != '\r') s.push_back(c);
    }
    return s;
  }
  int fd_ = -1;
};

// One redis-server child. Persistence: AOF with appendfsync always in `dir`, so every
// acknowledged write survives a SIGKILL and a restart on the same dir replays it.
class RedisServer {
 public:
  explicit RedisServer(std::string dir) : dir_(std::move(dir)) {}
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts on a fresh free port at most `max_port` (tries a few in case of a race). `extra` are
  // more --flags. A cluster node needs max_port 55535: its bus listens on port + 10000.
  ::testing::AssertionResult Start(std::vector<std::string> extra = {}, int max_port = 65535) {
    extra_ = std::move(extra);
    for (int attempt = 0; attempt < 5; ++attempt) {
      for (int pick = 0; pick < 100 && (pick == 0 || port_ > max_port); ++pick) port_ = FreeLoopbackPort();
      if (Launch()) return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "redis-server did not come up; see " << dir_ << "/redis.log";
  }
  // Same port and directory: replays the AOF.
  ::testing::AssertionResult Restart() {
    Stop();
    for (int attempt = 0; attempt < 20; ++attempt) {  // the port may linger briefly
      if (Launch()) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ::testing::AssertionFailure() << "redis-server did not restart on port " << port_;
  }
  // SIGKILL: no shutdown, no final save.
  void Kill() { Signal(SIGKILL); }
  void Stop() { Signal(SIGTERM); }
  // SIGSTOP / SIGCONT: a stalled server that keeps its sockets open (the kernel still accepts).
  void Pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void Resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

  int port() const { return port_; }
  RedisOptions Options(const std::string& tenant = "default") const {
    RedisOptions o;
    o.port = port_;
    o.tenant = tenant;
    o.prefix = "faktest";
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 2000;
    o.retry_backoff_ms = 10;
    return o;
  }

 private:
  void Signal(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::kill(pid_, SIGCONT);  // a paused server would never act on SIGTERM
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  bool Launch() {
    std::vector<std::string> args = {RedisServerBinary(), "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                      "--dir", dir_, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                                      "--daemonize", "no", "--logfile", dir_ + "/redis.log"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      if (::getppid() != parent) ::_exit(1);
      const int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {  // up to 5 s
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      RawRedis raw(port_);
      if (raw.connected() && raw.Command({"PING"}) == "+PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Signal(SIGKILL);
    return false;
  }

  std::string dir_;
  std::vector<std::string> extra_;
  int port_ = -1;
  pid_t pid_ = -1;
};

}  // namespace fak::testing

#endif  // FAK_TESTS_STORE_REDIS_TEST_UTIL_H_
