#include "src/server/metrics.h"

#include <algorithm>
#include <charconv>
#include <system_error>
#include <utility>

#include "fak/gate/binding_tuple.h"
#include "fak/session/kv_pager.h"
#include "src/server/verdict_json.h"

namespace fak::internal {
namespace {

// Label values escape backslash, double quote and newline (exposition format 0.0.4).
std::string Escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// The shortest text that reads back as `value` (0.005, not 0.0050000000000000001).
std::string Number(double value) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

void Header(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Sample(std::string* out, std::string_view name, std::string_view labels, double value) {
  *out += name;
  if (!labels.empty()) {
    *out += '{';
    *out += labels;
    *out += '}';
  }
  *out += ' ';
  *out += Number(value);
  *out += '\n';
}

void Scalar(std::string* out, std::string_view name, std::string_view type, std::string_view help, double value) {
  Header(out, name, type, help);
  Sample(out, name, "", value);
}

std::string Label(std::string_view key, std::string_view value) {
  return std::string(key) + "=\"" + Escape(value) + "\"";
}

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string_view name, std::string* out) const {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    Sample(out, bucket, Label("le", Number(bounds_[i])), static_cast<double>(cumulative));
  }
  Sample(out, bucket, Label("le", "+Inf"), static_cast<double>(count_));
  Sample(out, std::string(name) + "_sum", "", sum_);
  Sample(out, std::string(name) + "_count", "", static_cast<double>(count_));
}

ServerMetrics::ServerMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void ServerMetrics::CountRequest(std::string_view tenant, std::string_view endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{std::string(tenant), std::string(endpoint), status}];
}

void ServerMetrics::CountGeneration(std::string_view tenant, const RequestUsage& usage, const RequestTimings& timings) {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(tenant);
  if (it == tokens_.end()) it = tokens_.emplace(std::string(tenant), TokenCounts{}).first;
  it->second.prompt += usage.prompt_tokens;
  it->second.generated += usage.generated_tokens;
  it->second.cached += usage.cached_tokens;
  if (timings.first_token_ns > 0) ttft_.Observe(Seconds(timings.first_token_ns - timings.submitted_ns));
  for (size_t i = 1; i < timings.token_ns.size(); ++i) itl_.Observe(Seconds(timings.token_ns[i] - timings.token_ns[i - 1]));
}

void ServerMetrics::CountProbe(const ClaimVerdict& verdict) {
  std::string why = "none";
  if (verdict.outcome == ClaimOutcome::kMiss) why = BindingAxisName(verdict.axis);
  if (verdict.outcome == ClaimOutcome::kRefuse) why = RefuseReasonName(verdict.refuse_reason);
  std::lock_guard lock(mu_);
  ++probes_[{ClaimOutcomeName(verdict.outcome), why}];
}

void ServerMetrics::CountSealed(std::string_view tenant, size_t sealed, size_t quarantined) {
  std::lock_guard lock(mu_);
  if (sealed > 0) sealed_[{std::string(tenant), "sealed"}] += sealed;
  if (quarantined > 0) sealed_[{std::string(tenant), "quarantined"}] += quarantined;
}

void ServerMetrics::CountErasure(std::string_view tenant) {
  std::lock_guard lock(mu_);
  ++erasures_[std::string(tenant)];
}

void ServerMetrics::CountFleetAnnouncement(bool failed, size_t pending) {
  std::lock_guard lock(mu_);
  ++fleet_[{"announced", failed ? "failed" : pending > 0 ? "unconfirmed" : "confirmed"}];
}

void ServerMetrics::CountFleetApplied() {
  std::lock_guard lock(mu_);
  ++fleet_[{"applied", "applied"}];
}

