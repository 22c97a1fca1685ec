// Rollouts over HTTP: load the new weights, build their tree, drivers and engine, select the hot set
// from the server's conversations, backfill it through that engine, verify, and report.
#include "src/server/rollouts.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include "fak/regen/hot_set.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"

namespace fak::internal {

// Declared in destruction order reversed: the backfill (whose thread uses the rollout and the
// engine) goes first, the model last. The model, tree and engine are shared with the serving built
// on them, which may outlive the run.
struct Rollouts::Run {
  std::shared_ptr<LoadedModel> target;
  std::shared_ptr<RadixTree> tree;
  std::unique_ptr<RegenDriver> from, to;
  HotSetTracker hot;
  std::unique_ptr<Rollout> rollout;
  std::shared_ptr<Serving> next;                   // what serves after cutover; null once installed
  std::shared_ptr<const Serving> engine;           // the new weights' engine, held while the backfill may use it
  std::unique_ptr<EngineBackfill> backfill;
  std::string model_id;
};

struct Rollouts::StartRequest {
  std::string model;
  std::string model_id;
  RolloutPolicy policy = RolloutPolicy::kLazy;
};

namespace {

bool ParseStart(std::string_view body, Rollouts::StartRequest* out, HttpReply* error) {
  Result<Json> parsed = ParseJsonObject(body, "the request body");
  if (!parsed) {
    *error = HttpReply::BadRequest(std::string(parsed.error().message()), "", "invalid_request");
    return false;
  }
  for (const auto& [key, v] : parsed->items()) {
    if (key == "model" && v.is_string() && !v.get_ref<const std::string&>().empty()) {
      out->model = v.get<std::string>();
    } else if (key == "model_id" && v.is_string() && !v.get_ref<const std::string&>().empty()) {
      out->model_id = v.get<std::string>();
    } else if (key == "model_id") {
      *error = HttpReply::BadRequest("model_id must be a non-empty string (the new model's id in the API)", key);
      return false;
    } else if (key == "policy" && v.is_string()) {
      Result<RolloutPolicy> policy = ParseRolloutPolicy(v.get<std::string>());
      if (!policy || *policy == RolloutPolicy::kCanary) {
        // A canary routes sessions between two models; this server answers with one.
        *error = HttpReply::BadRequest("policy must be flush, lazy or blue_green", "policy");
        return false;
      }
      out->policy = *policy;
    } else if (key == "model" || key == "policy") {
      *error = HttpReply::BadRequest(key + " must be " + (key == "model" ? "a non-empty string (the weights to roll out)"
                                                                         : "a string"), key);
      return false;
    } else {
      *error = HttpReply::BadRequest("unknown field '" + key + "' (model, policy, model_id)", key);
      return false;
    }
  }
  if (out->model.empty()) {
    *error = HttpReply::BadRequest("model is required (the weights to roll out)", "model");
    return false;
  }
  // Named as `fak serve` names its model by default.
  if (out->model_id.empty()) out->model_id = std::filesystem::path(out->model).filename().string();
  if (out->model_id.empty()) out->model_id = out->model;
  return true;
}

}  // namespace

Rollouts::Rollouts(Planner& planner, const Model& model, const Tokenizer& tokenizer, Conversations& conversations,
                   ModelLoader loader, MakeServing make_serving, InstallServing install)
    : planner_(planner),
      model_(model),
      tokenizer_(tokenizer),
      conversations_(conversations),
      loader_(std::move(loader)),
      make_serving_(std::move(make_serving)),
      install_(std::move(install)) {}

Rollouts::~Rollouts() = default;

namespace {

// Warming: a newer rollout would race it (a refused or cut-over one is settled).
bool Warming(const Rollout& rollout) {
  const RolloutPhase phase = rollout.Stats().phase;
  return phase == RolloutPhase::kWarming || phase == RolloutPhase::kVerifying;
}

// Nearest-rank percentiles of TTFTs in nanoseconds.
TtftSummary Summarize(std::vector<int64_t> ns) {
  TtftSummary s;
  s.requests = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) {
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(ns.size())));
    return static_cast<double>(ns[std::max<size_t>(rank, 1) - 1]) * 1e-9;
  };
  s.p50_s = at(0.50);
  s.p99_s = at(0.99);
  return s;
}

Json TtftJson(const TtftSummary& s) {
  return {{"requests", s.requests}, {"p50_ms", s.p50_s * 1e3}, {"p99_ms", s.p99_s * 1e3}};
}

constexpr size_t kMaxTtftDuring = size_t{1} << 16;
constexpr size_t kMaxTtftIdle = 1024;

}  // namespace

