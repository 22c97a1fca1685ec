// Jinja values: Python's printing (str, repr, float repr), equality and ordering, and json.dumps as
// transformers' `tojson` calls it — what the template's output depends on, byte for byte.
#include "src/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <unicode/uchar.h>

#include "src/tokenizer/unicode.h"

namespace fak::jinja {

namespace {

void AddSpan(std::vector<TextSpan>& spans, size_t offset, size_t size) {
  if (size == 0) return;
  if (!spans.empty() && spans.back().offset + spans.back().size == offset) {
    spans.back().size += size;
  } else {
    spans.push_back({offset, size});
  }
}

// Python's str.isprintable() for one code point: not a control, format, private-use, surrogate,
// unassigned or separator character (the space excepted).
bool PythonPrintable(uint32_t cp) {
  if (cp == ' ') return true;
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

// Python's repr() of a str: single quotes unless the text has ' and no ".
std::string StringRepr(std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (const internal::CodePoint& c : internal::DecodeUtf8(s)) {
    char buf[16];
    if (c.cp == static_cast<uint32_t>(q) || c.cp == '\\') {
      out += '\\';
      out += static_cast<char>(c.cp);
    } else if (c.cp == '\n') {
      out += "\\n";
    } else if (c.cp == '\r') {
      out += "\\r";
    } else if (c.cp == '\t') {
      out += "\\t";
    } else if (c.cp == 0xFFFD && c.len == 1) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(s[c.offset]));  // not UTF-8
      out += buf;
    } else if (!PythonPrintable(c.cp)) {
      if (c.cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", c.cp);
      } else if (c.cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", c.cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", c.cp);
      }
      out += buf;
    } else {
      out.append(s.substr(c.offset, c.len));
    }
  }
  return out + q;
}


Status JsonValue(const Value& v, const JsonFormat& f, int depth, int max_depth, std::string& out) {
  if (depth > max_depth) return InvalidArgument("tojson: value nested deeper than " + std::to_string(max_depth) + " levels");
  const std::string item_sep = f.separators_set ? f.item_separator : (f.has_indent ? "," : ", ");
  const std::string key_sep = f.separators_set ? f.key_separator : ": ";
  auto newline = [&](int level) {
    if (!f.has_indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += f.indent;
  };
  if (v.none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.boolean() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.integer());
  } else if (v.is_float()) {
    const double d = v.number();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : FloatRepr(d);
  } else if (v.is_string()) {
    AppendJsonString(v.str(), out);
  } else if (v.is_list()) {
    const auto& items = v.list().items;
    if (items.empty()) {
      out += "[]";
      return Status::Ok();
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      FAK_RETURN_IF_ERROR(JsonValue(items[i], f, depth + 1, max_depth, out));
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : v.dict().items) items.push_back(&kv);
    if (items.empty()) {
      out += "{}";
      return Status::Ok();
    }
    if (f.sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    out += '{';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      AppendJsonString(items[i]->first, out);
      out += key_sep;
      FAK_RETURN_IF_ERROR(JsonValue(items[i]->second, f, depth + 1, max_depth, out));
    }
    newline(depth);
    out += '}';
  } else {
    return InvalidArgument("tojson: Object of type " + std::string(v.TypeName()) + " is not JSON serializable");
  }
  return Status::Ok();
}

}  // namespace

bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

Text Text::Content(std::string s) {
  Text t{std::move(s), {}};
  AddSpan(t.content, 0, t.bytes.size());
  return t;
}

void Text::Append(const Text& other) {
  const size_t base = bytes.size();
  bytes += other.bytes;
  for (const TextSpan& s : other.content) AddSpan(content, base + s.offset, s.size);
}

void Text::Append(std::string_view markup) { bytes += markup; }

Text Text::Slice(size_t begin, size_t end) const {
  end = std::min(end, bytes.size());
  begin = std::min(begin, end);
  Text t{bytes.substr(begin, end - begin), {}};
  for (const TextSpan& s : content) {
    const size_t b = std::max(begin, s.offset), e = std::min(end, s.offset + s.size);
    if (b < e) AddSpan(t.content, b - begin, e - b);
  }
  return t;
}

Text Text::Derived(std::string s, std::initializer_list<const Text*> inputs) {
  const bool any = std::any_of(inputs.begin(), inputs.end(), [](const Text* t) { return t != nullptr && !t->content.empty(); });
  return any ? Content(std::move(s)) : Text{std::move(s), {}};
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::MakeList(std::vector<Value> items, bool tuple) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->tuple = tuple;
  return Value(std::move(l));
}

Value Value::MakeDict(std::vector<std::pair<std::string, Value>> items) {
  auto d = std::make_shared<Dict>();
  d->items = std::move(items);
  return Value(std::move(d));
}

