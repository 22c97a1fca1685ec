// The evaluator's state during one render — scopes, limits, counters — and the builtins
// (filters, tests, methods of str/dict/list, global functions) it dispatches to.
#ifndef FAK_SRC_TOKENIZER_JINJA_INTERPRETER_H_
#define FAK_SRC_TOKENIZER_JINJA_INTERPRETER_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/tokenizer/jinja/ast.h"
#include "src/tokenizer/jinja/template.h"

namespace fak::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* Find(std::string_view name) const;
  void Set(std::string name, Value value);
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : options_(options) {}

  Result<Text> Run(const Body& body, const Value& context);

  const RenderOptions& options() const { return options_; }
  // Errors that name the line the evaluator is at.
  Status Error(std::string what) const;
  Status Exhausted(std::string what) const;
  // Limits: a string about to be made, loop iterations about to run, a value about to be
  // printed or compared (its nesting).
  Status CheckSize(size_t bytes) const;
  Status CountIterations(size_t n);
  Status CheckNesting(const Value& v) const;
  Status CheckOperands(const Value& target, const CallArgs& args) const;

  Result<Value> Call(const Value& callee, CallArgs& args);
  Result<Value> Filter(const std::string& name, const Value& target, CallArgs& args);
  Result<bool> Test(const std::string& name, const Value& target, CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> Exec(const Body& body, Text& out);
  Result<Flow> ExecOne(const Stmt& s, Text& out);
  Result<Flow> ExecFor(const Stmt& s, Text& out);
  Status Emit(Text& out, const Text& piece);
  Result<Value> Eval(const Expr& e);
  Result<Value> EvalBinary(const Expr& e);
  Result<CallArgs> EvalArgs(const Expr& e, size_t first);
  Result<Value> Lookup(const std::string& name) const;
  Status Assign(const std::vector<std::string>& targets, const Value& value);
  Value MakeMacro(const Stmt& s);

  const RenderOptions& options_;
  std::shared_ptr<Scope> scope_;
  int line_ = 0;
  int call_depth_ = 0;
  size_t iterations_ = 0;
  size_t produced_ = 0;
};

// Attribute `name` of `target` as jinja2's sandbox resolves it (`x.name`; `x[name]` when `item`
// is true tries the item first): a dict's key or method, a string's or list's method, else
// Undefined; unsafe (mutating) methods are errors.
Result<Value> GetAttribute(Interpreter& in, const Value& target, const std::string& name, bool item);
// `target[key]` (int index, negative from the end; dict key) and `target[a:b:c]`.
Result<Value> GetItem(Interpreter& in, const Value& target, const Value& key);
Result<Value> GetSlice(Interpreter& in, const Value& target, const Value& start, const Value& stop, const Value& step);
// The global functions: range, namespace, dict, raise_exception, strftime_now (when enabled).
void AddGlobals(Scope& scope, const RenderOptions& options);
// Iterates as Python's iter(): a list's items, a dict's keys, a string's characters, nothing
// for undefined; an error for other values.
Result<std::vector<Value>> Iterate(Interpreter& in, const Value& v);

Result<Value> ApplyFilter(Interpreter& in, const std::string& name, const Value& target, CallArgs& args);
Result<bool> ApplyTest(Interpreter& in, const std::string& name, const Value& target, CallArgs& args);

}  // namespace fak::jinja

#endif  // FAK_SRC_TOKENIZER_JINJA_INTERPRETER_H_
