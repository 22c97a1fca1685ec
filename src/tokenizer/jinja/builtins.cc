// The builtins chat templates call: jinja2's filters and tests, the methods of Python's str, dict
// and list they use, and the globals (range, namespace, dict, raise_exception, strftime_now). A
// builtin jinja2 or Python has but fak does not is Unsupported by name, never quietly undefined.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "src/tokenizer/jinja/interpreter.h"
#include "src/tokenizer/unicode.h"

namespace fak::jinja {

namespace {

// ---- arguments ----

const Value* FindArg(const CallArgs& args, size_t index, std::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  for (const auto& [k, v] : args.named) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Arg(const CallArgs& args, size_t index, std::string_view name, Value fallback) {
  const Value* v = FindArg(args, index, name);
  return v != nullptr ? *v : fallback;
}

Status CheckArity(Interpreter& in, const CallArgs& args, size_t max, std::string_view what) {
  if (args.positional.size() > max) {
    return in.Error(std::string(what) + " takes at most " + std::to_string(max) + " arguments, " +
                    std::to_string(args.positional.size()) + " given");
  }
  return Status::Ok();
}

Result<std::string> StringArg(Interpreter& in, const Value& v, std::string_view what) {
  if (!v.is_string()) return in.Error(std::string(what) + " must be a string, not " + std::string(v.TypeName()));
  return v.str();
}

Value MakeFunction(std::string name, std::function<Result<Value>(Interpreter&, CallArgs&)> call) {
  auto f = std::make_shared<Function>();
  f->name = std::move(name);
  f->call = std::move(call);
  return Value(std::shared_ptr<const Function>(std::move(f)));
}

// ---- strings by code point ----

// Byte offsets of each code point's start, then the end.
std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  for (const internal::CodePoint& c : internal::DecodeUtf8(s)) offsets.push_back(c.offset);
  offsets.push_back(s.size());
  return offsets;
}

enum class CaseMap { kUpper, kLower };

std::string MapCase(std::string_view s, CaseMap m) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (m == CaseMap::kUpper) {
    u.toUpper(icu::Locale::getRoot());
  } else {
    u.toLower(icu::Locale::getRoot());
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool IsCased(uint32_t cp) {
  return u_isupper(static_cast<UChar32>(cp)) || u_islower(static_cast<UChar32>(cp)) || u_istitle(static_cast<UChar32>(cp));
}

// Python's str.title() (capitalize_rest=false) and str.capitalize() (true: only the first
// character is title-cased).
std::string TitleCase(std::string_view s, bool capitalize) {
  std::string out;
  bool prev_cased = false, first = true;
  for (const internal::CodePoint& c : internal::DecodeUtf8(s)) {
    const UChar32 cp = static_cast<UChar32>(c.cp);
    const bool upper = capitalize ? first : !prev_cased;
    internal::AppendUtf8(static_cast<uint32_t>(upper ? u_totitle(cp) : u_tolower(cp)), out);
    prev_cased = IsCased(c.cp);
    first = false;
  }
  return out;
}

// jinja2's `title` filter: each run after [-\s({[<] starts upper-case, the rest lower-case.
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (const internal::CodePoint& c : internal::DecodeUtf8(s)) {
    const bool sep = c.cp == '-' || c.cp == '(' || c.cp == '{' || c.cp == '[' || c.cp == '<' || IsPythonSpace(c.cp);
    const UChar32 cp = static_cast<UChar32>(c.cp);
    if (sep) {
      out.append(s.substr(c.offset, c.len));
      word_start = true;
    } else {
      internal::AppendUtf8(static_cast<uint32_t>(word_start ? u_toupper(cp) : u_tolower(cp)), out);
      word_start = false;
    }
  }
  return out;
}

// str.strip/lstrip/rstrip(chars): the byte range kept.
std::pair<size_t, size_t> StripRange(std::string_view s, const Value& chars, bool left, bool right) {
  std::vector<internal::CodePoint> cps = internal::DecodeUtf8(s);
  std::vector<uint32_t> set;
  const bool whitespace = !chars.is_string();
  if (!whitespace) {
    for (const internal::CodePoint& c : internal::DecodeUtf8(chars.str())) set.push_back(c.cp);
  }
  auto strip = [&](uint32_t cp) {
    return whitespace ? IsPythonSpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b].cp)) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1].cp)) --e;
  }
  if (b == e) return {0, 0};
  return {cps[b].offset, cps[e - 1].offset + cps[e - 1].len};
}

