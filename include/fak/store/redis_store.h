// Redis fleet tier: the text corpus and the quarantine authority shared by every serving process of
// a fleet (architecture §7), on a store operators already run.
//
// RedisBlobStore implements BlobStore over a Redis server or Redis Cluster: content-addressed keys
// under a configurable prefix and tenant, one Cluster hash tag per digest (so a digest's value and
// pin count share a shard and are updated atomically by server-side scripts), every read verified
// against its digest, pins reference-counted in Redis (shared by all processes), no TTL by default,
// batch calls pipelined. RedisDenylist is the fleet-wide digest-keyed quarantine denylist, with
// reasons and times for every add and revocation; it is an Admitter, so it plugs into a
// ScreenChain, and regen/backfill can ask it directly (IsQuarantined). The key layout is in
// docs/store.md §5. No hiredis type appears here.
#ifndef FAK_STORE_REDIS_STORE_H_
#define FAK_STORE_REDIS_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/store/blob_store.h"
#include "fak/core/digest.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"

namespace fak {

struct RedisOptions {
  // Server address. Default: 127.0.0.1:6379. When unix_socket is set it is used instead.
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_socket;
  // Sent as AUTH after every (re)connect when non-empty. Default: empty.
  std::string password;
  // SELECT after every (re)connect when non-zero (Redis Cluster has only 0). Default: 0.
  int database = 0;
  // First part of every key, shared by the fleet: 1-64 of [A-Za-z0-9_.-]. Default: "fak".
  std::string prefix = "fak";
  // Blob namespace: 1-64 of [A-Za-z0-9_.-]. A store sees only its tenant's blobs. Default: "default".
  std::string tenant = "default";
  // Bound on establishing a connection, and on each command round trip. A call that times out
  // fails with IOError and is not retried (a slow server is not helped by more load).
  // Defaults: 1000 ms, 3000 ms.
  int connect_timeout_ms = 1000;
  int command_timeout_ms = 3000;
  // After a broken connection (refused, reset, closed) a call reconnects and retries up to this many
  // times, sleeping retry_backoff_ms and doubling it each time, before failing with IOError.
  // Non-idempotent calls (Pin, Unpin, Remove, Revoke) are never re-sent once they may have reached
  // the server. Defaults: 3 retries, 20 ms.
  int max_retries = 3;
  int retry_backoff_ms = 20;
  // Blobs per pipelined round trip in PutMany / GetMany (PutMany also ends a round trip at 1 MiB
  // of payload). Default: 128.
  int pipeline_depth = 128;
  // Blob store: seconds an unpinned blob lives after its last Put or Unpin; 0 = forever (no TTL).
  // Pinned blobs never expire. Default: 0.
  int64_t ttl_seconds = 0;
  // Denylist: when Redis cannot be asked, RedisDenylist::Screen quarantines (true) or admits
  // (false). Default: true (fail closed).
  bool screen_fail_closed = true;
};

// Opens a BlobStore on Redis: validates the options (InvalidArgument naming the field), connects
// and PINGs (IOError naming host:port when unreachable, after the bounded retries).
// Semantics beyond BlobStore:
//   - Put always (re)writes the value, so a Put of the true bytes repairs a damaged value.
//   - Get: NotFound when absent, VerificationFailed when the bytes do not hash to the digest,
//     Corruption when the key holds something other than a string.
//   - No LRU eviction in the client: capacity is the server's (maxmemory; an OOM reply is
//     ResourceExhausted). options.capacity_bytes is reported, not enforced.
//   - PutMany sends everything pipelined and reports the first error; later payloads may have been
//     stored (harmless: content-addressed).
//   - Stats() counts this handle's calls (n_puts, n_dedup_hits, n_gets, n_verify_failures);
//     fleet-wide counts are not tracked (List() walks the keys).
// Thread-safety: all methods may be called concurrently; one connection per store, so calls
// serialize (open one store per thread for parallel round trips). Cost: one TCP connection.
Result<std::unique_ptr<BlobStore>> OpenRedisBlobStore(const RedisOptions& options,
                                                      const BlobStoreOptions& store_options = {});

// Keys, for operators and tests (docs/store.md §5). `options` must be valid.
std::string RedisBlobKey(const RedisOptions& options, const Digest& digest);
std::string RedisPinKey(const RedisOptions& options, const Digest& digest);
std::string RedisDenylistKey(const RedisOptions& options, const Digest& digest);

// One digest's denylist state.
struct DenylistRecord {
  Digest digest;
  bool quarantined = false;     // false once revoked
  std::string reason;           // why it was (last) added
  int64_t added_unix_ms = 0;    // when it was (last) added
  std::string revoke_reason;    // empty unless revoked
  int64_t revoked_unix_ms = 0;  // 0 unless revoked
};

// One event in a digest's denylist history.
struct DenylistEvent {
  enum class Kind { kAdd, kRevoke };
  Kind kind = Kind::kAdd;
  int64_t unix_ms = 0;
  std::string reason;
};

// The fleet quarantine authority: digests listed here are quarantined in every process that asks.
// Fleet-wide (keyed by options.prefix, not by tenant): bad text is bad for every tenant.
// As an Admitter ("fleet_denylist") it screens by the input's source_digest (hashing the bytes
// when absent) and fails closed by default when Redis cannot be asked.
// Thread-safety: all methods may be called concurrently (one connection, calls serialize).
// Cost: one round trip per call; Screen is not cached, so a revocation or add is seen at once.
class RedisDenylist final : public Admitter {
 public:
  // Validates the options, connects and PINGs; errors as for OpenRedisBlobStore.
  static Result<std::shared_ptr<RedisDenylist>> Open(const RedisOptions& options);
  ~RedisDenylist() override;
  RedisDenylist(const RedisDenylist&) = delete;
  RedisDenylist& operator=(const RedisDenylist&) = delete;

  // Whether `digest` is listed and not revoked. IOError when Redis cannot be asked.
  Result<bool> IsQuarantined(const Digest& digest);
  // Lists `digest` with `reason`, stamped with this host's clock; re-adding replaces the reason
  // (and lifts an earlier revocation). Every add is appended to the digest's history.
  Status Add(const Digest& digest, std::string_view reason);
  // Revokes a listing, recording reason and time. NotFound when `digest` is not quarantined.
  Status Revoke(const Digest& digest, std::string_view reason);
  // The digest's record; nullopt when it was never listed.
  Result<std::optional<DenylistRecord>> Lookup(const Digest& digest);
  // Every record (quarantined and revoked) under the prefix, in no particular order.
  Result<std::vector<DenylistRecord>> Entries();
  // The digest's adds and revocations, oldest first.
  Result<std::vector<DenylistEvent>> History(const Digest& digest);
  // Copies the quarantined entries into a process-local list (e.g. a ScreenChain's denylist), for
  // hosts that screen offline between refreshes. Replaces reasons; removes nothing.
  Status CopyTo(QuarantineDenylist& local);

  std::string_view name() const override { return "fleet_denylist"; }
  Verdict Screen(const ScreenInput& input) const override;

 private:
  struct Impl;
  explicit RedisDenylist(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak

#endif  // FAK_STORE_REDIS_STORE_H_
