// RespReader: fak's parser of Redis replies (RESP2), fed the bytes a connection received. A reply
// comes from a server, or from whatever answers on its port, so nothing it says is trusted: every
// length and count is checked against RespLimits before anything is allocated or waited for, the
// nesting is bounded, no element count reserves memory, and the parse is iterative (an explicit
// stack), so no reply can exhaust memory or the stack. hiredis only writes commands; every reply
// fak reads goes through here (RedisConnection::Run) or through RunInto's bounded bulk reader.
#ifndef FAK_SRC_STORE_RESP_READER_H_
#define FAK_SRC_STORE_RESP_READER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"

namespace fak::internal {

// A reply, copied out of the stream. Error replies ("-ERR ...") are replies, not Statuses: the
// caller decides what they mean.
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

struct RespLimits {
  uint64_t max_bulk_bytes = uint64_t{512} << 20;  // one bulk string (Redis's own proto-max-bulk-len)
  uint64_t max_elements = uint64_t{1} << 22;      // array elements in one reply, nested ones included
  int max_depth = 8;                              // arrays open at once
  size_t max_line_bytes = 64 * 1024;              // a header or simple-string line, without its CRLF
  uint64_t max_reply_bytes = uint64_t{1} << 30;   // bytes one reply may span on the wire
};

class RespReader {
 public:
  explicit RespReader(const RespLimits& limits = {}) : limits_(limits) {}

  // Appends received bytes.
  void Feed(std::string_view bytes);
  // The next whole reply; nullopt when more bytes are needed; Corruption naming the limit or the
  // malformed part otherwise, after which the stream is unusable (every later call fails too).
  Result<std::optional<RedisReply>> Next();
  // Bytes fed and not yet part of a returned reply.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  struct Frame {
    RedisReply array;
    uint64_t left = 0;  // elements still to come
  };
  Status Fail(std::string why);

  const RespLimits limits_;
  std::string buf_;
  size_t pos_ = 0;               // start of the first unparsed item in buf_
  std::vector<Frame> stack_;     // arrays being filled, outermost first
  uint64_t reply_bytes_ = 0;     // wire bytes of the reply in progress
  uint64_t reply_elements_ = 0;  // array elements announced in the reply in progress
  std::string failed_;           // set once the stream is unusable
};

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_RESP_READER_H_
