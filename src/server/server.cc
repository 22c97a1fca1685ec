#include "src/server/server.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include <openssl/evp.h>

#include "fak/core/digest.h"
#include "fak/gate/kv_manifest.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/tool_calls.h"
#include "fak/model/embedding.h"
#include "src/core/json.h"
#include "src/server/api_request.h"
#include "src/server/conversations.h"
#include "src/server/gate_claim.h"
#include "src/server/http_front.h"
#include "src/server/http_reply.h"
#include "src/server/metrics.h"
#include "src/server/rollouts.h"
#include "src/server/serving.h"
#include "src/server/tree_publication.h"
#include "src/server/verdict_json.h"

namespace fak {
namespace {

using internal::ApiEndpoint;
using internal::ApiRequest;
using internal::ApiRequestError;
using internal::ErrorJson;
using internal::HttpError;
using internal::HttpRequest;
using internal::HttpResponse;
using internal::Json;

// A waiting connection writes a heartbeat this often, so a client that went away is noticed (the
// write fails) and its request cancelled even while it is still prefilling.
constexpr auto kHeartbeat = std::chrono::milliseconds(500);
constexpr char kJsonType[] = "application/json; charset=utf-8";
constexpr char kUnauthenticated[] = "unauthenticated";

// The status an engine refusal maps to.
HttpError SubmitError(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return {400, "invalid_request_error", std::string(s.message()), "", "invalid_value"};
    case StatusCode::kResourceExhausted:
      return {400, "invalid_request_error", std::string(s.message()), "max_tokens", "context_length_exceeded"};
    case StatusCode::kUnavailable:
      return {503, "server_overloaded", std::string(s.message()), "", "queue_full"};
    case StatusCode::kFailedPrecondition:
      return {503, "server_shutting_down", std::string(s.message()), "", "shutting_down"};
    default:
      return {500, "server_error", std::string(s.message()), "", ""};
  }
}

// A seed for a request that gave none: random, below 2^53 so a JavaScript client reads it exactly
// and can send it back.
uint64_t DrawSeed() {
  std::random_device device;
  const uint64_t high = device(), low = device();
  return ((high << 32) | low) & ((uint64_t{1} << 53) - 1);
}

std::string_view OpenAiFinishReason(FinishReason finish) {
  return finish == FinishReason::kLength ? "length" : "stop";
}

// The metrics label of a path: the route it names, "other" for anything else (bounded cardinality).
std::string_view EndpointLabel(std::string_view path) {
  for (std::string_view route : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                                 "/v1/embeddings", "/tokenize", "/detokenize",
                                 "/fak/v1/prefix", "/fak/v1/gate", "/fak/v1/erase", "/fak/v1/tree", "/fak/v1/conversations",
                                 "/fak/v1/certificates/verify", "/fak/v1/rollout"})
    if (path == route) return route;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  constexpr std::string_view kConversation = "/fak/v1/conversations/";
  if (path.rfind(kConversation, 0) == 0) {
    const std::string_view rest = path.substr(kConversation.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return "/fak/v1/conversations/{id}";
    if (rest.substr(slash) == "/messages") return "/fak/v1/conversations/{id}/messages";
    if (rest.substr(slash) == "/evict") return "/fak/v1/conversations/{id}/evict";
  }
  return "other";
}

}  // namespace

Result<ApiKeys> ParseApiKeys(std::string_view text) {
  ApiKeys keys;
  std::istringstream in{std::string(text)};
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    std::istringstream fields(line);
    std::string key, tenant, extra;
    const std::string where = "api keys line " + std::to_string(n);
    if (!(fields >> key >> tenant) || (fields >> extra)) return InvalidArgument(where + ": expected 'KEY TENANT'");
    if (!IsValidTenant(tenant)) return InvalidArgument(where + ": invalid tenant name '" + tenant + "'");
    if (!keys.emplace(key, tenant).second) return InvalidArgument(where + ": the key is listed twice");
  }
  return keys;
}

struct Server::Impl {
  ServerOptions options;
  // What OpenAI requests go to; a rollout replaces it at cutover. Read with Current.
  mutable std::mutex serving_mu;
  std::shared_ptr<const internal::Serving> serving;
  // sha256(key) hex → tenant: a lookup's timing depends on the hash, not on how much of a real key
  // a guess shares.
  std::map<std::string, std::string, std::less<>> tenant_by_key_digest;
  std::unique_ptr<internal::HttpFront> front;
  internal::ServerMetrics metrics;
  Engine* host_engine = nullptr;   // the host's, which the host shuts down (Stop cancels it past the drain deadline)
  RadixTree* host_tree = nullptr;  // the host engine's, which the Planner shares (fak serve); a rollout's engine has its own
  std::unique_ptr<internal::Conversations> conversations;  // null without a Planner
  std::unique_ptr<internal::Rollouts> rollouts;            // null without a Planner and a loader; uses conversations
  std::atomic<uint64_t> next_id{1};

  // Work a drain waits for (completion responses not yet fully written, conversation and rollout
  // requests) and threads that wait on an engine request. Counted by InFlight guards, so no exit
  // path of a request (an exception included) leaves a count behind.
  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  size_t busy = 0;     // GUARDED_BY(inflight_mu)
  size_t waiters = 0;  // GUARDED_BY(inflight_mu)
  bool draining = false;  // GUARDED_BY(inflight_mu); new work is refused (503)
  bool aborted = false;   // GUARDED_BY(inflight_mu); Abort: the drain ends now
  enum class StopState { kServing, kStopping, kStopped } stop_state = StopState::kServing;  // GUARDED_BY(inflight_mu)
  bool drained = true;  // GUARDED_BY(inflight_mu); what Stop returns

  // Holds one count of `busy` or `waiters` for its lifetime.
  class InFlight {
   public:
    InFlight(Impl& impl, size_t Impl::*count) : impl_(impl), count_(count) { ++(impl_.*count_); }  // under inflight_mu
    ~InFlight() {
      std::lock_guard lock(impl_.inflight_mu);
      --(impl_.*count_);
      impl_.inflight_cv.notify_all();
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    Impl& impl_;
    size_t Impl::*count_;
  };
  // A `busy` count for new work; null while draining (the caller answers 503).
  std::shared_ptr<InFlight> AcceptWork() {
    std::lock_guard lock(inflight_mu);
    if (draining) return nullptr;
    return std::make_shared<InFlight>(*this, &Impl::busy);
  }
  std::shared_ptr<InFlight> Waiter() {
    std::lock_guard lock(inflight_mu);
    return std::make_shared<InFlight>(*this, &Impl::waiters);
  }

  explicit Impl(ServerOptions o) : options(std::move(o)) {}
  ~Impl() {
    if (options.fleet != nullptr) options.fleet->StopListening();  // it calls into this
    Stop();
    std::unique_lock lock(inflight_mu);
    inflight_cv.wait(lock, [&] { return waiters == 0; });
  }
  bool Stop();
  void Abort() {
    std::lock_guard lock(inflight_mu);
    aborted = true;
    inflight_cv.notify_all();
  }
  std::shared_ptr<const internal::Serving> Current() const {
    std::lock_guard lock(serving_mu);
    return serving;
  }
  void Install(std::shared_ptr<const internal::Serving> next) {
    std::shared_ptr<const internal::Serving> old;
    {
      std::lock_guard lock(serving_mu);
      old = std::exchange(serving, next);
    }
    // Conversations switch with the OpenAI endpoints; the planner holds the serving while it runs
    // turns on its engine.
    if (conversations) {
      // The engine's own template (the rolled-out model's), kept alive with the serving.
      std::shared_ptr<const ChatTemplate> chat_template(next, next->engine->chat_template());
      conversations->planner().SwitchEngine(*next->model, *next->tokenizer, *next->engine, std::move(chat_template), next);
    }
    // `old` is freed here when no request (nor the planner) holds it, else by the last one that does.
  }
  // An engine on rolled-out weights (MakeServing).
  Result<std::shared_ptr<internal::Serving>> MakeServing(std::shared_ptr<const LoadedModel> weights,
                                                         std::shared_ptr<RadixTree> tree, const std::string& model_id) const;

