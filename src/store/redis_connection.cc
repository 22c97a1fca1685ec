// RedisConnection over hiredis 0.14+ (blocking API). hiredis writes with plain write(2), so a
// server that died would raise SIGPIPE and kill the host; every round trip blocks SIGPIPE in the
// calling thread and swallows one it caused, without touching the process's handlers.
#include "src/store/redis_connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
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

RedisReply CopyReply(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; break;
    case REDIS_REPLY_ARRAY: out.type = RedisReply::Type::kArray; break;
    default: out.type = RedisReply::Type::kNil; break;
  }
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  out.integer = r->integer;
  out.elements.reserve(r->elements);
  for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(CopyReply(r->element[i]));
  return out;
}

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
  if (o.ttl_seconds < 0) return InvalidArgument("RedisOptions.ttl_seconds must be >= 0");
  if (o.database < 0) return InvalidArgument("RedisOptions.database must be >= 0");
  return Status::Ok();
}

std::string CommandName(const RedisCommand& command) { return command.empty() ? "(empty)" : command[0]; }

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

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RedisConnection::RedisConnection(const RedisOptions& options) : options_(options), endpoint_(EndpointOf(options)) {}

RedisConnection::~RedisConnection() {
  std::lock_guard lock(mu_);
  Drop();
}

Result<std::unique_ptr<RedisConnection>> RedisConnection::Open(const RedisOptions& options) {
  FAK_RETURN_IF_ERROR(ValidateRedisOptions(options));
  std::unique_ptr<RedisConnection> conn(new RedisConnection(options));
  FAK_ASSIGN_OR_RETURN(RedisReply pong, conn->RunOne({"PING"}, /*idempotent=*/true));
  if (pong.type != RedisReply::Type::kStatus) return IOError("redis " + conn->endpoint_ + ": PING answered " + DescribeReply(pong));
  return conn;
}

void RedisConnection::Drop() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RedisConnection::Connect() {
  Drop();
  const timeval tv = Millis(options_.connect_timeout_ms);
  redisContext* c = options_.unix_socket.empty() ? redisConnectWithTimeout(options_.host.c_str(), options_.port, tv)
                                                 : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), tv);
  if (c == nullptr) return ResourceExhausted("redis " + endpoint_ + ": cannot allocate a connection");
  if (c->err != 0) {
    const std::string why = c->errstr;
    redisFree(c);
    return IOError("redis " + endpoint_ + ": connect failed: " + why);
  }
  redisSetTimeout(c, Millis(options_.command_timeout_ms));
  if (options_.unix_socket.empty()) redisEnableKeepAlive(c);
  ctx_ = c;
  std::vector<RedisCommand> setup;
  if (!options_.password.empty()) setup.push_back({"AUTH", options_.password});
  if (options_.database != 0) setup.push_back({"SELECT", std::to_string(options_.database)});
  if (setup.empty()) return Status::Ok();
  bool reached = false, timed_out = false;
  Result<std::vector<RedisReply>> replies = RunOnce(setup, &reached, &timed_out);
  if (!replies.has_value()) return replies.error();
  for (size_t i = 0; i < replies->size(); ++i) {
    if ((*replies)[i].type == RedisReply::Type::kError) {
      Drop();
      return FailedPrecondition("redis " + endpoint_ + ": " + setup[i][0] + " refused: " + (*replies)[i].str);
    }
  }
  return Status::Ok();
}

// A server that went away leaves the socket readable at EOF (or with an error) while idle; such a
// connection is re-made before anything is sent, so even non-idempotent calls survive a restart.
bool RedisConnection::LooksClosed() const {
  pollfd p{ctx_->fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  char byte;
  const ssize_t n = ::recv(ctx_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

Result<std::vector<RedisReply>> RedisConnection::RunOnce(std::span<const RedisCommand> commands, bool* may_have_reached,
                                                         bool* timed_out) {
  for (const RedisCommand& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      return ResourceExhausted("redis " + endpoint_ + ": cannot buffer " + CommandName(cmd));
  }
  *may_have_reached = true;  // the first redisGetReply flushes the buffer
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (const RedisCommand& cmd : commands) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      *timed_out = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      const std::string why = *timed_out ? "timed out after " + std::to_string(options_.command_timeout_ms) + " ms"
                                         : std::string(ctx_->errstr[0] ? ctx_->errstr : "connection lost");
      Drop();
      return IOError("redis " + endpoint_ + ": " + CommandName(cmd) + ": " + why);
    }
    out.push_back(CopyReply(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return out;
}

Result<std::vector<RedisReply>> RedisConnection::Run(std::span<const RedisCommand> commands, bool idempotent) {
  ScopedSigpipeBlock no_sigpipe;
  std::lock_guard lock(mu_);
  int backoff_ms = options_.retry_backoff_ms;
  Status last;
  for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
    if (attempt > 0 && backoff_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms *= 2;
    }
    if (ctx_ != nullptr && LooksClosed()) Drop();
    if (ctx_ == nullptr) {
      last = Connect();
      if (!last.ok()) {
        if (last.code() != StatusCode::kIOError) return last;
        continue;
      }
    }
    bool reached = false, timed_out = false;
    Result<std::vector<RedisReply>> r = RunOnce(commands, &reached, &timed_out);
    if (r.has_value() || r.error().code() != StatusCode::kIOError) return r;
    last = r.error();
    if (timed_out) return last;
    if (reached && !idempotent)
      return IOError(std::string(last.message()) + " (not retried: the command may or may not have been applied)");
  }
  return IOError(std::string(last.message()) + " (gave up after " + std::to_string(options_.max_retries + 1) +
                 " attempts)");
}

Result<RedisReply> RedisConnection::RunOne(const RedisCommand& command, bool idempotent) {
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, Run(std::span<const RedisCommand>(&command, 1), idempotent));
  return std::move(replies.front());
}

}  // namespace fak::internal
