// Fuzzes fak's Redis reply parser (src/store/resp_reader.h), the reader of every reply
// RedisConnection::Run receives — the bytes any peer on the Redis port can send. The first byte
// picks the feeding (1 + bits 0-5: the bytes per Feed) and the limits (bit 6 set: small ones, so
// inputs reach every limit; clear: the defaults). Invariants: no crash, hang or unbounded
// allocation; feeding the bytes in pieces gives exactly the replies and the final refusal of
// feeding them at once; every reply stays within the limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "src/store/resp_reader.h"

namespace {

using fak::internal::RedisReply;
using fak::internal::RespLimits;
using fak::internal::RespReader;

struct Outcome {
  std::vector<RedisReply> replies;
  std::string error;  // the refusal that ended the stream, if any
};

Outcome Parse(std::string_view bytes, size_t step, const RespLimits& limits) {
  RespReader r(limits);
  Outcome out;
  for (size_t at = 0; at < bytes.size(); at += step) {
    r.Feed(bytes.substr(at, step));
    for (;;) {
      fak::Result<std::optional<RedisReply>> next = r.Next();
      if (!next.has_value()) {
        out.error = next.error().message();
        return out;
      }
      if (!next->has_value()) break;
      out.replies.push_back(std::move(**next));
    }
  }
  return out;
}

bool Same(const RedisReply& a, const RedisReply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size()) return false;
  for (size_t i = 0; i < a.elements.size(); ++i)
    if (!Same(a.elements[i], b.elements[i])) return false;
  return true;
}

// Depth of arrays, elements in arrays and the longest string of `r`, checked against `limits`.
void CheckWithin(const RedisReply& r, const RespLimits& limits, int depth, uint64_t* elements) {
  FAK_FUZZ_CHECK(r.type != RedisReply::Type::kString || r.str.size() <= limits.max_bulk_bytes, "bulk past the limit");
  if (r.type != RedisReply::Type::kArray || r.elements.empty()) return;
  FAK_FUZZ_CHECK(depth < limits.max_depth, "arrays nested past the limit");
  *elements += r.elements.size();
  FAK_FUZZ_CHECK(*elements <= limits.max_elements, "elements past the limit");
  for (const RedisReply& e : r.elements) CheckWithin(e, limits, depth + 1, elements);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + (data[0] & 63);
  RespLimits limits;
  if (data[0] & 64) {
    limits.max_bulk_bytes = 64;
    limits.max_elements = 16;
    limits.max_depth = 3;
    limits.max_line_bytes = 32;
    limits.max_reply_bytes = 256;
  }
  const std::string_view bytes = fak::fuzz::AsText(data + 1, size - 1);
  const Outcome whole = Parse(bytes, bytes.size() + 1, limits);
  const Outcome pieces = Parse(bytes, step, limits);
  FAK_FUZZ_CHECK(whole.error == pieces.error, whole.error + " | " + pieces.error);
  FAK_FUZZ_CHECK(whole.replies.size() == pieces.replies.size(), "a different number of replies in pieces");
  for (size_t i = 0; i < whole.replies.size(); ++i) {
    FAK_FUZZ_CHECK(Same(whole.replies[i], pieces.replies[i]), "a different reply in pieces");
    uint64_t elements = 0;
    CheckWithin(whole.replies[i], limits, 0, &elements);
  }
  return 0;
}
