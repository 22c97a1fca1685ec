// Redis Cluster routing for RedisConnection (docs/store.md §5.5): the key slot of a key (CRC16 and
// {hash tag} rules of the cluster spec), the keys of each command fak sends, the slot map
// (CLUSTER SLOTS), and RedisClusterRouter, which sends each command to its slot's master and
// follows MOVED (refreshing the map) and ASK (with ASKING). A multi-key command whose keys span
// slots is refused before anything is sent: fak's key families put whatever one command or
// script touches under one hash tag.
#ifndef FAK_SRC_STORE_REDIS_CLUSTER_H_
#define FAK_SRC_STORE_REDIS_CLUSTER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/store/redis_store.h"
#include "src/store/resp_reader.h"

namespace fak::internal {

class RedisConnection;
using RedisCommand = std::vector<std::string>;  // argv; binary-safe

constexpr int kClusterSlots = 16384;

// CRC16/XMODEM of `bytes` (the cluster spec's checksum; "123456789" → 0x31C3).
uint16_t Crc16(std::string_view bytes);
// The slot of `key`: CRC16 of its hash tag (the bytes between the first '{' and the next '}',
// when that is non-empty) or of the whole key, mod 16384.
uint16_t KeySlot(std::string_view key);
// The keys `command` names, for the commands fak sends (InvalidArgument for any other: it cannot
// be routed safely). Keyless commands (PING, INFO, CLUSTER, ASKING) name none.
Result<std::vector<std::string_view>> CommandKeys(const RedisCommand& command);
// The one slot of a command's keys; nullopt for a keyless command; InvalidArgument naming two of
// its keys when they lie in different slots.
Result<std::optional<uint16_t>> CommandSlot(const RedisCommand& command);

struct ClusterNode {
  std::string host;
  int port = 0;
  std::string Endpoint() const { return host + ":" + std::to_string(port); }
};
struct SlotRange {
  uint16_t first = 0, last = 0;  // inclusive
  ClusterNode master;
};
// A CLUSTER SLOTS reply, checked (slot bounds, ports, shape). A master announced with an empty
// host (or "?") is taken to be `asked`, the node that answered.
Result<std::vector<SlotRange>> ParseClusterSlots(const RedisReply& reply, const ClusterNode& asked);

// A MOVED or ASK error reply: where the slot is (MOVED) or, for this command only, will be (ASK).
struct ClusterRedirect {
  bool ask = false;
  uint16_t slot = 0;
  ClusterNode to;
};
std::optional<ClusterRedirect> ParseRedirect(const RedisReply& reply);

// Counters of one router, for tests and operators.
struct ClusterStats {
  uint64_t moved = 0;      // MOVED replies followed
  uint64_t asked = 0;      // ASK replies followed
  uint64_t refreshes = 0;  // slot maps fetched (the first included)
};

// Sends commands to the masters of their slots, one pooled RedisConnection per master (each with
// its own timeouts, retries and circuit breaker, so one node down answers Unavailable for its
// slots only and fast once its breaker opens). A batch is split into runs of consecutive commands
// bound for one master; runs go out in order, so a batch's commands are applied in its order.
// Thread-safety: Run/RunInto may be called concurrently; the map and the node table are guarded
// by one mutex never held across I/O. Cost: up to options.pool_size sockets per master used.
class RedisClusterRouter {
 public:
  // A router over the map in `slots` (the seed's CLUSTER SLOTS reply). InvalidArgument when
  // options.database != 0 (a cluster has only database 0); Unavailable when no slot is assigned.
  static Result<std::unique_ptr<RedisClusterRouter>> Open(const RedisOptions& options, const RedisReply& slots);
  ~RedisClusterRouter();

  Result<std::vector<RedisReply>> Run(std::span<const RedisCommand> commands, bool idempotent);
  // RedisConnection::RunInto across masters. A value whose command met a redirect is fetched where
  // the redirect says and copied into its place (the values after it move up).
  Result<std::vector<RedisReply>> RunInto(std::span<const RedisCommand> commands, bool idempotent, std::span<char> dest,
                                          size_t* written);
  // Every key matching `pattern` on every master (SCAN is per node in a cluster).
  Result<std::vector<std::string>> ScanKeys(const std::string& pattern);
  ClusterStats Stats() const;

 private:
  // Consecutive commands of a batch bound for one master.
  struct Leg {
    size_t begin = 0, end = 0;
    ClusterNode master;
  };
  RedisClusterRouter(const RedisOptions& options, ClusterNode seed);
  // Fetches CLUSTER SLOTS from the first known node that answers and replaces the map; at most
  // once per kMinRefreshInterval unless `force`.
  Status Refresh(bool force);
  Status Apply(const std::vector<SlotRange>& ranges);
  // The master of `slot` (a keyless command: any master); refreshes the map once when it has none.
  Result<ClusterNode> MasterOf(std::optional<uint16_t> slot);
  // The pooled connection to `node`, made on first use (never connects here).
  Result<RedisConnection*> Node(const ClusterNode& node);
  // Every command's slot checked (cross-slot refused), then split into legs.
  Result<std::vector<Leg>> Plan(std::span<const RedisCommand> commands);
  // `reply` to `command`, after following MOVED / ASK redirects (bounded).
  Result<RedisReply> Follow(const RedisCommand& command, RedisReply reply, bool idempotent);
  // RunInto's destination: `dest`, filled from its start, `written` bytes so far.
  struct Into {
    std::span<char> dest;
    size_t written = 0;
  };
  // Run (into == nullptr) and RunInto: the batch planned into legs, each sent to its master, and
  // every redirected command followed (only that command: the others of its leg ran).
  Result<std::vector<RedisReply>> Route(std::span<const RedisCommand> commands, bool idempotent, Into* into);
  // A followed reply's value placed at `at` in into->dest, the bytes after it moved up; the reply
  // then has RunInto's form (kString with integer = its length). Corruption when it does not fit or
  // is not a bulk string, nil, integer or error.
  static Status PlaceAt(const RedisCommand& command, size_t at, Into* into, RedisReply* reply);
  // A node's failure, after scheduling a map refresh when it was an outage.
  Status Unreachable(const Status& s);

  const RedisOptions options_;
  mutable std::mutex mu_;  // guards the fields below; never held across I/O
  std::array<int16_t, kClusterSlots> slot_owner_;  // index into masters_, -1 = unassigned
  std::vector<ClusterNode> masters_;               // as of the last refresh (plus MOVED targets)
  std::map<std::string, std::unique_ptr<RedisConnection>> nodes_;  // by endpoint; never removed
  std::vector<ClusterNode> known_;                 // every node ever seen, the seed first
  std::chrono::steady_clock::time_point last_refresh_{};
  std::atomic<uint64_t> moved_{0}, asked_{0}, refreshes_{0};
};

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_REDIS_CLUSTER_H_