  std::vector<internal::HttpRoute> Routes();
  void Reply(HttpResponse& res, std::string_view tenant, std::string_view endpoint, int status, const Json& body);
  void ReplyError(HttpResponse& res, std::string_view tenant, std::string_view endpoint, const HttpError& e);
  // A 400 invalid_request reply naming the offending field (`param`, empty for the whole body).
  void ReplyBadRequest(HttpResponse& res, std::string_view tenant, std::string_view endpoint, std::string message,
                       std::string param);
  // The request's body as a JSON object (depth and size limited), or nullopt after a 400 saying why.
  std::optional<Json> ReadJsonBody(const HttpRequest& req, HttpResponse& res, std::string_view endpoint);
  // The front's admit hook: the tenant of the request's key in head.principal, or a 401 in `refusal`
  // when the key is missing or unknown (before the body is read).
  bool Authenticate(HttpRequest& head, HttpResponse& refusal);
  void HandleGeneration(ApiEndpoint api, const HttpRequest& req, HttpResponse& res);
  void HandlePrefixProbe(const HttpRequest& req, HttpResponse& res);
  // llama-server's shapes: {"content": TEXT, "add_special": BOOL} → {"tokens": [...]}, and
  // {"tokens": [...]} → {"content": TEXT}, with the serving model's tokenizer.
  void HandleTokenize(const HttpRequest& req, HttpResponse& res);
  // OpenAI's embeddings: each input an embedding request of the serving engine (pooled, unit length),
  // as floats or base64.
  void HandleEmbeddings(const HttpRequest& req, HttpResponse& res);
  void HandleDetokenize(const HttpRequest& req, HttpResponse& res);
  void HandleErase(const HttpRequest& req, HttpResponse& res);
  // Removes `source`'s KV from every copy the server holds beyond the Planner's tree: the serving
  // engines' trees (only what `tenant` can reach, for a tenant's erasure; all of it for a
  // quarantine) and the KV tiers. What was removed, for the reply.
  Json EraseCopies(const Digest& source, std::optional<std::string_view> tenant);
  // EraseCopies, then the fleet's part: announced to the other workers (a tenant's erasure waits
  // for their confirmations, a quarantine does not: the shared denylist already stops its reuse),
  // with what they said under "fleet".
  Json EraseEverywhere(const Digest& source, std::optional<std::string_view> tenant);
  // Screens a chat's messages through the Planner (Planner::ScreenChat) before the engine sees
  // them: sealed texts become their stubs, new tool results are judged. Null without a Planner.
  // On success `request.messages` holds what the engine may run and `sealed` the sealed indices.
  Status ScreenChat(const std::string& tenant, ApiRequest& request, std::vector<size_t>* sealed);
  void HandleGateProbe(const HttpRequest& req, HttpResponse& res);
  // What the serving trees hold, as prefixes a router can compute (tree_publication.h); with
  // `tenant`, only its own and the shared public ones.
  std::vector<PublishedPrefix> TreePrefixes(std::optional<std::string_view> tenant);
  void HandleTree(const HttpRequest& req, HttpResponse& res);
  // An operator: listed in admin_tenants, or anyone when the server has neither list nor keys.
  bool IsAdmin(const std::string& tenant) const {
    const std::vector<std::string>& admins = options.admin_tenants;
    return admins.empty() ? options.api_keys.empty() : std::find(admins.begin(), admins.end(), tenant) != admins.end();
  }
  void ConversationRoutes(std::vector<internal::HttpRoute>& routes);
  // Answers with `handle(tenant)`; 404 when the server has no Planner, 503 while draining.
  void WithConversations(const HttpRequest& req, HttpResponse& res,
                         const std::function<internal::HttpReply(const std::string& tenant)>& handle);
  void RolloutRoutes(std::vector<internal::HttpRoute>& routes);
  // A chat-completion body for a conversation turn; nullopt (and the error) when it is refused.
  std::optional<ApiRequest> ParseTurn(const HttpRequest& req, internal::HttpReply* error) const;
  // The request's prompt in `er` as the engine will run it: a chat's messages go to the engine,
  // which renders and tokenizes them (Engine::Prepare: message text is never markup, and each
  // message's run is indexed by its text in the tree and the KV tier); a completion's prompt is
  // text the client wrote, tokenized as it is.
  Status FillPrompt(const internal::Serving& s, ApiEndpoint api, const ApiRequest& request, EngineRequest* er) const;
  std::string RenderMetrics() const;
};

void Server::Impl::Reply(HttpResponse& res, std::string_view tenant, std::string_view endpoint, int status,
                         const Json& body) {
  res.status = status;
  res.content_type = kJsonType;
  res.body = internal::DumpJson(body);
  metrics.CountRequest(tenant, endpoint, status);
}

void Server::Impl::ReplyError(HttpResponse& res, std::string_view tenant, std::string_view endpoint, const HttpError& e) {
  Reply(res, tenant, endpoint, e.status, ErrorJson(e));
}

void Server::Impl::ReplyBadRequest(HttpResponse& res, std::string_view tenant, std::string_view endpoint,
                                   std::string message, std::string param) {
  ReplyError(res, tenant, endpoint, {400, "invalid_request_error", std::move(message), std::move(param), "invalid_request"});
}

std::optional<Json> Server::Impl::ReadJsonBody(const HttpRequest& req, HttpResponse& res, std::string_view endpoint) {
  Result<Json> body = internal::ParseJsonObject(req.body, "the request body");
  if (!body) {
    ReplyBadRequest(res, req.principal, endpoint, std::string(body.error().message()), "");
    return std::nullopt;
  }
  return std::move(*body);
}

bool Server::Impl::Authenticate(HttpRequest& head, HttpResponse& refusal) {
  if (options.api_keys.empty()) {
    head.principal = std::string(kDefaultTenant);
    return true;
  }
  const std::string_view header = head.header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.substr(0, kBearer.size()) == kBearer) {
    const auto it = tenant_by_key_digest.find(Digest::Of(header.substr(kBearer.size())).Hex());
    if (it != tenant_by_key_digest.end()) {
      head.principal = it->second;
      return true;
    }
  }
  ReplyError(refusal, kUnauthenticated, EndpointLabel(head.path),
             {401, "invalid_request_error", "missing or unknown API key (Authorization: Bearer KEY)", "", "invalid_api_key"});
  return false;
}

Status Server::Impl::FillPrompt(const internal::Serving& s, ApiEndpoint api, const ApiRequest& request,
                                EngineRequest* er) const {
  if (api == ApiEndpoint::kChatCompletions) {
    er->messages = request.messages;
    er->tools = request.tools.request();
    return s.engine->Prepare(*er);
  }
  const Tokenizer& tokenizer = *s.tokenizer;
  FAK_ASSIGN_OR_RETURN(er->prompt, tokenizer.Encode(request.prompt));
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) er->prompt.insert(er->prompt.begin(), tokenizer.bos_id());
  er->stop_tokens = s.completion_stop_tokens;
  return Status::Ok();
}

Result<std::shared_ptr<internal::Serving>> Server::Impl::MakeServing(std::shared_ptr<const LoadedModel> weights,
                                                                    std::shared_ptr<RadixTree> tree,
                                                                    const std::string& model_id) const {
  EngineOptions engine_options = options.rollout_engine;
  engine_options.tree = tree.get();
  if (engine_options.chat_template == nullptr)
    return InvalidArgument("ServerOptions::rollout_engine: a chat template is required (chat requests go to the engine)");
  // The new model renders chats as it was trained to (another family has other markup); the host's
  // template only stands in for a model that has none.
  std::string borrowed_template_reason;
  if (weights->chat_template) {
    engine_options.chat_template = weights->chat_template;
  } else {
    borrowed_template_reason = weights->template_status.ok() ? std::string("the model has no chat template")
                                                             : std::string(weights->template_status.message());
  }
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                       Engine::Create(*weights->model, *weights->tokenizer, std::move(engine_options)));
  auto s = std::make_shared<internal::Serving>();
  s->engine = engine.get();
  s->owned_engine = std::move(engine);
  s->model = weights->model.get();
  s->tokenizer = weights->tokenizer.get();
  s->model_id = model_id;
  s->label = weights->label;
  s->completion_stop_tokens = EndOfGenerationTokens(*s->tokenizer, nullptr);
  s->borrowed_template_reason = std::move(borrowed_template_reason);
  s->tree = std::move(tree);
  s->weights = std::move(weights);
  return s;
}

