#include "src/server/api_request.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <optional>
#include <span>
#include <string>

#include "fak/grammar/json_schema.h"
#include "src/core/json.h"

namespace fak::internal {
namespace {

constexpr size_t kMaxStopStrings = 4;  // OpenAI's limit

// Fills `error` and returns false, so a check reads `return Refuse(...)`.
bool Refuse(ApiRequestError* error, std::string param, std::string message) {
  error->param = std::move(param);
  error->message = std::move(message);
  return false;
}

bool ParseNumber(const Json& v, std::string_view name, double lo, double hi, double* out, ApiRequestError* error) {
  if (!v.is_number()) return Refuse(error, std::string(name), std::string(name) + " must be a number, not " + std::string(JsonTypeName(v)));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    return Refuse(error, std::string(name), std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = x;
  return true;
}

// A sampling value in [lo, hi], checked as the float the sampler uses: 5e-324 is not a top_p of 0
// (refused here, not later as a float), nor 1e-50 a temperature of 0 (greedy).
bool ParseSamplingFloat(const Json& v, std::string_view name, double lo, double hi, float* out, ApiRequestError* error) {
  double x = 0;
  if (!ParseNumber(v, name, lo, hi, &x, error)) return false;
  Result<float> f = SamplingFloat(x, name);
  if (!f) return Refuse(error, std::string(name), std::string(f.error().message()));
  *out = *f;
  return true;
}

bool ParseCount(const Json& v, std::string_view name, size_t* out, ApiRequestError* error) {
  if (!v.is_number_integer())
    return Refuse(error, std::string(name), std::string(name) + " must be an integer, not " + std::string(JsonTypeName(v)));
  if (v.is_number_unsigned() ? v.get<uint64_t>() == 0 : v.get<int64_t>() < 1)
    return Refuse(error, std::string(name), std::string(name) + " must be at least 1");
  *out = static_cast<size_t>(v.get<uint64_t>());
  return true;
}

// An integer in [lo, hi].
bool ParseInteger(const Json& v, std::string_view name, int64_t lo, int64_t hi, int64_t* out, ApiRequestError* error) {
  if (!v.is_number_integer())
    return Refuse(error, std::string(name), std::string(name) + " must be an integer, not " + std::string(JsonTypeName(v)));
  const bool big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t x = big ? INT64_MAX : v.get<int64_t>();
  if (big || x < lo || x > hi)
    return Refuse(error, std::string(name), std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = x;
  return true;
}

// {"token id": bias, ...}: ids as decimal strings (OpenAI's shape), biases in [-100, 100].
bool ParseLogitBias(const Json& v, std::vector<std::pair<int32_t, float>>* out, ApiRequestError* error) {
  if (v.is_null()) return true;
  if (!v.is_object()) return Refuse(error, "logit_bias", "logit_bias must be an object of token id → bias");
  if (v.size() > kMaxLogitBiasEntries)
    return Refuse(error, "logit_bias", "logit_bias has more than " + std::to_string(kMaxLogitBiasEntries) + " entries");
  for (const auto& [key, bias] : v.items()) {
    const std::string param = "logit_bias." + key;
    // At most 9 digits: every such id fits an int32 (the engine checks it against the vocabulary).
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
      return Refuse(error, param, "logit_bias keys must be token ids (decimal), not '" + key + "'");
    double x = 0;
    if (!ParseNumber(bias, param, -100, 100, &x, error)) return false;
    out->emplace_back(static_cast<int32_t>(std::stol(key)), static_cast<float>(x));
  }
  return true;
}

bool ParseBool(const Json& v, std::string_view name, bool* out, ApiRequestError* error) {
  if (!v.is_boolean()) return Refuse(error, std::string(name), std::string(name) + " must be a boolean");
  *out = v.get<bool>();
  return true;
}

bool ParseStop(const Json& v, std::vector<std::string>* out, ApiRequestError* error) {
  if (v.is_null()) return true;
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty()) return Refuse(error, "stop", "stop strings must not be empty");
    out->push_back(v.get<std::string>());
    return true;
  }
  if (!v.is_array()) return Refuse(error, "stop", "stop must be a string or a list of strings");
  if (v.size() > kMaxStopStrings) return Refuse(error, "stop", "at most 4 stop strings");
  for (const Json& s : v) {
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      return Refuse(error, "stop", "stop must be a list of non-empty strings");
    out->push_back(s.get<std::string>());
  }
  return true;
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts joined; null
// (an assistant turn that only calls tools) is empty.
bool ParseContent(const Json& v, std::string_view param, std::string* out, ApiRequestError* error) {
  if (v.is_null()) return true;
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (!v.is_array()) return Refuse(error, std::string(param), std::string(param) + " must be a string or a list of text parts");
  for (const Json& part : v) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return Refuse(error, std::string(param), std::string(param) + ": only {\"type\": \"text\", \"text\": ...} parts are supported");
    *out += part["text"].get_ref<const std::string&>();
  }
  return true;
}

// OpenAI's rule for function names, which also keeps them plain in the call grammar.
bool IsFunctionName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                                                   std::string_view::npos;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments": JSON text}}].
bool ParseMessageToolCalls(const Json& v, const std::string& param, std::vector<ChatToolCall>* out, ApiRequestError* error) {
  if (v.is_null()) return true;
  if (!v.is_array()) return Refuse(error, param, param + " must be a list");
  if (v.size() > kMaxToolCallsPerMessage)
    return Refuse(error, param, param + " has more than " + std::to_string(kMaxToolCallsPerMessage) + " calls");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const Json& c = v[i];
    if (!c.is_object()) return Refuse(error, p, p + " must be an object");
    ChatToolCall call;
    for (const auto& [key, value] : c.items()) {
      if (key == "id") {
        if (!value.is_string()) return Refuse(error, p + ".id", p + ".id must be a string");
        call.id = value.get<std::string>();
      } else if (key == "type") {
        if (value != "function") return Refuse(error, p + ".type", p + ".type must be \"function\"");
      } else if (key == "function") {
        if (!value.is_object() || !value.contains("name") || !value["name"].is_string())
          return Refuse(error, p + ".function", p + ".function must be an object with a name");
        for (const auto& [k, field] : value.items()) {
          if (k == "name") {
            call.name = field.get<std::string>();
          } else if (k == "arguments") {
            // JSON text, as OpenAI sends it; an object is taken as given.
            if (!field.is_string() && !field.is_object())
              return Refuse(error, p + ".function.arguments", p + ".function.arguments must be a string of JSON");
            call.arguments = field.is_string() ? field.get<std::string>() : DumpJson(field);
          } else {
            return Refuse(error, p + ".function." + k, "unknown field '" + k + "' in " + p + ".function");
          }
        }
      } else {
        return Refuse(error, p + "." + key, "unknown field '" + key + "' in " + p);
      }
    }
    if (call.name.empty()) return Refuse(error, p + ".function", p + " has no function");
    if (call.arguments.empty()) call.arguments = "{}";
    out->push_back(std::move(call));
  }
  return true;
}

// tools: [{"type": "function", "function": {"name", "description", "parameters", "strict"}}]. Each
// schema must convert to a grammar (the one tool_choice required/named forces), so a schema fak
// cannot hold a reply to is refused here, naming the tool.
bool ParseTools(const Json& v, ToolUse* tools, ApiRequestError* error) {
  if (v.is_null()) return true;
  if (!v.is_array()) return Refuse(error, "tools", "tools must be a list of {\"type\": \"function\", \"function\": {...}}");
  if (v.empty() || v.size() > kMaxTools) return Refuse(error, "tools", "tools must hold 1 to " + std::to_string(kMaxTools) + " tools");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const Json& t = v[i];
    if (!t.is_object() || t.value("type", Json()) != "function" || !t.contains("function") || !t["function"].is_object())
      return Refuse(error, p, p + " must be {\"type\": \"function\", \"function\": {...}} (only function tools are supported)");
    for (const auto& [key, value] : t.items())
      if (key != "type" && key != "function") return Refuse(error, p + "." + key, "unknown field '" + key + "' in " + p);
    const Json& f = t["function"];
    ToolFunction function;
    // Absent: no arguments, so the call's arguments are {}.
    function.parameters = Json{{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    for (const auto& [key, value] : f.items()) {
      const std::string fp = p + ".function." + key;
      if (key == "name") {
        if (!value.is_string() || !IsFunctionName(value.get_ref<const std::string&>()))
          return Refuse(error, fp, fp + " must be 1 to 64 letters, digits, '_' or '-'");
        function.name = value.get<std::string>();
      } else if (key == "description") {
        if (!value.is_string()) return Refuse(error, fp, fp + " must be a string");
      } else if (key == "strict") {
        if (!value.is_null() && !value.is_boolean()) return Refuse(error, fp, fp + " must be a boolean");
      } else if (key == "parameters") {
        if (!value.is_object()) return Refuse(error, fp, fp + " must be a JSON schema object");
        function.parameters = value;
      } else {
        return Refuse(error, fp, "unknown field '" + key + "' in " + p + ".function");
      }
    }
    if (function.name.empty()) return Refuse(error, p + ".function.name", p + ".function.name is required");
    for (const ToolFunction& other : tools->functions)
      if (other.name == function.name) return Refuse(error, p + ".function.name", "two tools are named '" + function.name + "'");
    // Any call format will do for the check: the arguments' grammar is the same in each.
    Result<std::string> gbnf = ToolCallGbnf(ToolCallFormat::kHermes, std::span<const ToolFunction>(&function, 1), false);
    if (!gbnf) return Refuse(error, p + ".function.parameters", std::string(gbnf.error().message()));
    tools->functions.push_back(std::move(function));
  }
  tools->tools_json = DumpJson(v);
  return true;
}

// tool_choice: "auto", "none", "required" or {"type": "function", "function": {"name": ...}}.
bool ParseToolChoice(const Json& v, ToolUse* tools, bool* given, ApiRequestError* error) {
  if (v.is_null()) return true;
  *given = true;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "auto") tools->choice = ToolChoice::kAuto;
    else if (s == "none") tools->choice = ToolChoice::kNone;
    else if (s == "required") tools->choice = ToolChoice::kRequired;
    else return Refuse(error, "tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return true;
  }
  if (!v.is_object() || v.value("type", Json()) != "function" || !v.contains("function") || !v["function"].is_object() ||
      !v["function"].contains("name") || !v["function"]["name"].is_string())
    return Refuse(error, "tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  tools->choice = ToolChoice::kNamed;
  tools->named = v["function"]["name"].get<std::string>();
  return true;
}

bool ParseMessages(const Json& v, std::vector<ChatMessage>* out, ApiRequestError* error) {
  if (!v.is_array() || v.empty()) return Refuse(error, "messages", "messages must be a non-empty list");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const Json& m = v[i];
    if (!m.is_object()) return Refuse(error, param, param + " must be an object");
    ChatMessage message;
    bool has_role = false, has_content = false, has_tool_calls = false;
    for (const auto& [key, value] : m.items()) {
      if (key == "role") {
        if (!value.is_string()) return Refuse(error, param + ".role", param + ".role must be a string");
        Result<ChatRole> role = ParseChatRole(value.get_ref<const std::string&>());
        if (!role) return Refuse(error, param + ".role", std::string(role.error().message()));
        message.role = *role;
        has_role = true;
      } else if (key == "content") {
        if (!ParseContent(value, param + ".content", &message.content, error)) return false;
        has_content = !value.is_null();
      } else if (key == "name" || key == "tool_call_id") {
        if (value.is_null()) continue;
        if (!value.is_string()) return Refuse(error, param + "." + key, param + "." + key + " must be a string");
        (key == "name" ? message.name : message.tool_call_id) = value.get<std::string>();
      } else if (key == "tool_calls") {
        if (!ParseMessageToolCalls(value, param + ".tool_calls", &message.tool_calls, error)) return false;
        has_tool_calls = !value.is_null();
      } else if (key == "refusal" || key == "audio") {  // what a client echoes back from a reply
        if (!value.is_null() && !(key == "refusal" && value.is_string()))
          return Refuse(error, param + "." + key, param + "." + key + " is not supported");
      } else if (key == "function_call") {
        if (!value.is_null()) return Refuse(error, param + "." + key, "function_call (deprecated) is not supported; use tool_calls");
      } else {
        return Refuse(error, param + "." + key, "unknown field '" + key + "' in " + param);
      }
    }
    if (!has_role) return Refuse(error, param + ".role", param + " has no role");
    // An assistant turn that only calls tools has no content (null or absent).
    if (!has_content && message.tool_calls.empty()) return Refuse(error, param + ".content", param + " has no content");
    if (has_tool_calls && message.role != ChatRole::kAssistant)
      return Refuse(error, param + ".tool_calls", "only assistant messages have tool_calls");
    out->push_back(std::move(message));
  }
  return true;
}

// Fields OpenAI defines that fak does not implement, accepted only at their "off" value.
bool IsOffValue(std::string_view key, const Json& v) {
  if (key == "echo") return v.is_null() || (v.is_boolean() && !v.get<bool>());
  if (key == "suffix") return v.is_null();
  if (key == "best_of") return v.is_null() || (v.is_number_integer() && v.get<int64_t>() == 1);
  if (key == "modalities") return v.is_null() || v == Json::array({"text"});
  // SGLang's extensions, which its router sends at these values on every request.
  if (key == "no_stop_trim" || key == "ignore_eos" || key == "continue_final_message" || key == "return_hidden_states")
    return v.is_null() || (v.is_boolean() && !v.get<bool>());
  if (key == "skip_special_tokens") return v.is_null() || (v.is_boolean() && v.get<bool>());
  return false;
}
bool IsOffField(std::string_view key) {
  for (std::string_view k : {"echo", "suffix", "best_of", "modalities", "no_stop_trim", "ignore_eos",
                             "continue_final_message", "return_hidden_states", "skip_special_tokens"})
    if (k == key) return true;
  return false;
}

// `gbnf` parsed into the request's grammar; a refusal names `param`.
bool SetGrammar(std::string_view gbnf, const std::string& param, ApiRequest* r, ApiRequestError* error) {
  if (r->grammar) return Refuse(error, param, "give one of response_format (json_object, json_schema) and grammar");
  Result<Grammar> grammar = Grammar::Parse(gbnf);
  if (!grammar) return Refuse(error, param, std::string(grammar.error().message()));
  r->grammar = std::move(*grammar);
  return true;
}

// response_format: text (no constraint), json_object (any JSON object) or json_schema.
bool ParseResponseFormat(const Json& v, ApiRequest* r, ApiRequestError* error) {
  const std::string param = "response_format";
  if (v.is_null()) return true;
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    return Refuse(error, param, "response_format must be an object with a type (text, json_object or json_schema)");
  const std::string& type = v["type"].get_ref<const std::string&>();
  for (const auto& [key, value] : v.items()) {
    if (key != "type" && !(type == "json_schema" && key == "json_schema"))
      return Refuse(error, param + "." + key, "unknown field '" + key + "' in response_format of type " + type);
  }
  if (type == "text") return true;
  if (type == "json_object") return SetGrammar(JsonObjectGbnf(), param, r, error);
  if (type != "json_schema") return Refuse(error, param + ".type", "response_format.type must be text, json_object or json_schema");
  const std::string spec_param = param + ".json_schema";
  if (!v.contains("json_schema") || !v["json_schema"].is_object()) return Refuse(error, spec_param, "json_schema must be an object");
  const Json& spec = v["json_schema"];
  for (const auto& [key, value] : spec.items()) {
    if (key == "name" || key == "description") {
      if (!value.is_string()) return Refuse(error, spec_param + "." + key, spec_param + "." + key + " must be a string");
    } else if (key == "strict") {
      if (!value.is_null() && !value.is_boolean()) return Refuse(error, spec_param + ".strict", "strict must be a boolean");
    } else if (key != "schema") {
      return Refuse(error, spec_param + "." + key, "unknown field '" + key + "' in json_schema");
    }
  }
  if (!spec.contains("name")) return Refuse(error, spec_param + ".name", "json_schema.name is required");
  if (!spec.contains("schema")) return Refuse(error, spec_param + ".schema", "json_schema.schema is required");
  // Strict or not, the reply is held to the schema: a grammar cannot half-enforce one.
  Result<std::string> gbnf = JsonSchemaToGbnf(DumpJson(spec["schema"]));
  if (!gbnf) return Refuse(error, spec_param + ".schema", std::string(gbnf.error().message()));
  return SetGrammar(*gbnf, spec_param + ".schema", r, error);
}

// Fields that cannot change the reply (bookkeeping, or a hint fak has no use for), accepted when
// well-typed and then ignored: nullopt for any other field, else whether `v` has the field's type.
std::optional<bool> IgnoredFieldWellTyped(std::string_view key, const Json& v) {
  // (prompt_cache_key: fak reuses every prefix it holds; safety_identifier: OpenAI's abuse tracking.)
  if (key == "user" || key == "service_tier" || key == "prompt_cache_key" || key == "safety_identifier")
    return v.is_null() || v.is_string();
  if (key == "metadata") return v.is_null() || v.is_object();
  if (key == "store") return v.is_null() || v.is_boolean();
  // SGLang's reasoning switches (its router sends both true): fak returns the text as generated.
  if (key == "separate_reasoning" || key == "stream_reasoning") return v.is_null() || v.is_boolean();
  return std::nullopt;
}

bool ParseField(ApiEndpoint endpoint, const std::string& key, const Json& v, ApiRequest* r, bool* has_input,
                bool* tool_choice_given, ApiRequestError* error) {
  const bool chat = endpoint == ApiEndpoint::kChatCompletions;
  if (key == "model") {
    if (!v.is_string()) return Refuse(error, key, "model must be a string");
    r->model = v.get<std::string>();
  } else if (chat && key == "messages") {
    *has_input = true;
    return ParseMessages(v, &r->messages, error);
  } else if (!chat && key == "prompt") {
    if (!v.is_string()) return Refuse(error, key, "prompt must be a string (token lists and batches are not supported)");
    r->prompt = v.get<std::string>();
    *has_input = true;
  } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
    if (v.is_null()) return true;
    size_t n = 0;
    if (!ParseCount(v, key, &n, error)) return false;
    r->max_tokens = n;
  } else if (key == "temperature") {
    r->sampling.temperature = 1;
    if (!v.is_null() && !ParseSamplingFloat(v, key, 0, 2, &r->sampling.temperature, error)) return false;
  } else if (key == "top_p") {
    r->sampling.top_p = 1;
    if (!v.is_null() && !ParseSamplingFloat(v, key, 0, 1, &r->sampling.top_p, error)) return false;
    if (r->sampling.top_p == 0) return Refuse(error, key, "top_p must be in (0, 1]");
  } else if (key == "top_k") {
    int64_t k = 0;
    if (!v.is_null() && !ParseInteger(v, key, 0, INT32_MAX, &k, error)) return false;
    r->sampling.top_k = static_cast<size_t>(k);
  } else if (key == "min_p") {
    r->sampling.min_p = 0;
    if (!v.is_null() && !ParseSamplingFloat(v, key, 0, 1, &r->sampling.min_p, error)) return false;
  } else if (key == "presence_penalty" || key == "frequency_penalty") {
    double x = 0;
    if (!v.is_null() && !ParseNumber(v, key, -2, 2, &x, error)) return false;
    (key == "presence_penalty" ? r->sampling.presence_penalty : r->sampling.frequency_penalty) = static_cast<float>(x);
  } else if (key == "repetition_penalty" || key == "repeat_penalty") {
    r->sampling.repetition_penalty = 1;
    if (!v.is_null() && !ParseSamplingFloat(v, key, 0, 10, &r->sampling.repetition_penalty, error)) return false;
    if (r->sampling.repetition_penalty == 0) return Refuse(error, key, key + " must be in (0, 10]");
  } else if (key == "logit_bias") {
    return ParseLogitBias(v, &r->sampling.logit_bias, error);
  } else if (key == "seed") {
    if (v.is_null()) return true;
    if (!v.is_number_integer()) return Refuse(error, key, "seed must be an integer");
    r->seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  } else if (key == "stop") {
    return ParseStop(v, &r->stop, error);
  } else if (key == "n") {
    int64_t n = 1;
    if (!v.is_null() && !ParseInteger(v, key, 1, kMaxChoices, &n, error)) return false;
    r->n = static_cast<size_t>(n);
  } else if (chat && key == "logprobs") {
    return v.is_null() || ParseBool(v, key, &r->logprobs, error);
  } else if (chat && key == "top_logprobs") {
    int64_t k = 0;
    if (!v.is_null() && !ParseInteger(v, key, 0, kMaxTopLogprobs, &k, error)) return false;
    r->top_logprobs = static_cast<size_t>(k);
  } else if (!chat && key == "logprobs") {
    if (v.is_null() || (v.is_boolean() && !v.get<bool>())) return true;
    int64_t k = 0;
    if (!ParseInteger(v, key, 0, kMaxTopLogprobs, &k, error)) return false;
    r->logprobs = true;
    r->top_logprobs = static_cast<size_t>(k);
  } else if (key == "stream") {
    return v.is_null() || ParseBool(v, key, &r->stream, error);
  } else if (key == "stream_options") {
    if (v.is_null()) return true;
    if (!v.is_object()) return Refuse(error, key, "stream_options must be an object");
    for (const auto& [k, value] : v.items()) {
      if (k != "include_usage") return Refuse(error, key + "." + k, "unknown field '" + k + "' in stream_options");
      if (!ParseBool(value, key + ".include_usage", &r->include_usage, error)) return false;
    }
  } else if (key == "response_format") {
    return ParseResponseFormat(v, r, error);
  } else if (chat && key == "tools") {
    return ParseTools(v, &r->tools, error);
  } else if (chat && key == "tool_choice") {
    return ParseToolChoice(v, &r->tools, tool_choice_given, error);
  } else if (chat && key == "parallel_tool_calls") {
    return v.is_null() || ParseBool(v, key, &r->tools.parallel, error);
  } else if (key == "grammar") {
    if (v.is_null()) return true;
    if (!v.is_string()) return Refuse(error, key, "grammar must be a string of GBNF");
    return SetGrammar(v.get_ref<const std::string&>(), key, r, error);
  } else if (std::optional<bool> well_typed = IgnoredFieldWellTyped(key, v)) {
    if (!*well_typed) return Refuse(error, key, key + " has the wrong type (it is accepted and ignored)");
  } else if (IsOffField(key)) {
    if (!IsOffValue(key, v)) return Refuse(error, key, key + " is not supported (only its default value is accepted)");
  } else {
    return Refuse(error, key, "unknown field '" + key + "'");
  }
  return true;
}