HttpReply Rollouts::Start(std::string_view body) {
  StartRequest request;
  HttpReply error;
  if (!ParseStart(body, &request, &error)) return error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (starting_ || (run_ && Warming(*run_->rollout))) {
      return HttpReply::Error({409, "invalid_request_error", "another rollout is starting or still warming", "", "conflict"});
    }
    starting_ = true;
  }
  // Built without the lock (loading weights takes a while; scrapes and progress reads go on).
  HttpReply reply = Begin(request);
  std::lock_guard<std::mutex> lock(mu_);
  starting_ = false;
  return reply;
}

HttpReply Rollouts::Begin(const StartRequest& request) {
  Result<LoadedModel> target = loader_(request.model);
  if (!target) return StatusReply(target.error(), "model");
  if (!target->model || !target->tokenizer)
    return HttpReply::BadRequest("'" + request.model + "' has no tokenizer; a rollout needs one", "model");
  auto run = std::make_unique<Run>();
  run->target = std::make_shared<LoadedModel>(std::move(*target));
  run->tree = std::make_shared<RadixTree>(*run->target->model, *run->target->tokenizer);
  run->model_id = request.model_id;
  // Built before the rollout begins (flush empties the old tree), so a refusal changes nothing.
  // Only blue_green warms the new tree, through the engine that then serves from it; flush and lazy
  // start it cold.
  Result<std::shared_ptr<Serving>> next =
      make_serving_(run->target, request.policy == RolloutPolicy::kBlueGreen ? run->tree : nullptr, request.model_id);
  if (!next) return StatusReply(next.error(), "model");
  run->next = std::move(*next);
  run->engine = run->next;
  run->from = std::make_unique<RegenDriver>(RegenTarget{&model_, &tokenizer_, &planner_.tree()},
                                            planner_.corpus(), planner_.chain());
  run->to = std::make_unique<RegenDriver>(RegenTarget{run->target->model.get(), run->target->tokenizer.get(), run->tree.get()},
                                          planner_.corpus(), planner_.chain());
  // Every conversation is in the hot set (no budget), as its client holds it; its texts' bytes
  // only order the set here.
  const int64_t now = Env::Default()->NowMonotonicNanos();
  std::vector<HeldChat> chats = conversations_.HeldChats();
  for (const HeldChat& chat : chats) run->hot.Touch(chat.ref, chat.n_bytes, now);
  run->backfill = std::make_unique<EngineBackfill>(*run->engine->engine, *run->engine->model, planner_.chain(),
                                                   std::move(chats));
  RolloutOptions options;
  options.policy = request.policy;
  options.clock = Env::Default();
  EngineBackfill* backfill = run->backfill.get();
  options.verify = [backfill] { return backfill->Verify(); };  // on the backfill's thread (below)
  run->rollout = std::make_unique<Rollout>(*run->from, *run->to, options);
  if (Status s = run->rollout->Begin(run->hot, *run->backfill); !s.ok()) return StatusReply(s);
  if (Warming(*run->rollout)) {
    BackfillStarted();
    Rollout* rollout = run->rollout.get();
    // When the last request has finished, the same thread checks the KV and cuts over (or refuses).
    Status started = run->backfill->Start([this, rollout] {
      BackfillEnded();
      rollout->Poll();
    });
    if (!started.ok()) return StatusReply(started);
  }
  std::unique_ptr<Run> previous;  // cut over or refused: its backfill thread is done; freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  PollLocked(*run);  // flush, lazy and shared weights switch now
  pending_switch_.store(run->next != nullptr, std::memory_order_release);
  previous = std::exchange(run_, std::move(run));
  return ProgressOf(*run_);
}

HttpReply Rollouts::Progress() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!run_) return HttpReply::Error({404, "invalid_request_error", "no rollout has been started", "", "not_found"});
  PollLocked(*run_);
  return ProgressOf(*run_);
}