Result<Value> Split(Interpreter& in, const Text& t, const Value& sep, const Value& maxsplit) {
  int64_t limit = maxsplit.is_int() ? maxsplit.integer() : -1;
  std::vector<Value> parts;
  const std::string& s = t.bytes;
  if (sep.is_string()) {
    const std::string& d = sep.str();
    if (d.empty()) return in.Error("split(): empty separator");
    size_t pos = 0;
    while (limit != 0) {
      const size_t at = s.find(d, pos);
      if (at == std::string::npos) break;
      parts.push_back(Value(t.Slice(pos, at)));
      pos = at + d.size();
      --limit;
      FAK_RETURN_IF_ERROR(in.CountIterations(1));
    }
    parts.push_back(Value(t.Slice(pos, s.size())));
  } else if (sep.none() || sep.undefined()) {
    std::vector<internal::CodePoint> cps = internal::DecodeUtf8(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPythonSpace(cps[i].cp)) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      if (limit == 0) {
        // The rest, trailing whitespace stripped, is the last part.
        size_t e = cps.size();
        while (e > i && IsPythonSpace(cps[e - 1].cp)) --e;
        parts.push_back(Value(t.Slice(cps[i].offset, cps[e - 1].offset + cps[e - 1].len)));
        break;
      }
      while (j < cps.size() && !IsPythonSpace(cps[j].cp)) ++j;
      const size_t end = j < cps.size() ? cps[j].offset : s.size();
      parts.push_back(Value(t.Slice(cps[i].offset, end)));
      FAK_RETURN_IF_ERROR(in.CountIterations(1));
      --limit;
      i = j;
    }
  } else {
    return in.Error("split(): the separator must be a string or None");
  }
  return Value::MakeList(std::move(parts));
}

Result<Value> Replace(Interpreter& in, const Value& target, const Value& old_v, const Value& new_v, const Value& count) {
  if (!target.is_string() || !old_v.is_string() || !new_v.is_string()) return in.Error("replace() needs strings");
  const std::string &s = target.str(), &from = old_v.str(), &to = new_v.str();
  if (from.empty()) return Unsupported("jinja: replace() with an empty search string is not supported");
  int64_t left = count.is_int() ? count.integer() : -1;
  std::string out;
  size_t pos = 0;
  while (left != 0) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += to;
    FAK_RETURN_IF_ERROR(in.CheckSize(out.size()));
    pos = at + from.size();
    --left;
  }
  out.append(s, pos);
  FAK_RETURN_IF_ERROR(in.CheckSize(out.size()));
  return Value(Text::Derived(std::move(out), {&target.text(), &old_v.text(), &new_v.text()}));
}

// Python's int() of a string: optional sign, digits with single underscores, whitespace around.
bool ParseInt(std::string_view s, int64_t* out) {
  std::string digits;
  size_t b = 0, e = s.size();
  while (b < e && IsPythonSpace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && IsPythonSpace(static_cast<unsigned char>(s[e - 1]))) --e;
  s = s.substr(b, e - b);
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) digits += s[i++];
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      digits += s[i];
    } else if (s[i] != '_' || i + 1 == s.size() || !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      return false;
    }
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseFloat(std::string_view s, double* out) {
  std::string t(s);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  while (end != nullptr && *end != '\0' && IsPythonSpace(static_cast<unsigned char>(*end))) ++end;
  if (end == t.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

// An item's attribute for the filters that take `attribute=` ("a.b" walks), as jinja2's
// make_attrgetter: item lookup first.
Result<Value> AttributePath(Interpreter& in, Value v, const std::string& path) {
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (v.undefined()) return in.Error(v.undef().name);
    int64_t index = 0;
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        ParseInt(part, &index)) {
      FAK_ASSIGN_OR_RETURN(v, GetItem(in, v, Value(index)));
    } else {
      FAK_ASSIGN_OR_RETURN(v, GetAttribute(in, v, part, /*item=*/true));
    }
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// jinja2's `indent` filter: every line after the first (and the first when `first`) indented;
// blank lines only when `blank`.
Value Indent(const Text& t, const Value& width, bool first, bool blank) {
  const std::string pad = width.is_string() ? width.str() : std::string(width.is_int() ? std::max<int64_t>(0, std::min<int64_t>(width.integer(), 1 << 16)) : 4, ' ');
  std::vector<std::string> lines;
  std::string s = t.bytes + "\n";
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t nl = s.find('\n', pos);
    lines.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += "\n";
    const bool indent_this = i == 0 ? false : (blank || !lines[i].empty());
    rv += (indent_this ? pad : "") + lines[i];
  }
  if (first) rv = pad + rv;
  return Value(Text::Derived(std::move(rv), {&t}));
}

Result<Value> ToJsonFilter(Interpreter& in, const Value& target, const CallArgs& args) {
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  JsonFormat f;
  if (Arg(args, 0, "ensure_ascii", Value(false)).Truthy()) {
    return Unsupported("jinja: tojson(ensure_ascii=true) is not supported");
  }
  const Value indent = Arg(args, 1, "indent", Value(None{}));
  if (indent.is_int()) {
    f.has_indent = true;
    f.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent.integer(), 0, 64)), ' ');
  } else if (indent.is_string()) {
    f.has_indent = true;
    f.indent = indent.str();
  }
  const Value seps = Arg(args, 2, "separators", Value(None{}));
  if (seps.is_list() && seps.list().items.size() == 2 && seps.list().items[0].is_string() && seps.list().items[1].is_string()) {
    f.separators_set = true;
    f.item_separator = seps.list().items[0].str();
    f.key_separator = seps.list().items[1].str();
  }
  f.sort_keys = Arg(args, 3, "sort_keys", Value(false)).Truthy();
  if (target.undefined()) return in.Error(target.undef().name + " (tojson of an undefined value)");
  FAK_RETURN_IF_ERROR(in.CheckNesting(target));
  Result<std::string> json = ToJson(target, f, in.options().limits.max_depth);
  if (!json.has_value()) return in.Error(std::string(json.error().message()));
  FAK_RETURN_IF_ERROR(in.CheckSize(json->size()));
  return Value(target.ToText().content.empty() ? Text{std::move(*json), {}} : Text::Content(std::move(*json)));
}

