// RedisConnection: the one place fak talks to hiredis. Owns a blocking connection with connect and
// command timeouts, pipelines a batch of commands per round trip, reconnects with bounded,
// backed-off retries, and turns every failure into a Status naming the endpoint and command.
// Also the option validation and key layout shared by the Redis blob store and denylist.
#ifndef FAK_SRC_STORE_REDIS_CONNECTION_H_
#define FAK_SRC_STORE_REDIS_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/store/redis_store.h"
#include "fak/core/status.h"

struct redisContext;

namespace fak::internal {

// A reply, copied out of hiredis. Error replies ("-ERR ...") are replies, not Statuses: the caller
// decides what they mean.
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

using RedisCommand = std::vector<std::string>;  // argv; binary-safe

// Thread-safety: Run may be called concurrently; calls serialize on one connection.
// Ownership: owns its hiredis context. Cost: one socket.
class RedisConnection {
 public:
  // Connects, authenticates, selects the database and PINGs.
  static Result<std::unique_ptr<RedisConnection>> Open(const RedisOptions& options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends `commands` in one pipelined round trip; one reply each, in order. A broken connection is
  // re-made and the batch re-sent up to max_retries times, except that a batch that may have
  // reached the server is re-sent only when `idempotent`. A timeout is never retried.
  Result<std::vector<RedisReply>> Run(std::span<const RedisCommand> commands, bool idempotent);
  Result<RedisReply> RunOne(const RedisCommand& command, bool idempotent);

  // "host:port" or the socket path, for messages.
  const std::string& endpoint() const { return endpoint_; }
  const RedisOptions& options() const { return options_; }

 private:
  explicit RedisConnection(const RedisOptions& options);
  Status Connect();  // REQUIRES: mu_ held
  void Drop();       // REQUIRES: mu_ held
  bool LooksClosed() const;  // REQUIRES: mu_ held
  // One attempt. `*may_have_reached` is set once bytes may have left for the server;
  // `*timed_out` when the failure was a timeout.
  Result<std::vector<RedisReply>> RunOnce(std::span<const RedisCommand> commands, bool* may_have_reached,
                                          bool* timed_out);  // REQUIRES: mu_ held

  const RedisOptions options_;
  const std::string endpoint_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;  // GUARDED_BY(mu_); null while disconnected
};

// InvalidArgument naming the field when an option is out of range.
Status ValidateRedisOptions(const RedisOptions& options);

// The name of a command for messages: its first word (never its payload).
std::string CommandName(const RedisCommand& command);
// A short description of an unexpected reply, for messages.
std::string DescribeReply(const RedisReply& reply);

// Wall clock in Unix milliseconds (denylist stamps).
int64_t UnixMillisNow();

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_REDIS_CONNECTION_H_
