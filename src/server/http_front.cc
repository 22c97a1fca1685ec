#include "src/server/http_front.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <microhttpd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <exception>

namespace fak::internal {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kNoDeadline = std::chrono::milliseconds::max();
// How often the watchdog looks for connections past their deadline: the deadlines hold to this.
constexpr auto kWatchPeriod = std::chrono::milliseconds(100);

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// The pattern's matches against `path` in *params; false when it does not match.
bool Match(std::string_view pattern, std::string_view path, std::vector<std::string>* params) {
  params->clear();
  while (true) {
    const size_t p_end = std::min(pattern.find('/'), pattern.size());
    const size_t s_end = std::min(path.find('/'), path.size());
    const std::string_view want = pattern.substr(0, p_end);
    if (want == "{*}" && p_end == pattern.size()) {
      if (path.empty()) return false;
      params->emplace_back(path);
      return true;
    }
    const std::string_view got = path.substr(0, s_end);
    if (want == "{}") {
      if (got.empty()) return false;
      params->emplace_back(got);
    } else if (want != got) {
      return false;
    }
    if (p_end == pattern.size() || s_end == path.size()) return p_end == pattern.size() && s_end == path.size();
    pattern.remove_prefix(p_end + 1);
    path.remove_prefix(s_end + 1);
  }
}

std::string PeerAddress(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr == nullptr) return "";
  if (addr->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  else if (addr->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
  return text;
}

// Writes all of `bytes` to a (non-blocking) socket within `budget`; false when it could not.
bool SendAll(int fd, std::string_view bytes, std::chrono::milliseconds budget) {
  const auto deadline = Clock::now() + budget;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left));
      continue;
    }
    return false;
  }
  return true;
}

// A whole response as bytes, for the one case libmicrohttpd cannot answer: a refusal in the middle
// of a request body (it queues responses only before the body or after all of it).
std::string Serialize(const HttpResponse& r) {
  const char* reason = MHD_get_reason_phrase_for(static_cast<unsigned>(r.status));
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + (reason ? reason : "") + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n";
  return out + r.body;
}

// A streamed body's state, owned by the libmicrohttpd response (freed with it).
struct Stream {
  std::function<bool(std::string*)> next;
  std::string buffer;
  size_t offset = 0;
  bool last = false;  // `next` said the buffer holds the end
};

ssize_t ReadStream(void* cls, uint64_t, char* out, size_t max) {
  auto* s = static_cast<Stream*>(cls);
  try {
    while (s->offset == s->buffer.size()) {
      if (s->last) return MHD_CONTENT_READER_END_OF_STREAM;
      s->buffer.clear();
      s->offset = 0;
      s->last = !s->next(&s->buffer);
    }
    const size_t n = std::min(max, s->buffer.size() - s->offset);
    std::memcpy(out, s->buffer.data() + s->offset, n);
    s->offset += n;
    return static_cast<ssize_t>(n);
  } catch (...) {
    return MHD_CONTENT_READER_END_WITH_ERROR;  // the connection is closed; on_end(false)
  }
}

void FreeStream(void* cls) { delete static_cast<Stream*>(cls); }

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  const std::string key = Lower(name);
  for (const auto& [n, v] : headers)
    if (n == key) return v;
  return {};
}