Result<std::vector<Value>> SortValues(Interpreter& in, std::vector<Value> items, const Value& attribute, bool reverse,
                                      bool case_sensitive) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) {
    Value key = v;
    if (attribute.is_string()) {
      FAK_ASSIGN_OR_RETURN(key, AttributePath(in, v, attribute.str()));
    }
    if (key.is_string() && !case_sensitive) key = Value(MapCase(key.str(), CaseMap::kLower));
    keyed.emplace_back(std::move(key), std::move(v));
  }
  Status failure = Status::Ok();
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    Result<bool> less = reverse ? Less(b.first, a.first) : Less(a.first, b.first);
    if (!less.has_value()) {
      if (failure.ok()) failure = less.error();
      return false;
    }
    return *less;
  });
  if (!failure.ok()) return in.Error(std::string(failure.message()));
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return out;
}

// Methods of a str value.
Result<Value> StringMethod(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  const Text& t = self.text();
  const std::string& s = t.bytes;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto [b, e] = StripRange(s, Arg(args, 0, "chars", Value(None{})), name != "rstrip", name != "lstrip");
    return Value(t.Slice(b, e));
  }
  if (name == "split") return Split(in, t, Arg(args, 0, "sep", Value(None{})), Arg(args, 1, "maxsplit", Value(-1)));
  if (name == "upper" || name == "lower") {
    return Value(Text::Derived(MapCase(s, name == "upper" ? CaseMap::kUpper : CaseMap::kLower), {&t}));
  }
  if (name == "title" || name == "capitalize") return Value(Text::Derived(TitleCase(s, name == "capitalize"), {&t}));
  if (name == "startswith" || name == "endswith") {
    const Value what = Arg(args, 0, "prefix", Value(None{}));
    std::vector<Value> options = what.is_list() ? what.list().items : std::vector<Value>{what};
    for (const Value& o : options) {
      FAK_ASSIGN_OR_RETURN(std::string p, StringArg(in, o, name + "() argument"));
      if (name == "startswith" ? s.starts_with(p) : s.ends_with(p)) return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    return Replace(in, self, Arg(args, 0, "old", Value(None{})), Arg(args, 1, "new", Value(None{})),
                   Arg(args, 2, "count", Value(-1)));
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    FAK_ASSIGN_OR_RETURN(std::string sub, StringArg(in, Arg(args, 0, "sub", Value(None{})), name + "() argument"));
    if (args.positional.size() > 1) return Unsupported("jinja: str." + name + "() with start/end is not supported");
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(CodePointOffsets(s).size()));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    }
    const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") return in.Error("substring not found");
      return Value(-1);
    }
    const std::vector<size_t> offsets = CodePointOffsets(s);
    return Value(static_cast<int64_t>(std::lower_bound(offsets.begin(), offsets.end(), at) - offsets.begin()));
  }
  if (name == "join") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, Arg(args, 0, "iterable", Value(None{}))));
    Text out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return in.Error("str.join(): item " + std::to_string(i) + " is " + std::string(items[i].TypeName()) + ", not str");
      if (i > 0) out.Append(t);
      out.Append(items[i].text());
      FAK_RETURN_IF_ERROR(in.CheckSize(out.bytes.size()));
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum" || name == "islower" || name == "isupper") {
    std::vector<internal::CodePoint> cps = internal::DecodeUtf8(s);
    if (cps.empty()) return Value(false);
    bool any_cased = false;
    for (const internal::CodePoint& c : cps) {
      const UChar32 cp = static_cast<UChar32>(c.cp);
      bool ok = true;
      if (name == "isdigit") ok = u_isdigit(cp);
      if (name == "isspace") ok = IsPythonSpace(c.cp);
      if (name == "isalpha") ok = u_isalpha(cp);
      if (name == "isalnum") ok = u_isalnum(cp);
      if (name == "islower") ok = !u_isupper(cp) && !u_istitle(cp);
      if (name == "isupper") ok = !u_islower(cp) && !u_istitle(cp);
      any_cased = any_cased || IsCased(c.cp);
      if (!ok) return Value(false);
    }
    return Value(name == "islower" || name == "isupper" ? any_cased : true);
  }
  return Unsupported("jinja: the string method '" + name + "' is not supported");
}

