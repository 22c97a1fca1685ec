// Internal JSON: the one place fak parses and dumps JSON with nlohmann_json and contains what it
// throws. Documents are expected input (manifests, recall images, journals, Hugging Face files),
// so every failure comes back as a Status naming what was parsed and where it failed. nlohmann
// types may appear in src/ through this header, never in include/fak/ (architecture §10).
#ifndef FAK_SRC_CORE_JSON_H_
#define FAK_SRC_CORE_JSON_H_

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fak/core/digest.h"
#include "fak/core/status.h"

namespace fak::internal {

using Json = nlohmann::json;

// What a parse accepts before nlohmann sees the text. Every JSON fak reads may come from someone
// else (a client, a file another process wrote), and nlohmann copies, compares, dumps and hashes
// values recursively: a document nested deeper than the stack allows would crash whatever touches
// it after the parse. The depth is checked by a linear scan (brackets outside strings), so nothing
// recursive ever runs on a document that is refused; the size bounds the parser's allocations.
struct JsonLimits {
  static constexpr int kDefaultMaxDepth = 64;
  static constexpr size_t kDefaultMaxBytes = size_t{256} << 20;  // a large tokenizer.json is ~35 MB
  int max_depth = kDefaultMaxDepth;       // arrays and objects open at once; 1 = no nesting inside the top value
  size_t max_bytes = kDefaultMaxBytes;    // the text's length
};

// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count), up
// to `stop_at` (the scan stops there). Linear, no allocation; `text` need not be valid JSON.
int JsonNestingDepth(std::string_view text, int stop_at);

// Parses `text` as one JSON value. On malformed input: a `code` error
// "<what>: malformed JSON: <reason, with the line and column>". Past a limit, before parsing: a
// `code` error "<what>: JSON nested deeper than the limit of <n> levels" or "<what>: JSON of <n>
// bytes is larger than the limit of <m> bytes".
Result<Json> ParseJson(std::string_view text, std::string_view what, StatusCode code = StatusCode::kInvalidArgument,
                       const JsonLimits& limits = {});
// ParseJson for a document that must be an object; a malformed or non-object document reads
// "<what>: not a JSON object (<why>)"; the limits' errors read as ParseJson's.
Result<Json> ParseJsonObject(std::string_view text, std::string_view what,
                             StatusCode code = StatusCode::kInvalidArgument, const JsonLimits& limits = {});

// Sorted keys (std::map order), no whitespace when indent < 0, UTF-8 passed through. Invalid UTF-8
// is replaced rather than thrown on, so this never fails.
std::string DumpJson(const Json& value, int indent = -1);
// The canonical form for hashing and signing: DumpJson(value) but a `code` error
// "<what>: cannot encode as JSON (...)" on invalid UTF-8 instead of replacing it.
Result<std::string> CanonicalJson(const Json& value, std::string_view what,
                                  StatusCode code = StatusCode::kInvalidArgument);

// "string", "object", "unsigned integer", ... for error messages.
std::string_view JsonTypeName(const Json& value);

// Required fields of object `obj`: a `code` error "<what>: missing field '<key>'" or
// "<what>: field '<key>' is not <a type>" (also when `obj` is not an object).
Result<std::string> GetString(const Json& obj, std::string_view key, std::string_view what,
                              StatusCode code = StatusCode::kCorruption);
Result<uint64_t> GetUint(const Json& obj, std::string_view key, std::string_view what,
                         StatusCode code = StatusCode::kCorruption);
Result<int64_t> GetInt(const Json& obj, std::string_view key, std::string_view what,
                       StatusCode code = StatusCode::kCorruption);
// A sha256 as 64 hex digits (Digest::FromHex); the error also names the field.
Result<Digest> GetDigest(const Json& obj, std::string_view key, std::string_view what,
                         StatusCode code = StatusCode::kCorruption);
// The member object or array; valid while `obj` is.
Result<const Json*> GetObject(const Json& obj, std::string_view key, std::string_view what,
                              StatusCode code = StatusCode::kCorruption);
Result<const Json*> GetArray(const Json& obj, std::string_view key, std::string_view what,
                             StatusCode code = StatusCode::kCorruption);

// Runs `body` (returning Status or Result<T>) and turns anything it throws — a nlohmann type error
// a reader's checks missed, bad_alloc on a pathological document — into a `code` error
// "<context>: <exception text>", so no exception crosses the API.
template <class Body>
auto ContainJsonExceptions(StatusCode code, std::string_view context, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::string message(context);
    message += ": ";
    message += e.what();
    return Status(code, std::move(message));
  }
}

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_JSON_H_
