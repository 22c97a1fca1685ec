// RedisConnection over hiredis 0.14+ (blocking API), pooled. hiredis connects, formats and writes
// commands; replies are parsed by fak (RespReader, RunIntoOnce), with limits hiredis 0.14's reader
// lacks (it trusts bulk lengths and array counts). The mutex guards only the pool and breaker
// bookkeeping; every round trip runs on a leased context with no lock held. hiredis writes with plain write(2), so a
// server that died would raise SIGPIPE and kill the host; every round trip blocks SIGPIPE in the
// calling thread and swallows one it caused, without touching the process's handlers.
#include "src/store/redis_connection.h"
#include "fak/core/env.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <chrono>
#include <thread>

namespace fak::internal {
namespace {

timeval Millis(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// Blocks SIGPIPE in this thread for its lifetime and consumes a SIGPIPE raised meanwhile.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedSigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string EndpointOf(const RedisOptions& o) {
  return o.unix_socket.empty() ? o.host + ":" + std::to_string(o.port) : "unix:" + o.unix_socket;
}

}  // namespace

Status ValidateRedisOptions(const RedisOptions& o) {
  if (!ValidName(o.prefix)) return InvalidArgument("RedisOptions.prefix '" + o.prefix + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (!ValidName(o.tenant)) return InvalidArgument("RedisOptions.tenant '" + o.tenant + "' must be 1-64 of [A-Za-z0-9_.-]");
  if (o.unix_socket.empty() && o.host.empty()) return InvalidArgument("RedisOptions.host is empty");
  if (o.unix_socket.empty() && (o.port <= 0 || o.port > 65535))
    return InvalidArgument("RedisOptions.port " + std::to_string(o.port) + " is out of range");
  if (o.connect_timeout_ms <= 0) return InvalidArgument("RedisOptions.connect_timeout_ms must be > 0");
  if (o.command_timeout_ms <= 0) return InvalidArgument("RedisOptions.command_timeout_ms must be > 0");
  if (o.max_retries < 0 || o.max_retries > 100) return InvalidArgument("RedisOptions.max_retries must be in [0, 100]");
  if (o.retry_backoff_ms < 0) return InvalidArgument("RedisOptions.retry_backoff_ms must be >= 0");
  if (o.pipeline_depth <= 0) return InvalidArgument("RedisOptions.pipeline_depth must be > 0");
  if (o.pool_size < 1 || o.pool_size > 1024) return InvalidArgument("RedisOptions.pool_size must be in [1, 1024]");
  if (o.breaker_failure_threshold < 0) return InvalidArgument("RedisOptions.breaker_failure_threshold must be >= 0");
  if (o.breaker_cooldown_ms < 0) return InvalidArgument("RedisOptions.breaker_cooldown_ms must be >= 0");
  if (o.ttl_seconds < 0) return InvalidArgument("RedisOptions.ttl_seconds must be >= 0");
  if (o.database < 0) return InvalidArgument("RedisOptions.database must be >= 0");
  return Status::Ok();
}

std::string CommandName(const RedisCommand& command) { return command.empty() ? "(empty)" : command[0]; }

Status ErrorReplyStatus(const std::string& what, const RedisReply& r) {
  const auto starts = [&r](std::string_view word) { return r.str.rfind(word, 0) == 0; };
  if (starts("OOM")) return ResourceExhausted(what + ": redis is out of memory: " + r.str);
  if (starts("LOADING") || starts("BUSY") || starts("MASTERDOWN") || starts("TRYAGAIN") || starts("CLUSTERDOWN"))
    return Unavailable(what + ": redis cannot serve now: " + r.str);
  if (starts("WRONGTYPE")) return Corruption(what + ": key holds a value of another type: " + r.str);
  return IOError(what + ": redis error: " + r.str);
}

std::string DescribeReply(const RedisReply& reply) {
  switch (reply.type) {
    case RedisReply::Type::kNil: return "nil";
    case RedisReply::Type::kString: return "string of " + std::to_string(reply.str.size()) + " bytes";
    case RedisReply::Type::kInteger: return "integer " + std::to_string(reply.integer);
    case RedisReply::Type::kArray: return "array of " + std::to_string(reply.elements.size());
    case RedisReply::Type::kStatus: return "status " + reply.str;
    case RedisReply::Type::kError: return "error '" + reply.str + "'";
  }
  return "?";
}

int64_t UnixMillisNow() { return Env::Default()->NowUnixMicros() / 1000; }

namespace {

void Free(redisContext*& ctx) {
  if (ctx != nullptr) redisFree(ctx);
  ctx = nullptr;
}

// A server that went away leaves the socket readable at EOF (or with an error) while idle; such a
// connection is re-made before anything is sent, so even non-idempotent calls survive a restart.
bool LooksClosed(const redisContext* ctx) {
  pollfd p{ctx->fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  char byte;
  const ssize_t n = ::recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

RedisConnection::RedisConnection(const RedisOptions& options) : options_(options), endpoint_(EndpointOf(options)) {}

RedisConnection::~RedisConnection() {
  // The owner destroys us only after every call returned, so every context is idle here.
  for (redisContext*& c : idle_) Free(c);
}

Result<std::unique_ptr<RedisConnection>> RedisConnection::Open(const RedisOptions& options) {
  FAK_RETURN_IF_ERROR(ValidateRedisOptions(options));
  std::unique_ptr<RedisConnection> conn(new RedisConnection(options));
  const RedisCommand hello[] = {{"PING"}, {"CLUSTER", "SLOTS"}};
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, conn->Run(hello, /*idempotent=*/true));
  if (replies[0].type != RedisReply::Type::kStatus)
    return IOError("redis " + conn->endpoint_ + ": PING answered " + DescribeReply(replies[0]));
  // An error ("cluster support disabled") is one server; an array is a cluster's slot map.
  if (replies[1].type == RedisReply::Type::kArray) {
    FAK_ASSIGN_OR_RETURN(conn->cluster_, RedisClusterRouter::Open(options, replies[1]));
  }
  return conn;
}

std::unique_ptr<RedisConnection> RedisConnection::ForNode(const RedisOptions& options) {
  return std::unique_ptr<RedisConnection>(new RedisConnection(options));
}

Result<std::vector<std::string>> RedisConnection::ScanKeys(const std::string& pattern) {
  if (cluster_) return cluster_->ScanKeys(pattern);
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    FAK_ASSIGN_OR_RETURN(RedisReply r, RunOne({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, true));
    if (r.type != RedisReply::Type::kArray || r.elements.size() != 2 || r.elements[0].type != RedisReply::Type::kString ||
        r.elements[1].type != RedisReply::Type::kArray) {
      if (r.type == RedisReply::Type::kError) return ErrorReplyStatus("redis " + endpoint_ + ": SCAN", r);
      return Corruption("redis " + endpoint_ + ": SCAN: unexpected reply " + DescribeReply(r));
    }
    cursor = r.elements[0].str;
    for (RedisReply& key : r.elements[1].elements) keys.push_back(std::move(key.str));
  } while (cursor != "0");
  return keys;
}

std::optional<ClusterStats> RedisConnection::cluster_stats() const {
  if (!cluster_) return std::nullopt;
  return cluster_->Stats();
}

Status RedisConnection::Connect(redisContext*& ctx) {
  Free(ctx);
  const timeval tv = Millis(options_.connect_timeout_ms);
  redisContext* c = options_.unix_socket.empty() ? redisConnectWithTimeout(options_.host.c_str(), options_.port, tv)
                                                 : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), tv);
  if (c == nullptr) return ResourceExhausted("redis " + endpoint_ + ": cannot allocate a connection");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    return Unavailable("redis " + endpoint_ + ": connect failed: " + why);
  }
  redisSetTimeout(c, Millis(options_.command_timeout_ms));
  if (options_.unix_socket.empty()) redisEnableKeepAlive(c);
  ctx = c;
  std::vector<RedisCommand> setup;
  if (!options_.password.empty()) setup.push_back({"AUTH", options_.password});
  if (options_.database != 0) setup.push_back({"SELECT", std::to_string(options_.database)});
  if (setup.empty()) return Status::Ok();
  bool reached = false, timed_out = false;
  Result<std::vector<RedisReply>> replies = RunOnce(ctx, setup, &reached, &timed_out);
  if (!replies.has_value()) return replies.error();
  for (size_t i = 0; i < replies->size(); ++i) {
    if ((*replies)[i].type == RedisReply::Type::kError) {
      Free(ctx);
      return FailedPrecondition("redis " + endpoint_ + ": " + setup[i][0] + " refused: " + (*replies)[i].str);
    }
  }
  return Status::Ok();
}

Status RedisConnection::Buffer(redisContext*& ctx, std::span<const RedisCommand> commands) {
  for (const RedisCommand& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
      Free(ctx);  // its output buffer may hold part of the batch
      return ResourceExhausted("redis " + endpoint_ + ": cannot buffer " + CommandName(cmd));
    }
  }
  return Status::Ok();
}