// Python str methods fak does not implement: refused by name rather than treated as undefined.
constexpr std::string_view kStringMethods[] = {
    "strip", "lstrip", "rstrip", "split", "upper", "lower", "title", "capitalize", "startswith", "endswith",
    "replace", "find", "rfind", "count", "index", "join", "isdigit", "isspace", "isalpha", "isalnum", "islower",
    "isupper", "format", "rsplit", "splitlines", "partition", "rpartition", "zfill", "center", "ljust", "rjust",
    "casefold", "swapcase", "encode", "expandtabs", "format_map", "isdecimal", "isnumeric", "isidentifier",
    "isprintable", "istitle", "isascii", "removeprefix", "removesuffix", "rindex", "translate", "maketrans"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy",     "update",
                                             "pop",   "popitem", "setdefault", "clear", "fromkeys"};
constexpr std::string_view kListMethods[] = {"append", "extend", "insert", "pop", "remove", "clear",
                                             "sort",   "reverse", "index", "count", "copy"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value BoundMethod(const Value& self, const std::string& name,
                  Result<Value> (*impl)(Interpreter&, const Value&, const std::string&, CallArgs&)) {
  return MakeFunction(std::string(self.TypeName()) + "." + name,
                      [self, name, impl](Interpreter& in, CallArgs& args) { return impl(in, self, name, args); });
}

Result<Value> DictMethod(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  const Dict& d = self.dict();
  if (name == "items") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) out.push_back(Value::MakeList({Value(k), v}, true));
    return Value::MakeList(std::move(out));
  }
  if (name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? Value(k) : v);
    return Value::MakeList(std::move(out));
  }
  if (name == "get") {
    const Value key = Arg(args, 0, "key", Value(None{}));
    const Value* v = key.is_string() ? d.Find(key.str()) : nullptr;
    return v != nullptr ? *v : Arg(args, 1, "default", Value(None{}));
  }
  if (name == "copy") return Value::MakeDict(d.items);
  return in.Error("access to the method '" + name + "' of a dict is unsafe (the sandbox keeps values immutable)");
}

Result<Value> ListMethod(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  const std::vector<Value>& items = self.list().items;
  if (name == "index" || name == "count") {
    const Value x = Arg(args, 0, "value", Value(None{}));
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!Equal(items[i], x)) continue;
      if (name == "index") return Value(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return in.Error("value is not in list");
    return Value(n);
  }
  if (name == "copy") return Value::MakeList(items);
  return in.Error("access to the method '" + name + "' of a list is unsafe (the sandbox keeps values immutable)");
}

}  // namespace

Result<std::vector<Value>> Iterate(Interpreter& in, const Value& v) {
  if (v.undefined()) return std::vector<Value>{};
  if (v.is_list()) return v.list().items;
  if (v.is_dict() && !v.dict().is_namespace) {
    std::vector<Value> keys;
    for (const auto& kv : v.dict().items) keys.push_back(Value(kv.first));
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> chars;
    const std::vector<size_t> offsets = CodePointOffsets(v.str());
    for (size_t i = 0; i + 1 < offsets.size(); ++i) chars.push_back(Value(v.text().Slice(offsets[i], offsets[i + 1])));
    return chars;
  }
  return in.Error("'" + std::string(v.TypeName()) + "' object is not iterable");
}