namespace {

// One choice of a run: an engine request and what of it is still to be written.
struct Choice {
  RequestId id = 0;
  std::string pending;                     // streamed text not yet written
  Json pending_logprobs = Json::array();   // log-probability entries not yet written (LogprobEntry)
  size_t token_bytes = 0;                  // bytes of the tokens' text so far (completions' text_offset)
  bool done = false, finish_sent = false;
  EngineResult result;
  std::optional<ToolCallReader> tools;     // set when the reply is read for tool calls
};

// One accepted generation request, shared by the engine's token callbacks (step thread), the
// thread that waits for its results, and the connection's content provider.
struct Run {
  ApiEndpoint api = ApiEndpoint::kChatCompletions;
  std::string tenant, endpoint, response_id, model;
  int64_t created = 0;
  uint64_t seed = 0;  // the request's (choice i ran with seed + i)
  bool stream = false, include_usage = false, logprobs = false;
  std::vector<size_t> sealed;  // chat messages run as their sealed stub

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Choice> choices;
  size_t unfinished = 0;
  bool client_gone = false;
  bool role_sent = false;
  bool done() const { return unfinished == 0; }
};

Json UsageJson(const std::vector<Choice>& choices) {
  // The prompt is counted once, as OpenAI bills n choices; cached_tokens is the most any choice
  // was served from the tree (with n > 1 the later choices reuse the first one's prefill).
  size_t prompt = 0, cached = 0, generated = 0;
  for (const Choice& c : choices) {
    prompt = c.result.usage.prompt_tokens;
    cached = std::max(cached, c.result.usage.cached_tokens);
    generated += c.result.usage.generated_tokens;
  }
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", generated},
              {"total_tokens", prompt + generated},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

Json ChunkJson(const Run& run, const Json& choices) {
  const bool chat = run.api == ApiEndpoint::kChatCompletions;
  return Json{{"id", run.response_id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", run.created},
              {"model", run.model},
              {"seed", run.seed},
              {"choices", choices}};
}

// OpenAI reports -9999 for a probability that underflows (JSON has no -inf).
double ShownLogprob(double x) { return std::isfinite(x) ? x : -9999.0; }

std::string TokenString(const Tokenizer& tokenizer, int32_t token) {
  Result<std::string> text = tokenizer.Decode(std::span<const int32_t>(&token, 1));
  return text ? *text : std::string();
}

Json TokenBytes(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// A token's entry as chat's logprobs.content has it (token, logprob, bytes, top_logprobs), plus its
// text offset, which completions report.
Json LogprobEntry(const Tokenizer& tokenizer, const TokenLogprobs& lp, size_t text_offset) {
  const auto entry = [&](const TokenLogprob& t) {
    const std::string s = TokenString(tokenizer, t.token);
    return Json{{"token", s}, {"logprob", ShownLogprob(t.logprob)}, {"bytes", TokenBytes(s)}};
  };
  Json e = entry(lp.chosen);
  e["top_logprobs"] = Json::array();
  for (const TokenLogprob& t : lp.top) e["top_logprobs"].push_back(entry(t));
  e["text_offset"] = text_offset;
  return e;
}

// Chat's logprobs.content: the entries without the offset.
Json ChatLogprobs(const Json& entries) {
  Json content = entries;
  for (Json& e : content) e.erase("text_offset");
  return Json{{"content", std::move(content)}, {"refusal", nullptr}};
}

// Completions' logprobs object: parallel lists, the alternatives as token text → logprob.
Json CompletionLogprobs(const Json& entries) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), text_offset = Json::array();
  for (const Json& e : entries) {
    tokens.push_back(e["token"]);
    token_logprobs.push_back(e["logprob"]);
    Json alternatives = Json::object();
    for (const Json& t : e["top_logprobs"]) {
      const std::string& text = t["token"].get_ref<const std::string&>();
      if (!alternatives.contains(text)) alternatives[text] = t["logprob"];  // two ids may spell the same text
    }
    top.push_back(std::move(alternatives));
    text_offset.push_back(e["text_offset"]);
  }
  return Json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", text_offset}};
}

// The logprobs member of choice `c` for what it has not yet written (a stream) or for all of it.
Json ChoiceLogprobs(const Run& run, const Choice& c) {
  if (!run.logprobs) return nullptr;
  return run.api == ApiEndpoint::kChatCompletions ? ChatLogprobs(c.pending_logprobs) : CompletionLogprobs(c.pending_logprobs);
}

// A streamed piece of choice i (finish: null) or its last (finish: its reason).
Json StreamChoice(const Run& run, size_t i, const Json& finish) {
  const Choice& c = run.choices[i];
  if (run.api == ApiEndpoint::kChatCompletions) {
    Json delta = Json::object();
    if (!c.pending.empty()) delta["content"] = c.pending;
    return Json{{"index", i}, {"delta", delta}, {"finish_reason", finish}, {"logprobs", ChoiceLogprobs(run, c)}};
  }
  return Json{{"index", i}, {"text", c.pending}, {"finish_reason", finish}, {"logprobs", ChoiceLogprobs(run, c)}};
}

std::string SseEvent(const Json& data) { return "data: " + internal::DumpJson(data) + "\n\n"; }

// A reply's content beside its calls (ToolCallReader::content): null when there is none.
Json ToolContentJson(const ToolCallReader& reader) {
  std::optional<std::string> content = reader.content();
  return content ? Json(std::move(*content)) : Json(nullptr);
}

// message.tool_calls: [{id, type, function: {name, arguments}}].
Json ToolCallsJson(const ToolCallReader& reader) {
  Json calls = Json::array();
  for (const ToolCall& call : reader.calls())
    calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return calls;
}

// A stream's delta.tool_calls entry.
Json ToolCallDeltaJson(const ToolCallDelta& d) {
  if (d.first) return {{"index", d.index}, {"id", d.id}, {"type", "function"}, {"function", {{"name", d.name}, {"arguments", ""}}}};
  return {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
}

// A choice's finish_reason: "tool_calls" when a reply that ended by itself holds calls.
Json ChoiceFinish(const Choice& c) {
  const std::string_view finish = OpenAiFinishReason(c.result.finish);
  return Json(c.tools && c.tools->has_calls() && finish == "stop" ? "tool_calls" : finish);
}

// The last events of choice i's stream: its tool calls as deltas, then the chunk with its finish.
std::string FinishEvents(const Run& run, size_t i) {
  std::string out;
  const Choice& c = run.choices[i];
  if (c.tools) {
    for (const ToolCallDelta& delta : c.tools->Deltas()) {
      Json choice = {{"index", i}, {"delta", {{"tool_calls", Json::array({ToolCallDeltaJson(delta)})}}}, {"finish_reason", nullptr},
                     {"logprobs", nullptr}};
      out += SseEvent(ChunkJson(run, Json::array({std::move(choice)})));
    }
  }
  return out + SseEvent(ChunkJson(run, Json::array({StreamChoice(run, i, ChoiceFinish(c))})));
}

// The error a finished request carries when it did not end normally; nullopt when it did.
std::optional<HttpError> FinishError(const EngineResult& r) {
  if (r.finish == FinishReason::kError)
    return HttpError{500, "server_error", std::string(r.error.message()), "", ""};
  if (r.finish == FinishReason::kCancelled || r.finish == FinishReason::kDeadline)
    return HttpError{503, "server_error", "the request was cancelled (" + std::string(FinishReasonName(r.finish)) + ")",
                     "", "cancelled"};
  return std::nullopt;
}
std::optional<HttpError> RunError(const Run& run) {
  for (const Choice& c : run.choices)
    if (std::optional<HttpError> e = FinishError(c.result)) return e;
  return std::nullopt;
}

// What is written once every choice is done: the whole response, or the stream's last events.
std::string FinalBody(Run& run) {
  const std::optional<HttpError> error = RunError(run);
  if (!run.stream) {
    if (error) return internal::DumpJson(ErrorJson(*error));
    const bool chat = run.api == ApiEndpoint::kChatCompletions;
    Json choices = Json::array();
    for (size_t i = 0; i < run.choices.size(); ++i) {
      const Choice& c = run.choices[i];
      Json choice = {{"index", i}, {"finish_reason", ChoiceFinish(c)}, {"logprobs", ChoiceLogprobs(run, c)}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.tools ? ToolContentJson(*c.tools) : Json(c.result.text)}};
        if (c.tools && c.tools->has_calls()) choice["message"]["tool_calls"] = ToolCallsJson(*c.tools);
      } else {
        choice["text"] = c.result.text;
      }
      choices.push_back(std::move(choice));
    }
    Json body = {{"id", run.response_id},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", run.created},
                 {"model", run.model},
                 {"seed", run.seed},
                 {"choices", std::move(choices)},
                 {"usage", UsageJson(run.choices)}};
    if (!run.sealed.empty()) body["fak"] = {{"sealed_messages", run.sealed}};
    return internal::DumpJson(body);
  }
  std::string out;
  if (error) {
    out = SseEvent(ErrorJson(*error));
  } else {
    for (size_t i = 0; i < run.choices.size(); ++i) {
      Choice& c = run.choices[i];
      if (c.finish_sent) continue;
      out += FinishEvents(run, i);
      c.pending.clear();
      c.finish_sent = true;
    }
    if (run.include_usage) {
      Json chunk = ChunkJson(run, Json::array());
      chunk["usage"] = UsageJson(run.choices);
      out += SseEvent(chunk);
    }
  }
  return out + "data: [DONE]\n\n";
}

bool HasStreamWork(const Run& run) {
  for (const Choice& c : run.choices)
    if (!c.pending.empty() || !c.pending_logprobs.empty() || (c.done && !c.finish_sent && !FinishError(c.result))) return true;
  return false;
}

// The next bytes to write for `run`: streamed pieces, the final body, or a heartbeat (whitespace
// before a JSON body, an SSE comment in a stream) when nothing arrived for kHeartbeat. Sets *done
// when this is the last write.
std::string NextWrite(Run& run, bool* done) {
  std::unique_lock lock(run.mu);
  std::string out;
  if (run.stream && !run.role_sent) {
    run.role_sent = true;
    if (run.api == ApiEndpoint::kChatCompletions) {
      for (size_t i = 0; i < run.choices.size(); ++i) {
        Json choice = Json::array({Json{{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"finish_reason", nullptr}, {"logprobs", nullptr}}});
        out += SseEvent(ChunkJson(run, choice));
      }
      return out;
    }
  }
  run.cv.wait_for(lock, kHeartbeat, [&] { return run.done() || (run.stream && HasStreamWork(run)); });
  *done = run.done();
  if (run.done()) return FinalBody(run);
  if (run.stream) {
    for (size_t i = 0; i < run.choices.size(); ++i) {
      Choice& c = run.choices[i];
      const bool finishing = c.done && !c.finish_sent && !FinishError(c.result);
      if (c.pending.empty() && c.pending_logprobs.empty() && !finishing) continue;
      out += finishing ? FinishEvents(run, i) : SseEvent(ChunkJson(run, Json::array({StreamChoice(run, i, nullptr)})));
      c.pending.clear();
      c.pending_logprobs = Json::array();
      c.finish_sent = c.finish_sent || finishing;
    }
    if (!out.empty()) return out;
  }
  return run.stream ? ": waiting\n\n" : " ";
}

}  // namespace