namespace {

// The gate families, one sample set per tree ("completions": the engine's; "conversations": the
// Planner's). A family's samples stay together, as the text format requires.
void RenderGate(std::string* out, const std::vector<std::pair<std::string_view, GateStats>>& trees) {
  Header(out, "fak_gate_lookups_total", "counter", "Radix-tree lookups (one per admitted prompt or turn), by tree.");
  for (const auto& [tree, g] : trees) Sample(out, "fak_gate_lookups_total", Label("tree", tree), static_cast<double>(g.lookups));
  Header(out, "fak_gate_verdicts_total", "counter", "Manifest-gate verdicts on resident KV claims, by tree and verdict.");
  for (const auto& [tree, g] : trees) {
    const std::pair<const char*, uint64_t> verdicts[] = {
        {"hit", g.hits}, {"miss", g.misses}, {"refuse", g.refusals}, {"corrupt", g.corruptions}};
    for (const auto& [name, n] : verdicts)
      Sample(out, "fak_gate_verdicts_total", Label("tree", tree) + "," + Label("verdict", name), static_cast<double>(n));
  }
  Header(out, "fak_gate_misses_total", "counter", "Gate misses by tree and the binding axis that differed.");
  for (const auto& [tree, g] : trees)
    for (int a = 0; a < kNumBindingAxes; ++a)
      Sample(out, "fak_gate_misses_total", Label("tree", tree) + "," + Label("axis", BindingAxisName(static_cast<BindingAxis>(a))),
             static_cast<double>(g.misses_by_axis[static_cast<size_t>(a)]));
  Header(out, "fak_gate_refusals_total", "counter", "Gate refusals by tree and reason.");
  for (const auto& [tree, g] : trees)
    for (int r = 1; r < kNumRefuseReasons; ++r)
      Sample(out, "fak_gate_refusals_total",
             Label("tree", tree) + "," + Label("reason", RefuseReasonName(static_cast<RefuseReason>(r))),
             static_cast<double>(g.refusals_by_reason[static_cast<size_t>(r)]));
  Header(out, "fak_gate_served_tokens_total", "counter", "Prompt tokens the gate let the tree serve, by tree.");
  for (const auto& [tree, g] : trees) Sample(out, "fak_gate_served_tokens_total", Label("tree", tree), static_cast<double>(g.served_tokens));
  Header(out, "fak_gate_lookup_tokens_total", "counter", "Prompt tokens looked up in the tree, by tree.");
  for (const auto& [tree, g] : trees) Sample(out, "fak_gate_lookup_tokens_total", Label("tree", tree), static_cast<double>(g.lookup_tokens));
}

void RenderConversations(std::string* out, const ConversationStats& c) {
  Scalar(out, "fak_conversations", "gauge", "Conversations the server holds (fak's endpoints).", static_cast<double>(c.conversations));
  Scalar(out, "fak_conversation_turns_total", "counter", "Conversation turns completed through the planner.",
         static_cast<double>(c.turns));
  Scalar(out, "fak_quarantines_total", "counter", "Tool results quarantined at write time (evicted, sealed, certified).",
         static_cast<double>(c.quarantines));
  Scalar(out, "fak_message_evictions_total", "counter", "Messages evicted from a conversation on request.",
         static_cast<double>(c.evictions));
  Header(out, "fak_certificates_issued_total", "counter", "Deletion certificates issued, by why the span was evicted.");
  Sample(out, "fak_certificates_issued_total", Label("reason", "quarantine"), static_cast<double>(c.certificates_quarantine));
  Sample(out, "fak_certificates_issued_total", Label("reason", "request"), static_cast<double>(c.certificates_request));
  Header(out, "fak_certificate_verifications_total", "counter", "Certificates verified, by result.");
  Sample(out, "fak_certificate_verifications_total", Label("result", "valid"), static_cast<double>(c.verified_valid));
  Sample(out, "fak_certificate_verifications_total", Label("result", "invalid"), static_cast<double>(c.verified_invalid));
}

}  // namespace