Status RedisConnection::Flush(redisContext*& ctx, const std::string& what, bool* timed_out) {
  for (int done = 0; !done;) {
    errno = 0;
    if (redisBufferWrite(ctx, &done) != REDIS_OK) {
      *timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
      const std::string why = *timed_out ? "timed out after " + std::to_string(options_.command_timeout_ms) + " ms"
                                         : std::string(ctx->errstr[0] ? ctx->errstr : "connection lost");
      Free(ctx);
      return Unavailable(what + ": " + why);
    }
  }
  return Status::Ok();
}

Status RedisConnection::Receive(redisContext*& ctx, const std::string& what, char* to, size_t cap, size_t* got,
                                bool* timed_out) {
  for (;;) {
    const ssize_t n = ::recv(ctx->fd, to, cap, 0);
    if (n > 0) {
      *got = static_cast<size_t>(n);
      return Status::Ok();
    }
    std::string why;
    if (n == 0) {
      why = "connection closed by the server";
    } else if (errno == EINTR) {
      continue;
    } else {
      *timed_out = errno == EAGAIN || errno == EWOULDBLOCK;  // SO_RCVTIMEO (redisSetTimeout) expired
      why = *timed_out ? "timed out after " + std::to_string(options_.command_timeout_ms) + " ms"
                       : std::string("recv: ") + std::strerror(errno);
    }
    Free(ctx);
    return Unavailable(what + ": " + why);
  }
}

