// Redis fleet tier: the text corpus and the quarantine authority shared by every serving process of
// a fleet (architecture §7), on a store operators already run.
//
// RedisBlobStore implements BlobStore over a Redis server or Redis Cluster: content-addressed keys
// under a configurable prefix and tenant, one Cluster hash tag per digest (so a digest's value and
// pin count share a shard and are updated atomically by server-side scripts), every read verified
// against its digest, pins reference-counted in Redis (shared by all processes), no TTL by default,
// batch calls pipelined. RedisDenylist is the digest-keyed quarantine denylist shared by the fleet,
// with per-tenant and fleet-wide entries, reasons and times for every add and revocation; it is a
// Denylist, so it serves as a ScreenChain's denylist or plugs in as an admitter, and regen/backfill
// can ask it directly (IsQuarantined). An outage is always Unavailable, never an answer. The key
// layout is in docs/store.md §5. No hiredis type appears here.
#ifndef FAK_STORE_REDIS_STORE_H_
#define FAK_STORE_REDIS_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/store/blob_store.h"
#include "fak/core/digest.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"

namespace fak {

struct RedisOptions {
  // Server address. Default: 127.0.0.1:6379. When unix_socket is set it is used instead. Any one
  // node of a Redis Cluster will do: a cluster is detected when the handle opens and every command
  // is then routed to its slot's master (docs/store.md §5.5).
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
  // fails with Unavailable and is not retried (a slow server is not helped by more load).
  // Defaults: 1000 ms, 3000 ms.
  int connect_timeout_ms = 1000;
  int command_timeout_ms = 3000;
  // After a broken connection (refused, reset, closed) a call reconnects and retries up to this many
  // times, sleeping retry_backoff_ms and doubling it each time, before failing with Unavailable.
  // Non-idempotent calls (Pin, Unpin, Remove, Revoke) are never re-sent once they may have reached
  // the server. Defaults: 3 retries, 20 ms.
  int max_retries = 3;
  int retry_backoff_ms = 20;
  // Connections per handle, in [1, 1024]: each call leases its own, so one stalled call never
  // delays another; idle ones are kept and reused. A call that finds all busy waits up to
  // connect_timeout_ms + command_timeout_ms for one, then fails with Unavailable. Default: 8.
  int pool_size = 8;
  // Circuit breaker, per handle: after this many consecutive calls failed to reach the server
  // (refused, reset, timed out), calls fail fast with Unavailable for breaker_cooldown_ms; then one
  // probe call goes through (once, no retries) and closes the breaker on success or re-opens it.
  // 0 disables the breaker. Defaults: 5 failures, 1000 ms.
  int breaker_failure_threshold = 5;
  int breaker_cooldown_ms = 1000;
  // Blobs per pipelined round trip in PutMany / GetMany (PutMany also ends a round trip at 1 MiB
  // of payload). Default: 128.
  int pipeline_depth = 128;
  // Blob store: seconds an unpinned blob lives after its last Put or Unpin; 0 = forever (no TTL).
  // Pinned blobs never expire. Default: 0.
  int64_t ttl_seconds = 0;
  // Denylist: when Redis cannot be asked, RedisDenylist::Screen withholds the bytes this time
  // with Verdict::Unavailable (true) or admits them (false). It never quarantines on an outage.
  // Default: true (fail closed).
  bool screen_fail_closed = true;
};

// Opens a BlobStore on Redis: validates the options (InvalidArgument naming the field), connects
// and PINGs (Unavailable naming host:port when unreachable, after the bounded retries).
// Every call answers Unavailable when the server cannot be reached now (refused, reset, timed
// out, breaker open; RedisOptions says when); other codes are answers about the data.
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
// Thread-safety: all methods may be called concurrently, each on its own pooled connection.
// Cost: up to options.pool_size TCP connections.
FAK_EXPORT Result<std::unique_ptr<BlobStore>> OpenRedisBlobStore(const RedisOptions& options,
                                                      const BlobStoreOptions& store_options = {});

// Keys, for operators and tests (docs/store.md §5). `options` must be valid.
FAK_EXPORT std::string RedisBlobKey(const RedisOptions& options, const Digest& digest);
FAK_EXPORT std::string RedisPinKey(const RedisOptions& options, const Digest& digest);

// Where a denylist entry lives: the handle's tenant (options.tenant) only, or the whole fleet.
enum class DenylistScope { kTenant, kFleet };
// What a denylist handle may write: its tenant's entries only, or fleet entries too.
enum class DenylistRole { kTenant, kFleetAdmin };
FAK_EXPORT std::string RedisDenylistKey(const RedisOptions& options, const Digest& digest, DenylistScope scope);

// One digest's denylist state.
struct DenylistRecord {
  Digest digest;
  DenylistScope scope = DenylistScope::kTenant;
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

// The fleet quarantine authority. A handle is opened for one tenant (options.tenant) with a role.
// Reads (IsQuarantined, Screen) consult the tenant's entries and the fleet's: a fleet entry
// quarantines for every tenant. Writes are scoped: any handle may add or revoke its own tenant's
// entries; fleet entries need DenylistRole::kFleetAdmin (else FailedPrecondition), so one tenant
// cannot deny another tenant's text. As the chain's Denylist (ScreenChain::set_denylist) or as an
// Admitter ("fleet_denylist") it screens by the input's source_digest (hashing the bytes when
// absent); when Redis cannot be asked it answers Verdict::Unavailable (withhold now, retry later,
// never quarantine) or admits when !options.screen_fail_closed.
// Thread-safety: all methods may be called concurrently (pooled connections).
// Cost: one round trip per call; Screen is not cached, so a revocation or add is seen at once.
class FAK_EXPORT RedisDenylist final : public Denylist {
 public:
  // Validates the options, connects and PINGs; errors as for OpenRedisBlobStore.
  static Result<std::shared_ptr<RedisDenylist>> Open(const RedisOptions& options,
                                                     DenylistRole role = DenylistRole::kTenant);
  ~RedisDenylist() override;
  RedisDenylist(const RedisDenylist&) = delete;
  RedisDenylist& operator=(const RedisDenylist&) = delete;