Json Server::Impl::EraseCopies(const Digest& source, std::optional<std::string_view> tenant) {
  Json trees = Json::array();
  const std::shared_ptr<const internal::Serving> serving = Current();
  std::vector<std::pair<std::string, RadixTree*>> held = {{serving->model_id, &serving->engine->tree()}};
  if (host_tree != nullptr && host_tree != held[0].second) held.emplace_back(options.model_id, host_tree);
  for (const auto& [model, tree] : held)
    trees.push_back({{"model", model}, {"tokens", tree->EvictSource(source, tenant).n_tokens}});
  if (rollouts) {
    if (auto warming = rollouts->EraseWarming(source, tenant)) trees.push_back({{"model", warming->first}, {"tokens", warming->second}});
  }
  size_t tier_entries = 0;
  Json tier_errors = Json::array();
  for (KVTierStore* tier : options.kv_tiers) {
    Result<size_t> n = tier->EraseSource(source);
    if (n) {
      tier_entries += *n;
    } else {
      tier_errors.push_back(std::string(n.error().message()));
    }
  }
  Json copies = {{"trees", std::move(trees)}, {"kv_tier_entries", tier_entries}};
  if (!tier_errors.empty()) copies["kv_tier_errors"] = std::move(tier_errors);
  return copies;
}

std::vector<PublishedPrefix> Server::Impl::TreePrefixes(std::optional<std::string_view> tenant) {
  const std::shared_ptr<const internal::Serving> serving = Current();
  std::vector<HeldPath> paths = serving->engine->tree().HeldPaths();
  if (host_tree != nullptr && host_tree != &serving->engine->tree()) {
    std::vector<HeldPath> more = host_tree->HeldPaths();
    paths.insert(paths.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  std::vector<PublishedPrefix> all = PublishedPrefixes(paths);
  if (tenant) std::erase_if(all, [&](const PublishedPrefix& p) { return !p.tenant.empty() && p.tenant != *tenant; });
  return all;
}

// GET /fak/v1/tree: what this worker's trees hold, for a cache-aware router (docs/fleet.md). An
// operator sees every tenant's prefixes; a tenant its own and the shared public ones.
void Server::Impl::HandleTree(const HttpRequest& req, HttpResponse& res) {
  const std::string& tenant = req.principal;
  Json prefixes = Json::array();
  for (const PublishedPrefix& p : TreePrefixes(IsAdmin(tenant) ? std::nullopt : std::optional<std::string_view>(tenant)))
    prefixes.push_back({{"tenant", p.tenant}, {"prefix", p.digest.Hex()}, {"messages", p.messages}, {"tokens", p.tokens}});
  Reply(res, tenant, "/fak/v1/tree", 200,
        Json{{"object", "fak.tree"}, {"worker", options.fleet ? Json(options.fleet->worker_id()) : Json(nullptr)},
             {"prefixes", std::move(prefixes)}});
}

Json Server::Impl::EraseEverywhere(const Digest& source, std::optional<std::string_view> tenant) {
  Json copies = EraseCopies(source, tenant);
  if (options.fleet == nullptr) return copies;
  const FleetConfirmation c = options.fleet->Announce(
      FleetErasure{source, tenant ? std::optional<std::string>(*tenant) : std::nullopt}, /*wait=*/tenant.has_value());
  Json fleet = {{"event", c.event_id}, {"confirmed", c.confirmed}, {"pending", c.pending}};
  if (!c.error.empty()) fleet["error"] = c.error;
  metrics.CountFleetAnnouncement(!c.error.empty(), c.pending.size());
  copies["fleet"] = std::move(fleet);
  return copies;
}

Status Server::Impl::ScreenChat(const std::string& tenant, ApiRequest& request, std::vector<size_t>* sealed) {
  if (!conversations) return Status::Ok();
  FAK_ASSIGN_OR_RETURN(ScreenedChat screened,
                       conversations->planner().ScreenChat(tenant, request.messages, options.screen_user_messages));
  for (const Digest& d : screened.newly_sealed) (void)EraseEverywhere(d, std::nullopt);  // quarantined: everyone's
  for (size_t i = 0; i < screened.outcomes.size(); ++i)
    if (screened.outcomes[i].sealed) sealed->push_back(i);
  metrics.CountSealed(tenant, sealed->size() - screened.newly_sealed.size(), screened.newly_sealed.size());
  request.messages = std::move(screened.messages);
  return Status::Ok();
}

void Server::Impl::HandleGeneration(ApiEndpoint api, const HttpRequest& req, HttpResponse& res) {
  const std::string endpoint(EndpointLabel(req.path));
  const std::string* tenant = &req.principal;
  ApiRequest request;
  ApiRequestError parse_error;
  if (!internal::ParseApiRequest(api, req.body, &request, &parse_error))
    return ReplyError(res, *tenant, endpoint, {400, "invalid_request_error", parse_error.message, parse_error.param, "invalid_request"});
  if (rollouts) rollouts->Poll();  // a blue_green backfill that is done switches serving now
  // Held until the request ends: a rollout that switches meanwhile leaves this engine to finish it.
  std::shared_ptr<const internal::Serving> serving = Current();
  if (request.model != serving->model_id)
    return ReplyError(res, *tenant, endpoint,
                      {404, "invalid_request_error", "the model '" + request.model + "' does not exist; this server serves '" +
                                                         serving->model_id + "'", "model", "model_not_found"});
  std::vector<size_t> sealed;
  if (api == ApiEndpoint::kChatCompletions) {
    if (Status s = ScreenChat(*tenant, request, &sealed); !s.ok()) {
      HttpError e = s.code() == StatusCode::kUnavailable
                        ? HttpError{503, "server_error", std::string(s.message()), "messages", "screen_unavailable"}
                        : HttpError{400, "invalid_request_error", std::string(s.message()), "messages", "invalid_value"};
      if (e.status == 503) res.headers.emplace_back("Retry-After", "1");
      return ReplyError(res, *tenant, endpoint, e);
    }
  }
  EngineRequest er;
  er.tenant = *tenant;
  // Replies are read for calls when tools are offered (the engine renders them and forces calls).
  std::optional<ToolCallReader> tool_reader;
  if (api == ApiEndpoint::kChatCompletions && request.tools.active()) {
    Result<ToolCallReader> reader = ToolCallReader::Create(*serving->engine->chat_template(), request.tools.request());
    if (!reader)
      return ReplyError(res, *tenant, endpoint, {400, "invalid_request_error", std::string(reader.error().message()), "tools", "invalid_value"});
    tool_reader = std::move(*reader);
  }
  if (request.grammar) {
    Result<std::shared_ptr<const TokenVocabulary>> vocabulary = serving->engine->Vocabulary();
    if (!vocabulary)
      return ReplyError(res, *tenant, endpoint, {500, "server_error", std::string(vocabulary.error().message()), "", "internal_error"});
    er.constraint = std::make_shared<GrammarConstraint>(std::move(*request.grammar), std::move(*vocabulary));
  }
  const char* input_param = api == ApiEndpoint::kChatCompletions ? "messages" : "prompt";
  if (Status s = FillPrompt(*serving, api, request, &er); !s.ok())
    return ReplyError(res, *tenant, endpoint, {400, "invalid_request_error", std::string(s.message()), input_param, "invalid_value"});
  const std::vector<int32_t>* prompt = &er.prompt;
  if (prompt->empty()) return ReplyError(res, *tenant, endpoint, {400, "invalid_request_error", "the prompt is empty", input_param, "invalid_value"});
  const size_t context = serving->model->config().context_length;
  if (prompt->size() >= context)
    return ReplyError(res, *tenant, endpoint,
                      {400, "invalid_request_error", "the prompt is " + std::to_string(prompt->size()) +
                       " tokens; the model's context is " + std::to_string(context), input_param, "context_length_exceeded"});
  const size_t room = context - prompt->size();
  const size_t max_tokens = request.max_tokens.value_or(std::min(options.default_max_tokens, room));
  if (max_tokens > room)
    return ReplyError(res, *tenant, endpoint,
                      {400, "invalid_request_error", "prompt (" + std::to_string(prompt->size()) + " tokens) + max_tokens (" +
                       std::to_string(max_tokens) + ") exceeds the model's context of " + std::to_string(context),
                       "max_tokens", "context_length_exceeded"});

  auto run = std::make_shared<Run>();
  run->api = api;
  run->tenant = *tenant;
  run->endpoint = endpoint;
  run->response_id = (api == ApiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  run->model = serving->model_id;
  run->created = static_cast<int64_t>(std::time(nullptr));
  run->stream = request.stream;
  run->include_usage = request.include_usage;
  run->logprobs = request.logprobs;
  run->sealed = std::move(sealed);
  run->seed = request.seed.value_or(DrawSeed());
  run->choices.resize(request.n);
  if (tool_reader) {
    for (Choice& c : run->choices) c.tools = tool_reader;
  }
  run->unfinished = request.n;

  er.sampling = request.sampling;
  er.max_tokens = max_tokens;
  er.stop_strings = std::move(request.stop);
  er.logprobs = request.logprobs;
  er.top_logprobs = request.top_logprobs;
  // Counts until the response is written or abandoned (held by its stream).
  std::shared_ptr<InFlight> work = AcceptWork();
  if (!work)
    return ReplyError(res, *tenant, endpoint, {503, "server_shutting_down", "the server is shutting down", "", "shutting_down"});
  // n choices are n requests over one prompt: the engine prefills it once (the later ones wait for
  // the first's prompt to reach the tree) and each samples with its own seed.
  const Tokenizer* tokenizer = serving->tokenizer;
  for (size_t i = 0; i < request.n; ++i) {
    EngineRequest choice_request = er;
    choice_request.sampling.seed = run->seed + i;
    if (run->stream || run->logprobs) {
      choice_request.on_token = [run, i, tokenizer](const TokenEvent& event) {
        if (event.text.empty() && event.logprobs == nullptr) return true;
        std::lock_guard lock(run->mu);
        Choice& c = run->choices[i];
        if (run->stream) c.pending += c.tools ? c.tools->Feed(event.text) : event.text;
        if (event.logprobs != nullptr) {
          c.pending_logprobs.push_back(LogprobEntry(*tokenizer, *event.logprobs, c.token_bytes));
          c.token_bytes += c.pending_logprobs.back()["bytes"].size();
        }
        run->cv.notify_all();
        return true;
      };
    }
    Result<RequestId> id = serving->engine->Submit(std::move(choice_request));
    if (!id) {
      for (size_t k = 0; k < i; ++k) {  // all or none
        (void)serving->engine->Cancel(run->choices[k].id);
        (void)serving->engine->Wait(run->choices[k].id);
      }
      HttpError e = SubmitError(id.error());
      if (e.status == 503) res.headers.emplace_back("Retry-After", "1");
      return ReplyError(res, *tenant, endpoint, e);
    }
    run->choices[i].id = *id;
  }

  // Waits for the results on a thread of its own, so that the connection's thread can write
  // heartbeats meanwhile.
  std::shared_ptr<InFlight> waiter = Waiter();
  try {
    std::thread([this, run, serving, waiter]() mutable {
      bool client_gone = false;
      for (size_t i = 0; i < run->choices.size(); ++i) {
        Result<EngineResult> result = serving->engine->Wait(run->choices[i].id);
        std::lock_guard lock(run->mu);
        Choice& c = run->choices[i];
        if (result) {
          c.result = std::move(*result);
        } else {
          c.result.finish = FinishReason::kError;
          c.result.error = result.error();
        }
        if (c.tools) {
          c.tools->Finish(c.result.text, DrawSeed());
          if (run->stream) c.pending += c.tools->UnshownContent();
        }
        c.done = true;
        if (--run->unfinished == 0) client_gone = run->client_gone;
        metrics.CountGeneration(run->tenant, c.result.usage, c.result.timings);
        if (rollouts) rollouts->ObserveInteractive(c.result.timings);  // TTFT during a backfill, or without
        run->cv.notify_all();
      }
      // Released before the count that lets the server go: a replaced engine is freed here or sooner.
      serving.reset();
      metrics.CountRequest(run->tenant, run->endpoint, client_gone ? 499 : 200);
    }).detach();
  } catch (...) {  // no thread to wait: the requests must not run unobserved
    for (const Choice& c : run->choices) {
      (void)serving->engine->Cancel(c.id);
      (void)serving->engine->Wait(c.id);
    }
    throw;
  }

  // The connection's thread writes as the request progresses; a failed write means the client is
  // gone, and its requests are cancelled (prefill included).
  // Holds the serving too: the waiting thread may release its reference while this cancels.
  const auto abandon = [run, serving] {
    std::vector<RequestId> ids;
    {
      std::lock_guard lock(run->mu);
      if (run->done()) return;
      run->client_gone = true;
      for (const Choice& c : run->choices) ids.push_back(c.id);
    }
    for (RequestId id : ids) (void)serving->engine->Cancel(id);
  };
  res.content_type = run->stream ? "text/event-stream" : kJsonType;
  res.stream = [run, work](std::string* out) {
    bool done = false;
    *out = NextWrite(*run, &done);
    return !done;
  };
  res.on_end = [abandon](bool complete) {
    if (!complete) abandon();
  };
  if (run->stream) res.headers.emplace_back("Cache-Control", "no-cache");
  if (!run->sealed.empty()) {
    std::string indices;
    for (size_t i : run->sealed) indices += (indices.empty() ? "" : ",") + std::to_string(i);
    res.headers.emplace_back("X-Fak-Sealed-Messages", indices);
  }
}

// Erasure of a text sent through any endpoint: {"content": TEXT} or {"digest": SHA256_HEX}, and an
// optional "reason". Sealed, erased from the text store, its KV removed from every tree and tier;
// the reply names each copy and carries the signed erasure certificate (naming, in a fleet, the
// workers that confirmed). Needs the Planner (it owns seals, the journal and the key).
void Server::Impl::HandleErase(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/fak/v1/erase";
  const std::string* tenant = &req.principal;
  if (!conversations)
    return ReplyError(res, *tenant, kEndpoint, {404, "invalid_request_error", "this server keeps no seals (it was started "
                                                "without a planner)", "", "not_enabled"});
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  std::optional<Digest> digest;
  std::string reason;
  for (const auto& [key, v] : body->items()) {
    if (key == "content" && v.is_string()) {
      digest = Digest::Of(v.get_ref<const std::string&>());
    } else if (key == "digest" && v.is_string()) {
      Result<Digest> d = Digest::FromHex(v.get_ref<const std::string&>());
      if (!d) return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", "digest must be 64 hex digits (sha256)", "digest", "invalid_value"});
      digest = *d;
    } else if (key == "reason" && v.is_string() && v.get_ref<const std::string&>().size() <= 1024) {
      reason = v.get<std::string>();
    } else {
      return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", "unknown or malformed field '" + key +
                                                  "' (content, digest: strings; reason: at most 1024 bytes)", key, "invalid_value"});
    }
  }
  if (!digest || (body->contains("content") && body->contains("digest")))
    return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", "give the text as content or its sha256 as digest (one of them)",
                                                "", "invalid_value"});
  Result<ErasureReport> erased = conversations->planner().EraseText(*tenant, *digest, reason);
  if (!erased) {
    const Status& s = erased.error();
    const int status = s.code() == StatusCode::kUnavailable ? 503 : s.code() == StatusCode::kFailedPrecondition ? 409 : 500;
    return ReplyError(res, *tenant, kEndpoint, {status, status == 500 ? "server_error" : "invalid_request_error",
                                                std::string(s.message()), "", status == 409 ? "conflict" : ""});
  }
  Json copies = EraseEverywhere(*digest, *tenant);
  // Signed once the fleet has answered, so a fleet's certificate names the workers that confirmed.
  Result<DeletionCertificate> cert = conversations->planner().CertifyErasure(erased->journal_seq);
  Result<Json> certificate = cert ? internal::RemovalCertificateJson(conversations->planner(), copies, std::move(*cert)) : cert.error();
  copies["text_store"] = erased->text_erased;
  // The planner's tree is the serving engine's (the first listed): what it evicted counts there.
  Json& serving_tree = copies["trees"][0];
  serving_tree["tokens"] = serving_tree["tokens"].get<size_t>() + erased->tree_tokens;
  metrics.CountErasure(*tenant);
  if (!certificate)
    return ReplyError(res, *tenant, kEndpoint, {500, "server_error", "the text is erased (journal row " +
                                                std::to_string(erased->journal_seq) + ") but its certificate failed: " +
                                                std::string(certificate.error().message()), "", ""});
  Reply(res, *tenant, kEndpoint, 200, Json{{"object", "fak.erasure"},
                                           {"tenant", *tenant},
                                           {"source_digest", digest->Hex()},
                                           {"newly_sealed", erased->newly_sealed},
                                           {"journal_seq", erased->journal_seq},
                                           {"removed", std::move(copies)},
                                           {"certificate", std::move(*certificate)}});
}

