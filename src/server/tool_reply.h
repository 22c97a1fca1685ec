// One choice's reply read for tool calls (src/grammar/tool_calls.h): while it streams, which of its
// text may be shown as content (never the start of a call); when it is done, its calls in the
// OpenAI shapes — the message's `tool_calls` and the stream's `tool_calls` deltas.
// Not thread-safe: the server guards it with its run's lock.
#ifndef FAK_SRC_SERVER_TOOL_REPLY_H_
#define FAK_SRC_SERVER_TOOL_REPLY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/json.h"
#include "src/grammar/tool_calls.h"

namespace fak::internal {

class ToolReply {
 public:
  ToolReply(ToolCallFormat format, std::vector<ToolFunction> functions) : format_(format), functions_(std::move(functions)) {}

  // Streaming: appends `text` to the reply and returns the part of it now known to be content.
  std::string Feed(std::string_view text);
  // The whole reply, done: reads its calls (ids drawn from `random`).
  void Finish(std::string_view text, uint64_t random);

  bool has_calls() const { return !parsed_.calls.empty(); }
  // The message's content: the text outside the calls, trimmed; null when there is none beside calls.
  Json Content() const;
  // message.tool_calls: [{id, type, function: {name, arguments}}].
  Json ToolCalls() const;
  // Streaming, after Finish: the content not yet shown, and the calls as the deltas' `tool_calls`
  // entries — for each call its index, id, type and name (arguments ""), then its arguments in pieces.
  std::string UnshownContent() const;
  std::vector<Json> ToolCallDeltas() const;

 private:
  ToolCallFormat format_;
  std::vector<ToolFunction> functions_;
  std::string text_;  // streamed so far
  size_t shown_ = 0;  // bytes of text_ shown as content
  ParsedReply parsed_;
  std::vector<std::string> ids_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_TOOL_REPLY_H_
