// Rollout: move serving from one model to another under one policy (architecture §9).
//
// A model change misses every cached span at once; how the new model's cache is rebuilt is a
// policy — flush, lazy, blue_green (backfill the hot set first), canary — and CanShare skips all of
// it for a redeploy of identical weights. Policies and their trade-offs: docs/regen.md.
//
// Where a blue_green backfill runs is the host's choice (BackfillSink): a BackfillScheduler beside
// the engine (Begin with a scheduler), or the new model's serving engine as background requests
// (fak serve). Its cutover can wait for a check of the warmed KV (RolloutOptions::verify).
#ifndef FAK_REGEN_ROLLOUT_H_
#define FAK_REGEN_ROLLOUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/gate/binding_tuple.h"
#include "fak/model/model.h"
#include "fak/regen/backfill_scheduler.h"
#include "fak/regen/hot_set.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// Whether the new model may serve the old one's KV as is: every regime axis (weights digest,
// tokenizer, adapter, precision, position convention, producer) is equal — a rename or redeploy.
struct ShareDecision {
  bool share = false;
  std::optional<BindingAxis> axis;  // the first axis that differs when !share
  std::string detail;
};
FAK_EXPORT ShareDecision CanShare(const BindingTuple& from_regime, const BindingTuple& to_regime);
FAK_EXPORT ShareDecision CanShare(const Model& from_model, const Tokenizer& from_tokenizer, const Model& to_model,
                       const Tokenizer& to_tokenizer);

enum class RolloutPolicy { kFlush, kLazy, kBlueGreen, kCanary };
FAK_EXPORT std::string_view RolloutPolicyName(RolloutPolicy policy);  // "flush", "lazy", "blue_green", "canary"
FAK_EXPORT Result<RolloutPolicy> ParseRolloutPolicy(std::string_view name);

// kVerifying: blue_green's backfill is done and RolloutOptions::verify runs. kRefused: it failed,
// so the rollout never cuts over (the old model keeps serving); final.
enum class RolloutPhase { kNotStarted, kWarming, kVerifying, kCanary, kCutOver, kRefused };
FAK_EXPORT std::string_view RolloutPhaseName(RolloutPhase phase);

struct RolloutOptions {
  // Default: kLazy.
  RolloutPolicy policy = RolloutPolicy::kLazy;
  // Hot-set budget for blue_green (0 = unbounded). Default: 0, 0.
  size_t hot_set_budget_tokens = 0, hot_set_budget_bytes = 0;
  // blue_green: cut over this long after Begin even if backfill is unfinished; 0 = wait. Default: 0.
  int64_t warm_deadline_ns = 0;
  // canary: share of sessions (by hash) served by the new model first. Default: 0.1.
  double canary_share = 0.1;
  // canary: promote to everyone this long after Begin; 0 = only on Promote(). Default: 0.
  int64_t canary_duration_ns = 0;
  // Whose monotonic clock times the deadlines, the stats and hot-set selection (it must be the
  // clock the tracker was touched with); null = the scheduler's Env (Env::Default() with a sink).
  // Must outlive the rollout.
  Env* clock = nullptr;
  // blue_green: run once the backfill is done (or the warm deadline passed), before cutover, on the
  // thread that calls Poll — e.g. the new model's KV for a sample of the backfilled contexts
  // against its own recompute. An error refuses the cutover (kRefused, Stats().refusal says why).
  // Empty: cut over unchecked. Default: empty.
  std::function<Status()> verify = nullptr;
};

struct RolloutStats {
  RolloutPolicy policy = RolloutPolicy::kLazy;
  RolloutPhase phase = RolloutPhase::kNotStarted;
  bool shared = false;  // CanShare held: no backfill, the old cache serves
  size_t hot_set_sessions = 0, hot_set_tokens = 0;
  size_t backfill_tasks = 0, backfill_refused = 0, backfill_skipped = 0, backfill_pending = 0;
  int64_t begin_ns = 0, cutover_ns = 0;  // cutover_ns: 0 until cut over
  std::string refusal;  // kRefused: what RolloutOptions::verify answered
};

// Where a blue_green rollout sends the rebuilding of each hot transcript under the new model.
// Implementations: the scheduler adapter inside Rollout::Begin(hot, scheduler) (RegenDriver tasks),
// or a host's, e.g. background requests on the new model's engine.
class BackfillSink {
 public:
  virtual ~BackfillSink() = default;
  // Takes one transcript of the hot set. Returns true when work was queued — then `finished` must be
  // called exactly once, from any thread, when it has ended (done, failed or dropped) — and false
  // when its context is resident already (skipped; `finished` is never called). An error refuses it
  // (a quarantined or denylisted text, or one that is gone: nothing of it is ever prefilled).
  virtual Result<bool> Submit(const HotSetTracker::Entry& entry, std::function<void()> finished) = 0;
};

// Moves serving from one model to another under one policy (docs/regen.md):
//   flush       cut over at once; the old model's tree is emptied (the cliff, no way back).
//   lazy        cut over at once; the new model regenerates each context from text on its miss.
//   blue_green  backfill the hot set for the new model behind live work, check it
//               (RolloutOptions::verify), then cut over — or refuse to.
//   canary      a share of sessions goes to the new model (lazily) first; the rest on Promote().
// When CanShare holds, every policy cuts over at once with no backfill and the old driver (same
// weights, same bits) keeps serving from its cache. Thread-safety: Route/Stats may be called
// concurrently with Poll; Begin and Promote once, from one thread. Both drivers, the scheduler
// and the tracker must outlive the rollout.
class FAK_EXPORT Rollout {
 public:
  Rollout(RegenDriver& from, RegenDriver& to, RolloutOptions options = {});
  ~Rollout();

  // Starts the rollout now (options.clock, or the scheduler's Env). blue_green selects the hot set and submits one
  // backfill task per transcript, under the transcript's own tenant (denylisted or quarantined ones
  // are refused and counted).
  // FailedPrecondition when already begun; InvalidArgument for a canary_share outside [0, 1].
  Status Begin(const HotSetTracker& hot, BackfillScheduler& scheduler);
  // The same with the backfill handed to `sink` (which must outlive the rollout's warming), one
  // Submit per selected transcript in rank order; the clock is options.clock or Env::Default().
  Status Begin(const HotSetTracker& hot, BackfillSink& sink);
  // Advances time-driven phases: blue_green verifies and cuts over when its backfill is done (or
  // the deadline passed) — RolloutOptions::verify runs inside this call, on its thread, while other
  // callers return at once; canary promotes after canary_duration_ns.
  void Poll();
  // Canary (or any warming phase): cut over now. A refused rollout stays refused.
  void Promote();
  // The driver that serves `session` now.
  RegenDriver& Route(std::string_view session);
  bool cut_over() const;
  RolloutStats Stats() const;

 private:
  struct State;
  Status BeginWith(const HotSetTracker& hot, BackfillSink& sink, Env* clock);
  RegenDriver* from_;
  RegenDriver* to_;
  RolloutOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace fak

#endif  // FAK_REGEN_ROLLOUT_H_
