// A choice's reply read for tool calls, in the OpenAI shapes (src/server/tool_reply.h).
#include "src/server/tool_reply.h"

#include <algorithm>

namespace fak::internal {
namespace {

constexpr size_t kArgumentPiece = 32;  // bytes of arguments per streamed delta

std::string_view TrimSpace(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::string ToolReply::Feed(std::string_view text) {
  text_ += text;
  const size_t upto = std::max(shown_, ToolCallContentPrefix(format_, text_));
  std::string out = text_.substr(shown_, upto - shown_);
  shown_ = upto;
  return out;
}

void ToolReply::Finish(std::string_view text, uint64_t random) {
  parsed_ = ParseToolCalls(format_, text, functions_);
  ids_.clear();
  for (size_t i = 0; i < parsed_.calls.size(); ++i) ids_.push_back(ToolCallId(format_, random + i));
}

Json ToolReply::Content() const {
  if (!has_calls()) return parsed_.content;
  const std::string_view content = TrimSpace(parsed_.content);
  return content.empty() ? Json(nullptr) : Json(std::string(content));
}

Json ToolReply::ToolCalls() const {
  Json calls = Json::array();
  for (size_t i = 0; i < parsed_.calls.size(); ++i) {
    calls.push_back({{"id", ids_[i]},
                     {"type", "function"},
                     {"function", {{"name", parsed_.calls[i].name}, {"arguments", parsed_.calls[i].arguments}}}});
  }
  return calls;
}

std::string ToolReply::UnshownContent() const {
  // The content begins with the text shown so far (the text before the first call); where the
  // parser changed that text (it drops a <|python_tag|>), nothing more is shown.
  const std::string_view shown = std::string_view(text_).substr(0, shown_);
  if (!std::string_view(parsed_.content).starts_with(shown)) return "";
  std::string rest = parsed_.content.substr(shown.size());
  return has_calls() && TrimSpace(rest).empty() ? std::string() : rest;
}

std::vector<Json> ToolReply::ToolCallDeltas() const {
  std::vector<Json> deltas;
  for (size_t i = 0; i < parsed_.calls.size(); ++i) {
    const ParsedToolCall& call = parsed_.calls[i];
    deltas.push_back({{"index", i}, {"id", ids_[i]}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}});
    // The arguments are compact JSON; pieces end before a UTF-8 continuation byte, so each is text.
    for (size_t at = 0; at < call.arguments.size();) {
      size_t end = std::min(call.arguments.size(), at + kArgumentPiece);
      while (end < call.arguments.size() && (static_cast<unsigned char>(call.arguments[end]) & 0xC0) == 0x80) ++end;
      deltas.push_back({{"index", i}, {"function", {{"arguments", call.arguments.substr(at, end - at)}}}});
      at = end;
    }
  }
  return deltas;
}

}  // namespace fak::internal
