// A rollout of new weights started over HTTP (POST /fak/v1/rollout) and watched (GET), under a
// policy (fak/regen/rollout.h): flush and lazy cut over at once (flush empties the old tree);
// blue_green backfills the hot set — the conversations the server holds, as their clients would
// send them to /v1/chat/completions — as background prefill-only requests on the new weights'
// engine (src/server/rollout_backfill.h), checks the warmed KV against the new model's recompute,
// and cuts over only if it matches. The backfill never prefills a sealed or denylisted text.
//
// At cutover the OpenAI endpoints switch to the engine on the new weights (src/server/serving.h),
// built when the rollout begins: cold for flush and lazy, the backfilled one for blue_green. While
// a backfill runs, the interactive requests' time to first token is recorded apart, beside the
// same measured with no backfill running, so its cost to live traffic is reported.
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

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "fak/engine/request.h"
#include "fak/planner/planner.h"
#include "fak/regen/rollout.h"
#include "src/server/conversations.h"
#include "src/server/http_reply.h"
#include "src/server/rollout_backfill.h"
#include "src/server/server.h"
#include "src/server/serving.h"

namespace fak::internal {

// Time to first token of interactive requests, in seconds (nearest-rank percentiles).
struct TtftSummary {
  size_t requests = 0;
  double p50_s = 0, p99_s = 0;
};

// For /metrics: the current (or last) rollout.
struct RolloutSnapshot {
  RolloutStats rollout;
  EngineBackfillStats backfill;
  TtftSummary during_backfill;   // interactive requests that overlapped this rollout's backfill
  TtftSummary without_backfill;  // the last ones that overlapped none
};

// Builds what serves the new weights: an engine on `weights`, sharing `tree` when it is not null,
// named `model_id`. Called when a rollout begins, so a failure refuses the rollout.
using MakeServing = std::function<Result<std::shared_ptr<Serving>>(
    std::shared_ptr<const LoadedModel> weights, std::shared_ptr<RadixTree> tree, const std::string& model_id)>;
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
  // Switches serving once the rollout has cut over; cheap otherwise. (A blue_green backfill's own
  // thread verifies and cuts over; this notices it.)
  void Poll();
  std::optional<RolloutSnapshot> Snapshot() const;
  // One interactive request's timings (the server calls it for every finished OpenAI request):
  // recorded as during or without backfill.
  void ObserveInteractive(const RequestTimings& timings);
  // Removes `source`'s KV from a warming rollout's tree, which no serving engine holds yet (the
  // server's erasure reaches the serving ones): the model id and the tokens removed; nullopt when no
  // rollout is warming.
  std::optional<std::pair<std::string, size_t>> EraseWarming(const Digest& source,
                                                             std::optional<std::string_view> tenant = std::nullopt);

  struct StartRequest;  // the parsed body of Start

 private:
  struct Run;  // the new model, its tree, both drivers, the hot set, the rollout and its backfill
  // Loads the weights, builds and begins a run, and installs it as run_. REQUIRES: starting_ set by this caller.
  HttpReply Begin(const StartRequest& request);
  HttpReply ProgressOf(Run& run) const;  // reads only the run's thread-safe statistics
  // Installs `run`'s serving once it has cut over. REQUIRES: mu_ held.
  void PollLocked(Run& run);
  void BackfillStarted();  // opens the window of TTFTs "during backfill"
  void BackfillEnded();    // closes it
  std::pair<TtftSummary, TtftSummary> Ttft() const;  // during, without

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

  mutable std::mutex ttft_mu_;  // guards the TTFT records below
  // The current backfill's window on Env::Default()'s monotonic clock: begin 0 = none yet; end 0 =
  // running.
  int64_t backfill_begin_ns_ = 0, backfill_end_ns_ = 0;
  std::vector<int64_t> ttft_during_ns_;  // overlapping the current (or last) backfill; bounded
  std::deque<int64_t> ttft_idle_ns_;     // the last ones overlapping none
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_ROLLOUTS_H_