void Server::Impl::HandleTokenize(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/tokenize";
  const std::string& tenant = req.principal;
  const auto bad = [&](std::string message, std::string param) {
    ReplyBadRequest(res, tenant, kEndpoint, std::move(message), std::move(param));
  };
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  std::optional<std::string> content;
  bool add_special = false;
  for (const auto& [key, v] : body->items()) {
    if (key == "content" && v.is_string()) {
      content = v.get<std::string>();
    } else if (key == "add_special" && v.is_boolean()) {
      add_special = v.get<bool>();
    } else if (key != "model" || !v.is_string()) {
      return bad("unknown or malformed field '" + key + "' (content: string; add_special: boolean; model: string)", key);
    }
  }
  if (!content) return bad("content (a string) is required", "content");
  const std::shared_ptr<const internal::Serving> serving = Current();
  const Tokenizer& tokenizer = *serving->tokenizer;
  Result<std::vector<int32_t>> tokens = tokenizer.Encode(*content);
  if (!tokens) return bad(std::string(tokens.error().message()), "content");
  if (add_special && tokenizer.add_bos() && tokenizer.bos_id() >= 0) tokens->insert(tokens->begin(), tokenizer.bos_id());
  Reply(res, tenant, kEndpoint, 200, Json{{"tokens", *tokens}});
}