Result<Value> GetAttribute(Interpreter& in, const Value& target, const std::string& name, bool item) {
  if (target.is_dict()) {
    const Dict& d = target.dict();
    if (d.is_namespace || item) {
      if (const Value* v = d.Find(name)) return *v;
      if (d.is_namespace) return Value(Undefined{"namespace has no attribute '" + name + "'"});
    }
    if (In(kDictMethods, name)) return BoundMethod(target, name, DictMethod);
    if (const Value* v = d.Find(name)) return *v;
    return Value(Undefined{"'dict object' has no attribute '" + name + "'"});
  }
  if (target.is_string()) {
    if (In(kStringMethods, name)) return BoundMethod(target, name, StringMethod);
    return Value(Undefined{"'str object' has no attribute '" + name + "'"});
  }
  if (target.is_list()) {
    if (In(kListMethods, name)) return BoundMethod(target, name, ListMethod);
    return Value(Undefined{"'list object' has no attribute '" + name + "'"});
  }
  (void)in;
  return Value(Undefined{"'" + std::string(target.TypeName()) + " object' has no attribute '" + name + "'"});
}

Result<Value> GetItem(Interpreter& in, const Value& target, const Value& key) {
  if (target.is_dict()) {
    if (key.is_string()) return GetAttribute(in, target, key.str(), /*item=*/true);
    return Value(Undefined{"'dict object' has no attribute " + key.Repr()});
  }
  if ((target.is_list() || target.is_string()) && key.is_int()) {
    const bool str = target.is_string();
    const std::vector<size_t> offsets = str ? CodePointOffsets(target.str()) : std::vector<size_t>{};
    const int64_t n = str ? static_cast<int64_t>(offsets.size() - 1) : static_cast<int64_t>(target.list().items.size());
    int64_t i = key.integer();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value(Undefined{std::string(target.TypeName()) + " index " + key.Repr() + " out of range"});
    if (!str) return target.list().items[static_cast<size_t>(i)];
    return Value(target.text().Slice(offsets[i], offsets[i + 1]));
  }
  if (key.is_string()) return GetAttribute(in, target, key.str(), /*item=*/true);
  return Value(Undefined{"'" + std::string(target.TypeName()) + " object' has no item " + key.Repr()});
}

Result<Value> GetSlice(Interpreter& in, const Value& target, const Value& start, const Value& stop, const Value& step) {
  if (!target.is_list() && !target.is_string()) return in.Error("'" + std::string(target.TypeName()) + "' object is not subscriptable");
  for (const Value* v : {&start, &stop, &step}) {
    if (!v->none() && !v->is_int()) return in.Error("slice indices must be integers or None");
  }
  const bool str = target.is_string();
  const std::vector<size_t> offsets = str ? CodePointOffsets(target.str()) : std::vector<size_t>{};
  const int64_t n = str ? static_cast<int64_t>(offsets.size() - 1) : static_cast<int64_t>(target.list().items.size());
  const int64_t st = step.none() ? 1 : step.integer();
  if (st == 0) return in.Error("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.none()) return fallback;
    int64_t i = v.integer();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  if (str && st == 1) return Value(target.text().Slice(offsets[b], offsets[std::max(b, e)]));
  std::vector<int64_t> picks;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) picks.push_back(i);
  FAK_RETURN_IF_ERROR(in.CountIterations(picks.size()));
  if (str) {
    std::string out;
    for (int64_t i : picks) out.append(target.str(), offsets[i], offsets[i + 1] - offsets[i]);
    return Value(Text::Derived(std::move(out), {&target.text()}));
  }
  std::vector<Value> items;
  for (int64_t i : picks) items.push_back(target.list().items[static_cast<size_t>(i)]);
  return Value::MakeList(std::move(items), target.list().tuple);
}

void AddGlobals(Scope& scope, const RenderOptions& options) {
  scope.Set("range", MakeFunction("range", [](Interpreter& in, CallArgs& args) -> Result<Value> {
    std::vector<int64_t> a;
    for (const Value& v : args.positional) {
      if (!v.is_int()) return in.Error("range() takes integers, not " + std::string(v.TypeName()));
      a.push_back(v.integer());
    }
    if (a.empty() || a.size() > 3) return in.Error("range() takes 1 to 3 arguments");
    const int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1], step = a.size() == 3 ? a[2] : 1;
    if (step == 0) return in.Error("range() step must not be zero");
    const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    if (count > static_cast<double>(in.options().limits.max_iterations)) return in.Exhausted("range() of " + std::to_string(static_cast<int64_t>(count)) + " items");
    FAK_RETURN_IF_ERROR(in.CountIterations(static_cast<size_t>(count)));
    std::vector<Value> items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value(i));
    return Value::MakeList(std::move(items));
  }));
  auto dict_of = [](bool ns) {
    return [ns](Interpreter& in, CallArgs& args) -> Result<Value> {
      Value d = Value::MakeDict();
      d.mutable_dict().is_namespace = ns;
      for (const Value& v : args.positional) {
        if (!v.is_dict()) return in.Error(std::string(ns ? "namespace" : "dict") + "() takes a dict or keyword arguments");
        for (const auto& [k, x] : v.dict().items) d.mutable_dict().Set(k, x);
      }
      for (const auto& [k, x] : args.named) d.mutable_dict().Set(k, x);
      return d;
    };
  };
  scope.Set("namespace", MakeFunction("namespace", dict_of(true)));
  scope.Set("dict", MakeFunction("dict", dict_of(false)));
  scope.Set("raise_exception", MakeFunction("raise_exception", [](Interpreter&, CallArgs& args) -> Result<Value> {
    const Value msg = Arg(args, 0, "message", Value(""));
    return InvalidArgument(msg.ToText().bytes);
  }));
  if (options.now.has_value()) {
    const int64_t now = *options.now;
    scope.Set("strftime_now", MakeFunction("strftime_now", [now](Interpreter& in, CallArgs& args) -> Result<Value> {
      FAK_ASSIGN_OR_RETURN(std::string format, StringArg(in, Arg(args, 0, "format", Value(None{})), "strftime_now() format"));
      const time_t t = static_cast<time_t>(now);
      struct tm tm {};
      gmtime_r(&t, &tm);
      char buf[256];
      const size_t n = std::strftime(buf, sizeof(buf), format.c_str(), &tm);
      if (n == 0 && !format.empty()) return in.Error("strftime_now(): format too long or empty result");
      return Value(std::string(buf, n));
    }));
  }
}

