// JsonSchemaToGbnf: one pass over the schema, each subschema becoming a GBNF expression, objects
// and $ref targets becoming rules of their own. The JSON primitives are fixed rules emitted with
// every grammar.
#include "fak/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/core/json.h"

namespace fak {
namespace {

using internal::Json;

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxCount = 1000;  // minItems/maxItems/minLength/maxLength (GrammarLimits.max_repetition)

// The primitives. `ws` is bounded so a model cannot pad forever; digits likewise.
constexpr std::string_view kPrimitives = R"(ws ::= [ \t\n]{0,20}
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}"
array ::= "[" ws (value ws ("," ws value ws)*)? "]"
digit2 ::= [0-9] [0-9]
date ::= "\"" date-body "\""
date-body ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])
time ::= "\"" time-body "\""
time-body ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
date-time ::= "\"" date-body "T" time-body "\""
hex ::= [0-9a-fA-F]
uuid ::= "\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\""
)";

// `bytes` as a GBNF string literal.
std::string Literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool IsAnnotation(std::string_view key) {
  for (std::string_view k : {"title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
                             "readOnly", "writeOnly", "$defs", "definitions"})
    if (k == key) return true;
  return false;
}

// Whether `value` is of JSON Schema `type` (a name or a list of names).
bool OfType(const Json& value, const Json& type) {
  if (type.is_array()) {
    for (const Json& t : type)
      if (OfType(value, t)) return true;
    return false;
  }
  const std::string name = type.is_string() ? type.get<std::string>() : "";
  if (name == "string") return value.is_string();
  if (name == "integer") return value.is_number_integer() || (value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>());
  if (name == "number") return value.is_number();
  if (name == "boolean") return value.is_boolean();
  if (name == "null") return value.is_null();
  if (name == "object") return value.is_object();
  if (name == "array") return value.is_array();
  return false;
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {}

  Result<std::string> Run() {
    FAK_ASSIGN_OR_RETURN(std::string top, RefRule("#"));
    std::string out = "root ::= " + top + " ws\n" + std::string(kPrimitives);
    for (const std::string& rule : rules_) out += rule + "\n";
    return out;
  }

 private:
  Status Refuse(const std::string& path, const std::string& what) const {
    return InvalidArgument("JSON schema at #" + path + ": " + what);
  }

  // The name the next rule gets (appended, not `"s" + ...`: GCC 12 misreads that as -Wrestrict).
  std::string NextName() const {
    std::string name = "s";
    name += std::to_string(rules_.size() + 1);
    return name;
  }
  // A new rule; returns its name.
  std::string AddRule(const std::string& body) {
    const std::string name = NextName();
    rules_.push_back(name + " ::= " + body);
    return name;
  }

  // The rule for the schema `ref` points to, made once (so recursive schemas become recursive rules).
  Result<std::string> RefRule(const std::string& ref) {
    if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
    const Json* target = nullptr;
    if (ref == "#") {
      target = &root_;
    } else {
      for (std::string_view prefix : {"#/$defs/", "#/definitions/"}) {
        if (ref.rfind(prefix, 0) != 0) continue;
        const std::string section(prefix.substr(2, prefix.size() - 3));
        std::string name;  // JSON pointer unescaping: ~1 is '/', ~0 is '~'
        for (size_t k = prefix.size(); k < ref.size(); ++k) {
          if (ref[k] == '~' && k + 1 < ref.size() && (ref[k + 1] == '0' || ref[k + 1] == '1')) {
            name += ref[++k] == '1' ? '/' : '~';
          } else {
            name += ref[k];
          }
        }
        if (root_.is_object() && root_.contains(section) && root_[section].is_object() && root_[section].contains(name))
          target = &root_[section][name];
      }
    }
    if (target == nullptr) return Refuse("", "$ref '" + ref + "' does not resolve (only #, #/$defs/... and #/definitions/...)");
    const std::string name = NextName();
    rules_.push_back("");  // reserved: a reference inside resolves to this name
    const size_t slot = rules_.size() - 1;
    ref_rules_[ref] = name;
    FAK_ASSIGN_OR_RETURN(std::string body, Convert(*target, ref == "#" ? "" : ref.substr(1), 0));
    rules_[slot] = name + " ::= " + body;
    return name;
  }

  Result<std::string> Convert(const Json& s, const std::string& path, int depth);
  Result<std::string> ConvertTyped(const Json& s, const std::string& type, const std::string& path, int depth);
  Result<std::string> ConvertObject(const Json& s, const std::string& path, int depth);
  Result<std::string> ConvertArray(const Json& s, const std::string& path, int depth);
  Result<std::string> ConvertString(const Json& s, const std::string& path);
  Result<uint64_t> Count(const Json& s, const char* key, const std::string& path) const;

  const Json& root_;
  std::vector<std::string> rules_;
  std::map<std::string, std::string> ref_rules_;
};

