// A rollout of new weights started over HTTP (POST /fak/v1/rollout) and watched (GET): the new
// model's radix tree is warmed from the conversations' texts under a policy (fak/regen/rollout.h):
// flush and lazy cut over at once (flush empties the old tree), blue_green backfills the hot set —
// the conversations the server holds, ranked by use — behind live work on a BackfillScheduler
// thread, then cuts over. The backfill never prefills a sealed or denylisted text.
//
// At cutover the OpenAI endpoints switch to an engine on the new weights (src/server/serving.h),
// built when the rollout begins: cold for flush and lazy, on the backfilled tree for blue_green.
// The conversations' Planner is bound to its model for its lifetime and keeps the weights the
// server started with (docs/server.md).
//
// Thread-safety: every method may be called from any thread; one rollout runs at a time.
#ifndef FAK_SRC_SERVER_ROLLOUTS_H_
#define FAK_SRC_SERVER_ROLLOUTS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "fak/planner/planner.h"
#include "fak/regen/backfill_scheduler.h"
#include "fak/regen/rollout.h"
#include "src/server/conversations.h"
#include "src/server/http_reply.h"
#include "src/server/server.h"
#include "src/server/serving.h"

namespace fak::internal {

// For /metrics: the current (or last) rollout.
struct RolloutSnapshot {
  RolloutStats rollout;
  BackfillSchedulerStats backfill;
};

// Builds what serves the new weights: an engine on `weights`, sharing `tree` when it is not null,
// named `model_id`. Called when a rollout begins, so a failure refuses the rollout.
using MakeServing = std::function<Result<std::shared_ptr<Serving>>(
    std::shared_ptr<const RolloutModel> weights, std::shared_ptr<RadixTree> tree, const std::string& model_id)>;
// Makes `serving` the one new requests go to (called once per rollout, at cutover).
using InstallServing = std::function<void(std::shared_ptr<const Serving> serving)>;

class Rollouts {
 public:
  // `planner` serves `model` with `tokenizer`, the ones rolled out from; `conversations` are the hot
  // set. All must outlive this.
  Rollouts(Planner& planner, const Model& model, const Tokenizer& tokenizer, Conversations& conversations,
           ModelLoader loader, MakeServing make_serving, InstallServing install);
  ~Rollouts();

  // POST /fak/v1/rollout, body {"model": SPEC, "policy": "flush"|"lazy"|"blue_green", "model_id":
  // ID} (policy default lazy; model_id default SPEC's file name). 409 while another rollout is
  // still warming.
  HttpReply Start(std::string_view body);
  // GET /fak/v1/rollout: phase and backfill progress ("done" once cut over with nothing pending).
  HttpReply Progress();
  // Advances a warming rollout and switches serving once it has cut over; cheap otherwise.
  void Poll();
  std::optional<RolloutSnapshot> Snapshot() const;

  struct StartRequest;  // the parsed body of Start

 private:
  struct Run;  // the new model, its tree, both drivers, the hot set, the scheduler and the rollout
  // Loads the weights, builds and begins a run, and installs it as run_. REQUIRES: starting_ set by this caller.
  HttpReply Begin(const StartRequest& request);
  HttpReply ProgressOf(Run& run) const;  // reads only the run's thread-safe statistics
  // Polls `run`, and installs its serving once it has cut over. REQUIRES: mu_ held.
  void PollLocked(Run& run);

  Planner& planner_;
  const Model& model_;
  const Tokenizer& tokenizer_;
  Conversations& conversations_;
  ModelLoader loader_;
  MakeServing make_serving_;
  InstallServing install_;
  mutable std::mutex mu_;  // guards run_ and starting_
  std::unique_ptr<Run> run_;
  bool starting_ = false;  // a Start is loading and building outside the lock
  // run_ has a serving to install: lets Poll, called on every completion request, skip the lock.
  std::atomic<bool> pending_switch_{false};
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_ROLLOUTS_H_
