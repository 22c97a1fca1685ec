// The C API's engine: submit with a token callback, cancel, wait, and the result's accessors.
#include <mutex>
#include <random>
#include <unordered_map>

#include "fak/grammar/grammar.h"
#include "fak/grammar/grammar_constraint.h"
#include "fak/grammar/json_schema.h"
#include "fak/grammar/tool_calls.h"
#include "src/c/c_api_internal.h"
#include "src/core/json.h"

struct fak_engine {
  std::shared_ptr<const fak::capi::LoadedModel> model;  // these two first: they outlive the engine
  std::shared_ptr<fak::capi::RadixHolder> tree;         // a shared tree, or null
  std::unique_ptr<fak::Engine> engine;
  // The readers of the replies of requests that offered tools, by id, until they are waited for.
  std::mutex tools_mu;
  std::unordered_map<uint64_t, fak::ToolCallReader> tool_readers;  // GUARDED_BY(tools_mu)
};

struct fak_result {
  fak::EngineResult result;
  std::string error_message;
  std::optional<std::string> tool_calls_json;  // set when the request offered tools
};

namespace fak::capi {
namespace {

Result<EngineRequest> ReadRequest(const fak_request& r, const Model& model) {
  EngineRequest q;
  FAK_ASSIGN_OR_RETURN(q.tenant, ReadTenant(r.tenant));
  if (r.prompt == nullptr && r.n_prompt > 0) return NullArgument("request.prompt");
  q.prompt.assign(r.prompt, r.prompt + (r.prompt == nullptr ? 0 : r.n_prompt));
  FAK_ASSIGN_OR_RETURN(q.messages, ReadMessages(r.messages, r.n_messages));
  if (r.tools_json == nullptr && r.tools_json_len > 0) return NullArgument("request.tools_json");
  if (r.tools_json != nullptr) {
    q.tools.tools_json.assign(r.tools_json, r.tools_json_len);
    const std::string_view choice = r.tool_choice == nullptr ? "auto" : r.tool_choice;
    q.tools.choice = choice == "auto"       ? ToolChoice::kAuto
                     : choice == "none"     ? ToolChoice::kNone
                     : choice == "required" ? ToolChoice::kRequired
                                            : ToolChoice::kNamed;
    if (q.tools.choice == ToolChoice::kNamed) q.tools.named = choice;
    q.tools.parallel = r.parallel_tool_calls != 0;
    if (q.messages.empty()) return InvalidArgument("request.tools_json: tools are offered only to a request given as messages");
  } else if (r.tool_choice != nullptr && std::string_view(r.tool_choice) != "auto" && std::string_view(r.tool_choice) != "none") {
    return InvalidArgument("request.tool_choice '" + std::string(r.tool_choice) + "' needs request.tools_json");
  }
  if (q.prompt.empty() == q.messages.empty())
    return InvalidArgument("a request carries either prompt token ids or messages (exactly one of them)");
  FAK_ASSIGN_OR_RETURN(q.sampling, ReadSampling(r.sampling));
  q.max_tokens = r.max_tokens;
  q.logprobs = r.logprobs != 0;
  q.top_logprobs = r.top_logprobs;
  q.priority = r.background != 0 ? RequestPriority::kBackground : RequestPriority::kInteractive;
  if (r.stop_tokens == nullptr && r.n_stop_tokens > 0) return NullArgument("request.stop_tokens");
  if (r.n_stop_tokens > 0) q.stop_tokens.assign(r.stop_tokens, r.stop_tokens + r.n_stop_tokens);
  if (r.stop_strings == nullptr && r.n_stop_strings > 0) return NullArgument("request.stop_strings");
  for (size_t i = 0; i < r.n_stop_strings; ++i) {
    if (r.stop_strings[i] == nullptr) return InvalidArgument("request.stop_strings[" + std::to_string(i) + "] is NULL");
    q.stop_strings.emplace_back(r.stop_strings[i]);
  }
  if (r.on_token != nullptr) {
    const fak_token_callback cb = r.on_token;
    void* const user_data = r.user_data;
    q.on_token = [cb, user_data](const TokenEvent& e) {
      return cb(user_data, e.id, e.token, e.text.data(), e.text.size()) != 0;
    };
  }
  if (r.embed != 0) {
    EmbedParams params{model.config().pooling, r.embed_normalize != 0};
    if (r.embed_pooling != nullptr) {
      Result<Pooling> pooling = ParsePooling(r.embed_pooling);
      if (!pooling) return pooling.error().WithContext("request.embed_pooling");
      params.pooling = *pooling;
    }
    q.embed = params;
  }
  return q;
}

// The request's grammar or JSON schema as a constraint over the engine's vocabulary; null for none.
Result<std::shared_ptr<const TokenConstraint>> ReadConstraint(const fak_request& r, fak_engine* engine) {
  if (r.grammar == nullptr && r.grammar_len > 0) return NullArgument("request.grammar");
  if (r.json_schema == nullptr && r.json_schema_len > 0) return NullArgument("request.json_schema");
  if (r.grammar == nullptr && r.json_schema == nullptr) return std::shared_ptr<const TokenConstraint>();
  if (r.grammar != nullptr && r.json_schema != nullptr)
    return InvalidArgument("request.grammar and request.json_schema are both set: give at most one constraint");
  const char* field = r.json_schema != nullptr ? "request.json_schema" : "request.grammar";
  std::string gbnf(r.grammar != nullptr ? std::string_view(r.grammar, r.grammar_len) : std::string_view());
  if (r.json_schema != nullptr) {
    Result<std::string> converted = JsonSchemaToGbnf(std::string_view(r.json_schema, r.json_schema_len));
    if (!converted) return converted.error().WithContext(field);
    gbnf = std::move(*converted);
  }
  Result<Grammar> grammar = Grammar::Parse(gbnf);
  if (!grammar) return grammar.error().WithContext(field);
  FAK_ASSIGN_OR_RETURN(std::shared_ptr<const TokenVocabulary> vocabulary, engine->engine->Vocabulary());
  return std::shared_ptr<const TokenConstraint>(std::make_shared<GrammarConstraint>(std::move(*grammar), std::move(vocabulary)));
}

// OpenAI's message fields of a reply read for calls: {"content", "tool_calls"}.
std::string ToolCallsJson(const ToolCallReader& reader) {
  internal::Json calls = internal::Json::array();
  for (const ToolCall& call : reader.calls())
    calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  std::optional<std::string> content = reader.content();
  return internal::DumpJson({{"content", content ? internal::Json(*content) : internal::Json(nullptr)}, {"tool_calls", calls}});
}

fak_finish_reason FinishOf(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return FAK_FINISH_STOP_TOKEN;
    case FinishReason::kStopString: return FAK_FINISH_STOP_STRING;
    case FinishReason::kLength: return FAK_FINISH_LENGTH;
    case FinishReason::kCancelled: return FAK_FINISH_CANCELLED;
    case FinishReason::kDeadline: return FAK_FINISH_DEADLINE;
    case FinishReason::kError: return FAK_FINISH_ERROR;
  }
  return FAK_FINISH_ERROR;
}

}  // namespace
}  // namespace fak::capi

