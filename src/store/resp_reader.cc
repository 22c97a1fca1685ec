// RespReader: an iterative RESP2 parser with every length checked before it is used.
#include "src/store/resp_reader.h"

#include <charconv>
#include <cstring>
#include <utility>

namespace fak::internal {
namespace {

// The decimal integer that is all of `s` (a sign allowed), or nullopt.
std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  const char* first = s.data();
  if (!s.empty() && s[0] == '+') ++first;  // from_chars takes '-' only
  auto [p, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || first == s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

void RespReader::Feed(std::string_view bytes) {
  // Consumed bytes are dropped once they are most of the buffer: amortised O(1) per byte.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

Status RespReader::Fail(std::string why) {
  failed_ = "redis reply: " + std::move(why);
  return Corruption(failed_);
}

Result<std::optional<RedisReply>> RespReader::Next() {
  if (!failed_.empty()) return Corruption(failed_);
  for (;;) {
    const std::string_view rest = std::string_view(buf_).substr(pos_);
    const size_t eol = rest.substr(0, limits_.max_line_bytes + 2).find("\r\n");
    if (eol == std::string_view::npos) {
      if (rest.size() > limits_.max_line_bytes + 1) {
        return Fail("a line longer than the limit of " + std::to_string(limits_.max_line_bytes) + " bytes");
      }
      return std::optional<RedisReply>();
    }
    if (eol == 0) return Fail("an empty line where a reply was expected");
    const char kind = rest[0];
    const std::string_view body = rest.substr(1, eol - 1);
    uint64_t item_bytes = eol + 2;
    RedisReply item;
    bool complete = true;
    std::optional<int64_t> n;
    if (kind == ':' || kind == '$' || kind == '*') {
      n = ParseInt(body);
      if (!n) return Fail(std::string("unparsable length or integer after '") + kind + "'");
    }
    switch (kind) {
      case '+':
      case '-':
        item.type = kind == '+' ? RedisReply::Type::kStatus : RedisReply::Type::kError;
        item.str.assign(body);
        break;
      case ':':
        item.type = RedisReply::Type::kInteger;
        item.integer = *n;
        break;
      case '$': {
        if (*n == -1) break;  // nil
        if (*n < 0) return Fail("bulk length " + std::to_string(*n));
        const uint64_t len = static_cast<uint64_t>(*n);
        // Checked before waiting for (or buffering) a byte of the payload.
        if (len > limits_.max_bulk_bytes) {
          return Fail("bulk length " + std::to_string(len) + " exceeds the limit of " +
                      std::to_string(limits_.max_bulk_bytes) + " bytes");
        }
        if (rest.size() - item_bytes < len + 2) return std::optional<RedisReply>();  // nothing consumed yet
        if (rest.compare(item_bytes + len, 2, "\r\n") != 0) return Fail("a bulk string not terminated by CRLF");
        item.type = RedisReply::Type::kString;
        item.str.assign(rest.substr(item_bytes, len));
        item_bytes += len + 2;
        break;
      }
      case '*': {
        if (*n == -1) break;  // nil array
        if (*n < 0) return Fail("array length " + std::to_string(*n));
        const uint64_t count = static_cast<uint64_t>(*n);
        if (count > limits_.max_elements - reply_elements_) {
          return Fail("an array of " + std::to_string(count) + " elements exceeds the limit of " +
                      std::to_string(limits_.max_elements) + " elements per reply");
        }
        item.type = RedisReply::Type::kArray;
        if (count == 0) break;
        if (stack_.size() >= static_cast<size_t>(limits_.max_depth)) {
          return Fail("arrays nested deeper than the limit of " + std::to_string(limits_.max_depth));
        }
        reply_elements_ += count;
        complete = false;
        break;
      }
      default:
        return Fail("unknown reply type byte " + std::to_string(static_cast<unsigned char>(kind)));
    }
    pos_ += item_bytes;
    reply_bytes_ += item_bytes;
    if (reply_bytes_ > limits_.max_reply_bytes) {
      return Fail("a reply longer than the limit of " + std::to_string(limits_.max_reply_bytes) + " bytes");
    }
    if (!complete) {
      // No reserve from the count: memory grows only with elements that actually arrive.
      stack_.push_back(Frame{std::move(item), static_cast<uint64_t>(*n)});
      continue;
    }
    // Attach the item to the arrays it completes; a reply is whole when none is left open.
    while (!stack_.empty()) {
      Frame& top = stack_.back();
      top.array.elements.push_back(std::move(item));
      if (--top.left > 0) break;
      item = std::move(top.array);
      stack_.pop_back();
    }
    if (!stack_.empty()) continue;
    reply_bytes_ = 0;
    reply_elements_ = 0;
    return std::optional<RedisReply>(std::move(item));
  }
}

}  // namespace fak::internal