Result<std::vector<RedisReply>> RedisConnection::RunOnce(redisContext*& ctx, std::span<const RedisCommand> commands,
                                                         bool* may_have_reached, bool* timed_out) {
  FAK_RETURN_IF_ERROR(Buffer(ctx, commands));
  *may_have_reached = true;
  const auto what = [&](size_t i) { return "redis " + endpoint_ + ": " + CommandName(i < commands.size() ? commands[i] : RedisCommand{}); };
  FAK_RETURN_IF_ERROR(Flush(ctx, what(0), timed_out));
  // Replies are parsed by RespReader (hiredis's reader is never fed): every length it announces
  // is checked before it is trusted.
  RespReader reader;
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  std::string chunk(64 * 1024, '\0');
  while (out.size() < commands.size()) {
    Result<std::optional<RedisReply>> next = reader.Next();
    if (!next.has_value()) {
      Free(ctx);  // the stream is mid-reply or lying: never reused
      return Corruption(what(out.size()) + ": " + std::string(next.error().message()));
    }
    if (next->has_value()) {
      out.push_back(std::move(**next));
      continue;
    }
    size_t got = 0;
    FAK_RETURN_IF_ERROR(Receive(ctx, what(out.size()), chunk.data(), chunk.size(), &got, timed_out));
    reader.Feed(std::string_view(chunk.data(), got));
  }
  if (reader.buffered() != 0) {  // more than the replies asked for: the stream cannot be trusted
    Free(ctx);
    return Corruption(what(0) + ": " + std::to_string(reader.buffered()) + " unexpected bytes after the replies");
  }
  return out;
}

Status RedisConnection::Attempts(redisContext*& ctx, bool idempotent, int max_retries, const Once& once) {
  int backoff_ms = options_.retry_backoff_ms;
  Status last;
  for (int attempt = 0; attempt <= max_retries; ++attempt) {
    if (attempt > 0 && backoff_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms *= 2;
    }
    if (ctx != nullptr && LooksClosed(ctx)) Free(ctx);
    if (ctx == nullptr) {
      last = Connect(ctx);
      if (!last.ok()) {
        if (last.code() != StatusCode::kUnavailable) return last;
        continue;
      }
    }
    bool reached = false, timed_out = false;
    Status s = once(ctx, &reached, &timed_out);
    if (s.ok() || s.code() != StatusCode::kUnavailable) return s;
    last = s;
    if (timed_out) return last;
    if (reached && !idempotent)
      return Unavailable(std::string(last.message()) + " (not retried: the command may or may not have been applied)");
  }
  return Unavailable(std::string(last.message()) + " (gave up after " + std::to_string(max_retries + 1) + " attempts)");
}