namespace {

constexpr size_t kMaxEmbeddingInputs = 256;

// A float vector as OpenAI's encoding_format "base64": its little-endian float32 bytes.
std::string Base64Floats(const std::vector<float>& v) {
  static_assert(std::endian::native == std::endian::little, "float32 bytes are sent little-endian");
  std::string out(4 * ((v.size() * sizeof(float) + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(v.data()),
                                static_cast<int>(v.size() * sizeof(float)));
  out.resize(static_cast<size_t>(n));
  return out;
}

// One input of an embeddings request as token ids: a string (tokenized as a completion's prompt) or
// a list of ids. `param` names it in errors.
Result<std::vector<int32_t>> EmbeddingInput(const Json& v, const Tokenizer& tokenizer, const std::string& param) {
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty()) return InvalidArgument(param + " is empty");
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.Encode(v.get_ref<const std::string&>()));
    if (tokenizer.add_bos() && tokenizer.bos_id() >= 0) ids.insert(ids.begin(), tokenizer.bos_id());
    return ids;
  }
  if (!v.is_array()) return InvalidArgument(param + " must be a string or a list of token ids");
  std::vector<int32_t> ids;
  for (const Json& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return InvalidArgument(param + " must be a string or a list of token ids (non-negative integers)");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

}  // namespace

void Server::Impl::HandleEmbeddings(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/v1/embeddings";
  const std::string& tenant = req.principal;
  const auto bad = [&](std::string message, std::string param) {
    ReplyBadRequest(res, tenant, kEndpoint, std::move(message), std::move(param));
  };
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  const std::shared_ptr<const internal::Serving> serving = Current();
  const size_t hidden = serving->model->config().hidden_size;
  std::optional<Json> input;
  bool base64 = false, has_model = false;
  EmbedParams params{serving->model->config().pooling, /*normalize=*/true};
  for (const auto& [key, v] : body->items()) {
    if (key == "model" && v.is_string()) {
      if (v.get_ref<const std::string&>() != serving->model_id)
        return ReplyError(res, tenant, kEndpoint, {404, "invalid_request_error", "the model '" + v.get<std::string>() +
                                                   "' does not exist; this server serves '" + serving->model_id + "'",
                                                   "model", "model_not_found"});
      has_model = true;
    } else if (key == "input") {
      input = v;
    } else if (key == "encoding_format" && v.is_string() && (v == "float" || v == "base64")) {
      base64 = v == "base64";
    } else if (key == "dimensions" && v.is_number_integer()) {
      // Shortening is only meaningful for models trained for it (Matryoshka); fak serves the full vector.
      if (v.get<int64_t>() != static_cast<int64_t>(hidden))
        return bad("dimensions " + v.dump() + " is not supported: this model's embeddings have " + std::to_string(hidden) +
                   " dimensions and are not shortened", "dimensions");
    } else if (key == "pooling" && v.is_string()) {  // fak's extension: the model's own pooling when absent
      Result<Pooling> pooling = ParsePooling(v.get_ref<const std::string&>());
      if (!pooling) return bad(std::string(pooling.error().message()), "pooling");
      params.pooling = *pooling;
    } else if (key == "user" && (v.is_string() || v.is_null())) {
      // ignored: bookkeeping
    } else {
      return bad("unknown or malformed field '" + key + "' (model, input, encoding_format: float or base64, dimensions: "
                 "the model's " + std::to_string(hidden) + ", pooling: mean, last or cls, user)", key);
    }
  }
  if (!has_model) return bad("model is required", "model");
  if (!input) return bad("input is required", "input");
  // One input (a string or a list of ids) or a list of them.
  const bool many = input->is_array() && !input->empty() && ((*input)[0].is_string() || (*input)[0].is_array());
  const Json inputs = many ? *input : Json::array({*input});
  if (inputs.empty() || inputs.size() > kMaxEmbeddingInputs)
    return bad("input must hold 1 to " + std::to_string(kMaxEmbeddingInputs) + " texts", "input");
  std::vector<EngineRequest> requests(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string param = many ? "input[" + std::to_string(i) + "]" : "input";
    Result<std::vector<int32_t>> ids = EmbeddingInput(inputs[i], *serving->tokenizer, param);
    if (!ids) return bad(std::string(ids.error().message()), "input");
    if (ids->empty()) return bad(param + " is empty", "input");
    requests[i].tenant = tenant;
    requests[i].prompt = std::move(*ids);
    requests[i].embed = params;
  }
  std::shared_ptr<InFlight> work = AcceptWork();
  if (!work)
    return ReplyError(res, tenant, kEndpoint, {503, "server_shutting_down", "the server is shutting down", "", "shutting_down"});
  // Every input is a request of the engine's, batched with whatever else runs; all or none.
  std::vector<RequestId> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<RequestId> id = serving->engine->Submit(std::move(requests[i]));
    if (!id) {
      for (RequestId submitted : ids) {
        (void)serving->engine->Cancel(submitted);
        (void)serving->engine->Wait(submitted);
      }
      HttpError e = SubmitError(id.error());
      if (e.status == 400) {
        e.message = (many ? "input[" + std::to_string(i) + "]: " : "input: ") + e.message;
        e.param = "input";
      }
      if (e.status == 503) res.headers.emplace_back("Retry-After", "1");
      return ReplyError(res, tenant, kEndpoint, e);
    }
    ids.push_back(*id);
  }
  Json data = Json::array();
  size_t prompt_tokens = 0;
  std::optional<HttpError> failed;
  // A client that goes away cancels its inputs (prefill included): nobody would read them.
  std::vector<Result<EngineResult>> results =
      WaitUnlessCancelled(*serving->engine, ids, [&req] { return req.client_gone(); });
  for (size_t i = 0; i < results.size(); ++i) {
    Result<EngineResult>& result = results[i];
    if (!result || result->finish != FinishReason::kStopToken) {
      const Status s = result ? result->error : result.error();
      if (!failed && result && result->finish == FinishReason::kCancelled && req.client_gone())
        failed = HttpError{499, "invalid_request_error", "the client went away; the embedding was cancelled", "", "cancelled"};
      if (!failed)
        failed = result && result->finish != FinishReason::kError
                     ? HttpError{503, "server_shutting_down", "the embedding was cancelled (" +
                                 std::string(FinishReasonName(result->finish)) + ")", "", "cancelled"}
                     : HttpError{500, "server_error", std::string(s.message()), "", ""};
      continue;
    }
    metrics.CountGeneration(tenant, result->usage, result->timings);
    prompt_tokens += result->usage.prompt_tokens;
    data.push_back({{"object", "embedding"}, {"index", i},
                    {"embedding", base64 ? Json(Base64Floats(result->embedding)) : Json(result->embedding)}});
  }
  if (failed) return ReplyError(res, tenant, kEndpoint, *failed);
  Reply(res, tenant, kEndpoint, 200,
        Json{{"object", "list"}, {"data", std::move(data)}, {"model", serving->model_id},
             {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}},
             {"fak", {{"pooling", PoolingName(params.pooling)}, {"normalized", true},
                      {"layer", "final hidden state after the output norm"}}}});
}

void Server::Impl::HandleDetokenize(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/detokenize";
  const std::string& tenant = req.principal;
  const auto bad = [&](std::string message, std::string param) {
    ReplyBadRequest(res, tenant, kEndpoint, std::move(message), std::move(param));
  };
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  const std::shared_ptr<const internal::Serving> serving = Current();
  const size_t vocab = serving->tokenizer->vocab_size();
  std::optional<std::vector<int32_t>> tokens;
  for (const auto& [key, v] : body->items()) {
    if (key == "tokens" && v.is_array()) {
      tokens.emplace();
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0 || static_cast<uint64_t>(v[i].get<int64_t>()) >= vocab)
          return bad("tokens[" + std::to_string(i) + "] must be a token id below the vocabulary of " + std::to_string(vocab),
                     "tokens");
        tokens->push_back(static_cast<int32_t>(v[i].get<int64_t>()));
      }
    } else if (key != "model" || !v.is_string()) {
      return bad("unknown or malformed field '" + key + "' (tokens: list of ids; model: string)", key);
    }
  }
  if (!tokens) return bad("tokens (a list of ids) is required", "tokens");
  Result<std::string> content = serving->tokenizer->Decode(*tokens);
  if (!content) return bad(std::string(content.error().message()), "tokens");
  Reply(res, tenant, kEndpoint, 200, Json{{"content", *content}});
}

// How much of a request's prompt the tree would serve now, for its tenant: the body is the chat
// (it has "messages") or completions request a client would send. Read-only: no lease, no
// recency, no statistics.
void Server::Impl::HandlePrefixProbe(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/fak/v1/prefix";
  const std::string* tenant = &req.principal;
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  // The kind is the body's: a chat request has a "messages" member (not merely the word somewhere).
  const ApiEndpoint api = body->contains("messages") ? ApiEndpoint::kChatCompletions : ApiEndpoint::kCompletions;
  ApiRequest request;
  ApiRequestError parse_error;
  if (!internal::ParseApiRequestJson(api, *body, &request, &parse_error))
    return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", parse_error.message, parse_error.param, "invalid_request"});
  const std::shared_ptr<const internal::Serving> serving = Current();
  if (request.model != serving->model_id)
    return ReplyError(res, *tenant, kEndpoint, {404, "invalid_request_error", "the model '" + request.model + "' does not exist",
                                                "model", "model_not_found"});
  EngineRequest er;
  if (Status s = FillPrompt(*serving, api, request, &er); !s.ok())
    return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", std::string(s.message()), "", "invalid_value"});
  const std::vector<int32_t>* prompt = &er.prompt;
  // A lookup always leaves the last prompt token to prefill (its logits start generation).
  const size_t reusable =
      prompt->empty() ? 0 : std::min(serving->engine->tree().MatchLength(*prompt, *tenant), prompt->size() - 1);
  Reply(res, *tenant, kEndpoint, 200, Json{{"tenant", *tenant}, {"prompt_tokens", prompt->size()}, {"cached_tokens", reusable}});
}

