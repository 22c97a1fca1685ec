// Rollouts over HTTP: load the new weights, build their tree and drivers, select the hot set from
// the server's conversations, and run the backfill on a scheduler thread.
#include "src/server/rollouts.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "fak/regen/hot_set.h"
#include "fak/regen/regen_driver.h"
#include "fak/session/radix_tree.h"

namespace fak::internal {

// Declared in destruction order reversed: the scheduler (whose tasks use the new driver) goes
// first, the model last. The model and tree are shared with the serving built on them, which may
// outlive the run.
struct Rollouts::Run {
  std::shared_ptr<RolloutModel> target;
  std::shared_ptr<RadixTree> tree;
  std::unique_ptr<RegenDriver> from, to;
  HotSetTracker hot;
  std::unique_ptr<Rollout> rollout;
  std::unique_ptr<BackfillScheduler> scheduler;
  std::shared_ptr<Serving> next;  // what serves after cutover; null once installed
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

HttpReply Rollouts::Start(std::string_view body) {
  StartRequest request;
  HttpReply error;
  if (!ParseStart(body, &request, &error)) return error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (starting_ || (run_ && !run_->rollout->cut_over())) {
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
  Result<RolloutModel> target = loader_(request.model);
  if (!target) return StatusReply(target.error(), "model");
  if (!target->model || !target->tokenizer)
    return HttpReply::BadRequest("'" + request.model + "' has no tokenizer; a rollout needs one", "model");
  auto run = std::make_unique<Run>();
  run->target = std::make_shared<RolloutModel>(std::move(*target));
  run->tree = std::make_shared<RadixTree>(*run->target->model, *run->target->tokenizer);
  run->model_id = request.model_id;
  // Built before the rollout begins (flush empties the old tree), so a refusal changes nothing.
  // Only blue_green warms the new tree for the engine; flush and lazy start it cold.
  Result<std::shared_ptr<Serving>> next =
      make_serving_(run->target, request.policy == RolloutPolicy::kBlueGreen ? run->tree : nullptr, request.model_id);
  if (!next) return StatusReply(next.error(), "model");
  run->next = std::move(*next);
  run->from = std::make_unique<RegenDriver>(RegenTarget{&model_, &tokenizer_, &planner_.tree()},
                                            planner_.corpus(), planner_.chain());
  run->to = std::make_unique<RegenDriver>(RegenTarget{run->target->model.get(), run->target->tokenizer.get(), run->tree.get()},
                                          planner_.corpus(), planner_.chain());
  run->scheduler = std::make_unique<BackfillScheduler>();
  const int64_t now = run->scheduler->env()->NowMonotonicNanos();
  // Every conversation is in the hot set (no budget); its size is its texts' bytes, which only
  // orders the set here.
  for (const auto& [ref, n_bytes] : conversations_.Transcripts()) run->hot.Touch(ref, n_bytes, now);
  RolloutOptions options;
  options.policy = request.policy;
  run->rollout = std::make_unique<Rollout>(*run->from, *run->to, options);
  if (Status s = run->rollout->Begin(run->hot, *run->scheduler); !s.ok()) return StatusReply(s);
  if (Status s = run->scheduler->Start(); !s.ok()) return StatusReply(s);
  std::lock_guard<std::mutex> lock(mu_);
  PollLocked(*run);  // flush and lazy switch now
  pending_switch_.store(run->next != nullptr, std::memory_order_release);
  run_ = std::move(run);  // the previous one (cut over) is dropped
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
  run.rollout->Poll();
  if (!run.rollout->cut_over()) return;
  // Even when the weights equal the planner's (shared), serving moves: the engine may serve
  // other weights by now, and the model named is the one to answer.
  install_(std::move(run.next));  // leaves run.next null: switched
  pending_switch_.store(false, std::memory_order_release);
}

HttpReply Rollouts::ProgressOf(Run& run) const {
  const RolloutStats r = run.rollout->Stats();
  const BackfillSchedulerStats b = run.scheduler->Stats();
  const bool done = r.phase == RolloutPhase::kCutOver && r.backfill_pending == 0;
  return HttpReply::Ok({{"object", "fak.rollout"},
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
                          {"tasks_done", b.backfill_tasks_done},
                          {"tokens", b.backfill_tokens},
                          {"chunks", b.backfill_chunks},
                          {"errors", b.backfill_errors}}},
                        {"new_tree_tokens", run.tree->Stats().unique_tokens}});
}

std::optional<RolloutSnapshot> Rollouts::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!run_) return std::nullopt;
  return RolloutSnapshot{run_->rollout->Stats(), run_->scheduler->Stats()};
}

}  // namespace fak::internal
