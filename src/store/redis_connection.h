// RedisConnection: the one place fak talks to hiredis (which connects and writes commands; replies
// are read by fak's own bounded parsers, RespReader and RunInto's bulk reader). Owns a small pool of blocking connections
// with connect and command timeouts and a circuit breaker, pipelines a batch of commands per round
// trip, reconnects with bounded, backed-off retries, and turns every failure into a Status naming
// the endpoint and command (Unavailable for outages, so callers never mistake one for an answer).
// When the server is a Redis Cluster node (detected at Open), every call is routed by slot through
// a RedisClusterRouter (src/store/redis_cluster.h) instead. Also the option validation shared by
// the Redis blob store, denylist, KV tier and fleet link.
#ifndef FAK_SRC_STORE_REDIS_CONNECTION_H_
#define FAK_SRC_STORE_REDIS_CONNECTION_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/store/redis_store.h"
#include "fak/core/status.h"
#include "src/store/redis_cluster.h"
#include "src/store/resp_reader.h"

struct redisContext;

namespace fak::internal {


// Thread-safety: Run may be called concurrently. Each call leases one connection from a pool of at
// most options.pool_size (idle ones are reused; a new one is made when none is idle), so a stalled
// call holds only its own socket and no lock is held across network I/O. A circuit breaker shared
// by the pool turns an outage into fast Unavailable answers: after breaker_failure_threshold
// consecutive failed calls it opens for breaker_cooldown_ms, then lets one probe call through.
// Ownership: owns its hiredis contexts. Cost: up to pool_size sockets.
class RedisConnection {
 public:
  // Connects, authenticates, selects the database and PINGs; asks CLUSTER SLOTS in the same round
  // trip, and when the server is a cluster node routes every later call by the slot map it gave
  // (a server without cluster support answers with an error: one server).
  static Result<std::unique_ptr<RedisConnection>> Open(const RedisOptions& options);
  // A connection to one server that never routes and connects on first use (a cluster's node).
  static std::unique_ptr<RedisConnection> ForNode(const RedisOptions& options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends `commands` in one pipelined round trip; one reply each, in order. A broken connection is
  // re-made and the batch re-sent up to max_retries times, except that a batch that may have
  // reached the server is re-sent only when `idempotent`. A timeout is never retried. An outage
  // (refused, reset, timed out, open breaker, every connection busy) is Unavailable; error replies
  // are replies. A reply past RespLimits (an absurd bulk length, array count or nesting) is
  // Corruption naming the limit, and the connection is dropped.
  Result<std::vector<RedisReply>> Run(std::span<const RedisCommand> commands, bool idempotent);
  Result<RedisReply> RunOne(const RedisCommand& command, bool idempotent);
  // Run for commands whose replies are bulk strings, nil, integers or errors (GET, EXPIRE): each
  // bulk string's bytes are received from the socket straight into `dest`, one after another from
  // its start — no copy through hiredis's reader, so a multi-MB value is moved once instead of
  // three times. Such a reply comes back as kString with an empty str and integer = its length;
  // *written = the bytes placed. A bulk string larger than what is left of `dest`, or a reply of
  // another type, is Corruption (the connection is dropped: its stream is mid-reply). Retried as Run.
  Result<std::vector<RedisReply>> RunInto(std::span<const RedisCommand> commands, bool idempotent, std::span<char> dest,
                                          size_t* written);

  // Every key matching `pattern` (a SCAN glob), on every master of a cluster; a key may repeat.
  Result<std::vector<std::string>> ScanKeys(const std::string& pattern);
  // The cluster's routing counters; nullopt for one server.
  std::optional<ClusterStats> cluster_stats() const;

  // "host:port" or the socket path, for messages.
  const std::string& endpoint() const { return endpoint_; }
  const RedisOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  explicit RedisConnection(const RedisOptions& options);
  // Breaker gate: OK to go on (setting *probe when this call is the one probe), else Unavailable.
  Status Admit(bool* probe);
  // Records a call's outcome for the breaker; `outage` when it failed to reach the server.
  void Record(bool outage, bool probe, const Status& why);
  // A pooled context (null: make a new one) or Unavailable when every slot stays busy.
  Result<redisContext*> Lease();
  void Return(redisContext* ctx);  // null gives the slot back
  // One attempt on a connected context: sets *may_have_reached once anything was sent and
  // *timed_out for a timeout; Unavailable for a lost connection (the context is then freed).
  using Once = std::function<Status(redisContext*& ctx, bool* may_have_reached, bool* timed_out)>;
  // Admission, lease, the retry loop and the breaker's bookkeeping around `once`.
  Status Call(bool idempotent, const Once& once);
  // The retry loop on one leased context; never touches the pool.
  Status Attempts(redisContext*& ctx, bool idempotent, int max_retries, const Once& once);
  Status Connect(redisContext*& ctx);
  // Appends the batch to ctx's output buffer (not sent yet); on failure ctx is freed.
  Status Buffer(redisContext*& ctx, std::span<const RedisCommand> commands);
  // Sends what Buffer appended; on failure ctx is freed (Unavailable, *timed_out for a timeout).
  Status Flush(redisContext*& ctx, const std::string& what, bool* timed_out);
  // One recv on ctx's socket into `to`: *got > 0 bytes, or Unavailable (ctx freed) for a closed
  // connection, an error or a timeout (*timed_out).
  Status Receive(redisContext*& ctx, const std::string& what, char* to, size_t cap, size_t* got, bool* timed_out);
  Result<std::vector<RedisReply>> RunOnce(redisContext*& ctx, std::span<const RedisCommand> commands,
                                          bool* may_have_reached, bool* timed_out);
  Result<std::vector<RedisReply>> RunIntoOnce(redisContext*& ctx, std::span<const RedisCommand> commands, std::span<char> dest,
                                              size_t* written, bool* may_have_reached, bool* timed_out);

  const RedisOptions options_;
  const std::string endpoint_;
  std::unique_ptr<RedisClusterRouter> cluster_;  // set when the server is a cluster node
  std::mutex mu_;  // guards the fields below; never held across I/O
  std::condition_variable slot_freed_;
  std::vector<redisContext*> idle_;
  int n_leased_ = 0;             // slots in use (leased contexts, or contexts being made)
  int consecutive_failures_ = 0;
  Clock::time_point open_until_{};  // breaker open while now < open_until_
  bool probe_in_flight_ = false;
  std::string last_failure_;        // for the open breaker's message
};

// InvalidArgument naming the field when an option is out of range.
Status ValidateRedisOptions(const RedisOptions& options);

// The name of a command for messages: its first word (never its payload).
std::string CommandName(const RedisCommand& command);
// The Status for an error reply: OOM (maxmemory reached) is ResourceExhausted; a server that is up
// but cannot serve now (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN) is Unavailable;
// WRONGTYPE is Corruption; anything else IOError. `what` names the endpoint and call.
Status ErrorReplyStatus(const std::string& what, const RedisReply& reply);
// A short description of an unexpected reply, for messages.
std::string DescribeReply(const RedisReply& reply);

// Wall clock in Unix milliseconds (denylist stamps).
int64_t UnixMillisNow();

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_REDIS_CONNECTION_H_
