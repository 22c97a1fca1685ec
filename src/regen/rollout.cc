// CanShare and the rollout policies (flush, lazy, blue_green, canary).
#include "fak/regen/rollout.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "src/core/str_cat.h"

namespace fak {

// ---- CanShare ----

ShareDecision CanShare(const BindingTuple& from_regime, const BindingTuple& to_regime) {
  BindingTuple a = from_regime, b = to_regime;
  for (BindingTuple* t : {&a, &b}) {  // only the regime axes decide; spans are per request
    t->span_digest = Digest{};
    t->tokens = TokenRange{};
    t->integrity_checksum = Digest{};
  }
  ShareDecision d;
  d.axis = FirstDifferingAxis(b, a);
  d.share = !d.axis.has_value();
  d.detail = d.share ? "every regime axis is equal: the cache is shared"
                     : internal::StrCat(BindingAxisName(*d.axis), " differs: ", DescribeAxisDifference(*d.axis, b, a));
  return d;
}

ShareDecision CanShare(const Model& from_model, const Tokenizer& from_tokenizer, const Model& to_model,
                       const Tokenizer& to_tokenizer) {
  return CanShare(RegimeBinding(from_model, from_tokenizer), RegimeBinding(to_model, to_tokenizer));
}

// ---- names ----

std::string_view RolloutPolicyName(RolloutPolicy policy) {
  switch (policy) {
    case RolloutPolicy::kFlush: return "flush";
    case RolloutPolicy::kLazy: return "lazy";
    case RolloutPolicy::kBlueGreen: return "blue_green";
    case RolloutPolicy::kCanary: return "canary";
  }
  return "?";
}

Result<RolloutPolicy> ParseRolloutPolicy(std::string_view name) {
  for (RolloutPolicy p : {RolloutPolicy::kFlush, RolloutPolicy::kLazy, RolloutPolicy::kBlueGreen, RolloutPolicy::kCanary}) {
    if (name == RolloutPolicyName(p)) return p;
  }
  return InvalidArgument("rollout policy: unknown '" + std::string(name) + "' (flush, lazy, blue_green, canary)");
}

std::string_view RolloutPhaseName(RolloutPhase phase) {
  switch (phase) {
    case RolloutPhase::kNotStarted: return "not_started";
    case RolloutPhase::kWarming: return "warming";
    case RolloutPhase::kVerifying: return "verifying";
    case RolloutPhase::kCanary: return "canary";
    case RolloutPhase::kCutOver: return "cut_over";
    case RolloutPhase::kRefused: return "refused";
  }
  return "?";
}

// ---- the rollout ----

namespace {

// Wraps a backfill task so the rollout learns when it has finished.
class CountedTask final : public BackfillTask {
 public:
  CountedTask(std::unique_ptr<BackfillTask> inner, std::function<void()> finished)
      : inner_(std::move(inner)), finished_(std::move(finished)) {}
  ~CountedTask() override { Finish(); }  // dropped unfinished (error, scheduler gone): stop waiting
  Result<size_t> RunChunk(size_t max_tokens) override {
    Result<size_t> r = inner_->RunChunk(max_tokens);
    if (!r.has_value() || inner_->done()) Finish();
    return r;
  }
  size_t remaining_tokens() const override { return inner_->remaining_tokens(); }

 private:
  void Finish() {
    if (finished_) std::exchange(finished_, nullptr)();
  }
  std::unique_ptr<BackfillTask> inner_;
  std::function<void()> finished_;
};

// The backfill as RegenDriver tasks on a BackfillScheduler (its own thread, beside the engine).
class SchedulerSink final : public BackfillSink {
 public:
  SchedulerSink(RegenDriver& to, BackfillScheduler& scheduler) : to_(to), scheduler_(scheduler) {}
  Result<bool> Submit(const HotSetTracker::Entry& entry, std::function<void()> finished) override {
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<BackfillTask> task, to_.PrepareBackfill(entry.transcript.tenant, entry.transcript));
    if (task->done()) return false;
    scheduler_.SubmitBackfill(std::make_unique<CountedTask>(std::move(task), std::move(finished)));
    return true;
  }

 private:
  RegenDriver& to_;
  BackfillScheduler& scheduler_;
};

uint64_t SessionHash(std::string_view session) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and platforms
  for (unsigned char c : session) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 33;  // finalize (murmur3 fmix64): FNV's high bits barely depend on the last bytes
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

}  // namespace

struct Rollout::State {
  mutable std::mutex mu;
  RolloutStats stats;                // GUARDED_BY(mu)
  Env* clock = nullptr;   // set by Begin: whose monotonic clock times the rollout
  std::atomic<bool> shared{false};
  std::shared_ptr<std::atomic<size_t>> pending = std::make_shared<std::atomic<size_t>>(0);
  std::atomic<int> phase{static_cast<int>(RolloutPhase::kNotStarted)};
};

Rollout::Rollout(RegenDriver& from, RegenDriver& to, RolloutOptions options)
    : from_(&from), to_(&to), options_(std::move(options)), state_(std::make_unique<State>()) {
  state_->stats.policy = options_.policy;
}
Rollout::~Rollout() = default;

Status Rollout::Begin(const HotSetTracker& hot, BackfillScheduler& scheduler) {
  SchedulerSink sink(*to_, scheduler);  // used only inside Begin: the tasks own what they need
  return BeginWith(hot, sink, options_.clock != nullptr ? options_.clock : scheduler.env());
}

Status Rollout::Begin(const HotSetTracker& hot, BackfillSink& sink) {
  return BeginWith(hot, sink, options_.clock != nullptr ? options_.clock : Env::Default());
}

