// Fleet: what one `fak serve` worker shares with the others behind the same router (docs/fleet.md).
//
// The seals live in a shared denylist (RedisDenylist, so a worker that was down asks it before it
// serves again); this link carries the rest of an erasure: the worker that performed one announces
// it, every other live worker removes its own copies (its trees and tiers, as the origin did) and
// confirms, and the origin names in its reply the workers that confirmed within the wait and those
// that did not. The transport is RedisFleet (src/server/redis_fleet.h); the server sees only this.
#ifndef FAK_SRC_SERVER_FLEET_H_
#define FAK_SRC_SERVER_FLEET_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/status.h"
#include "src/server/tree_publication.h"

namespace fak {

// One erasure as the fleet sees it: the text's digest, and the tenant whose copy it was (nullopt:
// a quarantine, everyone's copy).
struct FleetErasure {
  Digest source;
  std::optional<std::string> tenant;
};

// What the origin learnt about an announced erasure.
struct FleetConfirmation {
  std::string event_id;                // the announcement's id (empty when it could not be made)
  std::vector<std::string> confirmed;  // workers that removed their copies (this one first)
  std::vector<std::string> pending;    // live workers that had not confirmed when the wait ended
  std::string error;                   // why the announcement or the wait failed; empty when neither did
};

class FleetLink {
 public:
  // Removes a remote erasure's copies on this worker; what it removed, as a short text for the
  // confirmation (e.g. "12 tokens").
  using ApplyErasure = std::function<std::string(const FleetErasure&)>;

  virtual ~FleetLink() = default;
  // This worker's name in the fleet.
  virtual const std::string& worker_id() const = 0;
  // Starts applying the other workers' erasures with `apply` (called on the link's own thread).
  // Once; before the server serves.
  virtual Status Listen(ApplyErasure apply) = 0;
  // Stops applying (waits for an erasure being applied) and heartbeating; the others stop waiting
  // for this worker soon after. Idempotent.
  virtual void StopListening() = 0;
  // Announces an erasure performed here; with `wait`, waits (bounded) for the other live workers to
  // confirm (without, confirmed holds only this worker and pending nothing).
  virtual FleetConfirmation Announce(const FleetErasure& erasure, bool wait) = 0;
  // The workers seen alive recently (this one included), sorted.
  virtual Result<std::vector<std::string>> LiveWorkers() = 0;
  // What this worker's trees hold now (sorted as PublishedPrefixes returns it).
  using TreeSnapshot = std::function<std::vector<PublishedPrefix>()>;
  // Publishes the changes of `snapshot` for cache-aware routers, from the link's thread (asked once
  // a heartbeat). Before Listen. Default: nothing is published.
  virtual void PublishTree(TreeSnapshot snapshot) { (void)snapshot; }
};

}  // namespace fak

#endif  // FAK_SRC_SERVER_FLEET_H_