  // Whether `digest` is listed and not revoked, in the tenant's scope or the fleet's.
  // Unavailable when Redis cannot be asked now.
  Result<bool> IsQuarantined(const Digest& digest) const override;
  // Lists `digest` in `scope` (the 2-argument form: the tenant's) with `reason`, stamped with this
  // host's clock; re-adding replaces the reason (and lifts an earlier revocation). Every add is
  // appended to the entry's history. FailedPrecondition for kFleet without kFleetAdmin.
  Status Add(const Digest& digest, std::string reason) override;
  Status Add(const Digest& digest, std::string reason, DenylistScope scope);
  // Revokes a listing in `scope`, recording reason and time. NotFound when it is not quarantined
  // there; FailedPrecondition for kFleet without kFleetAdmin.
  Status Revoke(const Digest& digest, std::string_view reason, DenylistScope scope = DenylistScope::kTenant);
  // The entry in `scope`; nullopt when it was never listed there.
  Result<std::optional<DenylistRecord>> Lookup(const Digest& digest, DenylistScope scope = DenylistScope::kTenant);
  // Every record (quarantined and revoked) in `scope`, in no particular order.
  Result<std::vector<DenylistRecord>> Entries(DenylistScope scope = DenylistScope::kTenant);
  // The entry's adds and revocations in `scope`, oldest first.
  Result<std::vector<DenylistEvent>> History(const Digest& digest, DenylistScope scope = DenylistScope::kTenant);
  // Copies the quarantined entries of both scopes into a process-local list (e.g. a ScreenChain's
  // denylist), for hosts that screen offline between refreshes. Replaces reasons; removes nothing.
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