// What tool_choice asks of the tools given.
bool CheckToolUse(const ApiRequest& r, bool tool_choice_given, ApiRequestError* error) {
  const ToolUse& t = r.tools;
  if (tool_choice_given && t.functions.empty() && t.choice != ToolChoice::kNone && t.choice != ToolChoice::kAuto)
    return Refuse(error, "tool_choice", "tool_choice needs tools");
  if (t.choice == ToolChoice::kNamed &&
      std::none_of(t.functions.begin(), t.functions.end(), [&](const ToolFunction& f) { return f.name == t.named; }))
    return Refuse(error, "tool_choice", "tool_choice names '" + t.named + "', which is not among the tools");
  if (t.forced() && r.grammar) return Refuse(error, "tool_choice", "give one of tool_choice required/named and response_format or grammar");
  return true;
}

bool ParseDocument(ApiEndpoint endpoint, const Json& doc, ApiRequest* request, ApiRequestError* error) {
  if (!doc.is_object()) return Refuse(error, "", "request body: not a JSON object");
  ApiRequest r;
  r.sampling.temperature = 1.0f;  // OpenAI's default; 0 asks for greedy
  bool has_model = false, has_input = false, tool_choice_given = false;
  for (const auto& [key, value] : doc.items()) {
    if (!ParseField(endpoint, key, value, &r, &has_input, &tool_choice_given, error)) return false;
    has_model = has_model || key == "model";
  }
  if (!has_model) return Refuse(error, "model", "model is required");
  if (!has_input) {
    const char* param = endpoint == ApiEndpoint::kChatCompletions ? "messages" : "prompt";
    return Refuse(error, param, std::string(param) + " is required");
  }
  if (r.include_usage && !r.stream) return Refuse(error, "stream_options", "stream_options needs stream: true");
  if (endpoint == ApiEndpoint::kChatCompletions && r.top_logprobs > 0 && !r.logprobs)
    return Refuse(error, "top_logprobs", "top_logprobs needs logprobs: true");
  if (Status s = r.sampling.Validate(); !s.ok()) return Refuse(error, "", std::string(s.message()));
  if (!CheckToolUse(r, tool_choice_given, error)) return false;
  *request = std::move(r);
  return true;
}

}  // namespace

bool ParseApiRequestJson(ApiEndpoint endpoint, const Json& doc, ApiRequest* request, ApiRequestError* error) {
  try {
    return ParseDocument(endpoint, doc, request, error);
  } catch (const std::exception& e) {  // bad_alloc on a pathological body; nothing else throws here
    return Refuse(error, "", std::string("request body: ") + e.what());
  }
}

bool ParseApiRequest(ApiEndpoint endpoint, std::string_view body, ApiRequest* request, ApiRequestError* error) {
  Result<Json> doc = ParseJsonObject(body, "request body");
  if (!doc) return Refuse(error, "", std::string(doc.error().message()));
  return ParseApiRequestJson(endpoint, *doc, request, error);
}

}  // namespace fak::internal
