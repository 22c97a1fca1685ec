// Tool calls on the engine: what a request offers the model (ToolRequest, in EngineRequest::tools),
// and the reader of a reply's calls in the OpenAI shapes (ToolCallReader) that every surface — fak
// serve, the Python package, the C API — uses. Engine::Prepare renders the tools through the chat
// template and installs the grammar that forces calls; the call formats are docs/server.md's
// "Tool calls".
#ifndef FAK_GRAMMAR_TOOL_CALLS_H_
#define FAK_GRAMMAR_TOOL_CALLS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/tokenizer/chat_template.h"

namespace fak {

enum class ToolChoice {
  kAuto,      // the model may call: free text until it writes its family's call marker, then the
              // grammar holds the call (so its arguments parse)
  kNone,      // no calls: the tools are not offered
  kRequired,  // the reply is one or more calls of any of the tools (a grammar forces it)
  kNamed,     // the reply is one call of ToolRequest::named
};

// OpenAI's tools, tool_choice and parallel_tool_calls.
struct ToolRequest {
  // The `tools` array as the OpenAI API gives it ([{"type": "function", "function": {"name",
  // "parameters"?, ...}}]), JSON text; empty: no tools.
  std::string tools_json;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;     // kNamed: the function's name
  bool parallel = true;  // kRequired may write several calls (at most eight)
  // Whether the model is offered tools and its reply is read for calls.
  bool active() const { return !tools_json.empty() && choice != ToolChoice::kNone; }
};

// A call read from a reply; `arguments` is compact JSON text of an object.
struct ToolCall {
  std::string id;  // "call_" and 24 letters or digits (Mistral: 9 letters or digits, as its template requires)
  std::string name;
  std::string arguments;
};

// A streamed piece of the calls (OpenAI's delta.tool_calls[i]): a call's first piece carries its id
// and name (and empty arguments), the next ones its arguments in order.
struct ToolCallDelta {
  size_t index = 0;
  bool first = false;
  std::string id, name;
  std::string arguments;
};

// One reply read for tool calls. Feed it the streamed text to learn which part is content (never the
// start of a call); Finish it with the whole text to read its calls. Parsing is total: a call that
// does not parse, or names a function not offered, stays content. Not thread-safe; copyable.
class FAK_EXPORT ToolCallReader {
 public:
  // The reader of replies of `chat_template`'s model to `tools` (active). InvalidArgument naming a
  // bad tools entry; Unsupported for a template whose call format fak does not read.
  static Result<ToolCallReader> Create(const ChatTemplate& chat_template, const ToolRequest& tools);

  // Streaming: appends `text` to the reply and returns the part of it now known to be content.
  std::string Feed(std::string_view text);
  // The whole reply, done: reads its calls (ids drawn from `random`).
  void Finish(std::string_view text, uint64_t random);

  bool has_calls() const { return !calls_.empty(); }
  const std::vector<ToolCall>& calls() const { return calls_; }
  // The message's content: the text outside the calls (all of it when there are none; trimmed
  // beside calls, and nullopt when nothing is left).
  std::optional<std::string> content() const;
  // Streaming, after Finish: the content not yet returned by Feed, and the calls as deltas
  // (arguments in pieces of about 32 bytes, each whole UTF-8).
  std::string UnshownContent() const;
  std::vector<ToolCallDelta> Deltas() const;

 private:
  struct Format;
  explicit ToolCallReader(std::shared_ptr<const Format> format) : format_(std::move(format)) {}

  std::shared_ptr<const Format> format_;  // the call format and the functions offered
  std::string text_;  // streamed so far
  size_t shown_ = 0;  // bytes of text_ returned by Feed
  std::string content_;
  std::vector<ToolCall> calls_;
};

}  // namespace fak

#endif  // FAK_GRAMMAR_TOOL_CALLS_H_
