// A rollout of new weights started over HTTP (POST /fak/v1/rollout) and watched (GET): the new
// model's radix tree is warmed from the conversations' texts under a policy (fak/regen/rollout.h):
// flush and lazy cut over at once (flush empties the old tree), blue_green backfills the hot set —
// the conversations the server holds, ranked by use — behind live work on a BackfillScheduler
// thread, then cuts over. The backfill never prefills a sealed or denylisted text.
//
// What it does not do (docs/server.md): switch serving. The Engine and the Planner are bound to
// their model for their lifetime, so requests keep being answered by the model the server started
// with; the rollout shows how much of the new model's cache is rebuilt from text, and how fast.
//
// Thread-safety: every method may be called from any thread; one rollout runs at a time.
#ifndef FAK_SRC_SERVER_ROLLOUTS_H_
#define FAK_SRC_SERVER_ROLLOUTS_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "fak/planner/planner.h"
#include "fak/regen/backfill_scheduler.h"
#include "fak/regen/rollout.h"
#include "fak/server/server.h"
#include "src/server/conversations.h"
#include "src/server/http_reply.h"

namespace fak::internal {

// For /metrics: the current (or last) rollout.
struct RolloutSnapshot {
  RolloutStats rollout;
  BackfillSchedulerStats backfill;
};

class Rollouts {
 public:
  // `planner` serves `model` with `tokenizer`, the ones rolled out from; `conversations` are the hot
  // set. All must outlive this.
  Rollouts(Planner& planner, const Model& model, const Tokenizer& tokenizer, Conversations& conversations,
           ModelLoader loader);
  ~Rollouts();

  // POST /fak/v1/rollout, body {"model": SPEC, "policy": "flush"|"lazy"|"blue_green"} (default
  // lazy). 409 while another rollout is still warming.
  HttpReply Start(std::string_view body);
  // GET /fak/v1/rollout: phase and backfill progress ("done" once cut over with nothing pending).
  HttpReply Progress();
  std::optional<RolloutSnapshot> Snapshot() const;

  struct StartRequest;  // the parsed body of Start

 private:
  struct Run;  // the new model, its tree, both drivers, the hot set, the scheduler and the rollout
  // Loads the weights, builds and begins a run, and installs it as run_. REQUIRES: starting_ set by this caller.
  HttpReply Begin(const StartRequest& request);
  HttpReply ProgressOf(Run& run) const;  // reads only the run's thread-safe statistics

  Planner& planner_;
  const Model& model_;
  const Tokenizer& tokenizer_;
  Conversations& conversations_;
  ModelLoader loader_;
  mutable std::mutex mu_;  // guards run_ and starting_
  std::unique_ptr<Run> run_;
  bool starting_ = false;  // a Start is loading and building outside the lock
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_ROLLOUTS_H_
