// Fuzzes `fak serve`'s HTTP front (HttpFront over libmicrohttpd, src/server/http_front.h) with raw
// bytes on a connection: request lines, headers, Content-Length and chunked bodies, pipelined
// requests. Each input is written to one end of a socketpair whose other end the real front serves
// (AddConnection), with a route table that echoes; the writer then half-closes and reads until the
// front closes. Checked: no crash or sanitizer report; the front closes every connection (no hang);
// whatever it answers is HTTP; no handler ever sees a body past the limit, or a route param that
// is empty or holds '/'; a non-open route never runs without the admit hook's consent.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_util.h"
#include "src/server/http_front.h"

namespace {

using fak::internal::HttpFront;
using fak::internal::HttpRequest;
using fak::internal::HttpResponse;

constexpr size_t kMaxBody = 1024;  // small, so that inputs of a few KiB cross it

HttpFront& Front() {
  static HttpFront* front = [] {
    fak::internal::HttpFrontOptions o;
    o.limits.max_body_bytes = kMaxBody;
    o.limits.header_timeout = std::chrono::seconds(2);
    o.limits.body_timeout = std::chrono::seconds(2);
    o.limits.idle_timeout = std::chrono::seconds(2);
    const auto echo = [](const HttpRequest& req, HttpResponse& res) {
      FAK_FUZZ_CHECK(req.body.size() <= kMaxBody, "a body past the limit reached a handler");
      for (const std::string& p : req.params)
        FAK_FUZZ_CHECK(!p.empty() && p.find('/') == std::string::npos, "a {} param that is empty or holds '/'");
      FAK_FUZZ_CHECK(req.path != "/private" || req.header("Authorization") == "Bearer k", "admit was bypassed");
      res.content_type = "text/plain";
      res.body = req.method + " " + req.path + " " + std::to_string(req.body.size()) + "\n" + req.body;
    };
    o.routes.push_back({"POST", "/echo", echo, true});
    o.routes.push_back({"GET", "/echo/{}/x", echo, true});
    o.routes.push_back({"POST", "/private", echo});  // needs the admit hook's consent
    // A streamed answer: the body back in pieces of 7 bytes.
    o.routes.push_back({"POST", "/stream",
                        [](const HttpRequest& req, HttpResponse& res) {
                          auto at = std::make_shared<size_t>(0);
                          res.stream = [body = req.body, at](std::string* out) {
                            *out = body.substr(*at, 7) + "|";
                            *at += 7;
                            return *at < body.size();
                          };
                        },
                        true});
    o.routes.push_back({"GET", "/throw", [](const HttpRequest&, HttpResponse&) { throw std::runtime_error("boom"); }, true});
    o.admit = [](HttpRequest& head, HttpResponse& refusal) {
      if (head.header("Authorization") == "Bearer k") return true;
      refusal.status = 401;
      refusal.body = "no";
      return false;
    };
    auto* f = new HttpFront(std::move(o));  // lives for the process: libFuzzer ends by _exit
    const fak::Status started = f->Start();
    FAK_FUZZ_CHECK(started.ok(), started.ToString());
    return f;
  }();
  return *front;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HttpFront& front = Front();
  int fds[2];
  FAK_FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair");
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!front.AddConnection(fds[1], reinterpret_cast<const sockaddr*>(&peer), sizeof peer).ok()) {
    ::close(fds[0]);
    return 0;
  }
  // Write the input (the front may stop reading early: a refusal), then half-close.
  const std::string_view in = fak::fuzz::AsText(data, size);
  size_t sent = 0;
  while (sent < in.size()) {
    const ssize_t n = ::send(fds[0], in.data() + sent, in.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  // Read until the front closes; past its deadlines (2 s) plus slack, it hangs.
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    FAK_FUZZ_CHECK(left.count() > 0, "the front did not close the connection: " + out.substr(0, 200));
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fds[0], buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  FAK_FUZZ_CHECK(out.empty() || out.rfind("HTTP/1.", 0) == 0, "an answer that is not HTTP: " + out.substr(0, 200));
  return 0;
}
