// RedisConnection against a peer that answers with hostile replies (what a compromised or
// impersonated server could send; a real redis-server cannot be made to): absurd bulk lengths,
// array counts and nesting are refused as Corruption naming the limit, promptly (nothing waits for
// the announced bytes), and the connection is dropped rather than reused mid-reply.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "src/store/redis_connection.h"
#include "tests/test_util.h"

namespace fak::internal {
namespace {

// A loopback listener that answers PING with +PONG, CLUSTER SLOTS as a server without cluster
// support does, and every other command with `reply`, then keeps the connection open (so a reader
// waiting for more would hang until its timeout).
class HostilePeer {
 public:
  static constexpr const char* kNotACluster = "-ERR This instance has cluster support disabled\r\n";
  explicit HostilePeer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostilePeer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  // The end of the first whole command in `in` ("*N\r\n" then N "$len\r\nbytes\r\n"), or npos.
  static size_t CommandEnd(const std::string& in) {
    size_t eol = in.find("\r\n");
    if (eol == std::string::npos) return eol;
    const int n = std::stoi(in.substr(1, eol - 1));
    size_t pos = eol + 2;
    for (int i = 0; i < n; ++i) {
      eol = in.find("\r\n", pos);
      if (eol == std::string::npos) return eol;
      pos = eol + 2 + std::stoul(in.substr(pos + 1, eol - pos - 1)) + 2;
      if (pos > in.size()) return std::string::npos;
    }
    return pos;
  }

  void Serve() {
    std::vector<int> clients;
    std::vector<std::thread> threads;
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) break;
      clients.push_back(c);
      threads.emplace_back([this, c] {
        std::string in;
        char buf[4096];
        for (ssize_t n; (n = ::recv(c, buf, sizeof(buf), 0)) > 0;) {
          in.append(buf, static_cast<size_t>(n));
          for (size_t end; (end = CommandEnd(in)) != std::string::npos;) {
            const std::string cmd = in.substr(0, end);
            const std::string out = cmd == "*1\r\n$4\r\nPING\r\n"                             ? "+PONG\r\n"
                                    : cmd == "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n" ? kNotACluster
                                                                                          : reply_;
            if (::send(c, out.data(), out.size(), MSG_NOSIGNAL) < 0) return;
            in.erase(0, end);
          }
        }
      });
    }
    for (int c : clients) ::shutdown(c, SHUT_RDWR);
    for (std::thread& t : threads) t.join();
    for (int c : clients) ::close(c);
  }

  std::string reply_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

RedisOptions OptionsFor(int port) {
  RedisOptions o;
  o.port = port;
  o.command_timeout_ms = 5000;  // a reader that waited for the announced bytes would take this long
  o.max_retries = 0;
  return o;
}

TEST(RedisReplyBounds, AbsurdRepliesAreRefusedPromptlyWithTheLimitNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {"$4611686018427387904\r\n", "bulk length 4611686018427387904 exceeds the limit"},
      {"$9223372036854775807\r\nxx", "bulk length 9223372036854775807 exceeds the limit"},
      {"*4611686018427387904\r\n", "an array of 4611686018427387904 elements exceeds the limit"},
      {"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n", "arrays nested deeper than the limit of 8"},
  };
  for (const auto& [reply, why] : cases) {
    HostilePeer peer(reply);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(OptionsFor(peer.port())));
    const auto start = std::chrono::steady_clock::now();
    Result<RedisReply> r = conn->RunOne({"GET", "k"}, /*idempotent=*/true);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(r.has_value()) << reply;
    EXPECT_EQ(r.error().code(), StatusCode::kCorruption) << r.error().ToString();
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().ToString();
    EXPECT_LT(took, std::chrono::seconds(2)) << "waited for bytes the reply only announced";
  }
}

TEST(RedisReplyBounds, RunIntoRefusesANegativeBulkLength) {
  HostilePeer peer("$-5\r\n");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(OptionsFor(peer.port())));
  std::string dest(64, '\0');
  size_t written = 0;
  const std::vector<RedisCommand> get{{"GET", "k"}};
  Result<std::vector<RedisReply>> r = conn->RunInto(get, true, std::span<char>(dest), &written);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCorruption) << r.error().ToString();
  EXPECT_NE(r.error().message().find("bulk length -5"), std::string::npos) << r.error().ToString();
}

}  // namespace
}  // namespace fak::internal