std::string ServerMetrics::Render(const EngineSnapshot& s) const {
  std::string out;
  {
    std::lock_guard lock(mu_);
    Header(&out, "fak_requests_total", "counter", "HTTP requests answered, by tenant, endpoint and status (499: client gone).");
    for (const auto& [key, n] : requests_) {
      const auto& [tenant, endpoint, status] = key;
      Sample(&out, "fak_requests_total",
             Label("tenant", tenant) + "," + Label("endpoint", endpoint) + "," + Label("status", std::to_string(status)),
             static_cast<double>(n));
    }
    struct TokenFamily {
      const char* name;
      const char* help;
      uint64_t TokenCounts::*count;
    };
    const TokenFamily token_families[] = {
        {"fak_prompt_tokens_total", "Prompt tokens of finished requests, by tenant.", &TokenCounts::prompt},
        {"fak_generated_tokens_total", "Tokens generated, by tenant.", &TokenCounts::generated},
        {"fak_cached_tokens_total", "Prompt tokens reused from the radix tree instead of prefilled, by tenant.",
         &TokenCounts::cached},
    };
    for (const TokenFamily& f : token_families) {
      Header(&out, f.name, "counter", f.help);
      for (const auto& [tenant, counts] : tokens_) Sample(&out, f.name, Label("tenant", tenant), static_cast<double>(counts.*f.count));
    }
    Header(&out, "fak_time_to_first_token_seconds", "histogram", "From submission to the first generated token.");
    ttft_.Render("fak_time_to_first_token_seconds", &out);
    Header(&out, "fak_inter_token_latency_seconds", "histogram", "Between consecutive generated tokens of a request.");
    itl_.Render("fak_inter_token_latency_seconds", &out);
  }
  Scalar(&out, "fak_queue_depth", "gauge", "Requests waiting for admission.", static_cast<double>(s.engine.queued));
  Scalar(&out, "fak_running_requests", "gauge", "Requests prefilling or decoding.", static_cast<double>(s.engine.running));
  Scalar(&out, "fak_preemptions_total", "counter", "Running requests whose KV was dropped for memory and recomputed.",
         static_cast<double>(s.engine.preemptions));
  Scalar(&out, "fak_engine_steps_total", "counter", "Engine steps that ran a batch.", static_cast<double>(s.engine.steps));
  Header(&out, "fak_kv_bytes", "gauge", "KV bytes resident: owned by running requests (sessions) and by the radix tree.");
  Sample(&out, "fak_kv_bytes", Label("kind", "sessions"), static_cast<double>(s.engine.session_kv_bytes));
  Sample(&out, "fak_kv_bytes", Label("kind", "tree"), static_cast<double>(s.engine.tree_kv_bytes));
  Scalar(&out, "fak_kv_budget_bytes", "gauge", "The KV budget over sessions and tree (0: unbounded).",
         static_cast<double>(s.kv_budget_bytes));
  Scalar(&out, "fak_http_connections", "gauge", "HTTP connections open.", static_cast<double>(s.http.connections));
  Header(&out, "fak_http_connections_cut_total", "counter",
         "HTTP connections cut because their headers or body were not whole by the deadline.");
  Sample(&out, "fak_http_connections_cut_total", Label("deadline", "header"), static_cast<double>(s.http.header_deadline_cuts));
  Sample(&out, "fak_http_connections_cut_total", Label("deadline", "body"), static_cast<double>(s.http.body_deadline_cuts));
  Scalar(&out, "fak_http_bodies_too_large_total", "counter", "Request bodies refused with 413 (declared or chunked).",
         static_cast<double>(s.http.bodies_too_large));
  Scalar(&out, "fak_kv_tier_page_ins_total", "counter", "Prompts whose missing prefix was asked of the KV tier.",
         static_cast<double>(s.engine.page_ins));
  Scalar(&out, "fak_kv_tier_paged_tokens_total", "counter", "Prompt tokens read from the KV tier instead of prefilled.",
         static_cast<double>(s.engine.paged_tokens));
  Header(&out, "fak_kv_tier_page_in_refusals_total", "counter",
         "Page-ins stopped by a slab that failed verification, or a tier that could not be asked (then prefilled).");
  for (int i = 0; i < kNumPageInFailures; ++i) {
    const PageInFailure f = static_cast<PageInFailure>(i);
    if (!IsPageInRefusal(f)) continue;
    Sample(&out, "fak_kv_tier_page_in_refusals_total", Label("reason", PageInFailureName(f)),
           static_cast<double>(s.engine.page_in_failures[i]));
  }
  Scalar(&out, "fak_tree_tokens", "gauge", "Tokens resident in the radix tree.", static_cast<double>(s.tree.unique_tokens));
  Scalar(&out, "fak_evicted_tokens_total", "counter", "Tokens the radix tree evicted (budget or explicit).",
         static_cast<double>(s.tree.evicted_tokens));
  std::vector<std::pair<std::string_view, GateStats>> trees = {{"completions", s.gate}};
  if (s.conversations) trees.emplace_back("conversations", s.conversation_gate);
  RenderGate(&out, trees);
  if (s.conversations) {
    RenderConversations(&out, *s.conversations);
    // The planner's own tree pages in apart from the engine's: its own families, so the engine's
    // keep their meaning.
    Scalar(&out, "fak_conversation_kv_tier_page_ins_total", "counter",
           "Conversation turns whose missing prefix was asked of the KV tier.",
           static_cast<double>(s.conversation_tier.page_ins));
    Scalar(&out, "fak_conversation_kv_tier_paged_tokens_total", "counter",
           "Conversation context tokens read from the KV tier instead of prefilled.",
           static_cast<double>(s.conversation_tier.paged_tokens));
    Scalar(&out, "fak_conversation_kv_tier_page_in_refusals_total", "counter",
           "Conversation page-ins stopped by a slab that failed verification, or a tier that could not be asked.",
           static_cast<double>(s.conversation_tier.page_in_refusals));
  }
  Header(&out, "fak_serving_model", "gauge", "The model OpenAI requests go to (1); a rollout switches it at cutover.");
  Sample(&out, "fak_serving_model", Label("model", s.serving_model), 1);
  if (s.rollout) {
    const RolloutStats& r = s.rollout->rollout;
    const EngineBackfillStats& b = s.rollout->backfill;
    Scalar(&out, "fak_rollout_cut_over", "gauge", "Whether the current rollout has cut over (1) or not yet, or never (0).",
           r.phase == RolloutPhase::kCutOver ? 1 : 0);
    Scalar(&out, "fak_rollout_cutover_refused", "gauge",
           "Whether the current rollout's cutover was refused by the check of its KV (1): serving stays on the old model.",
           r.phase == RolloutPhase::kRefused ? 1 : 0);
    Header(&out, "fak_rollout_backfill_tasks", "gauge", "The current rollout's backfill tasks (one per conversation), by state.");
    const std::pair<const char*, size_t> tasks[] = {{"submitted", r.backfill_tasks}, {"pending", r.backfill_pending},
                                                    {"refused", r.backfill_refused}, {"skipped", r.backfill_skipped}};
    for (const auto& [state, n] : tasks) Sample(&out, "fak_rollout_backfill_tasks", Label("state", state), static_cast<double>(n));
    Header(&out, "fak_rollout_backfill_requests", "gauge",
           "The current rollout's background prefill requests on the new model's engine, by state.");
    const std::pair<const char*, uint64_t> requests[] = {{"queued", b.queued}, {"in_flight", b.in_flight},
                                                         {"finished", b.finished}, {"failed", b.failed}};
    for (const auto& [state, n] : requests)
      Sample(&out, "fak_rollout_backfill_requests", Label("state", state), static_cast<double>(n));
    Scalar(&out, "fak_rollout_backfill_tokens", "gauge", "Prompt tokens the current rollout's backfill has prefilled.",
           static_cast<double>(b.prefilled_tokens));
    Header(&out, "fak_rollout_verified_contexts", "gauge",
           "Backfilled contexts checked against the new model's recompute before cutover, by result.");
    Sample(&out, "fak_rollout_verified_contexts", Label("result", "equal"), static_cast<double>(b.verified));
    Sample(&out, "fak_rollout_verified_contexts", Label("result", "different"),
           static_cast<double>(b.verify_samples - std::min(b.verify_samples, b.verified)));
    Header(&out, "fak_rollout_interactive_ttft_seconds", "gauge",
           "Time to first token of interactive requests while the current rollout's backfill ran (backfill=\"running\") "
           "and of the last ones while none ran (backfill=\"idle\"): nearest-rank quantiles.");
    for (const auto& [label, t] : {std::pair{"running", s.rollout->during_backfill}, std::pair{"idle", s.rollout->without_backfill}}) {
      if (t.requests == 0) continue;
      Sample(&out, "fak_rollout_interactive_ttft_seconds", Label("backfill", label) + "," + Label("quantile", "0.5"), t.p50_s);
      Sample(&out, "fak_rollout_interactive_ttft_seconds", Label("backfill", label) + "," + Label("quantile", "0.99"), t.p99_s);
    }
  }
  {
    std::lock_guard lock(mu_);
    Header(&out, "fak_gate_probes_total", "counter",
           "Gate probes answered (POST /fak/v1/gate), by verdict and the axis missed or the refusal reason.");
    for (const auto& [key, n] : probes_)
      Sample(&out, "fak_gate_probes_total", Label("verdict", key.first) + "," + Label("why", key.second), static_cast<double>(n));
    Header(&out, "fak_chat_sealed_messages_total", "counter",
           "Chat messages served as their sealed stub, by tenant and cause (sealed before, or quarantined by the screen now).");
    for (const auto& [key, n] : sealed_)
      Sample(&out, "fak_chat_sealed_messages_total", Label("tenant", key.first) + "," + Label("cause", key.second),
             static_cast<double>(n));
    Header(&out, "fak_erasures_total", "counter", "Texts erased on request (POST /fak/v1/erase), by tenant.");
    for (const auto& [tenant, n] : erasures_) Sample(&out, "fak_erasures_total", Label("tenant", tenant), static_cast<double>(n));
    if (!fleet_.empty()) {
      Header(&out, "fak_fleet_erasures_total", "counter",
             "Erasures this worker announced to its fleet (by whether every live worker confirmed) or applied for another.");
      for (const auto& [key, n] : fleet_)
        Sample(&out, "fak_fleet_erasures_total", Label("direction", key.first) + "," + Label("outcome", key.second),
               static_cast<double>(n));
    }
  }
  return out;
}

}  // namespace fak::internal
