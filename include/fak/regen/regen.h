// Regen and rollout: rebuild a model's KV from the durable text after a model change (architecture §9).
//
// A rollout changes the ModelID axis, so every cached span misses at once (the cliff). The text
// survived in the TextCorpus, so the new model's cache is rebuilt from it — bytes → re-tokenize with
// the *serving* tokenizer → prefill — lazily on a miss (RegenDriver::Materialize) or eagerly for a
// hot set (HotSetTracker) by a BackfillScheduler that runs prefill in bounded chunks behind live
// work and throttles itself against a measured p99 live-latency SLO. A Rollout applies one policy
// (flush, lazy, blue_green, canary); CanShare skips all of it for a redeploy of identical weights.
// The quarantine denylist and the screening chain are consulted before any text is prefilled.
// Validation is against the same model's recompute (bit-exact within a regime), never against the
// old model's KV; across kernel tiers the oracle reports EXACT / EQUIVALENT{tol} / DIVERGENT.
// Definitions (hot-set score, policies, verdicts): docs/regen.md.
#ifndef FAK_REGEN_REGEN_H_
#define FAK_REGEN_REGEN_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fak/core/digest.h"
#include "fak/kv/kv_cache.h"
#include "fak/gate/manifest.h"
#include "fak/model/model.h"
#include "fak/session/radix_tree.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// ---- what a context is made of ----

// One context as text: ordered source texts (SourceDigests held in a TextCorpus) whose tokens,
// concatenated, form the context. Model-agnostic: the same ref materializes under any tokenizer.
struct TranscriptRef {
  std::string session;           // hot-set key (empty: keyed by the segment digests)
  std::vector<Digest> segments;  // in context order
};

// ---- Materialize: "give me this context" ----

// HIT: resident under the claim, served. FAULT: held by a lower tier, paged in. RECOMPUTE: text
// present, regenerated. REFUSE: policy, tenancy or quarantine forbids it. ABSTAIN: neither KV nor
// (screenable) text is available, or the claim names a regime this driver cannot produce.
enum class MaterializeVerdict : int { kHit = 0, kFault, kRecompute, kRefuse, kAbstain };
inline constexpr int kNumMaterializeVerdicts = 5;
std::string_view MaterializeVerdictName(MaterializeVerdict verdict);  // "HIT", "FAULT", ...

struct Materialized {
  MaterializeVerdict verdict = MaterializeVerdict::kAbstain;
  std::string detail;            // why (the segment, axis or gate verdict at fault)
  std::optional<KVCache> cache;  // the whole context; set for HIT, FAULT and RECOMPUTE
  std::vector<int32_t> tokens;   // the context's ids under the serving tokenizer (when known)
  std::vector<float> logits;     // [vocab] next-token logits after the context (with a cache)
  size_t reused_tokens = 0;      // served from the tree or paged in
  size_t prefilled_tokens = 0;   // computed by this call (a HIT still prefills the last token)
};

// A lower KV tier (disk, remote) that Materialize consults before recomputing: the FAULT path.
// No engine implements it yet; the verdict and the seam exist. Implementations must be thread-safe.
class KVPager {
 public:
  virtual ~KVPager() = default;
  // Whether the tier holds KV for exactly `binding`'s span (model, tokenizer, regime, tokens).
  virtual bool Holds(const BindingTuple& binding) const = 0;
  // A cache of the serving model holding the span's tokens from token 0.
  virtual Result<KVCache> PageIn(const BindingTuple& binding) = 0;
};

// The model a driver serves and the tree its KV lives in. Not owned; all must outlive the driver.
struct RegenTarget {
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  RadixTree* tree = nullptr;  // built over *model and *tokenizer
};

struct RegenDriverOptions {
  // Lower tier for FAULT; null = none. Default: null.
  KVPager* pager = nullptr;
};

// Counters by verdict plus token totals. Snapshot of relaxed atomics.
struct RegenStats {
  uint64_t verdicts[kNumMaterializeVerdicts] = {};
  uint64_t reused_tokens = 0, prefilled_tokens = 0;
  uint64_t backfill_prepared = 0, backfill_refused = 0, backfill_skipped = 0;
  uint64_t backfilled_tokens = 0;  // prefilled by backfill tasks
  uint64_t count(MaterializeVerdict v) const { return verdicts[static_cast<int>(v)]; }
};

class BackfillTask;