bool HttpRequest::client_gone() const {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

// One request on a connection, from its headers to the end of its response (libmicrohttpd's
// per-request context).
struct HttpFront::Exchange {
  HttpRequest request;
  const HttpRoute* route = nullptr;
  bool expects_body = false;
  std::function<void(bool)> on_end;
  std::shared_ptr<void> hold;

  void End(bool complete) {
    if (on_end) std::exchange(on_end, nullptr)(complete);
    hold.reset();
  }
  ~Exchange() { End(false); }
};

std::string HttpFront::AllowedOrigin(const HttpRequest& req) const {
  const std::string_view origin = req.header("origin");
  if (origin.empty()) return {};
  for (const std::string& allowed : options_.cors_origins) {
    if (allowed == "*") return "*";
    if (allowed == origin) return allowed;
  }
  return {};
}

struct HttpFrontCallbacks {
  static MHD_Result OnRequest(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                              const char* upload, size_t* upload_size, void** context) {
    auto* front = static_cast<HttpFront*>(cls);
    auto* ex = static_cast<HttpFront::Exchange*>(*context);
    try {
      if (ex == nullptr) return Begin(*front, c, url, method, context);
      if (ex->route == nullptr) return MHD_NO;  // refused on its headers, yet called again: close
      if (*upload_size != 0) {
        const size_t n = std::exchange(*upload_size, 0);
        if (ex->request.body.size() + n > front->options_.limits.max_body_bytes) return RefuseBody(*front, *ex);
        ex->request.body.append(upload, n);
        return MHD_YES;
      }
      front->SetDeadline(c, kNoDeadline, false);  // the body is whole; the handler runs unbounded
      return Finish(*front, c, *ex);
    } catch (...) {
      return MHD_NO;  // libmicrohttpd closes the connection
    }
  }

  // The headers are in: route, admit, and the body's declared size, before any of the body is read.
  static MHD_Result Begin(HttpFront& front, MHD_Connection* c, const char* url, const char* method, void** context) {
    auto* ex = new HttpFront::Exchange;
    *context = ex;  // freed in OnCompleted
    HttpRequest& req = ex->request;
    req.method = method;
    req.path = url;
    MHD_get_connection_values(
        c, MHD_HEADER_KIND,
        [](void* cls, MHD_ValueKind, const char* key, const char* value) {
          static_cast<HttpRequest*>(cls)->headers.emplace_back(Lower(key), value ? value : "");
          return MHD_YES;
        },
        &req);
    if (const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS))
      req.peer = PeerAddress(info->client_addr);
    if (const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD))
      req.fd = info->connect_fd;
    HttpResponse refusal;
    if (req.method == "OPTIONS" && !req.header("access-control-request-method").empty() && !front.AllowedOrigin(req).empty()) {
      refusal.status = 204;
      refusal.content_type = "text/plain";
      refusal.headers = {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
                         {"Access-Control-Allow-Headers", std::string(req.header("access-control-request-headers").empty()
                                                                          ? "Authorization, Content-Type"
                                                                          : req.header("access-control-request-headers"))},
                         {"Access-Control-Max-Age", "600"}};
      return Respond(front, c, *ex, std::move(refusal));
    }
    for (const HttpRoute& route : front.options_.routes) {
      if (route.method == req.method && Match(route.pattern, req.path, &req.params)) {
        ex->route = &route;
        break;
      }
    }
    if (ex->route == nullptr) {
      front.Error(req, 404, "no route " + req.method + " " + req.path, refusal);
      return Respond(front, c, *ex, std::move(refusal));
    }
    if (!ex->route->open && front.options_.admit && !front.options_.admit(req, refusal))
      return Respond(front, c, *ex, std::move(refusal));
    const size_t limit = front.options_.limits.max_body_bytes;
    const std::string_view length = req.header("content-length");
    uint64_t declared = 0;
    std::from_chars(length.data(), length.data() + length.size(), declared);  // libmicrohttpd checked its form
    if (declared > limit) {
      front.Error(req, 413, "the request body is larger than " + std::to_string(limit) + " bytes", refusal);
      {
        std::lock_guard lock(front.mu_);
        ++front.stats_.bodies_too_large;
      }
      return Respond(front, c, *ex, std::move(refusal));
    }
    ex->expects_body = declared > 0 || !req.header("transfer-encoding").empty();
    front.SetDeadline(c, ex->expects_body ? front.options_.limits.body_timeout : kNoDeadline, ex->expects_body);
    return MHD_YES;
  }

  // A body grew past the limit mid-transfer: answer 413 on the socket ourselves and have
  // libmicrohttpd close the connection (MHD_NO) without reading the rest.
  static MHD_Result RefuseBody(HttpFront& front, HttpFront::Exchange& ex) {
    HttpResponse refusal;
    front.Error(ex.request, 413,
                "the request body is larger than " + std::to_string(front.options_.limits.max_body_bytes) + " bytes",
                refusal);
    {
      std::lock_guard lock(front.mu_);
      ++front.stats_.bodies_too_large;
    }
    ex.request.body.clear();
    ex.request.body.shrink_to_fit();
    (void)SendAll(ex.request.fd, Serialize(refusal), std::chrono::milliseconds(1000));
    return MHD_NO;
  }

  static MHD_Result Finish(HttpFront& front, MHD_Connection* c, HttpFront::Exchange& ex) {
    HttpResponse res;
    try {
      ex.route->handler(ex.request, res);
    } catch (const std::exception& e) {
      res = HttpResponse{};
      front.Error(ex.request, 500, std::string("internal error: ") + e.what(), res);
    } catch (...) {
      res = HttpResponse{};
      front.Error(ex.request, 500, "internal error: unknown exception", res);
    }
    return Respond(front, c, ex, std::move(res));
  }

  static MHD_Result Respond(const HttpFront& front, MHD_Connection* c, HttpFront::Exchange& ex, HttpResponse res) {
    if (std::string origin = front.AllowedOrigin(ex.request); !origin.empty()) {
      res.headers.emplace_back("Access-Control-Allow-Origin", std::move(origin));
      res.headers.emplace_back("Vary", "Origin");
    }
    ex.on_end = std::move(res.on_end);
    ex.hold = std::move(res.hold);
    MHD_Response* response = nullptr;
    if (res.stream) {
      auto* stream = new Stream;
      stream->next = std::move(res.stream);
      response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, ReadStream, stream, FreeStream);
      if (response == nullptr) delete stream;
    } else {
      response = MHD_create_response_from_buffer(res.body.size(), res.body.data(), MHD_RESPMEM_MUST_COPY);
    }
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, res.content_type.c_str());
    for (const auto& [name, value] : res.headers) MHD_add_response_header(response, name.c_str(), value.c_str());
    const MHD_Result queued = MHD_queue_response(c, static_cast<unsigned>(res.status), response);
    MHD_destroy_response(response);  // the connection holds it until written
    return queued;
  }

  static void OnCompleted(void* cls, MHD_Connection* c, void** context, MHD_RequestTerminationCode code) {
    auto* front = static_cast<HttpFront*>(cls);
    auto* ex = static_cast<HttpFront::Exchange*>(*context);
    *context = nullptr;
    if (ex != nullptr) {
      ex->End(code == MHD_REQUEST_TERMINATED_COMPLETED_OK);
      delete ex;
    }
    // A kept-alive connection's next request must arrive whole within the header timeout.
    front->SetDeadline(c, front->options_.limits.header_timeout, false);
  }

  static void OnConnection(void* cls, MHD_Connection* c, void**, MHD_ConnectionNotificationCode code) {
    auto* front = static_cast<HttpFront*>(cls);
    std::lock_guard lock(front->mu_);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
      front->connections_.erase(c);  // before libmicrohttpd closes the socket
      return;
    }
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    front->connections_[c] = {info ? info->connect_fd : -1, Clock::now() + front->options_.limits.header_timeout, false};
  }
};