Status RedisConnection::Admit(bool* probe) {
  if (options_.breaker_failure_threshold == 0) return Status::Ok();
  std::lock_guard lock(mu_);
  if (consecutive_failures_ < options_.breaker_failure_threshold) return Status::Ok();
  const Clock::time_point now = Clock::now();
  if (now < open_until_ || probe_in_flight_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(open_until_ - now).count();
    return Unavailable("redis " + endpoint_ + ": circuit breaker open after " + std::to_string(consecutive_failures_) +
                       " consecutive failures, failing fast" +
                       (probe_in_flight_ ? std::string(" while a probe is in flight")
                                         : " for another " + std::to_string(left) + " ms") +
                       " (last failure: " + last_failure_ + ")");
  }
  probe_in_flight_ = true;
  *probe = true;
  return Status::Ok();
}

void RedisConnection::Record(bool outage, bool probe, const Status& why) {
  if (options_.breaker_failure_threshold == 0) return;
  std::lock_guard lock(mu_);
  if (probe) probe_in_flight_ = false;
  if (!outage) {
    consecutive_failures_ = 0;
    return;
  }
  last_failure_ = std::string(why.message());
  if (++consecutive_failures_ >= options_.breaker_failure_threshold)
    open_until_ = Clock::now() + std::chrono::milliseconds(options_.breaker_cooldown_ms);
}

Result<redisContext*> RedisConnection::Lease() {
  std::unique_lock lock(mu_);
  // A caller waits at most about one full call for a slot, so a stall cannot queue callers forever.
  const int wait_ms = options_.connect_timeout_ms + options_.command_timeout_ms;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  while (idle_.empty() && n_leased_ >= options_.pool_size) {
    if (slot_freed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        n_leased_ >= options_.pool_size) {
      return Unavailable("redis " + endpoint_ + ": all " + std::to_string(options_.pool_size) +
                         " pooled connections stayed busy for " + std::to_string(wait_ms) + " ms");
    }
  }
  ++n_leased_;
  redisContext* ctx = nullptr;  // none idle: the caller makes one in this slot
  if (!idle_.empty()) {
    ctx = idle_.back();  // the most recently used: the likeliest to be alive
    idle_.pop_back();
  }
  return ctx;
}

void RedisConnection::Return(redisContext* ctx) {
  {
    std::lock_guard lock(mu_);
    --n_leased_;
    if (ctx != nullptr) idle_.push_back(ctx);
  }
  slot_freed_.notify_one();
}

Status RedisConnection::Call(bool idempotent, const Once& once) {
  ScopedSigpipeBlock no_sigpipe;
  bool probe = false;
  FAK_RETURN_IF_ERROR(Admit(&probe));
  Result<redisContext*> leased = Lease();
  if (!leased.has_value()) {
    Record(/*outage=*/true, probe, leased.error());
    return leased.error();
  }
  redisContext* ctx = *leased;
  // The probe gets one attempt: it only asks whether the server is back.
  Status s = Attempts(ctx, idempotent, probe ? 0 : options_.max_retries, once);
  Return(ctx);  // null when the attempt dropped it
  Record(s.code() == StatusCode::kUnavailable, probe, s);
  return s;
}