// Serves contexts for one model from its radix tree, regenerating them from the corpus text.
// Thread-safety: all methods may be called concurrently (the tree and corpus are thread-safe; the
// counters are atomic). Cost: a RECOMPUTE prefills the unmatched suffix; a HIT prefills one token.
class RegenDriver {
 public:
  // `screen` (with its denylist) judges text before it is prefilled; it must outlive the driver
  // and not be reconfigured while the driver runs.
  RegenDriver(RegenTarget target, TextCorpus& corpus, const ScreenChain& screen, RegenDriverOptions options = {});
  ~RegenDriver();
  RegenDriver(const RegenDriver&) = delete;
  RegenDriver& operator=(const RegenDriver&) = delete;

  // Decides and acts: denylist first (REFUSE), then the claim's regime (ABSTAIN when it is not this
  // driver's), the serving tokenizer's ids from the corpus (ABSTAIN when the text is gone), the
  // tree's gate (HIT, or REFUSE on a tenancy denial), the pager (FAULT), then screening and
  // regeneration of the unmatched suffix (RECOMPUTE, inserted under the claim's tenant).
  // Errors only for failures that are not verdicts (I/O, corruption, an empty transcript).
  Result<Materialized> Materialize(const ResidentClaim& claim, const TranscriptRef& transcript);
  // Materialize with this tree's own regime for `tenant`.
  Result<Materialized> Materialize(std::string_view tenant, const TranscriptRef& transcript);

  // The context's token ids under the serving tokenizer (never another tokenizer's cached ids).
  Result<std::vector<int32_t>> ContextTokens(const TranscriptRef& transcript);
  // A chunked regeneration of `transcript` into the tree for `tenant`, for the scheduler. Denylist
  // and screening come first: FailedPrecondition naming the segment when one is quarantined (then
  // nothing is ever prefilled); NotFound when a text is gone. A task whose context is already
  // resident has remaining_tokens() == 0. The task must not outlive the driver.
  Result<std::unique_ptr<BackfillTask>> PrepareBackfill(std::string tenant, const TranscriptRef& transcript);

  ResidentClaim ClaimFor(std::string tenant) const { return target_.tree->ClaimFor(std::move(tenant)); }
  const RegenTarget& target() const { return target_; }
  RegenStats Stats() const;

  struct Counters;  // internal

 private:
  Status ScreenSegments(const TranscriptRef& transcript, std::string* refused_detail);
  std::optional<std::string> DenylistHit(const TranscriptRef& transcript) const;
  Result<Materialized> Regenerate(const ResidentClaim& claim, const TranscriptRef& transcript, Materialized out,
                                  LookupResult lookup);

  RegenTarget target_;
  TextCorpus* corpus_;
  const ScreenChain* screen_;
  RegenDriverOptions options_;
  std::unique_ptr<Counters> counters_;
};

// ---- the backfill scheduler ----