using fak::Status;
using fak::capi::Guard;

extern "C" {

void fak_engine_options_init(fak_engine_options* options) {
  if (options == nullptr) return;
  const fak::EngineOptions d;
  *options = fak_engine_options{};
  options->struct_size = sizeof(fak_engine_options);
  options->max_running = d.max_running;
  options->max_queued = d.max_queued;
  options->kv_budget_bytes = d.kv_budget_bytes;
  options->start_thread = d.start_thread ? 1 : 0;
}

fak_status fak_engine_new(const fak_model* model, const fak_engine_options* options, fak_engine** out) {
  return Guard("fak_engine_new", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(out);
    fak_engine_options o;
    fak_engine_options_init(&o);
    FAK_RETURN_IF_ERROR(fak::capi::ReadVersioned(options, &o, "options"));
    const fak::capi::LoadedModel& m = *model->loaded;
    fak::EngineOptions e;
    e.chat_template = m.chat_template;
    e.max_running = o.max_running;
    e.max_queued = o.max_queued;
    e.kv_budget_bytes = o.kv_budget_bytes;
    e.start_thread = o.start_thread != 0;
    // Every running request's decode must fit one step's batch.
    if (e.step_token_budget < e.max_running) e.step_token_budget = e.max_running;
    std::shared_ptr<fak::capi::RadixHolder> tree;
    if (o.tree != nullptr) {
      tree = o.tree->holder;
      if (tree->model != model->loaded) return fak::InvalidArgument("options.tree belongs to another model than the engine");
      e.tree = tree->tree.get();
    }
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<fak::Engine> engine, fak::Engine::Create(*m.model, *m.tokenizer, std::move(e)));
    *out = new fak_engine{model->loaded, std::move(tree), std::move(engine), {}, {}};
    return Status();
  });
}

void fak_engine_free(fak_engine* engine) { delete engine; }

void fak_request_init(fak_request* request) {
  if (request == nullptr) return;
  *request = fak_request{};
  request->struct_size = sizeof(fak_request);
  request->max_tokens = fak::EngineRequest().max_tokens;
  request->parallel_tool_calls = 1;
  request->embed_normalize = 1;
}

