// The server's Prometheus metrics: counters it keeps per request, and the text exposition
// (format 0.0.4) of those plus the Engine's and the radix tree's own statistics.
//
// Hand-written: the format is a few lines of text per family, and a client library would add a
// dependency (and its own registry and threads) for no gain. Thread-safe.
#ifndef FAK_SRC_SERVER_METRICS_H_
#define FAK_SRC_SERVER_METRICS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/engine/request.h"
#include "fak/gate/resident_claim.h"
#include "fak/planner/planner.h"
#include "fak/session/radix_tree.h"
#include "src/server/conversations.h"
#include "src/server/http_front.h"
#include "src/server/rollouts.h"

namespace fak::internal {

// Cumulative histogram over fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // The _bucket, _sum and _count lines of family `name`.
  void Render(std::string_view name, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the engine and tree report at scrape time, and the conversation path's when it runs.
struct EngineSnapshot {
  EngineStats engine;
  RadixTreeStats tree;
  GateStats gate;
  size_t kv_budget_bytes = 0;
  std::optional<ConversationStats> conversations;  // with the Planner's tree's gate below
  GateStats conversation_gate;
  PlannerStats conversation_tier;  // the Planner's page-ins (fak serve --kv-tier-*)
  std::optional<RolloutSnapshot> rollout;  // the current or last rollout
  std::string serving_model;               // the model id OpenAI requests go to
  HttpFrontStats http;                     // connections and what the HTTP limits refused
};

class ServerMetrics {
 public:
  ServerMetrics();

  // One HTTP request answered (or abandoned: status 499) on `endpoint` for `tenant`.
  void CountRequest(std::string_view tenant, std::string_view endpoint, int status);
  // A finished engine request's tokens and timings.
  void CountGeneration(std::string_view tenant, const RequestUsage& usage, const RequestTimings& timings);
  // One answer of the gate probe (POST /fak/v1/gate).
  void CountProbe(const ClaimVerdict& verdict);
  // Chat messages the OpenAI endpoint served as their sealed stub: sealed before (`sealed`) or
  // quarantined by its screen now (`quarantined`).
  void CountSealed(std::string_view tenant, size_t sealed, size_t quarantined);
  // One erasure (POST /fak/v1/erase).
  void CountErasure(std::string_view tenant);
  // One erasure this worker announced to its fleet (failed: not announced; pending: live workers
  // that had not confirmed in time), or one it applied for another worker.
  void CountFleetAnnouncement(bool failed, size_t pending);
  void CountFleetApplied();

  std::string Render(const EngineSnapshot& snapshot) const;

 private:
  struct TokenCounts {
    uint64_t prompt = 0, generated = 0, cached = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::string, TokenCounts, std::less<>> tokens_;
  std::map<std::pair<std::string, std::string>, uint64_t> probes_;  // (verdict, axis or reason) → count
  std::map<std::pair<std::string, std::string>, uint64_t> sealed_;  // (tenant, cause) → messages
  std::map<std::string, uint64_t, std::less<>> erasures_;            // tenant → erasures
  std::map<std::pair<std::string, std::string>, uint64_t> fleet_;    // (direction, outcome) → erasures
  Histogram ttft_;
  Histogram itl_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_METRICS_H_