std::string_view Value::TypeName() const {
  if (undefined()) return "Undefined";
  if (none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return list().tuple ? "tuple" : "list";
  if (is_dict()) return dict().is_namespace ? "Namespace" : "dict";
  return "function";
}

bool Value::Truthy() const {
  if (undefined() || none()) return false;
  if (is_bool()) return boolean();
  if (is_int()) return integer() != 0;
  if (is_float()) return number() != 0.0;
  if (is_string()) return !str().empty();
  if (is_list()) return !list().items.empty();
  if (is_dict()) return !dict().items.empty();
  return true;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e-05"
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {  // Python's repr: fixed for 1e-4 <= |d| < 1e16
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (ip.size() < static_cast<size_t>(exp + 1)) ip += '0';
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return neg ? "-" + out : out;
}

Text Value::ToText() const {
  if (is_string()) return text();
  if (undefined()) return Text{};
  if (is_list() || is_dict()) {
    // A container prints its items' reprs; content inside makes the whole of it content.
    bool any = false;
    std::function<void(const Value&)> scan = [&](const Value& v) {
      if (any) return;
      if (v.is_string()) {
        any = !v.text().content.empty();
      } else if (v.is_list()) {
        for (const Value& x : v.list().items) scan(x);
      } else if (v.is_dict()) {
        for (const auto& kv : v.dict().items) scan(kv.second);
      }
    };
    scan(*this);
    return any ? Text::Content(Repr()) : Text{Repr(), {}};
  }
  return Text{Repr(), {}};
}

std::string Value::Repr() const {
  if (undefined()) return "";
  if (none()) return "None";
  if (is_bool()) return boolean() ? "True" : "False";
  if (is_int()) return std::to_string(integer());
  if (is_float()) return FloatRepr(number());
  if (is_string()) return StringRepr(str());
  if (is_list()) {
    const List& l = list();
    std::string out = l.tuple ? "(" : "[";
    for (size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + l.items[i].Repr();
    if (l.tuple && l.items.size() == 1) out += ",";
    return out + (l.tuple ? ")" : "]");
  }
  if (is_dict()) {
    if (dict().is_namespace) return "<Namespace>";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : dict().items) {
      out += (first ? "" : ", ") + StringRepr(k) + ": " + v.Repr();
      first = false;
    }
    return out + "}";
  }
  return "<function " + function().name + ">";
}

namespace {
// `budget` bounds the nodes visited: a value that shares itself (ns.a = ns; ns.b = ns) is a tree
// of exponential size when walked.
int NestingWithin(const Value& v, int stop_at, size_t& budget) {
  if (stop_at <= 0 || (!v.is_list() && !v.is_dict())) return 0;
  if (budget == 0) return stop_at;
  --budget;
  int deepest = 0;
  if (v.is_list()) {
    for (const Value& x : v.list().items) deepest = std::max(deepest, NestingWithin(x, stop_at - 1, budget));
  } else {
    for (const auto& kv : v.dict().items) deepest = std::max(deepest, NestingWithin(kv.second, stop_at - 1, budget));
  }
  return 1 + deepest;
}
}  // namespace

int Nesting(const Value& v, int stop_at) {
  size_t budget = size_t{1} << 20;
  return NestingWithin(v, stop_at, budget);
}

bool Equal(const Value& a, const Value& b) {
  if (a.undefined() || b.undefined()) return a.undefined() && b.undefined();
  if (a.none() || b.none()) return a.none() && b.none();
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.integer() == b.integer();
    return a.number() == b.number();
  }
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.list().items, &y = b.list().items;
    if (x.size() != y.size() || a.list().tuple != b.list().tuple) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!Equal(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    if (a.dict().is_namespace || b.dict().is_namespace) return &a.dict() == &b.dict();
    const auto &x = a.dict().items, &y = b.dict().items;
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const Value* w = b.dict().Find(k);
      if (w == nullptr || !Equal(v, *w)) return false;
    }
    return true;
  }
  if (a.is_callable() && b.is_callable()) return &a.function() == &b.function();
  return false;
}

Result<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.integer() < b.integer();
    return a.number() < b.number();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list()) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgument("'<' not supported between instances of '" + std::string(a.TypeName()) + "' and '" +
                         std::string(b.TypeName()) + "'");
}

Value FromJson(const nlohmann::ordered_json& json, bool content) {
  using J = nlohmann::ordered_json;
  switch (json.type()) {
    case J::value_t::null: return Value(None{});
    case J::value_t::boolean: return Value(json.get<bool>());
    case J::value_t::number_integer: return Value(json.get<int64_t>());
    case J::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u)) : Value(static_cast<double>(u));
    }
    case J::value_t::number_float: return Value(json.get<double>());
    case J::value_t::string: {
      std::string s = json.get<std::string>();
      return content ? Value(Text::Content(std::move(s))) : Value(std::move(s));
    }
    case J::value_t::array: {
      std::vector<Value> items;
      for (const J& x : json) items.push_back(FromJson(x, content));
      return Value::MakeList(std::move(items));
    }
    case J::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      for (auto it = json.begin(); it != json.end(); ++it) items.emplace_back(it.key(), FromJson(it.value(), content));
      return Value::MakeDict(std::move(items));
    }
    default: return Value(None{});
  }
}

Result<Value> ParseJsonValue(std::string_view text, bool content, std::string_view what) {
  const internal::JsonLimits limits;
  if (text.size() > limits.max_bytes) return InvalidArgument(std::string(what) + ": JSON larger than the limit");
  if (internal::JsonNestingDepth(text, limits.max_depth + 1) > limits.max_depth) {
    return InvalidArgument(std::string(what) + ": JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return InvalidArgument(std::string(what) + ": malformed JSON");
  return FromJson(json, content);
}

Result<std::string> ToJson(const Value& value, const JsonFormat& format, int max_depth) {
  std::string out;
  FAK_RETURN_IF_ERROR(JsonValue(value, format, 0, max_depth, out));
  return out;
}

void AppendJsonString(std::string_view s, std::string& out) {
  out += '"';
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(ch));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace fak::jinja