fak_status fak_engine_submit(fak_engine* engine, const fak_request* request, uint64_t* id) {
  return Guard("fak_engine_submit", [&]() -> Status {
    FAK_C_REQUIRE(engine);
    FAK_C_REQUIRE(request);
    FAK_C_REQUIRE(id);
    fak_request r;
    fak_request_init(&r);
    FAK_RETURN_IF_ERROR(fak::capi::ReadVersioned(request, &r, "request"));
    FAK_ASSIGN_OR_RETURN(fak::EngineRequest q, fak::capi::ReadRequest(r, *engine->model->model));
    FAK_ASSIGN_OR_RETURN(q.constraint, fak::capi::ReadConstraint(r, engine));
    if (!q.messages.empty() && engine->model->chat_template == nullptr)
      return fak::FailedPrecondition("messages need a chat template and the model has none: " +
                                     std::string(engine->model->template_status.message()));
    std::optional<fak::ToolCallReader> reader;
    if (q.tools.active()) {
      fak::Result<fak::ToolCallReader> created = fak::ToolCallReader::Create(*engine->model->chat_template, q.tools);
      if (!created) return created.error().WithContext("request.tools_json");
      reader = std::move(*created);
    }
    FAK_ASSIGN_OR_RETURN(*id, engine->engine->Submit(std::move(q)));
    // Before the caller learns the id, so before anyone can wait for it.
    if (reader) {
      std::lock_guard lock(engine->tools_mu);
      engine->tool_readers.emplace(*id, std::move(*reader));
    }
    return Status();
  });
}

fak_status fak_engine_cancel(fak_engine* engine, uint64_t id) {
  return Guard("fak_engine_cancel", [&]() -> Status {
    FAK_C_REQUIRE(engine);
    return engine->engine->Cancel(id);
  });
}

fak_status fak_engine_wait(fak_engine* engine, uint64_t id, fak_result** out) {
  return Guard("fak_engine_wait", [&]() -> Status {
    FAK_C_REQUIRE(engine);
    FAK_C_REQUIRE(out);
    FAK_ASSIGN_OR_RETURN(fak::EngineResult result, engine->engine->Wait(id));
    std::string message(result.error.message());
    std::optional<std::string> tool_calls;
    {
      std::lock_guard lock(engine->tools_mu);
      if (auto it = engine->tool_readers.find(id); it != engine->tool_readers.end()) {
        it->second.Finish(result.text, std::random_device{}() * 0x100000001ull);
        tool_calls = fak::capi::ToolCallsJson(it->second);
        engine->tool_readers.erase(it);
      }
    }
    *out = new fak_result{std::move(result), std::move(message), std::move(tool_calls)};
    return Status();
  });
}

void fak_result_free(fak_result* result) { delete result; }

fak_status fak_result_tool_calls(const fak_result* result, const char** json, size_t* json_len) {
  return Guard("fak_result_tool_calls", [&]() -> Status {
    FAK_C_REQUIRE(result);
    FAK_C_REQUIRE(json);
    FAK_C_REQUIRE(json_len);
    if (!result->tool_calls_json) return fak::FailedPrecondition("the request offered no tools (fak_request.tools_json)");
    *json = result->tool_calls_json->c_str();
    *json_len = result->tool_calls_json->size();
    return Status();
  });
}

fak_status fak_result_info_get(const fak_result* result, fak_result_info* info) {
  return Guard("fak_result_info_get", [&]() -> Status {
    FAK_C_REQUIRE(result);
    FAK_C_REQUIRE(info);
    const fak::EngineResult& r = result->result;
    fak_result_info full{};
    full.struct_size = sizeof(full);
    full.finish = fak::capi::FinishOf(r.finish);
    full.tokens = r.tokens.data();
    full.n_tokens = r.tokens.size();
    full.text = r.text.c_str();
    full.text_len = r.text.size();
    full.prompt_tokens = r.usage.prompt_tokens;
    full.cached_tokens = r.usage.cached_tokens;
    full.error = static_cast<fak_status>(static_cast<int>(r.error.code()));
    full.error_message = result->error_message.c_str();
    return fak::capi::WriteVersioned(full, info, "info");
  });
}

fak_status fak_result_embedding(const fak_result* result, const float** data, size_t* n) {
  return Guard("fak_result_embedding", [&]() -> Status {
    FAK_C_REQUIRE(result);
    FAK_C_REQUIRE(data);
    FAK_C_REQUIRE(n);
    const fak::EngineResult& r = result->result;
    if (r.embedding.empty())
      return fak::FailedPrecondition("the result holds no embedding (fak_request.embed, finished with FAK_FINISH_STOP_TOKEN)");
    *data = r.embedding.data();
    *n = r.embedding.size();
    return Status();
  });
}

fak_status fak_result_logprobs(const fak_result* result, size_t index, fak_token_logprob* out, size_t capacity,
                               size_t* n_out) {
  return Guard("fak_result_logprobs", [&]() -> Status {
    FAK_C_REQUIRE(result);
    FAK_C_REQUIRE(out);
    FAK_C_REQUIRE(n_out);
    const fak::EngineResult& r = result->result;
    if (r.logprobs.empty() && !r.tokens.empty())
      return fak::FailedPrecondition("the request did not ask for logprobs (fak_request.logprobs)");
    if (index >= r.logprobs.size())
      return fak::InvalidArgument("index " + std::to_string(index) + " is past the " + std::to_string(r.logprobs.size()) +
                                  " generated tokens");
    return fak::capi::WriteLogprobs(r.logprobs[index], out, capacity, n_out);
  });
}

}  // extern "C"