HttpFront::HttpFront(HttpFrontOptions options) : options_(std::move(options)) {}

HttpFront::~HttpFront() {
  Stop();
  if (listen_fd_ >= 0 && daemon_ == nullptr) ::close(listen_fd_);  // bound, never started
}

void HttpFront::Error(const HttpRequest& req, int status, const std::string& message, HttpResponse& res) const {
  res = HttpResponse{};
  res.status = status;
  if (options_.error) {
    options_.error(req, status, message, res);
  } else {
    res.content_type = "text/plain; charset=utf-8";
    res.body = message + "\n";
  }
}

Result<uint16_t> HttpFront::Listen(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return IOError("cannot listen on " + where + ": " + ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) return IOError("cannot listen on " + where + ": " + why);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

Status HttpFront::Start() {
  const HttpLimits& l = options_.limits;
  if (l.max_body_bytes == 0 || l.max_connections == 0 || l.max_connections_per_peer == 0)
    return InvalidArgument("HttpLimits: the body and connection limits must be at least 1");
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
  if (listen_fd_ < 0) flags |= MHD_USE_NO_LISTEN_SOCKET;
  MHD_OptionItem listen[] = {{listen_fd_ >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_END, listen_fd_, nullptr},
                             {MHD_OPTION_END, 0, nullptr}};
  daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, reinterpret_cast<MHD_AccessHandlerCallback>(&HttpFrontCallbacks::OnRequest), this,
      MHD_OPTION_NOTIFY_COMPLETED, &HttpFrontCallbacks::OnCompleted, this,
      MHD_OPTION_NOTIFY_CONNECTION, &HttpFrontCallbacks::OnConnection, this,
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(std::min<size_t>(l.max_connections, 1u << 20)),
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, static_cast<unsigned>(std::min<size_t>(l.max_connections_per_peer, 1u << 20)),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(l.idle_timeout.count()),
      MHD_OPTION_ARRAY, listen, MHD_OPTION_END);
  if (daemon_ == nullptr) return IOError("the HTTP server could not start (libmicrohttpd)");
  std::lock_guard lock(mu_);
  stopping_ = false;
  watchdog_ = std::thread([this] { Watch(); });
  return Status::Ok();
}

Status HttpFront::AddConnection(int fd, const sockaddr* peer, socklen_t peer_len) {
  if (daemon_ == nullptr) {
    ::close(fd);
    return FailedPrecondition("HttpFront::AddConnection before Start");
  }
  if (MHD_add_connection(daemon_, fd, peer, peer_len) != MHD_YES)
    return Unavailable("the connection was refused (a connection limit, or shutting down)");  // libmicrohttpd closed it
  return Status::Ok();
}

void HttpFront::Stop() {
  {
    std::lock_guard lock(mu_);
    if (daemon_ == nullptr || stopping_) return;
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  MHD_stop_daemon(daemon_);  // shuts every connection down and joins its thread; closes the listener
  listen_fd_ = -1;
}

HttpFrontStats HttpFront::Stats() const {
  std::lock_guard lock(mu_);
  HttpFrontStats s = stats_;
  s.connections = connections_.size();
  return s;
}

void HttpFront::SetDeadline(MHD_Connection* c, std::chrono::milliseconds after, bool body) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(c);
  if (it == connections_.end()) return;
  it->second.deadline = after == kNoDeadline ? Clock::time_point::max() : Clock::now() + after;
  it->second.body = body;
}

void HttpFront::Watch() {
  std::unique_lock lock(mu_);
  while (!watch_cv_.wait_for(lock, kWatchPeriod, [&] { return stopping_; })) {
    const auto now = Clock::now();
    for (auto& [c, t] : connections_) {
      if (t.deadline > now) continue;
      // Under mu_, which the CLOSED notification takes before the socket is closed: `fd` is still
      // this connection's. Its thread wakes to a dead socket and libmicrohttpd closes it.
      ::shutdown(t.fd, SHUT_RDWR);
      ++(t.body ? stats_.body_deadline_cuts : stats_.header_deadline_cuts);
      t.deadline = Clock::time_point::max();
    }
  }
}

}  // namespace fak::internal
