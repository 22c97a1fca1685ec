// The size-capped manifest parse, decimal text for doubles, and the strict object reader.
#include "src/gate/manifest_json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "src/core/str_cat.h"

namespace fak::internal {

Result<Json> ParseJsonText(std::string_view text, std::string_view what) {
  if (text.size() > kMaxManifestJsonBytes) {
    return InvalidArgument(StrCat(what, ": document is ", std::to_string(text.size()), " bytes, more than the limit of ",
                                  std::to_string(kMaxManifestJsonBytes)));
  }
  return ParseJson(text, what);
}

std::string FormatDouble(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "nan";  // cannot happen for a double in 64 bytes
  return std::string(buf, end);
}

Result<double> ParseDouble(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return InvalidArgument(StrCat("\"", text, "\" is not a decimal number"));
  }
  if (!std::isfinite(value)) return InvalidArgument(StrCat("\"", text, "\" is not finite"));
  return value;
}

JsonObjectReader::JsonObjectReader(const Json& value, std::string path)
    : value_(value), path_(std::move(path)) {
  if (!value_.is_object()) {
    status_ = InvalidArgument(path_ + ": expected object, got " + std::string(JsonTypeName(value_)));
  }
}

void JsonObjectReader::Fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

const Json* JsonObjectReader::Find(std::string_view key, bool (*type_ok)(const Json&),
                                             const char* type_name) {
  if (!status_.ok()) return nullptr;
  read_.emplace(key);
  auto it = value_.find(key);
  if (it == value_.end()) {
    Fail(InvalidArgument(FieldPath(key) + ": missing"));
    return nullptr;
  }
  if (type_ok != nullptr && !type_ok(*it)) {
    Fail(InvalidArgument(FieldPath(key) + ": expected " + type_name + ", got " + std::string(JsonTypeName(*it))));
    return nullptr;
  }
  return &*it;
}

std::string JsonObjectReader::String(std::string_view key) {
  const Json* v = Find(key, [](const Json& j) { return j.is_string(); }, "string");
  return v ? v->get_ref<const std::string&>() : std::string();
}

Digest JsonObjectReader::Hex(std::string_view key) {
  const std::string hex = String(key);
  if (!status_.ok()) return {};
  bool lower_hex = hex.size() == Digest::kSize * 2;
  for (char c : hex) lower_hex = lower_hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!lower_hex) {
    Fail(InvalidArgument(FieldPath(key) + ": expected 64 lowercase hex digits, got " + std::to_string(hex.size()) +
                         " characters"));
    return {};
  }
  return *Digest::FromHex(hex);  // checked above
}

uint64_t JsonObjectReader::Unsigned(std::string_view key) {
  const Json* v =
      Find(key, [](const Json& j) { return j.is_number_unsigned(); }, "unsigned integer");
  return v ? v->get<uint64_t>() : 0;
}

int64_t JsonObjectReader::Signed(std::string_view key) {
  const Json* v = Find(key, [](const Json& j) { return j.is_number_integer(); }, "integer");
  if (v == nullptr) return 0;
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Fail(InvalidArgument(FieldPath(key) + ": " + std::to_string(v->get<uint64_t>()) + " is out of range"));
    return 0;
  }
  return v->get<int64_t>();
}

const Json* JsonObjectReader::Object(std::string_view key) {
  return Find(key, [](const Json& j) { return j.is_object(); }, "object");
}

const Json* JsonObjectReader::Raw(std::string_view key) { return Find(key, nullptr, ""); }

Status JsonObjectReader::Finish() const {
  if (!status_.ok()) return status_;
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (read_.find(it.key()) == read_.end()) return InvalidArgument(FieldPath(it.key()) + ": unknown field");
  }
  return Status::Ok();
}

}  // namespace fak::internal