Result<Value> ApplyFilter(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  if (name == "trim") {
    const Text t = v.ToText();
    auto [b, e] = StripRange(t.bytes, Arg(args, 0, "chars", Value(None{})), true, true);
    return Value(t.Slice(b, e));
  }
  if (name == "length" || name == "count") {
    if (v.undefined()) return Value(0);
    if (v.is_string()) return Value(static_cast<int64_t>(CodePointOffsets(v.str()).size() - 1));
    if (v.is_list()) return Value(static_cast<int64_t>(v.list().items.size()));
    if (v.is_dict()) return Value(static_cast<int64_t>(v.dict().items.size()));
    return in.Error("object of type '" + std::string(v.TypeName()) + "' has no len()");
  }
  if (name == "upper" || name == "lower") {
    const Text t = v.ToText();
    return Value(Text::Derived(MapCase(t.bytes, name == "upper" ? CaseMap::kUpper : CaseMap::kLower), {&t}));
  }
  if (name == "capitalize") {
    const Text t = v.ToText();
    return Value(Text::Derived(TitleCase(t.bytes, true), {&t}));
  }
  if (name == "title") {
    const Text t = v.ToText();
    return Value(Text::Derived(JinjaTitle(t.bytes), {&t}));
  }
  if (name == "tojson") return ToJsonFilter(in, v, args);
  if (name == "string") {
    FAK_RETURN_IF_ERROR(in.CheckNesting(v));
    return Value(v.ToText());
  }
  if (name == "safe") return v;
  if (name == "escape" || name == "e" || name == "forceescape") {
    const Text t = v.ToText();
    return Value(Text::Derived(HtmlEscape(t.bytes), {&t}));
  }
  if (name == "default" || name == "d") {
    const bool boolean = Arg(args, 1, "boolean", Value(false)).Truthy();
    if (v.undefined() || (boolean && !v.Truthy())) return Arg(args, 0, "default_value", Value(""));
    return v;
  }
  if (name == "join") {
    const Value sep = Arg(args, 0, "d", Value(""));
    const Value attribute = Arg(args, 1, "attribute", Value(None{}));
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    Text out;
    const Text sep_text = sep.ToText();
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (attribute.is_string()) {
        FAK_ASSIGN_OR_RETURN(item, AttributePath(in, item, attribute.str()));
      }
      FAK_RETURN_IF_ERROR(in.CheckNesting(item));
      if (i > 0) out.Append(sep_text);
      out.Append(item.ToText());
      FAK_RETURN_IF_ERROR(in.CheckSize(out.bytes.size()));
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    if (items.empty()) return Value(Undefined{"No " + name + " item, sequence was empty."});
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    if (v.is_string()) return GetSlice(in, v, Value(None{}), Value(None{}), Value(-1));
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "int") {
    const Value fallback = Arg(args, 0, "default", Value(0));
    if (args.positional.size() > 1 || FindArg(args, 1, "base") != nullptr) return Unsupported("jinja: the int filter's base argument is not supported");
    if (v.is_int()) return Value(v.integer());
    if (v.is_float()) {
      if (!std::isfinite(v.number()) || std::fabs(v.number()) >= 9.2e18) return fallback;
      return Value(static_cast<int64_t>(v.number()));
    }
    if (v.is_string()) {
      int64_t i = 0;
      double d = 0;
      if (ParseInt(v.str(), &i)) return Value(i);
      if (ParseFloat(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
    }
    return fallback;
  }
  if (name == "float") {
    const Value fallback = Arg(args, 0, "default", Value(0.0));
    if (v.is_number()) return Value(v.number());
    double d = 0;
    if (v.is_string() && ParseFloat(v.str(), &d)) return Value(d);
    return fallback;
  }
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.number()));
    if (v.is_int() && v.integer() != INT64_MIN) return Value(v.integer() < 0 ? -v.integer() : v.integer());
    return in.Error("bad operand type for abs(): '" + std::string(v.TypeName()) + "'");
  }
  if (name == "replace") {
    const Text t = v.ToText();
    return Replace(in, Value(t), Arg(args, 0, "old", Value(None{})), Arg(args, 1, "new", Value(None{})),
                   Arg(args, 2, "count", Value(None{})));
  }
  if (name == "items") {
    if (v.undefined()) return Value::MakeList({});
    if (!v.is_dict()) return in.Error("the items filter needs a mapping, not " + std::string(v.TypeName()));
    CallArgs none;
    return DictMethod(in, v, "items", none);
  }
  if (name == "dictsort") {
    if (!v.is_dict()) return in.Error("dictsort needs a mapping");
    const bool case_sensitive = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
    const Value by = Arg(args, 1, "by", Value("key"));
    const bool reverse = Arg(args, 2, "reverse", Value(false)).Truthy();
    CallArgs none;
    FAK_ASSIGN_OR_RETURN(Value pairs, DictMethod(in, v, "items", none));
    FAK_ASSIGN_OR_RETURN(std::vector<Value> sorted, SortValues(in, pairs.list().items, Value(by.is_string() && by.str() == "value" ? "1" : "0"), reverse, case_sensitive));
    return Value::MakeList(std::move(sorted));
  }
  if (name == "sort") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    const bool reverse = Arg(args, 0, "reverse", Value(false)).Truthy();
    const bool case_sensitive = Arg(args, 1, "case_sensitive", Value(false)).Truthy();
    FAK_ASSIGN_OR_RETURN(std::vector<Value> sorted, SortValues(in, std::move(items), Arg(args, 2, "attribute", Value(None{})), reverse, case_sensitive));
    return Value::MakeList(std::move(sorted));
  }
  if (name == "unique") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    std::vector<Value> out;
    for (const Value& x : items) {
      FAK_RETURN_IF_ERROR(in.CountIterations(out.size() + 1));
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& y) {
        return x.is_string() && y.is_string() ? MapCase(x.str(), CaseMap::kLower) == MapCase(y.str(), CaseMap::kLower) : Equal(x, y);
      });
      if (!seen) out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sum") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    const Value attribute = Arg(args, 0, "attribute", Value(None{}));
    int64_t isum = 0;
    double fsum = 0;
    bool is_float = false;
    for (Value x : items) {
      if (attribute.is_string()) {
        FAK_ASSIGN_OR_RETURN(x, AttributePath(in, x, attribute.str()));
      }
      if (!x.is_number()) return in.Error("sum: unsupported operand type '" + std::string(x.TypeName()) + "'");
      if (x.is_float()) is_float = true;
      if (!is_float && __builtin_add_overflow(isum, x.integer(), &isum)) return in.Error("integer overflow in sum");
      fsum += x.number();
    }
    const Value start = Arg(args, 1, "start", Value(0));
    return is_float ? Value(fsum + start.number()) : Value(isum + start.integer());
  }
  if (name == "indent") {
    return Indent(v.ToText(), Arg(args, 0, "width", Value(4)), Arg(args, 1, "first", Value(false)).Truthy(),
                  Arg(args, 2, "blank", Value(false)).Truthy());
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep_when = name == "selectattr" || name == "select";
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    size_t next = 0;
    std::string attribute;
    if (by_attr) {
      if (args.positional.empty() || !args.positional[0].is_string()) return in.Error(name + " needs an attribute name");
      attribute = args.positional[next++].str();
    }
    std::string test;
    if (next < args.positional.size()) {
      if (!args.positional[next].is_string()) return in.Error(name + ": the test must be named by a string");
      test = args.positional[next++].str();
    }
    CallArgs test_args;
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
    std::vector<Value> out;
    for (const Value& item : items) {
      FAK_RETURN_IF_ERROR(in.CountIterations(1));
      Value probe = item;
      if (by_attr) {
        FAK_ASSIGN_OR_RETURN(probe, AttributePath(in, item, attribute));
      }
      bool pass = probe.Truthy();
      if (!test.empty()) {
        CallArgs a = test_args;
        FAK_ASSIGN_OR_RETURN(pass, in.Test(test, probe, a));
      }
      if (pass == keep_when) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "map") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    std::vector<Value> out;
    const Value* attribute = FindArg(args, SIZE_MAX, "attribute");
    for (const Value& item : items) {
      FAK_RETURN_IF_ERROR(in.CountIterations(1));
      if (attribute != nullptr) {
        if (!attribute->is_string()) return in.Error("map: attribute must be a string");
        FAK_ASSIGN_OR_RETURN(Value x, AttributePath(in, item, attribute->str()));
        if (x.undefined()) {
          if (const Value* d = FindArg(args, SIZE_MAX, "default")) x = *d;
        }
        out.push_back(std::move(x));
      } else {
        if (args.positional.empty() || !args.positional[0].is_string()) return in.Error("map needs a filter name or attribute=");
        CallArgs rest;
        rest.positional.assign(args.positional.begin() + 1, args.positional.end());
        rest.named = args.named;
        FAK_ASSIGN_OR_RETURN(Value x, in.Filter(args.positional[0].str(), item, rest));
        out.push_back(std::move(x));
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "min" || name == "max") {
    FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(in, v));
    if (items.empty()) return Value(Undefined{"No aggregated item, sequence was empty."});
    FAK_ASSIGN_OR_RETURN(std::vector<Value> sorted, SortValues(in, std::move(items), Arg(args, 1, "attribute", Value(None{})), false,
                                                                Arg(args, 0, "case_sensitive", Value(false)).Truthy()));
    return name == "min" ? sorted.front() : sorted.back();
  }
  return Unsupported("jinja template: the filter '" + name + "' is not supported by fak's chat-template interpreter");
}

