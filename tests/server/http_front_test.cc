// HttpFront (src/server/http_front.h) over real loopback sockets: routes and params, the admit hook
// before the body, the body limit for both transfer encodings, the header and body deadlines
// against clients that never stop trickling, the per-peer limit, exceptions, streamed responses
// and their end, and client_gone.
#include "src/server/http_front.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace fak::internal {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A client connection, optionally from another loopback address (all of 127/8 is loopback).
class Client {
 public:
  explicit Client(uint16_t port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &from.sin_addr);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  }
  ~Client() { ::close(fd_); }
  // False once the server has closed or reset the connection.
  bool Send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Everything until the server closes, or what came within `wait`.
  std::string ReadAll(std::chrono::milliseconds wait = 5000ms) {
    std::string out;
    const auto deadline = Clock::now() + wait;
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // True when the server closed the connection within `wait` (reading and dropping what it sent).
  bool ClosedWithin(std::chrono::milliseconds wait) {
    ReadAll(wait);
    return closed_;
  }
  void Close() { ::shutdown(fd_, SHUT_RDWR); }

 private:
  int fd_ = -1;
  bool closed_ = false;
};

// "HTTP/1.1 200": the status line without its reason phrase.
std::string Status(const std::string& response) { return response.substr(0, 12); }
std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