Result<uint64_t> Converter::Count(const Json& s, const char* key, const std::string& path) const {
  const Json& v = s[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    return Refuse(path, std::string(key) + " must be a non-negative integer");
  const uint64_t n = v.get<uint64_t>();
  if (n > kMaxCount) return Refuse(path, std::string(key) + " " + std::to_string(n) + " is above the supported " + std::to_string(kMaxCount));
  return n;
}

Result<std::string> Converter::Convert(const Json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) return Refuse(path, "nested deeper than " + std::to_string(kMaxDepth));
  if (s.is_boolean()) {
    if (!s.get<bool>()) return Refuse(path, "the schema false admits nothing");
    return std::string("value");
  }
  if (!s.is_object()) return Refuse(path, "a schema must be an object or a boolean");
  // Which keywords each form reads; anything else is refused by name.
  static const std::set<std::string, std::less<>> kTyped = {
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
      "minLength", "maxLength", "format"};
  for (const auto& [key, value] : s.items()) {
    if (IsAnnotation(key) || kTyped.contains(key) || key == "enum" || key == "const" || key == "anyOf" ||
        key == "allOf" || key == "$ref")
      continue;
    return Refuse(path, "keyword '" + key + "' is not supported");
  }
  auto only = [&](std::string_view keyword) -> Status {
    for (const auto& [key, value] : s.items())
      if (key != keyword && !IsAnnotation(key)) return Refuse(path, "'" + key + "' beside '" + std::string(keyword) + "' is not supported");
    return Status::Ok();
  };
  if (s.contains("$ref")) {
    FAK_RETURN_IF_ERROR(only("$ref"));
    if (!s["$ref"].is_string()) return Refuse(path, "$ref must be a string");
    return RefRule(s["$ref"].get<std::string>());
  }
  if (s.contains("anyOf") || s.contains("allOf")) {
    const bool any = s.contains("anyOf");
    const char* key = any ? "anyOf" : "allOf";
    FAK_RETURN_IF_ERROR(only(key));
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) return Refuse(path, std::string(key) + " must be a non-empty list");
    if (!any && list.size() != 1) return Refuse(path, "allOf of more than one schema is not supported");
    std::string out = "(";
    for (size_t i = 0; i < list.size(); ++i) {
      FAK_ASSIGN_OR_RETURN(std::string e, Convert(list[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
      out += (i ? " | " : "") + e;
    }
    return out + ")";
  }
  if (s.contains("const") || s.contains("enum")) {
    const bool is_const = s.contains("const");
    for (const auto& [key, value] : s.items()) {
      if (key != "const" && key != "enum" && key != "type" && !IsAnnotation(key))
        return Refuse(path, "'" + key + "' beside '" + (is_const ? "const" : "enum") + "' is not supported");
    }
    const Json list = is_const ? Json::array({s["const"]}) : s["enum"];
    if (!list.is_array() || list.empty()) return Refuse(path, "enum must be a non-empty list");
    // pydantic writes {"enum": [...], "type": "string"}: only the values of that type are allowed.
    std::string out;
    for (const Json& value : list) {
      if (s.contains("type") && !OfType(value, s["type"])) continue;
      out += (out.empty() ? "(" : " | ") + Literal(internal::DumpJson(value));
    }
    if (out.empty()) return Refuse(path, "no value of the enum has the schema's type");
    return out + ")";
  }
  if (!s.contains("type")) {
    for (const auto& [key, value] : s.items())
      if (!IsAnnotation(key)) return Refuse(path, "'" + key + "' without a type is not supported");
    return std::string("value");
  }
  const Json& type = s["type"];
  if (type.is_string()) return ConvertTyped(s, type.get<std::string>(), path, depth);
  if (!type.is_array() || type.empty()) return Refuse(path, "type must be a string or a non-empty list of strings");
  std::string out = "(";
  for (size_t i = 0; i < type.size(); ++i) {
    if (!type[i].is_string()) return Refuse(path, "type must be a string or a non-empty list of strings");
    FAK_ASSIGN_OR_RETURN(std::string e, ConvertTyped(s, type[i].get<std::string>(), path, depth));
    out += (i ? " | " : "") + e;
  }
  return out + ")";
}

Result<std::string> Converter::ConvertTyped(const Json& s, const std::string& type, const std::string& path, int depth) {
  // Keywords that belong to another type are refused rather than ignored.
  auto foreign = [&](std::initializer_list<const char*> allowed) -> Status {
    for (const auto& [key, value] : s.items()) {
      if (IsAnnotation(key) || key == "type") continue;
      bool ok = false;
      for (const char* a : allowed) ok = ok || key == a;
      if (!ok && !(s["type"].is_array())) return Refuse(path, "keyword '" + key + "' does not apply to type " + type);
    }
    return Status::Ok();
  };
  if (type == "object") {
    FAK_RETURN_IF_ERROR(foreign({"properties", "required", "additionalProperties"}));
    return ConvertObject(s, path, depth);
  }
  if (type == "array") {
    FAK_RETURN_IF_ERROR(foreign({"items", "minItems", "maxItems"}));
    return ConvertArray(s, path, depth);
  }
  if (type == "string") {
    FAK_RETURN_IF_ERROR(foreign({"minLength", "maxLength", "format"}));
    return ConvertString(s, path);
  }
  FAK_RETURN_IF_ERROR(foreign({}));
  if (type == "number" || type == "integer" || type == "boolean" || type == "null") return type;
  return Refuse(path, "unknown type '" + type + "'");
}

Result<std::string> Converter::ConvertString(const Json& s, const std::string& path) {
  if (s.contains("format")) {
    if (s.contains("minLength") || s.contains("maxLength")) return Refuse(path, "format with minLength/maxLength is not supported");
    const std::string format = s["format"].is_string() ? s["format"].get<std::string>() : "";
    if (format == "date" || format == "time" || format == "date-time" || format == "uuid") return format;
    return Refuse(path, "format '" + internal::DumpJson(s["format"]) + "' is not supported (date, time, date-time, uuid are)");
  }
  if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("string");
  uint64_t min = 0;
  if (s.contains("minLength")) {
    FAK_ASSIGN_OR_RETURN(min, Count(s, "minLength", path));
  }
  std::string max;
  if (s.contains("maxLength")) {
    FAK_ASSIGN_OR_RETURN(uint64_t m, Count(s, "maxLength", path));
    if (m < min) return Refuse(path, "maxLength is below minLength");
    max = std::to_string(m);
  }
  return "\"\\\"\" char{" + std::to_string(min) + "," + max + "} \"\\\"\"";
}

Result<std::string> Converter::ConvertArray(const Json& s, const std::string& path, int depth) {
  std::string item = "value";
  if (s.contains("items")) {
    FAK_ASSIGN_OR_RETURN(item, Convert(s["items"], path + "/items", depth + 1));
  }
  uint64_t min = 0;
  if (s.contains("minItems")) {
    FAK_ASSIGN_OR_RETURN(min, Count(s, "minItems", path));
  }
  std::optional<uint64_t> max;
  if (s.contains("maxItems")) {
    FAK_ASSIGN_OR_RETURN(max, Count(s, "maxItems", path));
    if (*max < min) return Refuse(path, "maxItems is below minItems");
    if (*max == 0) return std::string("\"[\" ws \"]\"");
  }
  const std::string more = "(\",\" ws " + item + " ws){" + std::to_string(min > 0 ? min - 1 : 0) + "," +
                           (max ? std::to_string(*max - 1) : "") + "}";
  const std::string items = item + " ws " + more;
  return AddRule("\"[\" ws " + (min > 0 ? items : "(" + items + ")?") + " \"]\"");
}

Result<std::string> Converter::ConvertObject(const Json& s, const std::string& path, int depth) {
  const Json* props = s.contains("properties") ? &s["properties"] : nullptr;
  if (props != nullptr && !props->is_object()) return Refuse(path, "properties must be an object");
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Refuse(path, "required must be a list of names");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return Refuse(path, "required must be a list of names");
      if (props == nullptr || !props->contains(r.get<std::string>()))
        return Refuse(path, "required property '" + r.get<std::string>() + "' is not among the properties");
      required.insert(r.get<std::string>());
    }
  }
  if (props == nullptr || props->empty()) {
    const Json additional = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    if (additional.is_boolean()) return std::string(additional.get<bool>() ? "object" : "(\"{\" ws \"}\")");
    FAK_ASSIGN_OR_RETURN(std::string v, Convert(additional, path + "/additionalProperties", depth + 1));
    const std::string member = "string ws \":\" ws " + v + " ws";
    return AddRule("\"{\" ws (" + member + " (\",\" ws " + member + ")*)? \"}\"");
  }
  if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() && !s["additionalProperties"].is_object())
    return Refuse(path, "additionalProperties must be a boolean or a schema");
  // Members in the order of `required` (pydantic and OpenAI's strict mode list every property
  // there, in declaration order), then the optional ones by name. first[k]: members k.. when none
  // is written yet; after[k]: the same after one was (each preceded by a comma). An optional
  // member may be skipped.
  std::vector<std::string> order;
  for (const Json& r : s.value("required", Json::array()))
    if (std::find(order.begin(), order.end(), r.get<std::string>()) == order.end()) order.push_back(r.get<std::string>());
  for (const auto& [key, sub] : props->items())
    if (!required.contains(key)) order.push_back(key);
  std::vector<std::string> members;
  std::vector<bool> optional;
  for (const std::string& key : order) {
    FAK_ASSIGN_OR_RETURN(std::string v, Convert((*props)[key], path + "/properties/" + key, depth + 1));
    members.push_back(Literal(internal::DumpJson(Json(key))) + " ws \":\" ws " + v + " ws");
    optional.push_back(!required.contains(key));
  }
  const size_t n = members.size();
  std::vector<std::string> first(n + 1, "\"\""), after(n + 1, "\"\"");
  for (size_t k = n; k-- > 0;) {
    after[k] = AddRule("\",\" ws " + members[k] + " " + after[k + 1] + (optional[k] ? " | " + after[k + 1] : ""));
    first[k] = AddRule(members[k] + " " + after[k + 1] + (optional[k] ? " | " + first[k + 1] : ""));
  }
  return AddRule("\"{\" ws " + first[0] + " \"}\"");
}

}  // namespace

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json) {
  FAK_ASSIGN_OR_RETURN(Json schema, internal::ParseJson(schema_json, "JSON schema"));
  try {
    return Converter(schema).Run();
  } catch (const std::exception& e) {  // nlohmann's type errors on a malformed schema; bad_alloc
    return InvalidArgument(std::string("JSON schema: ") + e.what());
  }
}

std::string JsonObjectGbnf() { return "root ::= object ws\n" + std::string(kPrimitives); }

}  // namespace fak
