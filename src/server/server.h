// Server: an OpenAI-compatible HTTP front for the serving Engine.
//
// Endpoints (docs/server.md has parameters, errors and limits): POST /v1/chat/completions (messages
// rendered with the model's ChatTemplate), POST /v1/completions (a prompt string), GET /v1/models,
// POST /v1/embeddings, POST /tokenize and /detokenize, GET /health, GET /metrics (Prometheus text format 0.0.4). Both
// completion endpoints stream as server-sent events when asked, report logprobs, and run n choices
// as n engine requests over one prefill. Browsers on ServerOptions::cors_origins may call them. fak's own, under /fak/v1: the reuse probe (prefix), the gate's
// verdict for a prefix (gate), and with a Planner conversations kept by the server, a message
// evicted from one with a signed deletion certificate, certificate verification, and a rollout of
// new weights whose backfill progress can be watched; at its cutover the completion endpoints move
// to an Engine on the new weights (the Planner keeps its model). Every request's tokens go to the
// serving Engine with the tenant its API key maps to, so prefix reuse stays inside a tenant's
// namespace of the radix tree.
//
// Threads: each connection has a thread of its own (src/server/http_front.h, over libmicrohttpd),
// which waits on its request while the Engine's step thread batches them all; slow or greedy
// clients are bounded by the limits below before any request of theirs runs. A client that
// disconnects has its request cancelled (Engine::Cancel), prefill included.
//
// Not part of libfak: the static library fak_server over it, which `fak serve` (tools/fak/cmd_serve.cc)
// links; only it links libmicrohttpd.
#ifndef FAK_SRC_SERVER_SERVER_H_
#define FAK_SRC_SERVER_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/engine/engine.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/model/loaded_model.h"
#include "fak/model/model.h"
#include "fak/planner/planner.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/server/fleet.h"

namespace fak {

// Loads the model a rollout names (POST /fak/v1/rollout: a file, or a name the host knows; e.g.
// fak::LoadModel) with its tokenizer and chat template; errors name the spec.
using ModelLoader = std::function<Result<LoadedModel>(const std::string& spec)>;

// API key → tenant. Empty: no authentication, every request is tenant "default".
using ApiKeys = std::map<std::string, std::string, std::less<>>;

// One "KEY TENANT" per line; blank lines and lines starting with '#' are skipped. InvalidArgument
// naming the line for a malformed one, a repeated key or an invalid tenant (IsValidTenant).
Result<ApiKeys> ParseApiKeys(std::string_view text);

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (Bind says which)
  // The model's name in /v1/models; requests must name it. Default: "fak".
  std::string model_id = "fak";
  // Request bodies past this are refused with 413, chunked ones included; a declared length past
  // it before a byte is read. Default: 1 MiB.
  size_t max_body_bytes = size_t{1} << 20;
  // A request's line and headers must arrive whole within this of the connection's start (or of
  // the previous response's end); its body within body_timeout_s of the headers. Past either the
  // connection is cut, however steadily it trickles. Default: 10, 30.
  uint32_t header_timeout_s = 10;
  uint32_t body_timeout_s = 30;
  // A connection that reads or writes nothing for this long is closed. Default: 10.
  uint32_t idle_timeout_s = 10;
  // Connections held at once in total (more are closed at accept, or wait in the listen backlog
  // until one closes) and from one peer address (more are closed at accept). Behind a proxy every client is one peer: raise
  // the second. Default: 512, 64.
  size_t max_connections = 512;
  size_t max_connections_per_peer = 64;
  // Stop lets accepted requests run this long; then the engines are cancelled and every
  // connection is cut. Default: 30.
  uint32_t drain_timeout_s = 30;
  // Generated tokens when a request gives no max_tokens (capped by what the context leaves).
  // Default: 256.
  size_t default_max_tokens = 256;
  ApiKeys api_keys;
  // Browser origins allowed to call the API (CORS; "*" = any). Empty: CORS off. Default: empty.
  std::vector<std::string> cors_origins;
  // The KV budget the engine was given, reported as fak_kv_budget_bytes (0: unbounded).
  size_t kv_budget_bytes = 0;
  // fak's conversation endpoints (/fak/v1/conversations..., /fak/v1/certificates/verify) run through
  // this Planner: its own radix tree, text store, journal and signing key, over the same model and
  // tokenizer as the engine. Not owned; must outlive the server. Null: those endpoints answer 404.
  // Default: null.
  Planner* planner = nullptr;
  // Conversations held at once; more are refused with 503. Default: 1024.
  size_t max_conversations = 1024;
  // Conversations one tenant may hold (its share of max_conversations). Default: 256.
  size_t max_conversations_per_tenant = 256;
  // Rollouts (POST /fak/v1/rollout) load the new weights with this; they also need `planner`.
  // At cutover the OpenAI endpoints switch to an engine on the new weights. Null: the rollout
  // endpoints answer 404. Default: null.
  ModelLoader load_model;
  // The options that engine is created with (its tree is the rollout's own). Its chat_template is
  // the new model's own (LoadedModel::chat_template); the one given here (required) serves only a
  // model that has none, and GET /fak/v1/rollout says so. Default: defaults.
  EngineOptions rollout_engine;
  // Chat requests' user messages pass the Planner's screen too (tool results always do). Default: false.
  bool screen_user_messages = false;
  // KV tiers the engines spill to: an erased or quarantined text's KV is removed from them too. Not
  // owned; must outlive the server. Default: none.
  std::vector<KVTierStore*> kv_tiers;
  // The fleet this worker belongs to (src/server/fleet.h): an erasure here is announced to the other
  // workers and its reply names those that confirmed; theirs are applied here. Seals are shared
  // through the Planner's denylist, not this. Not owned; must outlive the server. Default: null.
  FleetLink* fleet = nullptr;
  // Tenants allowed to start a rollout (an operator action); others get 403. Empty: any caller
  // when there are no API keys, nobody when there are. Default: empty.
  std::vector<std::string> admin_tenants;
};

class Server {
 public:
  // `engine` (built on `model` and `tokenizer`, with the chat template chat requests are rendered
  // with: EngineOptions::chat_template) must outlive the server. A rollout's cutover stops sending
  // requests to `engine` (those it runs finish); the host shuts it down. InvalidArgument for a bad
  // option or an engine without a chat template.
  static Result<std::unique_ptr<Server>> Create(Engine& engine, const Model& model, const Tokenizer& tokenizer,
                                                ServerOptions options);
  ~Server();  // Stop, then waits for requests in flight
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port; returns the port bound. IOError when it cannot.
  Result<uint16_t> Bind();
  // Serves on the bound socket until Stop.
  Status Serve();
  // Drains: new completion, conversation and rollout requests are refused (503), those accepted
  // run to their end and are answered, then every connection is closed and Serve returns. Blocks
  // until then. Bounded: past ServerOptions::drain_timeout_s (or at Abort) the serving engines —
  // the host's included — are shut down with ShutdownMode::kCancel, so what still runs ends
  // cancelled, and the connections are cut a second later. True when everything accepted
  // finished. Idempotent (a second call waits for the first and returns the same), any thread
  // (not a signal handler, not a server callback).
  bool Stop();
  // Ends a drain now, as its deadline would (a second SIGTERM). Any thread, not a signal handler.
  void Abort();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fak

#endif  // FAK_SRC_SERVER_SERVER_H_