class HttpFrontTest : public ::testing::Test {
 protected:
  void Start(HttpFrontOptions options) {
    options.limits.max_body_bytes = 1000;
    if (options.routes.empty()) {
      options.routes.push_back({"POST", "/echo", [this](const HttpRequest& req, HttpResponse& res) {
                                  ++handled_;
                                  res.content_type = "text/plain";
                                  res.body = req.principal + ":" + req.body;
                                }});
      options.routes.push_back({"GET", "/items/{}/parts/{*}", [](const HttpRequest& req, HttpResponse& res) {
                                  res.body = req.params[0] + "|" + req.params[1];
                                },
                                true});
      options.routes.push_back({"GET", "/throw", [](const HttpRequest&, HttpResponse&) { throw std::runtime_error("boom"); },
                                true});
    }
    options.admit = [](HttpRequest& head, HttpResponse& refusal) {
      if (head.header("authorization") != "Bearer k") {
        refusal.status = 401;
        refusal.body = "who?";
        return false;
      }
      head.principal = "alice";
      return true;
    };
    front_ = std::make_unique<HttpFront>(std::move(options));
    Result<uint16_t> port = front_->Listen("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.error().ToString();
    port_ = *port;
    ASSERT_TRUE(front_->Start().ok());
  }
  void TearDown() override {
    if (front_) front_->Stop();
  }

  std::unique_ptr<HttpFront> front_;
  uint16_t port_ = 0;
  std::atomic<int> handled_{0};
};

TEST_F(HttpFrontTest, RoutesParamsAdmitAndErrors) {
  Start({});
  {
    Client c(port_);
    c.Send("GET /items/a%20b/parts/x/y HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    const std::string r = c.ReadAll();
    EXPECT_EQ(Status(r), "HTTP/1.1 200");
    EXPECT_EQ(Body(r), "a b|x/y");
  }
  {
    Client c(port_);
    c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    EXPECT_EQ(Body(c.ReadAll()), "alice:hello");
  }
  for (const char* request : {"GET /echo HTTP/1.1\r\nHost: h\r\n\r\n", "GET /items//parts/x HTTP/1.1\r\nHost: h\r\n\r\n",
                              "GET /items/a/parts/ HTTP/1.1\r\nHost: h\r\n\r\n"}) {
    Client c(port_);
    c.Send(request);
    EXPECT_EQ(Status(c.ReadAll(1000ms)), "HTTP/1.1 404") << request;
  }
  {
    Client c(port_);
    c.Send("GET /throw HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    const std::string r = c.ReadAll();
    EXPECT_EQ(Status(r), "HTTP/1.1 500");
    EXPECT_NE(Body(r).find("boom"), std::string::npos);
  }
}

TEST_F(HttpFrontTest, RefusalsComeBeforeTheBody) {
  Start({});
  // No key: 401 on the headers, though the declared body never comes; the handler never runs.
  {
    Client c(port_);
    c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 900\r\n\r\n");
    const std::string r = c.ReadAll(2000ms);
    EXPECT_EQ(Status(r), "HTTP/1.1 401");
    EXPECT_EQ(Body(r), "who?");
  }
  // A declared length past the limit: 413 before any of it is sent.
  {
    Client c(port_);
    c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nContent-Length: 1001\r\n\r\n");
    EXPECT_EQ(Status(c.ReadAll(2000ms)), "HTTP/1.1 413");
  }
  // Chunked: 413 once what arrived passes the limit, the rest unread, the connection closed.
  {
    Client c(port_);
    c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "190\r\n" + std::string(400, 'x') + "\r\n";
    for (int i = 0; i < 3; ++i) c.Send(chunk);
    std::string r = c.ReadAll(2000ms);
    EXPECT_EQ(Status(r), "HTTP/1.1 413");
    EXPECT_TRUE(c.ClosedWithin(1000ms));
  }
  EXPECT_EQ(handled_.load(), 0);
  EXPECT_EQ(front_->Stats().bodies_too_large, 2u);
  // Control: a chunked body under the limit is served.
  Client c(port_);
  c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\n"
         "Connection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(Body(c.ReadAll()), "alice:abcde");
}

TEST_F(HttpFrontTest, DeadlinesCutTricklersThatNeverGoQuiet) {
  HttpFrontOptions o;
  o.limits.header_timeout = 1000ms;
  o.limits.body_timeout = 1000ms;
  Start(std::move(o));
  Client header(port_), body(port_);
  ASSERT_TRUE(header.Send("GET /items/a/parts/b HTTP/1.1\r\nHost: h\r\nX-Slow: "));
  ASSERT_TRUE(body.Send("POST /echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer k\r\nContent-Length: 100\r\n\r\n"));
  const auto start = Clock::now();
  bool header_cut = false, body_cut = false;
  // A byte every 100 ms: never idle, so only the whole-header and whole-body deadlines can end them.
  while (Clock::now() - start < 3s && !(header_cut && body_cut)) {
    header_cut = header_cut || !header.Send("a") || header.ClosedWithin(100ms);
    body_cut = body_cut || !body.Send("b") || body.ClosedWithin(10ms);
  }
  const auto took = Clock::now() - start;
  EXPECT_TRUE(header_cut && body_cut);
  EXPECT_GE(took, 900ms);
  EXPECT_LE(took, 2000ms);
  const HttpFrontStats stats = front_->Stats();
  EXPECT_EQ(stats.header_deadline_cuts, 1u);
  EXPECT_EQ(stats.body_deadline_cuts, 1u);
  // Control: a request sent whole on a fresh connection is served.
  Client fresh(port_);
  fresh.Send("GET /items/a/parts/b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(Body(fresh.ReadAll()), "a|b");
}

TEST_F(HttpFrontTest, ConnectionLimitsLeaveOtherPeersServed) {
  HttpFrontOptions o;
  o.limits.max_connections_per_peer = 3;
  o.limits.max_connections = 5;
  Start(std::move(o));
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<Client>(port_, "127.0.0.2"));
  std::this_thread::sleep_for(200ms);  // accepted
  Client refused(port_, "127.0.0.2");
  EXPECT_TRUE(refused.ClosedWithin(1000ms));
  {
    Client other(port_, "127.0.0.3");
    other.Send("GET /items/a/parts/b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(Body(other.ReadAll()), "a|b");
  }
  // The total: 3 held + 2 more from other peers. A sixth connection is not served: libmicrohttpd
  // closes it at accept, or has stopped accepting and leaves it in the listen backlog.
  const auto open_now = [&](size_t n) {
    const auto until = Clock::now() + 2s;
    while (front_->Stats().connections != n && Clock::now() < until) std::this_thread::sleep_for(10ms);
    return front_->Stats().connections;
  };
  ASSERT_EQ(open_now(3), 3u);  // `other` is gone
  for (const char* peer : {"127.0.0.4", "127.0.0.5"}) held.push_back(std::make_unique<Client>(port_, peer));
  ASSERT_EQ(open_now(5), 5u);
  Client sixth(port_, "127.0.0.6");
  sixth.Send("GET /items/a/parts/b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(sixth.ReadAll(500ms), "");
  // One of the five closes: a new connection is served.
  held.pop_back();
  ASSERT_LE(open_now(4), 4u);
  Client seventh(port_, "127.0.0.7");
  seventh.Send("GET /items/a/parts/b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(Body(seventh.ReadAll()), "a|b");
}

TEST_F(HttpFrontTest, StreamsEndOnceAndClientGoneIsSeen) {
  std::atomic<int> ended_complete{0}, ended_abandoned{0};
  std::atomic<bool> saw_gone{false};
  HttpFrontOptions o;
  o.routes.push_back({"GET", "/count/{}", [&](const HttpRequest& req, HttpResponse& res) {
                        const int n = std::stoi(req.params[0]);
                        auto i = std::make_shared<int>(0);
                        res.content_type = "text/plain";
                        res.stream = [n, i](std::string* out) {
                          std::this_thread::sleep_for(20ms);
                          *out = std::to_string((*i)++) + ",";
                          return *i < n;
                        };
                        res.on_end = [&](bool complete) { ++(complete ? ended_complete : ended_abandoned); };
                      },
                      true});
  o.routes.push_back({"GET", "/wait", [&](const HttpRequest& req, HttpResponse& res) {
                        const auto until = Clock::now() + 5s;
                        while (!req.client_gone() && Clock::now() < until) std::this_thread::sleep_for(10ms);
                        saw_gone = req.client_gone();
                      },
                      true});
  Start(std::move(o));
  {
    Client c(port_);
    c.Send("GET /count/5 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    const std::string r = c.ReadAll();
    EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos);
    EXPECT_NE(r.find("0,"), std::string::npos);
    EXPECT_NE(r.find("4,"), std::string::npos);
  }
  {
    Client c(port_);
    c.Send("GET /count/100000 HTTP/1.1\r\nHost: h\r\n\r\n");
    c.ReadAll(200ms);
    c.Close();  // mid-stream
  }
  {
    Client c(port_);
    c.Send("GET /wait HTTP/1.1\r\nHost: h\r\n\r\n");
    std::this_thread::sleep_for(100ms);
    c.Close();
  }
  const auto until = Clock::now() + 5s;
  while ((ended_abandoned == 0 || !saw_gone) && Clock::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ended_complete.load(), 1);
  EXPECT_EQ(ended_abandoned.load(), 1);
  EXPECT_TRUE(saw_gone.load());
}

}  // namespace
}  // namespace fak::internal
