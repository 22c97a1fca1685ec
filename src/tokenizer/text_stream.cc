// TextStream: hold back what could still become a stop string or is half a UTF-8 character.
#include "fak/tokenizer/text_stream.h"

#include <algorithm>
#include <span>

namespace fak {
namespace {

// Bytes at the end of `s` that start a UTF-8 sequence not yet complete (0 when the end is whole
// or the bytes are not valid UTF-8 anyway: then there is nothing to wait for).
size_t IncompleteUtf8Tail(const std::string& s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, std::vector<int32_t> spelled)
    : tokenizer_(&tokenizer), spelled_(std::move(spelled)) {
  for (std::string& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

size_t TextStream::HeldBack() const {
  size_t held = IncompleteUtf8Tail(pending_);
  for (const std::string& stop : stops_) {
    // The longest suffix of pending_ that is a proper prefix of `stop`.
    for (size_t k = std::min(stop.size() - 1, pending_.size()); k > held; --k) {
      if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

Result<std::string> TextStream::Push(int32_t token) {
  if (stopped_) return std::string();
  // A generated token continues the prompt: its space prefix is text (each token decoded alone
  // as a start would run every SentencePiece word into the last).
  FAK_ASSIGN_OR_RETURN(std::string piece, tokenizer_->DecodeContinuation(std::span<const int32_t>(&token, 1)));
  if (piece.empty() && std::find(spelled_.begin(), spelled_.end(), token) != spelled_.end()) piece = tokenizer_->TokenText(token);
  pending_ += piece;
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < cut) {
      cut = at;
      stopped_by_ = stop;
    }
  }
  std::string out;
  if (cut != std::string::npos) {
    stopped_ = true;
    out = pending_.substr(0, cut);
    pending_.clear();
  } else {
    const size_t release = pending_.size() - HeldBack();
    out = pending_.substr(0, release);
    pending_.erase(0, release);
  }
  emitted_ += out;
  return out;
}

std::string TextStream::Finish() {
  std::string out;
  out.swap(pending_);
  emitted_ += out;
  return out;
}

}  // namespace fak
