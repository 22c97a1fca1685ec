// Tool-call formats: detection from a template's text, the forcing grammar, the prompt for
// templates without tools, and the parser of replies (src/grammar/tool_calls.h).
#include "src/grammar/tool_calls.h"

#include <algorithm>
#include <array>
#include <utility>

#include "fak/grammar/json_schema.h"

namespace fak::internal {
namespace {

bool Contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

size_t SkipSpace(std::string_view s, size_t at) {
  while (at < s.size() && IsSpace(s[at])) ++at;
  return at;
}

// The key a format's call object names its arguments with.
std::string_view ArgumentsKey(ToolCallFormat format) {
  return format == ToolCallFormat::kLlama3 || format == ToolCallFormat::kJson ? "parameters" : "arguments";
}

// Where the JSON value that opens at `begin` ('{' or '[') closes (one past it), or npos when it
// does not: brackets counted outside strings. Iterative, so any depth is safe here; ParseJson
// bounds the depth of what is then parsed.
size_t JsonValueEnd(std::string_view s, size_t begin) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return std::string_view::npos;
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// The JSON value (object or array) at `at`, and where it ends; false when there is none.
bool ReadJson(std::string_view s, size_t at, Json* value, size_t* end) {
  if (at >= s.size() || (s[at] != '{' && s[at] != '[')) return false;
  const size_t e = JsonValueEnd(s, at);
  if (e == std::string_view::npos) return false;
  Result<Json> parsed = ParseJson(s.substr(at, e - at), "tool call");
  if (!parsed) return false;
  *value = std::move(*parsed);
  *end = e;
  return true;
}

// A call object {"name": one of `functions`, "arguments"/"parameters": an object (or its JSON
// text)}; false for anything else.
bool ReadCall(const Json& v, std::span<const ToolFunction> functions, ParsedToolCall* call) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return false;
  const std::string& name = v["name"].get_ref<const std::string&>();
  if (std::none_of(functions.begin(), functions.end(), [&](const ToolFunction& f) { return f.name == name; })) return false;
  Json arguments = Json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!v.contains(key)) continue;
    arguments = v[key];
    if (arguments.is_string()) {
      Result<Json> inner = ParseJson(arguments.get_ref<const std::string&>(), "tool call arguments");
      if (!inner) return false;
      arguments = std::move(*inner);
    }
    break;
  }
  if (!arguments.is_object()) return false;
  call->name = name;
  call->arguments = DumpJson(arguments);
  return true;
}

// A call object or a list of them, all valid; appended to `calls` only when all are.
bool ReadCalls(const Json& v, std::span<const ToolFunction> functions, std::vector<ParsedToolCall>* calls) {
  std::vector<ParsedToolCall> read;
  if (v.is_array()) {
    if (v.empty()) return false;
    for (const Json& item : v) {
      if (!ReadCall(item, functions, &read.emplace_back())) return false;
    }
  } else if (!ReadCall(v, functions, &read.emplace_back())) {
    return false;
  }
  calls->insert(calls->end(), read.begin(), read.end());
  return true;
}

// Blocks `open` JSON `close`: each block that holds valid calls is taken out of the content; a
// block at the end may lack its `close` (the model stopped there). Hermes and Phi-4.
ParsedReply ParseBlocks(std::string_view text, std::string_view open, std::string_view close,
                        std::span<const ToolFunction> functions) {
  ParsedReply r;
  size_t from = 0;  // content not yet copied begins here
  for (size_t at = text.find(open); at != std::string_view::npos; at = text.find(open, at + 1)) {
    if (at < from) continue;
    Json value;
    size_t end = 0;
    if (!ReadJson(text, SkipSpace(text, at + open.size()), &value, &end)) continue;
    const size_t after = SkipSpace(text, end);
    size_t block_end = 0;
    if (text.substr(after, close.size()) == close) {
      block_end = after + close.size();
    } else if (after == text.size()) {
      block_end = after;
    } else {
      continue;
    }
    std::vector<ParsedToolCall> calls;
    if (!ReadCalls(value, functions, &calls)) continue;
    r.content.append(text.substr(from, at - from));
    r.calls.insert(r.calls.end(), calls.begin(), calls.end());
    from = block_end;
  }
  r.content.append(text.substr(from));
  return r;
}