// Time source for the scheduler: the steady clock in production, a manual clock in tests.
class SchedulerClock {
 public:
  virtual ~SchedulerClock() = default;
  virtual int64_t NowNanos() const = 0;
};
// The process-wide steady clock.
SchedulerClock& SteadyClock();
// A clock that moves only when told. Thread-safe.
class ManualClock final : public SchedulerClock {
 public:
  int64_t NowNanos() const override { return now_ns_.load(std::memory_order_relaxed); }
  void Advance(int64_t ns) { now_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void Set(int64_t ns) { now_ns_.store(ns, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ns_{0};
};

// One live request: a first step (lookup + prefill: the first token), then one decode step per token.
class LiveTask {
 public:
  virtual ~LiveTask() = default;
  // Runs the next step; true when the request is finished. An error ends the request.
  virtual Result<bool> Step() = 0;
};

// Low-priority prefill work, done in bounded chunks.
class BackfillTask {
 public:
  virtual ~BackfillTask() = default;
  // Prefills up to `max_tokens` (> 0) more tokens; returns how many (0 only when done).
  virtual Result<size_t> RunChunk(size_t max_tokens) = 0;
  virtual size_t remaining_tokens() const = 0;
  bool done() const { return remaining_tokens() == 0; }
};

// What the scheduler observed about one live step (for metrics: TTFT, per-token latency).
struct LiveStepRecord {
  uint64_t task_seq = 0;  // submission order, from 1
  bool first = false;     // the request's first step (its end - ready is the TTFT)
  bool last = false;
  int64_t ready_ns = 0;   // submission (first step) or the previous step's end
  int64_t start_ns = 0, end_ns = 0;
};

struct BackfillSchedulerOptions {
  // Backfill quantum: tokens per chunk at start and at most. Default: 64.
  size_t chunk_tokens = 64;
  // The quantum never shrinks below this. Default: 4.
  size_t min_chunk_tokens = 4;
  // Target p99 of live per-token decode latency (end - ready of each non-first step); 0 = none.
  // Default: 0.
  int64_t slo_p99_ns = 0;
  // Live samples in the sliding p99 window; the p99 is judged once min_samples are in. Default: 256, 32.
  size_t window = 256;
  size_t min_samples = 32;
  // Pause of interleaving after a violation; doubles on each consecutive violation up to 64x.
  // Default: 20 ms.
  int64_t cooldown_ns = 20'000'000;
  // Whether one chunk may run between two live steps when not throttled (otherwise backfill runs
  // only when no live step is ready). Default: true.
  bool interleave = true;
  // Called after every live step (on the thread that ran it). Default: none.
  std::function<void(const LiveStepRecord&)> on_live_step;
};

struct BackfillSchedulerStats {
  uint64_t live_steps = 0, live_tasks_done = 0, live_errors = 0;
  uint64_t backfill_chunks = 0, interleaved_chunks = 0, backfill_tokens = 0;
  uint64_t backfill_tasks_done = 0, backfill_errors = 0;
  uint64_t throttle_events = 0;
  size_t chunk_tokens = 0;            // the current quantum
  int64_t live_p99_ns = 0;            // p99 of the current window (0 when empty)
  double backfill_ns_per_token = 0;   // measured, smoothed
  size_t pending_live = 0, pending_backfill = 0;
  size_t pending_backfill_tokens = 0;
  Status last_error;
};

// Two classes of work on one executor. Live work always goes first: at every decision a ready live
// step wins, except that one bounded backfill chunk may run between two live steps when the SLO
// leaves room for it — the chunk is sized so that (p99 of bare live step time) + (chunk tokens x
// measured backfill ns per token) stays within slo_p99_ns, and skipped when fewer than
// min_chunk_tokens fit. When no live step is ready, backfill runs chunk after chunk at the full
// quantum. Feedback backstop: when the measured p99 of live per-token latency (end - ready of each
// non-first step, so it includes any chunk run before it) exceeds the SLO, the quantum halves and
// interleaving pauses for a cooldown (doubling while violations repeat); a full window within the
// SLO grows the quantum by a quarter. Live requests run to completion in submission order.
// Thread-safety: Submit* and Stats may be called from any thread; RunOnce calls are serialized
// (either drive it yourself or Start a worker thread, not both). Owns the submitted tasks.
class BackfillScheduler {
 public:
  enum class Ran { kNothing, kLive, kBackfill };

  explicit BackfillScheduler(SchedulerClock& clock, BackfillSchedulerOptions options = {});
  ~BackfillScheduler();  // stops the worker, drops unfinished tasks
  BackfillScheduler(const BackfillScheduler&) = delete;
  BackfillScheduler& operator=(const BackfillScheduler&) = delete;

  void SubmitLive(std::unique_ptr<LiveTask> task);
  void SubmitBackfill(std::unique_ptr<BackfillTask> task);
  // Runs one live step or one backfill chunk, as the policy above picks.
  Ran RunOnce();
  // Runs until nothing is left (live and backfill). Returns the steps run.
  size_t RunUntilIdle();
  // A worker thread running RunOnce, sleeping when idle. FailedPrecondition when already started.
  Status Start();
  void Stop();
  // Whether no live or backfill work is pending.
  bool Idle() const;
  BackfillSchedulerStats Stats() const;
  SchedulerClock& clock() const { return *clock_; }

 private:
  struct LiveEntry {
    std::unique_ptr<LiveTask> task;
    uint64_t seq = 0;
    int64_t ready_ns = 0;
    bool started = false;
  };
  Ran RunLiveStep(LiveEntry* entry);
  Ran RunChunk(bool interleaved, size_t quantum);
  void RecordLive(int64_t latency_ns, int64_t bare_ns, int64_t now_ns);  // REQUIRES: mu_
  size_t InterleaveTokens() const;                                        // REQUIRES: mu_

  SchedulerClock* clock_;
  BackfillSchedulerOptions options_;
  std::mutex run_mu_;  // serializes RunOnce
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LiveEntry> live_;                          // GUARDED_BY(mu_); front is in flight
  std::deque<std::unique_ptr<BackfillTask>> backfill_;  // GUARDED_BY(mu_)
  uint64_t next_seq_ = 1;                               // GUARDED_BY(mu_)
  bool chunk_owed_ = false;                             // GUARDED_BY(mu_): a live step ran since the last chunk
  std::vector<int64_t> window_;                         // GUARDED_BY(mu_): ring of live per-token samples
  std::vector<int64_t> bare_;                           // GUARDED_BY(mu_): ring of live step run times
  size_t window_next_ = 0, bare_next_ = 0, clean_samples_ = 0;  // GUARDED_BY(mu_)
  double ns_per_token_ = 0;                             // GUARDED_BY(mu_): backfill cost, smoothed
  size_t chunk_tokens_;                                 // GUARDED_BY(mu_)
  int64_t throttled_until_ns_ = 0, cooldown_ns_;        // GUARDED_BY(mu_)
  BackfillSchedulerStats stats_;                        // GUARDED_BY(mu_)
  std::thread worker_;
  bool stop_ = false;  // GUARDED_BY(mu_)
};

// ---- the hot set ----

struct HotSetOptions {
  // Half-life of an access's weight in the score. Default: 10 minutes.
  double half_life_s = 600.0;
};

// Ranks transcripts by return probability: score(t) = Σ over accesses i of 2^-((t - t_i) / half_life)
// — a recency- and frequency-decayed access count (docs/regen.md). Each session keeps its latest
// transcript (an agent's history only grows). Thread-safe (one mutex). Cost: O(1) per Touch,
// O(n log n) per Select.
class HotSetTracker {
 public:
  explicit HotSetTracker(HotSetOptions options = {}) : options_(options) {}

  // Records a use of `transcript` (n_tokens long under the current tokenizer) at `now_ns`.
  void Touch(const TranscriptRef& transcript, size_t n_tokens, int64_t now_ns);
  // Drops a session (ended, or its text was deleted).
  void Forget(std::string_view session);
  double Score(std::string_view session, int64_t now_ns) const;
  size_t size() const;

  struct Entry {
    TranscriptRef transcript;
    size_t n_tokens = 0;
    double score = 0;
  };
  // Highest score first, stopping before the first entry that would push the running total past
  // `budget_tokens` or, when bytes_per_token > 0, past `budget_bytes` (a budget of 0 is unbounded).
  std::vector<Entry> Select(int64_t now_ns, size_t budget_tokens, size_t budget_bytes = 0,
                            size_t bytes_per_token = 0) const;

 private:
  struct State {
    TranscriptRef transcript;
    size_t n_tokens = 0;
    double score = 0;  // as of last_ns
    int64_t last_ns = 0;
  };
  double Decayed(const State& s, int64_t now_ns) const;
  HotSetOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, State> sessions_;  // GUARDED_BY(mu_)
};

// ---- rollout ----

// Whether the new model may serve the old one's KV as is: every regime axis (weights digest,
// tokenizer, adapter, precision, position convention, producer) is equal — a rename or redeploy.
struct ShareDecision {
  bool share = false;
  std::optional<BindingAxis> axis;  // the first axis that differs when !share
  std::string detail;
};
ShareDecision CanShare(const BindingTuple& from_regime, const BindingTuple& to_regime);
ShareDecision CanShare(const Model& from_model, const Tokenizer& from_tokenizer, const Model& to_model,
                       const Tokenizer& to_tokenizer);

enum class RolloutPolicy { kFlush, kLazy, kBlueGreen, kCanary };
std::string_view RolloutPolicyName(RolloutPolicy policy);  // "flush", "lazy", "blue_green", "canary"
Result<RolloutPolicy> ParseRolloutPolicy(std::string_view name);

enum class RolloutPhase { kNotStarted, kWarming, kCanary, kCutOver };
std::string_view RolloutPhaseName(RolloutPhase phase);

struct RolloutOptions {
  // Default: kLazy.
  RolloutPolicy policy = RolloutPolicy::kLazy;
  // Tenant the hot set is backfilled for. Default: kDefaultTenant.
  std::string tenant = std::string(kDefaultTenant);
  // Hot-set budget for blue_green (0 = unbounded). Default: 0, 0.
  size_t hot_set_budget_tokens = 0, hot_set_budget_bytes = 0;
  // blue_green: cut over this long after Begin even if backfill is unfinished; 0 = wait. Default: 0.
  int64_t warm_deadline_ns = 0;
  // canary: share of sessions (by hash) served by the new model first. Default: 0.1.
  double canary_share = 0.1;
  // canary: promote to everyone this long after Begin; 0 = only on Promote(). Default: 0.
  int64_t canary_duration_ns = 0;
  // Clock for the deadlines, the stats' times and hot-set selection (it must be the clock the
  // tracker was touched with); null = the scheduler's. Must outlive the rollout. Default: null.
  SchedulerClock* clock = nullptr;
};

struct RolloutStats {
  RolloutPolicy policy = RolloutPolicy::kLazy;
  RolloutPhase phase = RolloutPhase::kNotStarted;
  bool shared = false;  // CanShare held: no backfill, the old cache serves
  size_t hot_set_sessions = 0, hot_set_tokens = 0;
  size_t backfill_tasks = 0, backfill_refused = 0, backfill_skipped = 0, backfill_pending = 0;
  int64_t begin_ns = 0, cutover_ns = 0;  // cutover_ns: 0 until cut over
};

// Moves serving from one model to another under one policy (docs/regen.md):
//   flush       cut over at once; the old model's tree is emptied (the cliff, no way back).
//   lazy        cut over at once; the new model regenerates each context from text on its miss.
//   blue_green  backfill the hot set for the new model behind live work, then cut over.
//   canary      a share of sessions goes to the new model (lazily) first; the rest on Promote().
// When CanShare holds, every policy cuts over at once with no backfill and the old driver (same
// weights, same bits) keeps serving from its cache. Thread-safety: Route/Stats may be called
// concurrently with Poll; Begin and Promote once, from one thread. Both drivers, the scheduler
// and the tracker must outlive the rollout.
class Rollout {
 public:
  Rollout(RegenDriver& from, RegenDriver& to, RolloutOptions options = {});
  ~Rollout();

  // Starts the rollout now (options.clock, or the scheduler's). blue_green selects the hot set and submits one
  // backfill task per transcript (denylisted or quarantined ones are refused and counted).
  // FailedPrecondition when already begun; InvalidArgument for a canary_share outside [0, 1].
  Status Begin(const HotSetTracker& hot, BackfillScheduler& scheduler);
  // Advances time-driven phases: blue_green cuts over when its backfill is done (or the deadline
  // passed); canary promotes after canary_duration_ns.
  void Poll();
  // Canary (or any warming phase): cut over now.
  void Promote();
  // The driver that serves `session` now.
  RegenDriver& Route(std::string_view session);
  bool cut_over() const;
  RolloutStats Stats() const;

 private:
  struct State;
  RegenDriver* from_;
  RegenDriver* to_;
  RolloutOptions options_;
  std::unique_ptr<State> state_;
};

// ---- validation ----

// Checks a regenerated cache against a fresh recompute of `tokens` under the same model and regime:
// OK when equal bit for bit (KVCache digest); VerificationFailed naming both digests otherwise.
Status VerifyRegenerated(const Model& model, const KVCache& regenerated, std::span<const int32_t> tokens);

enum class OracleOutcome { kExact, kEquivalent, kDivergent };
// Cross-regime comparison of logits: EXACT when max|Δ| == 0; EQUIVALENT{tol} when every position's
// argmax agrees and max|Δ| <= tol; DIVERGENT otherwise.
struct OracleVerdict {
  OracleOutcome outcome = OracleOutcome::kDivergent;
  float tolerance = 0;
  float max_abs_delta = 0;
  size_t positions = 0, argmax_agreements = 0;
  // "EXACT", "EQUIVALENT{tol=0.001}: max|Δ|=2.1e-06, argmax 12/12", "DIVERGENT: ...".
  std::string ToString() const;
};
// Compares two [positions][vocab] logit arrays. InvalidArgument on a size mismatch or vocab 0.
Result<OracleVerdict> CompareLogits(std::span<const float> a, std::span<const float> b, size_t vocab, float tolerance);
// Prefills `tokens` under kernel tier `tier_a`, then `tier_b` (names as SetKernelTier takes), and
// compares every position's logits. Restores the active tier. Unsupported when the CPU lacks a tier.
// Not safe while other threads run forward passes (the tier is process-wide).
Result<OracleVerdict> CompareTiers(const Model& model, std::span<const int32_t> tokens, std::string_view tier_a,
                                   std::string_view tier_b, float tolerance);

}  // namespace fak

#endif  // FAK_REGEN_REGEN_H_
