// The values a Jinja chat template computes with, as jinja2 sees Python's: undefined, none, bool,
// int, float, string, list, dict (and namespace), callable. A string remembers which of its bytes
// came from the conversation (Text::content), so message text stays text through the template.
#ifndef FAK_SRC_TOKENIZER_JINJA_VALUE_H_
#define FAK_SRC_TOKENIZER_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fak/core/status.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/core/json.h"

namespace fak::jinja {

// A string and the byte ranges of it that came from the conversation (sorted, disjoint, non-empty,
// adjacent ranges merged). Operations that cut a string (slices, strip, split) clip the ranges;
// ones that rewrite it (upper, replace, tojson) mark the whole result when any input byte was
// content — message text may become more text, never markup.
struct Text {
  std::string bytes;
  std::vector<TextSpan> content;

  static Text Content(std::string s);  // all of it from the conversation
  void Append(const Text& other);
  void Append(std::string_view markup);
  Text Slice(size_t begin, size_t end) const;  // bytes [begin, end), ranges clipped
  // `s` with the ranges of every input that had any content: all of `s` when one had.
  static Text Derived(std::string s, std::initializer_list<const Text*> inputs);
};

class Value;
class Interpreter;

struct List {
  std::vector<Value> items;
  bool tuple = false;  // printed (a, b) rather than [a, b]
};

// A dict in insertion order (Python's); small, so found by a scan. A namespace() is a dict that
// `set ns.attr = ...` may change.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

struct Function {
  std::string name;
  std::function<Result<Value>(Interpreter&, CallArgs&)> call;
};

// jinja2's default Undefined: prints as "", is falsy and empty; most other uses are errors that
// name it.
struct Undefined {
  std::string name;
};
struct None {};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::shared_ptr<const Text>,
                               std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<const Function>>;

  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(Text t) : v_(std::make_shared<const Text>(std::move(t))) {}
  Value(std::string markup) : v_(std::make_shared<const Text>(Text{std::move(markup), {}})) {}
  Value(const char* markup) : Value(std::string(markup)) {}
  Value(std::shared_ptr<List> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<const Function> f) : v_(std::move(f)) {}

  static Value MakeList(std::vector<Value> items, bool tuple = false);
  static Value MakeDict(std::vector<std::pair<std::string, Value>> items = {});

  bool undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_) || is_bool(); }  // Python: bool is an int
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::shared_ptr<const Text>>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<const Function>>(v_); }

  const Undefined& undef() const { return std::get<Undefined>(v_); }
  bool boolean() const { return std::get<bool>(v_); }
  int64_t integer() const { return is_bool() ? int64_t{std::get<bool>(v_)} : std::get<int64_t>(v_); }
  double number() const { return is_float() ? std::get<double>(v_) : static_cast<double>(integer()); }
  const Text& text() const { return *std::get<std::shared_ptr<const Text>>(v_); }
  const std::string& str() const { return text().bytes; }
  const List& list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& mutable_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Function& function() const { return *std::get<std::shared_ptr<const Function>>(v_); }

  std::string_view TypeName() const;  // Python's: "str", "dict", "NoneType", ...
  bool Truthy() const;                // Python's bool()
  // Python's str() / repr(), as `{{ x }}` and a list's printing show them (Undefined: "").
  Text ToText() const;
  std::string Repr() const;

 private:
  Storage v_;
};

// Python's str.isspace() for one code point (what strip(), split() and `\s` treat as whitespace).
bool IsPythonSpace(uint32_t c);

// A JSON value as a template value (objects keep their order, as Python's json does; numbers stay
// int or float); its strings are conversation content when `content` (message text, tool
// definitions) and markup otherwise. Recursion is bounded by the parse's depth limit.
Value FromJson(const nlohmann::ordered_json& json, bool content);
// Parses `text` (internal::JsonLimits' depth and size, checked before parsing) into a value;
// InvalidArgument naming `what` when it is not JSON.
Result<Value> ParseJsonValue(std::string_view text, bool content, std::string_view what);

// How deeply `v` nests lists and dicts (0 for a scalar), counted up to `stop_at`: a template can
// build deep or cyclic values (a namespace holding itself), which printing and comparing walk.
int Nesting(const Value& v, int stop_at);

// Python ==, as jinja2 compares (1 == 1.0 == True; undefined equals only undefined).
bool Equal(const Value& a, const Value& b);
// Python <, for numbers and strings; an error for other pairs.
Result<bool> Less(const Value& a, const Value& b);
// Python's repr() of a float: the shortest text that reads back, "1.0", "1e+20".
std::string FloatRepr(double d);

// json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...) as
// transformers' `tojson` calls it. indent: "" for none, else the text one level indents by.
struct JsonFormat {
  bool has_indent = false;
  std::string indent;
  std::string item_separator, key_separator;  // json.dumps' defaults when empty-and-unset
  bool separators_set = false;
  bool sort_keys = false;
};
Result<std::string> ToJson(const Value& value, const JsonFormat& format, int max_depth);
// Appends json.dumps(s, ensure_ascii=False) of one string: `tojson` of a string, and the hand-written
// families that print message text as JSON.
void AppendJsonString(std::string_view s, std::string& out);

}  // namespace fak::jinja

#endif  // FAK_SRC_TOKENIZER_JINJA_VALUE_H_