void Rollouts::Poll() {
  if (!pending_switch_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (run_) PollLocked(*run_);
}

void Rollouts::PollLocked(Run& run) {
  if (!run.next) return;
  if (run.rollout->Stats().phase == RolloutPhase::kRefused) {
    pending_switch_.store(false, std::memory_order_release);  // never switches: Poll stays cheap
    return;
  }
  if (!run.rollout->cut_over()) return;
  // Even when the weights equal the planner's (shared), serving moves: the engine may serve
  // other weights by now, and the model named is the one to answer.
  install_(std::move(run.next));  // leaves run.next null: switched
  pending_switch_.store(false, std::memory_order_release);
}

void Rollouts::BackfillStarted() {
  std::lock_guard<std::mutex> lock(ttft_mu_);
  backfill_begin_ns_ = Env::Default()->NowMonotonicNanos();
  backfill_end_ns_ = 0;
  ttft_during_ns_.clear();
}

void Rollouts::BackfillEnded() {
  std::lock_guard<std::mutex> lock(ttft_mu_);
  backfill_end_ns_ = Env::Default()->NowMonotonicNanos();
}

void Rollouts::ObserveInteractive(const RequestTimings& timings) {
  if (timings.first_token_ns == 0) return;  // none generated: no TTFT
  const int64_t ttft = timings.first_token_ns - timings.submitted_ns;
  std::lock_guard<std::mutex> lock(ttft_mu_);
  // Its wait for the first token overlapped the backfill's run.
  const bool during = backfill_begin_ns_ != 0 && timings.first_token_ns >= backfill_begin_ns_ &&
                      (backfill_end_ns_ == 0 || timings.submitted_ns <= backfill_end_ns_);
  if (during) {
    if (ttft_during_ns_.size() < kMaxTtftDuring) ttft_during_ns_.push_back(ttft);
    return;
  }
  ttft_idle_ns_.push_back(ttft);
  if (ttft_idle_ns_.size() > kMaxTtftIdle) ttft_idle_ns_.pop_front();
}

std::pair<TtftSummary, TtftSummary> Rollouts::Ttft() const {
  std::lock_guard<std::mutex> lock(ttft_mu_);
  return {Summarize(ttft_during_ns_), Summarize(std::vector<int64_t>(ttft_idle_ns_.begin(), ttft_idle_ns_.end()))};
}

std::optional<std::pair<std::string, size_t>> Rollouts::EraseWarming(const Digest& source,
                                                                     std::optional<std::string_view> tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!run_ || !run_->next || !run_->next->tree) return std::nullopt;  // switched, or nothing warmed
  return std::make_pair(run_->model_id + " (warming)", run_->next->tree->EvictSource(source, tenant).n_tokens);
}

HttpReply Rollouts::ProgressOf(Run& run) const {
  const RolloutStats r = run.rollout->Stats();
  const EngineBackfillStats b = run.backfill->Stats();
  const EngineStats e = run.engine->engine->Stats();
  const auto [during, without] = Ttft();
  const bool done = r.phase == RolloutPhase::kCutOver && r.backfill_pending == 0;
  Json reply = {{"object", "fak.rollout"},
                {"model", run.target->label},
                {"model_id", run.model_id},
                {"policy", RolloutPolicyName(r.policy)},
                {"phase", RolloutPhaseName(r.phase)},
                {"shared", r.shared},
                {"cut_over", r.phase == RolloutPhase::kCutOver},
                {"done", done},
                {"switched", run.next == nullptr},
                {"hot_set", {{"sessions", r.hot_set_sessions}}},
                {"backfill",
                 {{"tasks", r.backfill_tasks},
                  {"refused", r.backfill_refused},
                  {"skipped", r.backfill_skipped},
                  {"pending", r.backfill_pending},
                  {"tasks_done", b.finished},
                  {"errors", b.failed},
                  {"tokens", b.prefilled_tokens},
                  {"requests",
                   {{"queued", b.queued}, {"submitted", b.submitted}, {"in_flight", b.in_flight},
                    {"finished", b.finished}, {"failed", b.failed}}},
                  {"prompt_tokens", b.prompt_tokens},
                  {"cached_tokens", b.cached_tokens},
                  {"sealed_meanwhile", b.sealed_meanwhile},
                  {"engine", {{"background_queued", e.background_queued}, {"background_running", e.background_running}}}}},
                {"verification", {{"samples", b.verify_samples}, {"verified", b.verified},
                                  {"error", b.verify_error}}},
                {"interactive_ttft", {{"during_backfill", TtftJson(during)}, {"without_backfill", TtftJson(without)}}},
                {"new_tree_tokens", run.tree->Stats().unique_tokens}};
  // What the new engine renders chats with: the new model's own template, or the host's standing in
  // for a model that has none (and why).
  if (const ChatTemplate* t = run.engine->engine->chat_template()) {
    const std::string& borrowed = run.engine->borrowed_template_reason;
    reply["chat_template"] = {{"family", t->family()}, {"variant", t->variant()}, {"source", t->source()},
                              {"own", borrowed.empty()}};
    if (!borrowed.empty()) reply["chat_template"]["fallback"] = "the template the server started with, since the new model has none: " + borrowed;
  }
  if (r.phase == RolloutPhase::kRefused) {
    reply["error"] = {{"code", "verification_failed"},
                      {"message", "cutover refused by the check of the new model's KV against its recompute; serving "
                                  "stays on the old model: " + r.refusal}};
  }
  return HttpReply::Ok(std::move(reply));
}

std::optional<RolloutSnapshot> Rollouts::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!run_) return std::nullopt;
  const auto [during, without] = Ttft();
  return RolloutSnapshot{run_->rollout->Stats(), run_->backfill->Stats(), during, without};
}

}  // namespace fak::internal
