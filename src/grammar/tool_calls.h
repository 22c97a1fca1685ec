// Tool calls: how a model family writes a function call, the grammar that forces one, and the
// parser that reads calls back out of a reply (docs/tool-calls.md).
//
// The format is read from the chat template's own text (its markers), never from a model's name:
//   Hermes / Qwen   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>   (one block per call)
//   Llama 3.x       {"name": ..., "parameters": {...}}   (optionally after <|python_tag|>; one call)
//   Mistral         [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   Phi-4-mini      <|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>   (Granite: no closing tag)
//   JSON            a template that does not render tools (Gemma): the tools are described in a system
//                   message and a call is {"name": ..., "parameters": {...}}, several a JSON list of them
// fak's own family (the embedded model) renders tools itself and uses the Hermes form.
// Parsing is total: malformed or partial output never fails, an unparsable call stays content.
#ifndef FAK_SRC_GRAMMAR_TOOL_CALLS_H_
#define FAK_SRC_GRAMMAR_TOOL_CALLS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/grammar/tool_calls.h"
#include "fak/tokenizer/chat_template.h"
#include "src/core/json.h"

namespace fak::internal {

enum class ToolCallFormat { kHermes, kLlama3, kMistral, kPhi4, kJson };
std::string_view ToolCallFormatName(ToolCallFormat format);

// The format `chat_template`'s model writes calls in. Unsupported, naming the template, for one
// that renders tools in a format fak does not read (gpt-oss, DeepSeek, Command R).
Result<ToolCallFormat> ToolCallFormatFor(const ChatTemplate& chat_template);

// A function offered to the model: its name and its parameters' JSON schema.
struct ToolFunction {
  std::string name;
  Json parameters = Json::object();
};

// What a request says about tools (OpenAI's tools, tool_choice, parallel_tool_calls), its functions parsed.
struct ToolUse {
  std::string tools_json;               // the `tools` array as given: the template's `tools`
  std::vector<ToolFunction> functions;  // the same, parsed
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;                    // kNamed: the function
  bool parallel = true;
  // Whether the model is offered tools and its reply is read for calls.
  bool active() const { return !functions.empty() && choice != ToolChoice::kNone; }
  // kRequired / kNamed: the reply is forced to calls (ToolCallGbnf).
  bool forced() const { return active() && (choice == ToolChoice::kRequired || choice == ToolChoice::kNamed); }
  ToolRequest request() const { return ToolRequest{tools_json, choice, named, parallel}; }
};

// The functions of a `tools` array as the OpenAI API gives it ([{"type": "function", "function":
// {"name", "parameters"?, ...}}]; absent parameters: no arguments). InvalidArgument naming the
// entry at fault. (The server parses its request itself, to name each parameter as the API does.)
Result<std::vector<ToolFunction>> ToolFunctionsFromJson(std::string_view tools_json);

// A ToolRequest's functions parsed (ToolFunctionsFromJson) and its choice checked: InvalidArgument
// for a named function that is not among the tools.
Result<ToolUse> ToolUseOf(const ToolRequest& request);

// GBNF whose sentences are `format`'s calls of `functions` (one, or with `parallel` one to eight
// where the format allows several), each call's arguments a JSON document of its parameters'
// schema (JsonSchemaToGbnf). InvalidArgument naming the function for a schema it refuses.
Result<std::string> ToolCallGbnf(ToolCallFormat format, std::span<const ToolFunction> functions, bool parallel);

// The conversation as `format`'s template is given it. For kJson (a template that does not render
// tools) the tools are described in the system message (added when there is none) and earlier
// calls become the assistant's text in the call syntax, so the model sees the convention it is
// asked to follow; other formats pass through unchanged. `tools_json` is what the template gets
// as `tools` ("" for kJson, whose template ignores it).
struct ToolPrompt {
  std::vector<ChatMessage> messages;
  std::string tools_json;
};
ToolPrompt ToolCallPrompt(ToolCallFormat format, std::vector<ChatMessage> messages, const ToolUse& tools);

// What a request's tools make of a chat (Engine::Prepare): the conversation and `tools` the
// template renders (ToolCallPrompt), for tool_choice required/named the GBNF that forces calls, and
// for auto the marker that starts a call and the GBNF that then holds it.
// A template whose call format fak does not read renders the history itself: then the messages pass
// unchanged, and offering it tools is Unsupported.
// For tool_choice auto, where the format has a call marker, the marker and the GBNF of the call
// that follows it (its sentences begin with the marker), for a TriggeredGrammarConstraint.
struct PreparedToolChat {
  ToolPrompt prompt;
  std::string forced_gbnf;  // "" unless calls are forced
  std::string trigger, triggered_gbnf;  // "" unless auto, in a format with a marker
  // With tools offered: the format's call markers (the opening one first), which a vocabulary may
  // hold as special tokens that decode to nothing (Engine::Prepare has the reply spell them).
  std::vector<std::string> markers;
};
Result<PreparedToolChat> PrepareToolChat(const ChatTemplate& chat_template, std::vector<ChatMessage> messages,
                                         const ToolRequest& tools);

// A call read from a reply: the function and its arguments as compact JSON text (an object).
struct ParsedToolCall {
  std::string name;
  std::string arguments;
};
struct ParsedReply {
  std::string content;  // the reply's text outside the calls (all of it when none parsed)
  std::vector<ParsedToolCall> calls;
};

// The calls in `text` written in `format`, each naming one of `functions` with object arguments;
// a call that does not parse or names another function stays content.
ParsedReply ParseToolCalls(ToolCallFormat format, std::string_view text, std::span<const ToolFunction> functions);

// Streaming: how many leading bytes of `text` (a reply so far) are content whatever follows —
// text before anything that is, or may become, a call.
size_t ToolCallContentPrefix(ToolCallFormat format, std::string_view text);

// A new call id from `random` bits: "call_" and 24 letters or digits; Mistral's templates require
// exactly 9 letters or digits.
std::string ToolCallId(ToolCallFormat format, uint64_t random);

}  // namespace fak::internal

#endif  // FAK_SRC_GRAMMAR_TOOL_CALLS_H_