// The gate's verdict, axis by axis, for the caller's resident prefix of a request, judged for a
// claim: by default the caller's own (tenant and this server's regime); `claim` in the body may
// name another tenant or another regime axis — "would my context serve bob?", "would it serve other
// weights?". Only the caller's own namespace is walked, so nothing about another tenant's prefixes
// is revealed. Read-only (RadixTree::ProbeGate): no lease, no recency, no gate statistics.
void Server::Impl::HandleGateProbe(const HttpRequest& req, HttpResponse& res) {
  constexpr std::string_view kEndpoint = "/fak/v1/gate";
  const std::string* tenant = &req.principal;
  std::optional<Json> body = ReadJsonBody(req, res, kEndpoint);
  if (!body) return;
  const std::shared_ptr<const internal::Serving> serving = Current();
  ResidentClaim claim = serving->engine->tree().ClaimFor(*tenant);
  if (auto it = body->find("claim"); it != body->end()) {
    HttpError error;
    if (!internal::ApplyClaim(*it, &claim, &error)) return ReplyError(res, *tenant, kEndpoint, error);
    body->erase(it);
  }
  const ApiEndpoint api = body->contains("messages") ? ApiEndpoint::kChatCompletions : ApiEndpoint::kCompletions;
  ApiRequest request;
  ApiRequestError parse_error;
  if (!internal::ParseApiRequestJson(api, *body, &request, &parse_error))
    return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", parse_error.message, parse_error.param, "invalid_request"});
  if (request.model != serving->model_id)
    return ReplyError(res, *tenant, kEndpoint, {404, "invalid_request_error", "the model '" + request.model + "' does not exist",
                                                "model", "model_not_found"});
  EngineRequest er;
  if (Status s = FillPrompt(*serving, api, request, &er); !s.ok())
    return ReplyError(res, *tenant, kEndpoint, {400, "invalid_request_error", std::string(s.message()), "", "invalid_value"});
  const std::vector<int32_t>* prompt = &er.prompt;
  const GateProbe probe = serving->engine->tree().ProbeGate(claim, *prompt, *tenant);
  metrics.CountProbe(probe.verdict);
  Json reply = internal::VerdictJson(probe.verdict);
  reply["object"] = "fak.gate.verdict";
  reply["tenant"] = *tenant;
  reply["claim"] = internal::ClaimJson(claim);
  reply["prompt_tokens"] = prompt->size();
  reply["resident_tokens"] = probe.resident_tokens;
  reply["admitted_tokens"] = probe.admitted_tokens;
  Reply(res, *tenant, kEndpoint, 200, reply);
}

void Server::Impl::WithConversations(const HttpRequest& req, HttpResponse& res,
                                     const std::function<internal::HttpReply(const std::string& tenant)>& handle) {
  const std::string endpoint(EndpointLabel(req.path));
  const std::string& tenant = req.principal;
  if (!conversations)
    return ReplyError(res, tenant, endpoint, {404, "invalid_request_error", "this server keeps no conversations (it was "
                                              "started without a planner)", "", "not_enabled"});
  // A drain waits for the turn and its reply.
  res.hold = AcceptWork();
  if (!res.hold)
    return ReplyError(res, tenant, endpoint, {503, "server_shutting_down", "the server is shutting down", "", "shutting_down"});
  const internal::HttpReply reply = handle(tenant);
  Reply(res, tenant, endpoint, reply.status, reply.body);
}

std::optional<ApiRequest> Server::Impl::ParseTurn(const HttpRequest& req, internal::HttpReply* error) const {
  ApiRequest request;
  ApiRequestError parse_error;
  if (!internal::ParseApiRequest(ApiEndpoint::kChatCompletions, req.body, &request, &parse_error)) {
    *error = internal::HttpReply::BadRequest(parse_error.message, parse_error.param, "invalid_request");
    return std::nullopt;
  }
  if (request.grammar) {  // the planner's turns take no constraint: refused, never silently ignored
    *error = internal::HttpReply::BadRequest("response_format and grammar are served on /v1/chat/completions, not on "
                                             "conversation turns", "response_format", "invalid_request");
    return std::nullopt;
  }
  const std::string serving_id = Current()->model_id;
  if (request.model != serving_id) {
    *error = internal::HttpReply::Error({404, "invalid_request_error", "the model '" + request.model + "' does not exist; "
                                         "this server serves '" + serving_id + "'", "model", "model_not_found"});
    return std::nullopt;
  }
  return request;
}

void Server::Impl::ConversationRoutes(std::vector<internal::HttpRoute>& routes) {
  using internal::HttpReply;
  const auto route = [&](const char* method, const char* pattern,
                         std::function<HttpReply(const HttpRequest&, const std::string& tenant)> handle) {
    routes.push_back({method, pattern, [this, handle](const HttpRequest& req, HttpResponse& res) {
                        WithConversations(req, res, [&](const std::string& tenant) { return handle(req, tenant); });
                      }});
  };
  route("POST", "/fak/v1/conversations", [this](const HttpRequest& req, const std::string& tenant) {
    HttpReply error;
    std::optional<ApiRequest> turn = ParseTurn(req, &error);
    // The turn is cancelled if its client leaves meanwhile (its reply would be seen by nobody).
    return turn ? conversations->Create(tenant, *turn, [&req] { return req.client_gone(); }) : error;
  });
  route("POST", "/fak/v1/conversations/{}/messages", [this](const HttpRequest& req, const std::string& tenant) {
    HttpReply error;
    std::optional<ApiRequest> turn = ParseTurn(req, &error);
    return turn ? conversations->Continue(tenant, req.params[0], *turn, [&req] { return req.client_gone(); }) : error;
  });
  route("POST", "/fak/v1/conversations/{}/evict", [this](const HttpRequest& req, const std::string& tenant) {
    return conversations->Evict(tenant, req.params[0], req.body);
  });
  route("GET", "/fak/v1/conversations/{}", [this](const HttpRequest& req, const std::string& tenant) {
    return conversations->Get(tenant, req.params[0]);
  });
  route("DELETE", "/fak/v1/conversations/{}", [this](const HttpRequest& req, const std::string& tenant) {
    return conversations->Delete(tenant, req.params[0]);
  });
  route("POST", "/fak/v1/certificates/verify",
        [this](const HttpRequest& req, const std::string&) { return conversations->Verify(req.body); });
}

// Rollouts are an operator's action: only admin tenants (ServerOptions::admin_tenants) may start
// or watch one.
void Server::Impl::RolloutRoutes(std::vector<internal::HttpRoute>& routes) {
  const auto with_admin = [this](const HttpRequest& req, HttpResponse& res,
                                 const std::function<internal::HttpReply()>& handle) {
    constexpr std::string_view kEndpoint = "/fak/v1/rollout";
    const std::string& tenant = req.principal;
    if (!rollouts)
      return ReplyError(res, tenant, kEndpoint, {404, "invalid_request_error", "this server does not roll out models (it "
                                                 "was started without a planner or a model loader)", "", "not_enabled"});
    if (!IsAdmin(tenant))
      return ReplyError(res, tenant, kEndpoint, {403, "invalid_request_error", "tenant '" + tenant + "' may not roll out "
                                                 "models (see --admin-tenant)", "", "forbidden"});
    res.hold = AcceptWork();
    if (!res.hold)
      return ReplyError(res, tenant, kEndpoint, {503, "server_shutting_down", "the server is shutting down", "", "shutting_down"});
    internal::HttpReply reply = handle();
    if (reply.status == 200) reply.body["serving"] = Current()->model_id;
    Reply(res, tenant, kEndpoint, reply.status, reply.body);
  };
  routes.push_back({"POST", "/fak/v1/rollout", [this, with_admin](const HttpRequest& req, HttpResponse& res) {
                      with_admin(req, res, [&] { return rollouts->Start(req.body); });
                    }});
  routes.push_back({"GET", "/fak/v1/rollout", [this, with_admin](const HttpRequest& req, HttpResponse& res) {
                      with_admin(req, res, [&] { return rollouts->Progress(); });
                    }});
}

std::string Server::Impl::RenderMetrics() const {
  internal::EngineSnapshot s;
  const std::shared_ptr<const internal::Serving> serving = Current();
  s.engine = serving->engine->Stats();
  s.tree = serving->engine->tree().Stats();
  s.gate = serving->engine->tree().GateStatistics();
  s.serving_model = serving->model_id;
  s.kv_budget_bytes = options.kv_budget_bytes;
  s.http = front->Stats();
  if (conversations) {
    s.conversations = conversations->Stats();
    s.conversation_gate = conversations->planner().tree().GateStatistics();
    s.conversation_tier = conversations->planner().Stats();
  }
  if (rollouts) s.rollout = rollouts->Snapshot();
  return metrics.Render(s);
}

