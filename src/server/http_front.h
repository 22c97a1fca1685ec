// HttpFront: `fak serve`'s HTTP/1.1 front over libmicrohttpd — request and response types, a route
// table, and the limits that keep slow or greedy clients from starving everyone else.
//
// One thread per connection (libmicrohttpd's MHD_USE_THREAD_PER_CONNECTION): a handler may block on
// the engine for as long as its request runs. What a client can hold is bounded before any handler
// runs (docs/server.md, "Slow and greedy clients"):
// - connections per peer address (libmicrohttpd closes the rest at accept) and in total (past it,
//   libmicrohttpd closes new ones at accept or stops accepting, leaving them in the backlog);
// - the whole request line and headers must arrive within `header_timeout` of the connection's
//   start (or of the previous response's end, on a kept-alive connection), the whole body within
//   `body_timeout` of the headers' end: a watchdog cuts (shutdown) a connection past its deadline,
//   however steadily it trickles; libmicrohttpd's own timeout (`idle_timeout`) is per inactivity;
// - the body by `max_body_bytes`, whatever its transfer encoding: a Content-Length past it is
//   refused before a byte of the body is read, a chunked body as soon as what arrived passes it;
//   either is answered 413 and the connection closed;
// - a route that is not `open` passes the `admit` hook (authentication) on the headers alone,
//   before the body is read: a refused request costs no body memory.
// Nothing a handler throws escapes: the client gets the `error` hook's 500.
#ifndef FAK_SRC_SERVER_HTTP_FRONT_H_
#define FAK_SRC_SERVER_HTTP_FRONT_H_

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fak/core/status.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace fak::internal {

struct HttpRequest {
  std::string method;
  std::string path;                 // decoded, without the query
  std::vector<std::string> params;  // what the route pattern's {} and {*} matched, in order
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string peer;       // the client's address ("127.0.0.1")
  std::string principal;  // whom the admit hook found the request to come from (a tenant)
  int fd = -1;            // the connection's socket, for client_gone (valid while the handler runs)

  // The header's value (name in any case); "" when absent.
  std::string_view header(std::string_view name) const;
  // True once the client has closed or reset its end of the connection: a handler that waits
  // (on the engine) polls this to give up on a request nobody will read. A client that only
  // half-closes (shutdown(SHUT_WR) after its request) reads as gone too.
  bool client_gone() const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // A streamed body (chunked transfer encoding; `body` is ignored): called on the connection's
  // thread for the next bytes, appended to *out; returns false with the last of them. May block
  // (the caller writes what it returns, then calls again).
  std::function<bool(std::string* out)> stream;
  // Called once when the response has been written whole (true) or was abandoned: a write failed,
  // the client went away, a deadline or Stop cut the connection (false).
  std::function<void(bool complete)> on_end;
  // Released once the response is written or abandoned, after on_end (an in-flight count's guard).
  std::shared_ptr<void> hold;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpRoute {
  std::string method;  // "GET", "POST", "DELETE"
  // Segments separated by '/'; "{}" matches one non-empty segment, a last "{*}" the non-empty rest.
  std::string pattern;
  HttpHandler handler;
  bool open = false;  // served without the admit hook (health checks, metrics)
};

struct HttpLimits {
  size_t max_body_bytes = size_t{1} << 20;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::seconds idle_timeout{10};  // no byte read or written: libmicrohttpd closes the connection
  size_t max_connections = 512;
  size_t max_connections_per_peer = 64;
};

struct HttpFrontOptions {
  HttpLimits limits;
  std::vector<HttpRoute> routes;
  // Called with the headers alone (no body yet) for a route that is not open; fills `refusal` and
  // returns false to answer it instead (the body is never read), else may set head.principal.
  std::function<bool(HttpRequest& head, HttpResponse& refusal)> admit;
  // The response for an error the front answers itself: 404 (no route), 413 (body too large), 500
  // (a handler threw; `message` says what). Default: a plain-text body.
  std::function<void(const HttpRequest&, int status, const std::string& message, HttpResponse&)> error;
  // Origins browsers may call from (CORS): each response to a request whose Origin is listed (or
  // any, with "*") says so, and a preflight (OPTIONS with Access-Control-Request-Method) from one is
  // answered 204 before routing or authentication (it carries no credentials). Empty: CORS off,
  // OPTIONS is 404 like any method without a route.
  std::vector<std::string> cors_origins;
};

struct HttpFrontStats {
  size_t connections = 0;        // open now
  uint64_t header_deadline_cuts = 0;
  uint64_t body_deadline_cuts = 0;
  uint64_t bodies_too_large = 0;
};

class HttpFront {
 public:
  explicit HttpFront(HttpFrontOptions options);
  ~HttpFront();  // Stop
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds and listens on host:port (0: any free port); returns the port. IOError when it cannot.
  Result<uint16_t> Listen(const std::string& host, uint16_t port);
  // Starts serving: the listening socket when Listen was called, else only connections handed to
  // AddConnection. IOError when libmicrohttpd cannot start.
  Status Start();
  // Serves an already connected socket (the front owns it from now on, closing it on failure too):
  // socket activation, tests and the fuzzer. `peer` is the address limits count it under.
  Status AddConnection(int fd, const sockaddr* peer, socklen_t peer_len);
  // Closes every connection (a handler still running finishes first: it is waited for) and stops
  // the listener. Idempotent.
  void Stop();
  HttpFrontStats Stats() const;

 private:
  struct Exchange;
  struct Tracked {
    int fd = -1;
    std::chrono::steady_clock::time_point deadline;
    bool body = false;  // the deadline is the body's (else the header's, or none when max())
  };
  friend struct HttpFrontCallbacks;  // libmicrohttpd's callbacks (http_front.cc)
  void Error(const HttpRequest& req, int status, const std::string& message, HttpResponse& res) const;
  // The Access-Control-Allow-Origin value for `req` ("" when CORS is off or its origin is not listed).
  std::string AllowedOrigin(const HttpRequest& req) const;
  // Sets the connection's deadline `after` from now (max(): none).
  void SetDeadline(MHD_Connection* c, std::chrono::milliseconds after, bool body);
  void Watch();  // the watchdog thread

  HttpFrontOptions options_;
  int listen_fd_ = -1;
  MHD_Daemon* daemon_ = nullptr;

  // Open connections and their deadlines. An entry leaves in libmicrohttpd's CLOSED notification,
  // which comes before the socket is closed: the watchdog shuts down only sockets still open.
  mutable std::mutex mu_;
  std::condition_variable watch_cv_;
  std::unordered_map<MHD_Connection*, Tracked> connections_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                                      // GUARDED_BY(mu_)
  HttpFrontStats stats_;                                       // GUARDED_BY(mu_), but for connections
  std::thread watchdog_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_HTTP_FRONT_H_