// Mistral: [TOOL_CALLS] then a JSON list (or one object).
ParsedReply ParseMistral(std::string_view text, std::span<const ToolFunction> functions) {
  constexpr std::string_view kTag = "[TOOL_CALLS]";
  for (size_t at = text.find(kTag); at != std::string_view::npos; at = text.find(kTag, at + 1)) {
    Json value;
    size_t end = 0;
    ParsedReply r;
    if (!ReadJson(text, SkipSpace(text, at + kTag.size()), &value, &end) || !ReadCalls(value, functions, &r.calls)) continue;
    r.content = std::string(text.substr(0, at)) + std::string(text.substr(end));
    return r;
  }
  return ParsedReply{std::string(text), {}};
}

// Llama 3.x and the JSON convention: the reply ends with one or more call values (objects or
// lists, separated by whitespace, ';' or ','), perhaps after <|python_tag|> or inside a ``` fence.
// The first '{' or '[' from which that holds starts the calls; the text before is content.
ParsedReply ParseTrailingJson(std::string_view text, std::span<const ToolFunction> functions) {
  constexpr size_t kMaxStarts = 64;  // candidate starts tried: the parse is then linear per start
  size_t tried = 0;
  for (size_t at = text.find_first_of("{["); at != std::string_view::npos && tried < kMaxStarts;
       at = text.find_first_of("{[", at + 1), ++tried) {
    std::vector<ParsedToolCall> calls;
    size_t pos = at;
    bool ok = true;
    while (true) {
      Json value;
      size_t end = 0;
      if (!ReadJson(text, pos, &value, &end) || !ReadCalls(value, functions, &calls)) {
        ok = false;
        break;
      }
      pos = end;
      while (pos < text.size() && (IsSpace(text[pos]) || text[pos] == ';' || text[pos] == ',')) ++pos;
      std::string_view rest = text.substr(pos);
      if (rest.starts_with("```")) rest.remove_prefix(3);
      if (Trim(rest).empty()) break;
      if (pos >= text.size() || (text[pos] != '{' && text[pos] != '[')) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    std::string_view before = text.substr(0, at);
    // The opening of the calls is markup, not content: <|python_tag|>, a ``` fence and its tag.
    const size_t fence = before.rfind("```");
    if (fence != std::string_view::npos && Trim(before.substr(fence + 3)).find_first_of(" \t") == std::string_view::npos)
      before = before.substr(0, fence);
    before = Trim(before);
    if (before.ends_with("<|python_tag|>")) before.remove_suffix(std::string_view("<|python_tag|>").size());
    return ParsedReply{std::string(before), std::move(calls)};
  }
  return ParsedReply{std::string(text), {}};
}

// The GBNF of a JSON schema, cut into its top rule's body and its other rules (JsonSchemaToGbnf
// writes `root ::= TOP ws` first).
struct SchemaRules {
  std::string top, rules;
};
Result<SchemaRules> SplitSchemaGbnf(const std::string& gbnf) {
  constexpr std::string_view kHead = "root ::= ";
  const size_t eol = gbnf.find('\n');
  if (!gbnf.starts_with(kHead) || eol == std::string::npos || !std::string_view(gbnf).substr(0, eol).ends_with(" ws"))
    return FailedPrecondition("tool call grammar: unexpected JSON schema grammar layout");
  return SchemaRules{gbnf.substr(kHead.size(), eol - kHead.size() - 3), gbnf.substr(eol + 1)};
}

// `schema` with its references moved under #/$defs/<prefix>...: `#` itself becomes the function's
// own entry, so each function's schema resolves inside the combined one.
void Rebase(Json& schema, const std::string& prefix) {
  if (schema.is_array()) {
    for (Json& item : schema) Rebase(item, prefix);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      if (ref == "#") {
        value = "#/$defs/" + prefix;
      } else {
        for (std::string_view section : {"#/$defs/", "#/definitions/"}) {
          if (ref.starts_with(section)) value = "#/$defs/" + prefix + "-" + ref.substr(section.size());
        }
      }
    } else {
      Rebase(value, prefix);
    }
  }
}