Result<std::vector<RedisReply>> RedisConnection::Run(std::span<const RedisCommand> commands, bool idempotent) {
  if (cluster_) return cluster_->Run(commands, idempotent);
  std::vector<RedisReply> out;
  FAK_RETURN_IF_ERROR(Call(idempotent, [&](redisContext*& ctx, bool* reached, bool* timed_out) -> Status {
    Result<std::vector<RedisReply>> r = RunOnce(ctx, commands, reached, timed_out);
    if (!r.has_value()) return r.error();
    out = std::move(*r);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<RedisReply>> RedisConnection::RunInto(std::span<const RedisCommand> commands, bool idempotent,
                                                         std::span<char> dest, size_t* written) {
  if (cluster_) return cluster_->RunInto(commands, idempotent, dest, written);
  std::vector<RedisReply> out;
  *written = 0;
  FAK_RETURN_IF_ERROR(Call(idempotent, [&](redisContext*& ctx, bool* reached, bool* timed_out) -> Status {
    Result<std::vector<RedisReply>> r = RunIntoOnce(ctx, commands, dest, written, reached, timed_out);
    if (!r.has_value()) return r.error();
    out = std::move(*r);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<RedisReply>> RedisConnection::RunIntoOnce(redisContext*& ctx, std::span<const RedisCommand> commands,
                                                             std::span<char> dest, size_t* written, bool* may_have_reached,
                                                             bool* timed_out) {
  *written = 0;
  FAK_RETURN_IF_ERROR(Buffer(ctx, commands));
  *may_have_reached = true;
  // Send through hiredis; read the replies ourselves from the socket (hiredis's reader is never
  // fed; every earlier reply on this connection was read whole, and none are left after).
  const std::string what = "redis " + endpoint_ + ": " + CommandName(commands.empty() ? RedisCommand{} : commands[0]);
  FAK_RETURN_IF_ERROR(Flush(ctx, what, timed_out));
  // Header lines and the short replies go through a small staging buffer; bulk payloads do not.
  std::string stage(64 * 1024, '\0');
  size_t beg = 0, end = 0;
  const auto recv_into = [&](char* to, size_t cap, size_t* got) -> Status {
    return Receive(ctx, what, to, cap, got, timed_out);
  };
  const auto fill = [&]() -> Status {
    if (beg == end) beg = end = 0;
    if (end == stage.size()) {
      if (beg == 0) {
        Free(ctx);
        return Corruption(what + ": a reply line longer than " + std::to_string(stage.size()) + " bytes");
      }
      stage.erase(0, beg);
      stage.resize(stage.capacity());
      end -= beg;
      beg = 0;
    }
    size_t got = 0;
    FAK_RETURN_IF_ERROR(recv_into(stage.data() + end, stage.size() - end, &got));
    end += got;
    return Status::Ok();
  };
  const auto line = [&](std::string* out) -> Status {
    for (;;) {
      const size_t at = std::string_view(stage.data() + beg, end - beg).find("\r\n");
      if (at != std::string_view::npos) {
        out->assign(stage.data() + beg, at);
        beg += at + 2;
        return Status::Ok();
      }
      FAK_RETURN_IF_ERROR(fill());
    }
  };
  std::vector<RedisReply> out(commands.size());
  std::string head;
  for (size_t i = 0; i < commands.size(); ++i) {
    FAK_RETURN_IF_ERROR(line(&head));
    RedisReply& r = out[i];
    int64_t n = 0;
    const char kind = head.empty() ? '?' : head[0];
    const bool number = kind == '$' || kind == ':';
    if (number) {
      auto [p, ec] = std::from_chars(head.data() + 1, head.data() + head.size(), n);
      if (ec != std::errc() || p != head.data() + head.size()) {
        Free(ctx);
        return Corruption(what + ": unparsable reply header");
      }
    }
    if (kind == '-') {
      r.type = RedisReply::Type::kError;
      r.str = head.substr(1);
    } else if (kind == ':') {
      r.type = RedisReply::Type::kInteger;
      r.integer = n;
    } else if (kind == '$' && n == -1) {
      r.type = RedisReply::Type::kNil;
    } else if (kind == '$' && n < 0) {
      Free(ctx);
      return Corruption(what + ": bulk length " + std::to_string(n));
    } else if (kind == '$') {
      const size_t len = static_cast<size_t>(n);
      if (len > dest.size() - *written) {
        Free(ctx);
        return Corruption(what + ": a value of " + std::to_string(len) + " bytes does not fit the " +
                          std::to_string(dest.size() - *written) + " bytes left");
      }
      char* to = dest.data() + *written;
      const size_t staged = std::min(len, end - beg);
      std::memcpy(to, stage.data() + beg, staged);
      beg += staged;
      for (size_t have = staged; have < len;) {  // the payload, straight from the socket
        size_t got = 0;
        FAK_RETURN_IF_ERROR(recv_into(to + have, len - have, &got));
        have += got;
      }
      while (end - beg < 2) FAK_RETURN_IF_ERROR(fill());
      if (stage[beg] != '\r' || stage[beg + 1] != '\n') {
        Free(ctx);
        return Corruption(what + ": a bulk reply is not terminated by CRLF");
      }
      beg += 2;
      *written += len;
      r.type = RedisReply::Type::kString;
      r.integer = n;
    } else {
      Free(ctx);
      return Corruption(what + ": unexpected reply '" + head.substr(0, 32) + "'");
    }
  }
  if (beg != end) {  // more than the replies asked for: the stream cannot be trusted
    Free(ctx);
    return Corruption(what + ": " + std::to_string(end - beg) + " unexpected bytes after the replies");
  }
  return out;
}

Result<RedisReply> RedisConnection::RunOne(const RedisCommand& command, bool idempotent) {
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, Run(std::span<const RedisCommand>(&command, 1), idempotent));
  return std::move(replies.front());
}

}  // namespace fak::internal