Result<bool> ApplyTest(Interpreter& in, const std::string& name, const Value& v, CallArgs& args) {
  if (name == "defined") return !v.undefined();
  if (name == "undefined") return v.undefined();
  if (name == "none") return v.none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.dict().is_namespace;
  if (name == "iterable") return v.undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "sequence") return v.undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int() && !v.is_bool();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.boolean();
  if (name == "false") return v.is_bool() && !v.boolean();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    return MapCase(v.str(), name == "lower" ? CaseMap::kLower : CaseMap::kUpper) == v.str();
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int()) return in.Error("the '" + name + "' test needs an integer");
    if (name == "divisibleby") {
      const Value d = Arg(args, 0, "num", Value(None{}));
      if (!d.is_int() || d.integer() == 0) return in.Error("divisibleby needs a non-zero integer");
      return v.integer() % d.integer() == 0;
    }
    return (v.integer() % 2 != 0) == (name == "odd");
  }
  if (name == "escaped") return false;
  static const std::pair<std::string_view, std::string_view> kCompare[] = {
      {"equalto", "=="}, {"eq", "=="}, {"==", "=="}, {"sameas", "=="}, {"ne", "!="}, {"!=", "!="}, {"lt", "<"},
      {"lessthan", "<"}, {"<", "<"},  {"le", "<="}, {"<=", "<="},  {"gt", ">"},  {"greaterthan", ">"},
      {">", ">"},        {"ge", ">="}, {">=", ">="}, {"in", "in"}};
  for (const auto& [test, op] : kCompare) {
    if (name != test) continue;
    FAK_RETURN_IF_ERROR(CheckArity(in, args, 1, "the '" + name + "' test"));
    const Value other = Arg(args, 0, "other", Value(Undefined{"the '" + name + "' test's argument"}));
    FAK_RETURN_IF_ERROR(in.CheckNesting(v));
    FAK_RETURN_IF_ERROR(in.CheckNesting(other));
    if (op == "==") {
      if (name == "sameas" && !(v.none() || v.is_bool() || other.none() || other.is_bool())) {
        return Unsupported("jinja: the 'sameas' test on " + std::string(v.TypeName()) + " is not supported");
      }
      return Equal(v, other);
    }
    if (op == "!=") return !Equal(v, other);
    if (op == "in") {
      if (other.is_string() && v.is_string()) return other.str().find(v.str()) != std::string::npos;
      if (other.is_list()) return std::any_of(other.list().items.begin(), other.list().items.end(), [&](const Value& x) { return Equal(v, x); });
      if (other.is_dict()) return v.is_string() && other.dict().Find(v.str()) != nullptr;
      return in.Error("the 'in' test needs a container");
    }
    Result<bool> r = (op == "<" || op == ">=") ? Less(v, other) : Less(other, v);
    if (!r.has_value()) return in.Error(std::string(r.error().message()));
    return op == "<" || op == ">" ? *r : !*r;
  }
  return Unsupported("jinja template: the test '" + name + "' is not supported by fak's chat-template interpreter");
}

}  // namespace fak::jinja