// The text that starts a call in `format`; "" for the JSON formats' bare objects.
std::string CallMarker(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "<tool_call>";
    case ToolCallFormat::kMistral: return "[TOOL_CALLS]";
    case ToolCallFormat::kPhi4: return "<|tool_call|>";
    case ToolCallFormat::kLlama3: return "<|python_tag|>";
    case ToolCallFormat::kJson: return "";
  }
  return "";
}

// The text that closes a call block, "" where a call ends with its JSON.
std::string CallEndMarker(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "</tool_call>";
    case ToolCallFormat::kPhi4: return "<|/tool_call|>";
    default: return "";
  }
}

constexpr std::string_view kJsonInstructions =
    "You can call functions. To call one, reply with only a JSON object {\"name\": the function's name, "
    "\"parameters\": an object of its arguments} (to call several, a JSON list of them) and nothing else. "
    "The functions:\n";

// An assistant's earlier calls in the JSON convention, as the model is asked to write them.
std::string JsonCallsText(const std::vector<ChatToolCall>& calls) {
  Json list = Json::array();
  for (const ChatToolCall& c : calls) {
    Result<Json> arguments = ParseJson(c.arguments, "tool call arguments");
    list.push_back(Json{{"name", c.name}, {"parameters", arguments ? *arguments : Json(c.arguments)}});
  }
  return DumpJson(list.size() == 1 ? list[0] : list);
}

}  // namespace

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kPhi4: return "phi4";
    case ToolCallFormat::kJson: return "json";
  }
  return "";
}