std::vector<internal::HttpRoute> Server::Impl::Routes() {
  std::vector<internal::HttpRoute> routes;
  const auto add = [&](const char* method, const char* pattern, internal::HttpHandler handler, bool open = false) {
    routes.push_back({method, pattern, std::move(handler), open});
  };
  add("POST", "/v1/chat/completions",
      [this](const HttpRequest& req, HttpResponse& res) { HandleGeneration(ApiEndpoint::kChatCompletions, req, res); });
  add("POST", "/v1/completions",
      [this](const HttpRequest& req, HttpResponse& res) { HandleGeneration(ApiEndpoint::kCompletions, req, res); });
  add("POST", "/v1/embeddings", [this](const HttpRequest& req, HttpResponse& res) { HandleEmbeddings(req, res); });
  add("POST", "/tokenize", [this](const HttpRequest& req, HttpResponse& res) { HandleTokenize(req, res); });
  add("POST", "/detokenize", [this](const HttpRequest& req, HttpResponse& res) { HandleDetokenize(req, res); });
  add("POST", "/fak/v1/prefix", [this](const HttpRequest& req, HttpResponse& res) { HandlePrefixProbe(req, res); });
  add("POST", "/fak/v1/gate", [this](const HttpRequest& req, HttpResponse& res) { HandleGateProbe(req, res); });
  add("POST", "/fak/v1/erase", [this](const HttpRequest& req, HttpResponse& res) { HandleErase(req, res); });
  add("GET", "/fak/v1/tree", [this](const HttpRequest& req, HttpResponse& res) { HandleTree(req, res); });
  ConversationRoutes(routes);
  RolloutRoutes(routes);
  const auto model_json = [](const std::string& id) {
    return Json{{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "fak"}};
  };
  add("GET", "/v1/models", [this, model_json](const HttpRequest& req, HttpResponse& res) {
    Reply(res, req.principal, "/v1/models", 200, Json{{"object", "list"}, {"data", Json::array({model_json(Current()->model_id)})}});
  });
  add("GET", "/v1/models/{*}", [this, model_json](const HttpRequest& req, HttpResponse& res) {
    const std::string id = Current()->model_id;
    if (req.params[0] != id)
      return ReplyError(res, req.principal, "/v1/models",
                        {404, "invalid_request_error", "the model '" + req.params[0] + "' does not exist", "model",
                         "model_not_found"});
    Reply(res, req.principal, "/v1/models", 200, model_json(id));
  });
  add("GET", "/health",
      [this](const HttpRequest&, HttpResponse& res) { Reply(res, kUnauthenticated, "/health", 200, Json{{"status", "ok"}}); },
      /*open=*/true);
  add("GET", "/metrics",
      [this](const HttpRequest&, HttpResponse& res) {
        metrics.CountRequest(kUnauthenticated, "/metrics", 200);
        res.content_type = "text/plain; version=0.0.4; charset=utf-8";
        res.body = RenderMetrics();
      },
      /*open=*/true);
  return routes;
}

Result<std::unique_ptr<Server>> Server::Create(Engine& engine, const Model& model, const Tokenizer& tokenizer,
                                               ServerOptions options) {
  if (options.max_body_bytes == 0) return InvalidArgument("ServerOptions: max_body_bytes must be at least 1");
  if (options.max_connections == 0 || options.max_connections_per_peer == 0)
    return InvalidArgument("ServerOptions: max_connections and max_connections_per_peer must be at least 1");
  if (options.header_timeout_s == 0 || options.body_timeout_s == 0 || options.idle_timeout_s == 0)
    return InvalidArgument("ServerOptions: header_timeout_s, body_timeout_s and idle_timeout_s must be at least 1");
  if (options.default_max_tokens == 0) return InvalidArgument("ServerOptions: default_max_tokens must be at least 1");
  if (options.model_id.empty()) return InvalidArgument("ServerOptions: model_id must not be empty");
  if (engine.chat_template() == nullptr)
    return InvalidArgument("Server: the engine needs a chat template (EngineOptions::chat_template): chat requests go to it");
  auto impl = std::make_unique<Impl>(std::move(options));
  auto serving = std::make_shared<internal::Serving>();
  serving->engine = &engine;
  serving->model = &model;
  serving->tokenizer = &tokenizer;
  serving->model_id = impl->options.model_id;
  serving->label = impl->options.model_id;
  serving->completion_stop_tokens = EndOfGenerationTokens(tokenizer, nullptr);
  impl->serving = std::move(serving);
  impl->host_engine = &engine;
  impl->host_tree = &engine.tree();
  for (const auto& [key, tenant] : impl->options.api_keys) {
    if (!IsValidTenant(tenant)) return InvalidArgument("ServerOptions: invalid tenant name '" + tenant + "'");
    impl->tenant_by_key_digest.emplace(Digest::Of(key).Hex(), tenant);
  }
  if (impl->options.max_conversations == 0) return InvalidArgument("ServerOptions: max_conversations must be at least 1");
  if (impl->options.max_conversations_per_tenant == 0)
    return InvalidArgument("ServerOptions: max_conversations_per_tenant must be at least 1");
  Impl* self = impl.get();
  if (Planner* planner = impl->options.planner) {
    impl->conversations = std::make_unique<internal::Conversations>(
        *planner, model, impl->options.default_max_tokens, impl->options.max_conversations,
        impl->options.max_conversations_per_tenant,
        [self](const Digest& source, std::optional<std::string_view> tenant) { return self->EraseEverywhere(source, tenant); });
    if (impl->options.load_model) {
      impl->rollouts = std::make_unique<internal::Rollouts>(
          *planner, model, tokenizer, *impl->conversations, impl->options.load_model,
          [self](std::shared_ptr<const LoadedModel> weights, std::shared_ptr<RadixTree> tree, const std::string& id) {
            return self->MakeServing(std::move(weights), std::move(tree), id);
          },
          [self](std::shared_ptr<const internal::Serving> next) { self->Install(std::move(next)); });
    }
  }
  for (const std::string& tenant : impl->options.admin_tenants)
    if (!IsValidTenant(tenant)) return InvalidArgument("ServerOptions: invalid admin tenant name '" + tenant + "'");
  if (FleetLink* fleet = impl->options.fleet) {
    fleet->PublishTree([self] { return self->TreePrefixes(std::nullopt); });
    // Another worker's erasure: this worker's copies go as the origin's did (its trees and tiers).
    FAK_RETURN_IF_ERROR(fleet->Listen([self](const FleetErasure& e) {
      const Json copies = self->EraseCopies(e.source, e.tenant ? std::optional<std::string_view>(*e.tenant) : std::nullopt);
      size_t tokens = 0;
      for (const Json& tree : copies["trees"]) tokens += tree["tokens"].get<size_t>();
      self->metrics.CountFleetApplied();
      return std::to_string(tokens) + " tokens, " + std::to_string(copies["kv_tier_entries"].get<size_t>()) + " tier entries";
    }));
  }
  const ServerOptions& o = impl->options;
  internal::HttpFrontOptions front;
  front.limits.max_body_bytes = o.max_body_bytes;
  front.limits.header_timeout = std::chrono::seconds(o.header_timeout_s);
  front.limits.body_timeout = std::chrono::seconds(o.body_timeout_s);
  front.limits.idle_timeout = std::chrono::seconds(o.idle_timeout_s);
  front.limits.max_connections = o.max_connections;
  front.limits.max_connections_per_peer = o.max_connections_per_peer;
  front.routes = impl->Routes();
  front.cors_origins = o.cors_origins;
  front.admit = [self](HttpRequest& head, HttpResponse& refusal) { return self->Authenticate(head, refusal); };
  // What the front answers itself (no route 404, body too large 413, a handler's exception 500)
  // gets OpenAI's error shape.
  front.error = [self](const HttpRequest& req, int status, const std::string& message, HttpResponse& res) {
    const HttpError e{status, status >= 500 ? "server_error" : "invalid_request_error", message, "",
                      status == 404 ? "not_found" : status == 413 ? "request_too_large" : ""};
    self->ReplyError(res, req.principal.empty() ? std::string_view(kUnauthenticated) : req.principal,
                     EndpointLabel(req.path), e);
  };
  impl->front = std::make_unique<internal::HttpFront>(std::move(front));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

// After the drain deadline (or Abort) the engines are cancelled; their clients get the
// cancellation as their response's end if they read it within this, then every connection is cut.
constexpr auto kCutGrace = std::chrono::seconds(1);

bool Server::Impl::Stop() {
  std::unique_lock lock(inflight_mu);
  if (stop_state != StopState::kServing) {
    inflight_cv.wait(lock, [&] { return stop_state == StopState::kStopped; });
    return drained;
  }
  stop_state = StopState::kStopping;
  draining = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.drain_timeout_s);
  drained = inflight_cv.wait_until(lock, deadline, [&] { return busy == 0 || aborted; }) && busy == 0;
  if (!drained) {
    lock.unlock();
    // Conversation turns too: they run on these engines, and their connections' threads must end
    // before the front can stop.
    const std::shared_ptr<const internal::Serving> current = Current();
    current->engine->Shutdown(ShutdownMode::kCancel);
    if (host_engine != current->engine) host_engine->Shutdown(ShutdownMode::kCancel);
    lock.lock();
    inflight_cv.wait_for(lock, kCutGrace, [&] { return busy == 0; });
  }
  lock.unlock();
  front->Stop();  // closes every connection: idle, trickling or still writing
  lock.lock();
  stop_state = StopState::kStopped;
  inflight_cv.notify_all();
  return drained;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;

Result<uint16_t> Server::Bind() { return impl_->front->Listen(impl_->options.host, impl_->options.port); }

Status Server::Serve() {
  std::unique_lock lock(impl_->inflight_mu);
  if (impl_->stop_state != Impl::StopState::kServing) return Status::Ok();
  FAK_RETURN_IF_ERROR(impl_->front->Start());
  impl_->inflight_cv.wait(lock, [&] { return impl_->stop_state == Impl::StopState::kStopped; });
  return Status::Ok();
}

bool Server::Stop() { return impl_->Stop(); }

void Server::Abort() { impl_->Abort(); }

}  // namespace fak
