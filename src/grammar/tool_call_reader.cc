// ToolCallReader (fak/grammar/tool_calls.h): a reply's calls in the OpenAI shapes, over the formats
// of src/grammar/tool_calls.h.
#include <algorithm>

#include "fak/grammar/tool_calls.h"
#include "src/grammar/tool_calls.h"

namespace fak {

struct ToolCallReader::Format {
  internal::ToolCallFormat format;
  std::vector<internal::ToolFunction> functions;
};

namespace {

constexpr size_t kArgumentPiece = 32;  // bytes of arguments per streamed delta

std::string_view TrimSpace(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

Result<ToolCallReader> ToolCallReader::Create(const ChatTemplate& chat_template, const ToolRequest& tools) {
  auto format = std::make_shared<Format>();
  FAK_ASSIGN_OR_RETURN(format->format, internal::ToolCallFormatFor(chat_template));
  FAK_ASSIGN_OR_RETURN(format->functions, internal::ToolFunctionsFromJson(tools.tools_json));
  return ToolCallReader(std::move(format));
}

std::string ToolCallReader::Feed(std::string_view text) {
  text_ += text;
  const size_t upto = std::max(shown_, internal::ToolCallContentPrefix(format_->format, text_));
  std::string out = text_.substr(shown_, upto - shown_);
  shown_ = upto;
  return out;
}

void ToolCallReader::Finish(std::string_view text, uint64_t random) {
  internal::ParsedReply parsed = internal::ParseToolCalls(format_->format, text, format_->functions);
  content_ = std::move(parsed.content);
  calls_.clear();
  for (size_t i = 0; i < parsed.calls.size(); ++i) {
    calls_.push_back(ToolCall{internal::ToolCallId(format_->format, random + i), std::move(parsed.calls[i].name),
                              std::move(parsed.calls[i].arguments)});
  }
}

std::optional<std::string> ToolCallReader::content() const {
  if (!has_calls()) return content_;
  const std::string_view content = TrimSpace(content_);
  if (content.empty()) return std::nullopt;
  return std::string(content);
}

std::string ToolCallReader::UnshownContent() const {
  // The content begins with the text shown so far (the text before the first call); where the
  // parser changed that text (it drops a <|python_tag|>), nothing more is shown.
  const std::string_view shown = std::string_view(text_).substr(0, shown_);
  if (!std::string_view(content_).starts_with(shown)) return "";
  std::string rest = content_.substr(shown.size());
  return has_calls() && TrimSpace(rest).empty() ? std::string() : rest;
}

std::vector<ToolCallDelta> ToolCallReader::Deltas() const {
  std::vector<ToolCallDelta> deltas;
  for (size_t i = 0; i < calls_.size(); ++i) {
    const ToolCall& call = calls_[i];
    deltas.push_back(ToolCallDelta{i, true, call.id, call.name, ""});
    // The arguments are compact JSON; pieces end before a UTF-8 continuation byte, so each is text.
    for (size_t at = 0; at < call.arguments.size();) {
      size_t end = std::min(call.arguments.size(), at + kArgumentPiece);
      while (end < call.arguments.size() && (static_cast<unsigned char>(call.arguments[end]) & 0xC0) == 0x80) ++end;
      deltas.push_back(ToolCallDelta{i, false, "", "", call.arguments.substr(at, end - at)});
      at = end;
    }
  }
  return deltas;
}

}  // namespace fak