Result<ToolCallFormat> ToolCallFormatFor(const ChatTemplate& chat_template) {
  if (chat_template.family() == "fak") return ToolCallFormat::kHermes;
  const std::string_view src = chat_template.jinja_source();
  if (Contains(src, "<tool_call>")) return ToolCallFormat::kHermes;
  if (Contains(src, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (Contains(src, "<|python_tag|>") || Contains(src, "ipython")) return ToolCallFormat::kLlama3;
  if (Contains(src, "<|tool_call|>") || Contains(src, "<|tool|>")) return ToolCallFormat::kPhi4;
  // A template that prints neither tools nor calls leaves them to fak's JSON convention.
  if (!Contains(src, "tools") && !Contains(src, "tool_calls")) return ToolCallFormat::kJson;
  return Unsupported("chat template " + std::string(chat_template.variant()) + " (" + std::string(chat_template.source()) +
                     ") renders tools or calls, but its tool-call format is none fak reads (Hermes <tool_call>, Llama 3.x JSON, "
                     "Mistral [TOOL_CALLS], Phi-4 <|tool_call|>)");
}

Result<std::vector<ToolFunction>> ToolFunctionsFromJson(std::string_view tools_json) {
  FAK_ASSIGN_OR_RETURN(Json tools, ParseJson(tools_json, "tools"));
  if (!tools.is_array()) return InvalidArgument("tools: expected a list of {\"type\": \"function\", \"function\": {...}}");
  std::vector<ToolFunction> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object() || t.value("type", Json()) != "function" || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      return InvalidArgument(where + ": expected {\"type\": \"function\", \"function\": {\"name\": ...}}");
    ToolFunction f;
    f.name = t["function"]["name"].get<std::string>();
    f.parameters = t["function"].value("parameters", Json{{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}});
    if (f.name.empty() || std::any_of(out.begin(), out.end(), [&](const ToolFunction& o) { return o.name == f.name; }))
      return InvalidArgument(where + ".function.name: empty or given twice");
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::string> ToolCallGbnf(ToolCallFormat format, std::span<const ToolFunction> functions, bool parallel) {
  if (functions.empty()) return InvalidArgument("tool call grammar: no functions");
  // One schema for "a call of any of them": an anyOf of {name: const, arguments: $ref to the
  // function's parameters}, each function's own definitions moved under a prefix of its own.
  Json defs = Json::object(), alternatives = Json::array();
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string prefix = "f" + std::to_string(i);
    Json parameters = functions[i].parameters;
    for (const char* section : {"$defs", "definitions"}) {
      if (!parameters.is_object() || !parameters.contains(section) || !parameters[section].is_object()) continue;
      for (auto& [name, def] : parameters[section].items()) {
        Rebase(def, prefix);
        defs[prefix + "-" + name] = def;
      }
      parameters.erase(section);
    }
    Rebase(parameters, prefix);
    defs[prefix] = std::move(parameters);
    alternatives.push_back(Json{{"type", "object"},
                                {"properties", {{"name", {{"const", functions[i].name}}},
                                                {std::string(ArgumentsKey(format)), {{"$ref", "#/$defs/" + prefix}}}}},
                                {"required", Json::array({"name", std::string(ArgumentsKey(format))})},
                                {"additionalProperties", false}});
  }
  Json schema = alternatives.size() == 1 ? alternatives[0] : Json{{"anyOf", alternatives}};
  schema["$defs"] = std::move(defs);
  Result<std::string> gbnf = JsonSchemaToGbnf(DumpJson(schema));
  if (!gbnf) {
    std::string names;
    for (const ToolFunction& f : functions) names += (names.empty() ? "" : ", ") + f.name;
    return gbnf.error().WithContext("tool parameters (" + names + ")");
  }
  FAK_ASSIGN_OR_RETURN(SchemaRules schema_rules, SplitSchemaGbnf(*gbnf));
  const std::string call = "call ::= " + schema_rules.top + "\n";
  constexpr std::string_view kMore = "{0,7}";  // parallel: at most eight calls, so a reply ends
  std::string root;
  switch (format) {
    case ToolCallFormat::kHermes:
      root = "root ::= block" + (parallel ? " (\"\\n\" block)" + std::string(kMore) : std::string()) +
             "\nblock ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::kLlama3:  // Llama 3.x's templates take one call per turn
      root = "root ::= call\n";
      break;
    case ToolCallFormat::kMistral:
      root = "root ::= \"[TOOL_CALLS][\" call " + (parallel ? "(\", \" call)" + std::string(kMore) : std::string()) + " \"]\"\n";
      break;
    case ToolCallFormat::kPhi4:
      root = "root ::= \"<|tool_call|>[\" call " + (parallel ? "(\", \" call)" + std::string(kMore) : std::string()) +
             " \"]<|/tool_call|>\"\n";
      break;
    case ToolCallFormat::kJson:
      root = parallel ? "root ::= call | \"[\" call (\", \" call)" + std::string(kMore) + " \"]\"\n" : "root ::= call\n";
      break;
  }
  return root + call + schema_rules.rules;
}

Result<ToolUse> ToolUseOf(const ToolRequest& request) {
  ToolUse use;
  use.tools_json = request.tools_json;
  use.choice = request.choice;
  use.named = request.named;
  use.parallel = request.parallel;
  if (request.tools_json.empty()) {
    if (request.choice == ToolChoice::kRequired || request.choice == ToolChoice::kNamed)
      return InvalidArgument("tool_choice: required or a named tool needs tools");
    return use;
  }
  FAK_ASSIGN_OR_RETURN(use.functions, ToolFunctionsFromJson(request.tools_json));
  if (use.choice == ToolChoice::kNamed &&
      std::none_of(use.functions.begin(), use.functions.end(), [&](const ToolFunction& f) { return f.name == use.named; }))
    return InvalidArgument("tool_choice: '" + use.named + "' is not among the tools");
  return use;
}

Result<PreparedToolChat> PrepareToolChat(const ChatTemplate& chat_template, std::vector<ChatMessage> messages,
                                         const ToolRequest& tools) {
  FAK_ASSIGN_OR_RETURN(ToolUse use, ToolUseOf(tools));
  Result<ToolCallFormat> format = ToolCallFormatFor(chat_template);
  if (!format) {
    if (use.active()) return format.error();
    return PreparedToolChat{ToolPrompt{std::move(messages), ""}, "", "", "", {}};
  }
  PreparedToolChat out{ToolCallPrompt(*format, std::move(messages), use), "", "", "", {}};
  if (use.active()) {
    for (std::string marker : {CallMarker(*format), CallEndMarker(*format)})
      if (!marker.empty()) out.markers.push_back(std::move(marker));
  }
  if (use.active() && use.choice == ToolChoice::kAuto) {
    out.trigger = CallMarker(*format);
    if (out.trigger.empty()) return out;  // the JSON formats: a call has no marker to wait for
    // Hermes: one block per trigger (a second call triggers again); the list formats close their list.
    FAK_ASSIGN_OR_RETURN(out.triggered_gbnf, ToolCallGbnf(*format, use.functions, use.parallel && *format != ToolCallFormat::kHermes));
    if (*format == ToolCallFormat::kLlama3) {
      // Its call grammar is the bare object; the marker is <|python_tag|> before it.
      out.triggered_gbnf = "root ::= \"<|python_tag|>\" call\n" + out.triggered_gbnf.substr(out.triggered_gbnf.find('\n') + 1);
    }
    return out;
  }
  if (!use.forced()) return out;
  // required: any of the tools, parallel if allowed; named: that one, once.
  std::vector<ToolFunction> forced;
  for (const ToolFunction& f : use.functions)
    if (use.choice == ToolChoice::kRequired || f.name == use.named) forced.push_back(f);
  FAK_ASSIGN_OR_RETURN(out.forced_gbnf, ToolCallGbnf(*format, forced, use.choice == ToolChoice::kRequired && use.parallel));
  return out;
}

ToolPrompt ToolCallPrompt(ToolCallFormat format, std::vector<ChatMessage> messages, const ToolUse& tools) {
  if (format != ToolCallFormat::kJson) return ToolPrompt{std::move(messages), tools.active() ? tools.tools_json : ""};
  for (ChatMessage& m : messages) {
    if (!m.tool_calls.empty()) {
      m.content += (m.content.empty() ? "" : "\n") + JsonCallsText(m.tool_calls);
      m.tool_calls.clear();
    }
    m.tool_call_id.clear();  // the template has no place for them
    m.name.clear();
  }
  if (!tools.active()) return ToolPrompt{std::move(messages), ""};
  std::string described = std::string(kJsonInstructions) + tools.tools_json;
  if (!messages.empty() && messages.front().role == ChatRole::kSystem) {
    messages.front().content += "\n\n" + described;
  } else {
    messages.insert(messages.begin(), ChatMessage(ChatRole::kSystem, std::move(described)));
  }
  return ToolPrompt{std::move(messages), ""};
}

ParsedReply ParseToolCalls(ToolCallFormat format, std::string_view text, std::span<const ToolFunction> functions) {
  switch (format) {
    case ToolCallFormat::kHermes: return ParseBlocks(text, "<tool_call>", "</tool_call>", functions);
    case ToolCallFormat::kPhi4: return ParseBlocks(text, "<|tool_call|>", "<|/tool_call|>", functions);
    case ToolCallFormat::kMistral: return ParseMistral(text, functions);
    case ToolCallFormat::kLlama3:
    case ToolCallFormat::kJson: return ParseTrailingJson(text, functions);
  }
  return ParsedReply{std::string(text), {}};
}

size_t ToolCallContentPrefix(ToolCallFormat format, std::string_view text) {
  if (format == ToolCallFormat::kLlama3 || format == ToolCallFormat::kJson) {
    // A call may begin at any '{' or '[' (or its <|python_tag|> or ``` fence).
    const size_t at = text.find_first_of("{[<`");
    return at == std::string_view::npos ? text.size() : at;
  }
  const std::string_view open = format == ToolCallFormat::kHermes   ? "<tool_call>"
                                : format == ToolCallFormat::kMistral ? "[TOOL_CALLS]"
                                                                     : "<|tool_call|>";
  const size_t at = text.find(open);
  if (at != std::string_view::npos) return at;
  // The longest tail that could still grow into the marker is held back.
  for (size_t n = std::min(open.size() - 1, text.size()); n > 0; --n) {
    if (text.ends_with(open.substr(0, n))) return text.size() - n;
  }
  return text.size();
}

std::string ToolCallId(ToolCallFormat format, uint64_t random) {
  constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const size_t n = format == ToolCallFormat::kMistral ? 9 : 24;
  std::string id = format == ToolCallFormat::kMistral ? "" : "call_";
  const auto mix = [](uint64_t z) {  // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t x = mix(random);  // nearby inputs (random + i) give unrelated ids
  for (size_t i = 0; i < n; ++i) {
    x += 0x9E3779B97F4A7C15ull;  // each letter from fresh bits
    id += kAlphabet[mix(x) % kAlphabet.size()];
  }
  return id;
}

}  // namespace fak::internal
