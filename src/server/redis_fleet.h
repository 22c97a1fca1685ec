// RedisFleet: the FleetLink of workers that share one Redis (docs/fleet.md).
//
// Keys, all under one hash tag so a Redis Cluster keeps them on one shard:
//   <prefix>:{fleet}:workers      hash  worker → last heartbeat (Unix ms)
//   <prefix>:{fleet}:erasures     stream of announced erasures (origin, digest, tenant), capped
//   <prefix>:{fleet}:acks:<id>    hash  worker → what it removed, for an hour
//   <prefix>:{fleet}:tree         stream of tree changes (worker, op reset|insert|evict, tenant,
//                                 prefix, messages, tokens) for cache-aware routers, capped
// One thread per link heartbeats and reads the stream from where it left off, so erasures
// announced while Redis was unreachable are applied once it answers again.
#ifndef FAK_SRC_SERVER_REDIS_FLEET_H_
#define FAK_SRC_SERVER_REDIS_FLEET_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "fak/store/redis_store.h"
#include "src/server/fleet.h"

namespace fak {

namespace internal {
class RedisConnection;
}

struct RedisFleetOptions {
  RedisOptions redis;
  // This worker's name: 1-64 of [A-Za-z0-9_.:-], unique in the fleet. Required.
  std::string worker_id;
  // How often this worker says it is alive, and how long after its last word others still wait
  // for it. Defaults: 500 ms, 3000 ms.
  int heartbeat_ms = 500;
  int live_after_ms = 3000;
  // How long Announce waits for confirmations. Default: 2000 ms.
  int confirm_timeout_ms = 2000;
};

class RedisFleet final : public FleetLink {
 public:
  // Connects and registers the worker. InvalidArgument for bad options; Unavailable when Redis
  // cannot be reached.
  static Result<std::unique_ptr<RedisFleet>> Open(RedisFleetOptions options);
  ~RedisFleet() override;  // stops the thread and leaves the fleet (no one waits for it then)
  RedisFleet(const RedisFleet&) = delete;
  RedisFleet& operator=(const RedisFleet&) = delete;

  const std::string& worker_id() const override { return options_.worker_id; }
  Status Listen(ApplyErasure apply) override;
  void StopListening() override;
  FleetConfirmation Announce(const FleetErasure& erasure, bool wait) override;
  Result<std::vector<std::string>> LiveWorkers() override;
  void PublishTree(TreeSnapshot snapshot) override { tree_snapshot_ = std::move(snapshot); }

 private:
  RedisFleet(RedisFleetOptions options, std::unique_ptr<internal::RedisConnection> conn, std::string last_id);
  std::string Key(std::string_view what) const;
  Status Heartbeat();
  // Reads (blocking briefly) and applies the next announcements; advances last_id_.
  Status ApplyNext(const ApplyErasure& apply);
  void Run(ApplyErasure apply);
  // Streams what changed in the tree since the last publication (a reset first, once); on failure
  // the same changes are tried again next time.
  Status PublishTreeChanges();

  const RedisFleetOptions options_;
  std::unique_ptr<internal::RedisConnection> conn_;
  std::string last_id_;  // the stream position read up to; only the link's thread touches it after Listen
  TreeSnapshot tree_snapshot_;                 // set before Listen; then the thread's
  std::vector<PublishedPrefix> tree_published_;  // what the stream says this worker holds
  bool tree_reset_sent_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fak

#endif  // FAK_SRC_SERVER_REDIS_FLEET_H_
