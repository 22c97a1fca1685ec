// The body of an OpenAI-style completion request, parsed and checked before anything is tokenized.
//
// Policy (docs/server.md, "Parameters"): every field OpenAI defines is implemented, accepted and
// ignored (it cannot change the reply: `user`, `metadata`, `store`, `service_tier`), accepted only
// at the value that means "off" (e.g. echo false), or refused by name; the common extensions of
// OpenAI-compatible servers (top_k, min_p, repetition_penalty) are implemented; any other field is
// refused — a misspelt `max_token` would otherwise silently generate the default length. The parser is total: any byte string gives a
// request or an error naming the parameter, never an exception (fuzz/server_request_fuzz.cc).
#ifndef FAK_SRC_SERVER_API_REQUEST_H_
#define FAK_SRC_SERVER_API_REQUEST_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/grammar/grammar.h"
#include "fak/model/sampler.h"
#include "fak/tokenizer/chat_template.h"
#include "src/core/json.h"
#include "src/grammar/tool_calls.h"

namespace fak::internal {

enum class ApiEndpoint { kChatCompletions, kCompletions };

struct ApiRequest {
  std::string model;
  std::vector<ChatMessage> messages;  // chat completions
  std::string prompt;                 // completions
  std::optional<size_t> max_tokens;   // absent: the server's default, capped by the context
  SamplingParams sampling;             // its seed is `seed`'s, or the server's draw
  std::optional<uint64_t> seed;        // absent: the server draws one (and reports it)
  size_t n = 1;                        // choices, each its own engine request over the same prompt
  bool logprobs = false;               // chat: logprobs; completions: logprobs given (an integer)
  size_t top_logprobs = 0;             // chat: top_logprobs; completions: logprobs' value
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk carries usage
  // What the reply must be a sentence of: response_format json_object or json_schema (converted by
  // JsonSchemaToGbnf), or the `grammar` extra field (GBNF, as llama-server takes it). Parsed here,
  // so a bad schema or grammar is a 400 naming its parameter before anything is tokenized.
  std::optional<Grammar> grammar;
  // tools, tool_choice, parallel_tool_calls; each tool's parameter schema is checked here (it
  // converts to a grammar), the forcing grammar itself is made by the server, which knows the
  // template's call format (docs/server.md "Tool calls").
  ToolUse tools;
};

// A refused request: why, and the request parameter at fault ("" when the body as a whole is).
constexpr size_t kMaxChoices = 16;        // n
constexpr size_t kMaxLogitBiasEntries = 1024;
constexpr size_t kMaxTools = 128;         // OpenAI's limit
constexpr size_t kMaxToolCallsPerMessage = 128;

struct ApiRequestError {
  std::string message;
  std::string param;
};

// Parses `body` for `endpoint`. On failure returns false and fills `error`.
bool ParseApiRequest(ApiEndpoint endpoint, std::string_view body, ApiRequest* request, ApiRequestError* error);
// The same for a body already parsed (through ParseJson, so its depth is bounded).
bool ParseApiRequestJson(ApiEndpoint endpoint, const Json& doc, ApiRequest* request, ApiRequestError* error);

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_API_REQUEST_H_