Status Rollout::BeginWith(const HotSetTracker& hot, BackfillSink& sink, Env* clock) {
  if (state_->phase.load() != static_cast<int>(RolloutPhase::kNotStarted)) {
    return FailedPrecondition("Rollout::Begin: already begun");
  }
  if (!(options_.canary_share >= 0.0 && options_.canary_share <= 1.0)) {
    return InvalidArgument("RolloutOptions.canary_share: " + std::to_string(options_.canary_share) + " outside [0, 1]");
  }
  const RegenTarget& a = from_->target();
  const RegenTarget& b = to_->target();
  const ShareDecision share = CanShare(*a.model, *a.tokenizer, *b.model, *b.tokenizer);
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->clock = clock;
  RolloutStats& s = state_->stats;
  s.begin_ns = state_->clock->NowMonotonicNanos();
  s.shared = share.share;
  state_->shared.store(share.share);
  RolloutPhase phase = RolloutPhase::kCutOver;
  if (!share.share && options_.policy == RolloutPolicy::kBlueGreen) {
    phase = RolloutPhase::kWarming;
    const std::vector<HotSetTracker::Entry> set = hot.Select(s.begin_ns, options_.hot_set_budget_tokens,
                                                             options_.hot_set_budget_bytes, b.tree->BytesPerToken());
    s.hot_set_sessions = set.size();
    for (const HotSetTracker::Entry& e : set) {
      s.hot_set_tokens += e.n_tokens;
      state_->pending->fetch_add(1);  // before Submit: the sink may finish it at once, on its thread
      std::shared_ptr<std::atomic<size_t>> pending = state_->pending;
      Result<bool> queued = sink.Submit(e, [pending] { pending->fetch_sub(1); });
      if (!queued.has_value() || !*queued) state_->pending->fetch_sub(1);
      if (!queued.has_value()) {
        ++s.backfill_refused;  // quarantined or text gone: never prefilled
      } else if (!*queued) {
        ++s.backfill_skipped;
      } else {
        ++s.backfill_tasks;
      }
    }
  } else if (!share.share && options_.policy == RolloutPolicy::kCanary) {
    phase = RolloutPhase::kCanary;
  }
  if (phase == RolloutPhase::kCutOver) {
    s.cutover_ns = s.begin_ns;
    if (!share.share && options_.policy == RolloutPolicy::kFlush) a.tree->EvictToBudget(0);
  }
  state_->phase.store(static_cast<int>(phase));
  return Status::Ok();
}

void Rollout::Poll() {
  const RolloutPhase phase = static_cast<RolloutPhase>(state_->phase.load());
  if (phase != RolloutPhase::kWarming && phase != RolloutPhase::kCanary) return;
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->phase.load() != static_cast<int>(phase)) return;  // another Poll got here first
  const int64_t now = state_->clock->NowMonotonicNanos();
  const int64_t since = now - state_->stats.begin_ns;
  bool cut = false;
  if (phase == RolloutPhase::kWarming) {
    cut = state_->pending->load() == 0 || (options_.warm_deadline_ns > 0 && since >= options_.warm_deadline_ns);
  } else {
    cut = options_.canary_duration_ns > 0 && since >= options_.canary_duration_ns;
  }
  if (!cut) return;
  if (phase == RolloutPhase::kWarming && options_.verify) {
    // Checked without the lock (it prefills): Stats and Route go on, and other Polls return at once.
    state_->phase.store(static_cast<int>(RolloutPhase::kVerifying));
    lock.unlock();
    const Status verified = options_.verify();
    lock.lock();
    if (!verified.ok()) {
      state_->stats.refusal = verified.ToString();
      state_->phase.store(static_cast<int>(RolloutPhase::kRefused));
      return;
    }
  }
  state_->stats.cutover_ns = state_->clock->NowMonotonicNanos();
  state_->phase.store(static_cast<int>(RolloutPhase::kCutOver));
}

void Rollout::Promote() {
  std::lock_guard<std::mutex> lock(state_->mu);
  const auto phase = static_cast<RolloutPhase>(state_->phase.load());
  // A check in flight decides; a refused rollout is not cut over by hand around its failed check.
  if (phase == RolloutPhase::kCutOver || phase == RolloutPhase::kVerifying || phase == RolloutPhase::kRefused ||
      state_->clock == nullptr)
    return;
  state_->stats.cutover_ns = state_->clock->NowMonotonicNanos();
  state_->phase.store(static_cast<int>(RolloutPhase::kCutOver));
}
RegenDriver& Rollout::Route(std::string_view session) {
  if (state_->shared.load()) return *from_;  // identical weights and regime: the warm cache serves
  switch (static_cast<RolloutPhase>(state_->phase.load())) {
    case RolloutPhase::kNotStarted:
    case RolloutPhase::kWarming:
    case RolloutPhase::kVerifying:
    case RolloutPhase::kRefused:
      return *from_;
    case RolloutPhase::kCanary: {
      const double u = static_cast<double>(SessionHash(session) >> 11) * 0x1.0p-53;
      return u < options_.canary_share ? *to_ : *from_;
    }
    case RolloutPhase::kCutOver:
      return *to_;
  }
  return *to_;
}

bool Rollout::cut_over() const { return state_->phase.load() == static_cast<int>(RolloutPhase::kCutOver); }

RolloutStats Rollout::Stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  RolloutStats s = state_->stats;
  s.phase = static_cast<RolloutPhase>(state_->phase.load());
  s.backfill_pending = state_->pending->load();
  return s;
}

}  // namespace fak
