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

// Parses `text` as one JSON value. On malformed input: a `code` error
// "<what>: malformed JSON: <reason, with the line and column>".
Result<Json> ParseJson(std::string_view text, std::string_view what, StatusCode code = StatusCode::kInvalidArgument);
// ParseJson for a document that must be an object; either failure reads
// "<what>: not a JSON object (<why>)".
Result<Json> ParseJsonObject(std::string_view text, std::string_view what,
                             StatusCode code = StatusCode::kInvalidArgument);

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
