// Parsing, dumping and typed field reads over nlohmann_json, with every exception contained here.
#include "src/core/json.h"

#include <climits>
#include <optional>
#include <utility>

namespace fak::internal {
namespace {

// "<what>: <detail>" as a `code` status.
Status Error(StatusCode code, std::string_view what, std::string_view detail) {
  std::string message(what);
  message += ": ";
  message += detail;
  return Status(code, std::move(message));
}

bool IsString(const Json& j) { return j.is_string(); }
bool IsUint(const Json& j) { return j.is_number_unsigned(); }
bool IsInt(const Json& j) { return j.is_number_integer(); }
bool IsObject(const Json& j) { return j.is_object(); }
bool IsArray(const Json& j) { return j.is_array(); }

// The member `key` of `obj` when it exists and `type_ok` holds; otherwise the error naming it.
Result<const Json*> Field(const Json& obj, std::string_view key, std::string_view what, StatusCode code,
                          bool (*type_ok)(const Json&), std::string_view type) {
  if (obj.is_object()) {
    auto it = obj.find(key);
    if (it != obj.end() && type_ok(*it)) return &*it;
    if (it != obj.end()) {
      std::string detail = "field '";
      detail += key;
      detail += "' is not ";
      detail += type;
      return Error(code, what, detail);
    }
  }
  std::string detail = "missing field '";
  detail += key;
  detail += "'";
  return Error(code, what, detail);
}

// Parses into `out`; on failure, the reason (nlohmann's parse_error text gives line and column).
std::optional<std::string> Parse(std::string_view text, Json* out) {
  try {
    *out = Json::parse(text.begin(), text.end());
    return std::nullopt;
  } catch (const Json::exception& e) {
    return std::string("malformed JSON: ") + e.what();
  } catch (const std::exception& e) {  // e.g. bad_alloc from a pathological document
    return std::string("cannot parse JSON: ") + e.what();
  }
}

// The limits' error for `text`, or OK.
Status CheckLimits(std::string_view text, std::string_view what, StatusCode code, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Error(code, what, "JSON of " + std::to_string(text.size()) + " bytes is larger than the limit of " +
                                 std::to_string(limits.max_bytes) + " bytes");
  }
  const int max_depth = limits.max_depth < 0 ? 0 : limits.max_depth;
  if (max_depth < INT_MAX && JsonNestingDepth(text, max_depth + 1) > max_depth) {
    return Error(code, what, "JSON nested deeper than the limit of " + std::to_string(max_depth) + " levels");
  }
  return Status::Ok();
}

}  // namespace

int JsonNestingDepth(std::string_view text, int stop_at) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) >= stop_at) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<Json> ParseJson(std::string_view text, std::string_view what, StatusCode code, const JsonLimits& limits) {
  FAK_RETURN_IF_ERROR(CheckLimits(text, what, code, limits));
  Json value;
  if (std::optional<std::string> why = Parse(text, &value)) return Error(code, what, *why);
  return value;
}

Result<Json> ParseJsonObject(std::string_view text, std::string_view what, StatusCode code, const JsonLimits& limits) {
  FAK_RETURN_IF_ERROR(CheckLimits(text, what, code, limits));
  Json value;
  if (std::optional<std::string> why = Parse(text, &value)) return Error(code, what, "not a JSON object (" + *why + ")");
  if (!value.is_object()) {
    return Error(code, what, "not a JSON object (got " + std::string(JsonTypeName(value)) + ")");
  }
  return value;
}

std::string DumpJson(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

Result<std::string> CanonicalJson(const Json& value, std::string_view what, StatusCode code) {
  try {
    // nlohmann's object is a std::map: keys come out sorted. Numbers are integers or shortest
    // round-trip doubles, so parse-then-dump is stable.
    return value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict);
  } catch (const Json::exception& e) {
    return Error(code, what, std::string("cannot encode as JSON (") + e.what() + ")");
  }
}

std::string_view JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer: return "negative integer";
    case Json::value_t::number_unsigned: return "unsigned integer";
    case Json::value_t::number_float: return "floating-point number";
    case Json::value_t::binary: return "binary";
    case Json::value_t::discarded: return "discarded";
  }
  return "unknown";
}

Result<std::string> GetString(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  FAK_ASSIGN_OR_RETURN(const Json* v, Field(obj, key, what, code, IsString, "a string"));
  return v->get_ref<const std::string&>();
}

Result<uint64_t> GetUint(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  FAK_ASSIGN_OR_RETURN(const Json* v, Field(obj, key, what, code, IsUint, "an unsigned integer"));
  return v->get<uint64_t>();
}

Result<int64_t> GetInt(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  FAK_ASSIGN_OR_RETURN(const Json* v, Field(obj, key, what, code, IsInt, "an integer"));
  return v->get<int64_t>();
}

Result<Digest> GetDigest(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  FAK_ASSIGN_OR_RETURN(std::string hex, GetString(obj, key, what, code));
  Result<Digest> d = Digest::FromHex(hex);
  if (!d.has_value()) {
    std::string detail = "field '";
    detail += key;
    detail += "': ";
    detail += d.error().message();
    return Error(code, what, detail);
  }
  return *d;
}

Result<const Json*> GetObject(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  return Field(obj, key, what, code, IsObject, "an object");
}

Result<const Json*> GetArray(const Json& obj, std::string_view key, std::string_view what, StatusCode code) {
  return Field(obj, key, what, code, IsArray, "an array");
}

}  // namespace fak::internal
