// The evaluator: statements and expressions with jinja2's semantics — scopes (a for loop's body is
// a fresh scope per iteration, `if` is none), Python's operators, undefined values — under the
// render's limits.
#include "src/tokenizer/jinja/interpreter.h"

#include <cmath>
#include <limits>

namespace fak::jinja {

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(std::string name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::move(name), std::move(value));
}

Status Interpreter::Error(std::string what) const {
  return InvalidArgument("jinja template line " + std::to_string(line_) + ": " + what);
}

Status Interpreter::Exhausted(std::string what) const {
  return ResourceExhausted("jinja template line " + std::to_string(line_) + ": " + what);
}

Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes) {
    return Exhausted("a string of " + std::to_string(bytes) + " bytes is larger than the limit of " +
                     std::to_string(options_.limits.max_output_bytes));
  }
  return Status::Ok();
}

Status Interpreter::CountIterations(size_t n) {
  iterations_ += n;
  if (iterations_ > options_.limits.max_iterations) {
    return Exhausted("more than " + std::to_string(options_.limits.max_iterations) + " loop iterations");
  }
  return Status::Ok();
}

Status Interpreter::CheckNesting(const Value& v) const {
  if ((v.is_list() || v.is_dict()) && Nesting(v, options_.limits.max_depth + 1) > options_.limits.max_depth) {
    return Exhausted("a value nested deeper than " + std::to_string(options_.limits.max_depth) + " levels");
  }
  return Status::Ok();
}

Result<Text> Interpreter::Run(const Body& body, const Value& context) {
  auto globals = std::make_shared<Scope>();
  AddGlobals(*globals, options_);
  scope_ = std::make_shared<Scope>();
  scope_->parent = globals;
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict().items) scope_->Set(k, v);
  }
  Text out;
  Result<Flow> flow = Exec(body, out);
  if (!flow.has_value()) {
    // A builtin outside the subset is refused where it was met.
    if (flow.error().code() == StatusCode::kUnsupported && flow.error().message().find(" line ") == std::string::npos) {
      return Unsupported(std::string(flow.error().message()) + " (line " + std::to_string(line_) + ")");
    }
    return flow.error();
  }
  if (*flow != Flow::kNormal) return Error("'break' or 'continue' outside a loop");
  return out;
}

Status Interpreter::Emit(Text& out, const Text& piece) {
  produced_ += piece.bytes.size();
  if (produced_ > options_.limits.max_output_bytes) {
    return Exhausted("output larger than the limit of " + std::to_string(options_.limits.max_output_bytes) + " bytes");
  }
  out.Append(piece);
  return Status::Ok();
}

namespace {

// Whether `v` is or holds `target` (within `depth` levels; an exhausted budget counts as yes).
bool Reaches(const Value& v, const Dict* target, int depth, size_t& budget) {
  if (!v.is_list() && !v.is_dict()) return false;
  if (budget == 0 || depth < 0) return true;
  --budget;
  if (v.is_dict()) {
    if (&v.dict() == target) return true;
    for (const auto& kv : v.dict().items) {
      if (Reaches(kv.second, target, depth - 1, budget)) return true;
    }
    return false;
  }
  for (const Value& x : v.list().items) {
    if (Reaches(x, target, depth - 1, budget)) return true;
  }
  return false;
}

}  // namespace

Result<Interpreter::Flow> Interpreter::Exec(const Body& body, Text& out) {
  for (const auto& s : body) {
    FAK_ASSIGN_OR_RETURN(Flow flow, ExecOne(*s, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::ExecOne(const Stmt& s, Text& out) {
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::kData:
      FAK_RETURN_IF_ERROR(Emit(out, Text{s.text, {}}));
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      FAK_RETURN_IF_ERROR(CheckNesting(v));
      FAK_RETURN_IF_ERROR(Emit(out, v.ToText()));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        FAK_ASSIGN_OR_RETURN(Value c, Eval(*cond));
        if (c.Truthy()) return Exec(body, out);
      }
      return Exec(s.else_body, out);
    case Stmt::Kind::kFor:
      return ExecFor(s, out);
    case Stmt::Kind::kSet: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      if (s.attr.empty()) {
        FAK_RETURN_IF_ERROR(Assign(s.targets, v));
        return Flow::kNormal;
      }
      FAK_ASSIGN_OR_RETURN(Value ns, Lookup(s.targets[0]));
      if (!ns.is_dict() || !ns.dict().is_namespace) {
        return Error("cannot assign attribute '" + s.attr + "' on '" + s.targets[0] + "', which is not a namespace()");
      }
      // A namespace holding itself would be a reference cycle, never freed.
      FAK_RETURN_IF_ERROR(CheckNesting(v));
      size_t budget = size_t{1} << 20;
      if (Reaches(v, &ns.dict(), options_.limits.max_depth, budget)) {
        return Error("'" + s.targets[0] + "." + s.attr + "' would make the namespace hold itself");
      }
      ns.mutable_dict().Set(s.attr, std::move(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      Text captured;
      FAK_ASSIGN_OR_RETURN(Flow flow, Exec(s.body, captured));
      if (flow != Flow::kNormal) return Error("'break' or 'continue' inside a {% set %} block");
      scope_->Set(s.targets[0], Value(std::move(captured)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      scope_->Set(s.name, MakeMacro(s));
      return Flow::kNormal;
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope:
      return Exec(s.body, out);
  }
  return Flow::kNormal;
}

Status Interpreter::Assign(const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    scope_->Set(targets[0], value);
    return Status::Ok();
  }
  FAK_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*this, value));
  if (items.size() != targets.size()) {
    return Error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) + " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope_->Set(targets[i], items[i]);
  return Status::Ok();
}

Result<Interpreter::Flow> Interpreter::ExecFor(const Stmt& s, Text& out) {
  FAK_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
  FAK_ASSIGN_OR_RETURN(std::vector<Value> all, Iterate(*this, iterable));
  const std::shared_ptr<Scope> outer = scope_;
  std::vector<Value> items;
  if (s.cond) {
    // The filter sees each item bound as the loop's target, and loop.length counts what passes.
    for (const Value& item : all) {
      FAK_RETURN_IF_ERROR(CountIterations(1));
      scope_ = std::make_shared<Scope>();
      scope_->parent = outer;
      Status st = Assign(s.targets, item);
      Result<Value> keep = st.ok() ? Eval(*s.cond) : Result<Value>(st);
      scope_ = outer;
      if (!keep.has_value()) return keep.error();
      if (keep->Truthy()) items.push_back(item);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) return Exec(s.else_body, out);
  const int64_t n = static_cast<int64_t>(items.size());
  Flow result = Flow::kNormal;
  for (int64_t i = 0; i < n; ++i) {
    FAK_RETURN_IF_ERROR(CountIterations(1));
    scope_ = std::make_shared<Scope>();
    scope_->parent = outer;
    Status st = Assign(s.targets, items[i]);
    if (!st.ok()) {
      scope_ = outer;
      return st;
    }
    std::vector<std::pair<std::string, Value>> loop = {
        {"index", Value(i + 1)},       {"index0", Value(i)},         {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)}, {"first", Value(i == 0)},     {"last", Value(i == n - 1)},
        {"length", Value(n)},           {"depth", Value(1)},           {"depth0", Value(0)}};
    if (i > 0) loop.emplace_back("previtem", items[i - 1]);
    if (i + 1 < n) loop.emplace_back("nextitem", items[i + 1]);
    auto cycle = std::make_shared<Function>();
    cycle->name = "loop.cycle";
    cycle->call = [i](Interpreter& in, CallArgs& args) -> Result<Value> {
      if (args.positional.empty()) return in.Error("loop.cycle() needs at least one value");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    };
    loop.emplace_back("cycle", Value(std::shared_ptr<const Function>(std::move(cycle))));
    scope_->Set("loop", Value::MakeDict(std::move(loop)));
    Result<Flow> flow = Exec(s.body, out);
    scope_ = outer;
    if (!flow.has_value()) return flow.error();
    if (*flow == Flow::kBreak) break;
  }
  return result;
}

Value Interpreter::MakeMacro(const Stmt& s) {
  auto f = std::make_shared<Function>();
  f->name = s.name;
  // Weak: the macro is stored in the scope it closes over, and a strong reference would make that a
  // cycle that outlives the render (a leak per render).
  const std::weak_ptr<Scope> closure = scope_;
  const Stmt* def = &s;
  f->call = [closure, def](Interpreter& in, CallArgs& args) -> Result<Value> {
    std::shared_ptr<Scope> defining = closure.lock();
    if (!defining) return in.Error("macro '" + def->name + "' called after the block that defined it ended");
    if (in.call_depth_ >= in.options_.limits.max_depth) {
      return in.Exhausted("macro '" + def->name + "' called more than " + std::to_string(in.options_.limits.max_depth) +
                          " levels deep");
    }
    if (args.positional.size() > def->params.size()) {
      return in.Error("macro '" + def->name + "' takes " + std::to_string(def->params.size()) + " arguments, " +
                      std::to_string(args.positional.size()) + " given");
    }
    const std::shared_ptr<Scope> caller_scope = in.scope_;
    const int caller_line = in.line_;
    auto frame = std::make_shared<Scope>();
    frame->parent = std::move(defining);
    in.scope_ = frame;
    ++in.call_depth_;
    auto finish = [&](auto result) {
      --in.call_depth_;
      in.scope_ = caller_scope;
      in.line_ = caller_line;
      return result;
    };
    for (size_t p = 0; p < def->params.size(); ++p) {
      const auto& [name, default_expr] = def->params[p];
      Value v;
      if (p < args.positional.size()) {
        v = args.positional[p];
      } else if (auto it = std::find_if(args.named.begin(), args.named.end(), [&](auto& kv) { return kv.first == name; });
                 it != args.named.end()) {
        v = it->second;
      } else if (default_expr) {
        Result<Value> d = in.Eval(*default_expr);
        if (!d.has_value()) return finish(Result<Value>(d.error()));
        v = std::move(*d);
      } else {
        v = Undefined{"parameter '" + name + "' of macro '" + def->name + "' was not given"};
      }
      frame->Set(name, std::move(v));
    }
    for (const auto& [name, v] : args.named) {
      const bool known = std::any_of(def->params.begin(), def->params.end(), [&](auto& p) { return p.first == name; });
      if (!known) return finish(Result<Value>(in.Error("macro '" + def->name + "' has no parameter '" + name + "'")));
    }
    Text out;
    Result<Flow> flow = in.Exec(def->body, out);
    if (!flow.has_value()) return finish(Result<Value>(flow.error()));
    return finish(Result<Value>(Value(std::move(out))));
  };
  return Value(std::shared_ptr<const Function>(std::move(f)));
}

Result<Value> Interpreter::Lookup(const std::string& name) const {
  if (const Value* v = scope_->Find(name)) return *v;
  return Value(Undefined{"'" + name + "' is undefined"});
}

Result<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) {
    FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.named) {
    FAK_ASSIGN_OR_RETURN(Value v, Eval(*expr));
    args.named.emplace_back(name, std::move(v));
  }
  return args;
}

// Builtins print, compare and sort their operands recursively: none may nest past the limit.
Status Interpreter::CheckOperands(const Value& target, const CallArgs& args) const {
  FAK_RETURN_IF_ERROR(CheckNesting(target));
  for (const Value& v : args.positional) FAK_RETURN_IF_ERROR(CheckNesting(v));
  for (const auto& [name, v] : args.named) FAK_RETURN_IF_ERROR(CheckNesting(v));
  return Status::Ok();
}

Result<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.undefined()) return Error(callee.undef().name + " (called)");
  if (!callee.is_callable()) return Error("'" + std::string(callee.TypeName()) + "' object is not callable");
  FAK_RETURN_IF_ERROR(CheckOperands(Value(None{}), args));
  return callee.function().call(*this, args);
}

Result<Value> Interpreter::Filter(const std::string& name, const Value& target, CallArgs& args) {
  FAK_RETURN_IF_ERROR(CheckOperands(target, args));
  return ApplyFilter(*this, name, target, args);
}

Result<bool> Interpreter::Test(const std::string& name, const Value& target, CallArgs& args) {
  FAK_RETURN_IF_ERROR(CheckOperands(target, args));
  return ApplyTest(*this, name, target, args);
}

Result<Value> Interpreter::Eval(const Expr& e) {
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kList: {
      std::vector<Value> items;
      for (const auto& a : e.args) {
        FAK_ASSIGN_OR_RETURN(Value v, Eval(*a));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.tuple);
    }
    case Expr::Kind::kDict: {
      Value d = Value::MakeDict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        FAK_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
        FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
        if (!k.is_string()) {
          return Unsupported("jinja template line " + std::to_string(e.line) + ": dict keys other than strings (" +
                             std::string(k.TypeName()) + ") are not supported");
        }
        d.mutable_dict().Set(k.str(), std::move(v));
      }
      return d;
    }
    case Expr::Kind::kAttr: {
      FAK_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      line_ = e.line;
      if (target.undefined()) return Error(target.undef().name);
      return GetAttribute(*this, target, e.name, /*item=*/false);
    }
    case Expr::Kind::kItem: {
      FAK_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      FAK_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
      line_ = e.line;
      if (target.undefined()) return Error(target.undef().name);
      return GetItem(*this, target, key);
    }
    case Expr::Kind::kSlice: {
      FAK_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      Value parts[3] = {None{}, None{}, None{}};
      for (int i = 0; i < 3; ++i) {
        if (e.args[1 + i]) {
          FAK_ASSIGN_OR_RETURN(parts[i], Eval(*e.args[1 + i]));
        }
      }
      line_ = e.line;
      if (target.undefined()) return Error(target.undef().name);
      return GetSlice(*this, target, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: {
      FAK_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0]));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      line_ = e.line;
      return Call(callee, args);
    }
    case Expr::Kind::kFilter: {
      FAK_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      line_ = e.line;
      return Filter(e.name, target, args);
    }
    case Expr::Kind::kTest: {
      FAK_ASSIGN_OR_RETURN(Value target, Eval(*e.args[0]));
      FAK_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      line_ = e.line;
      FAK_ASSIGN_OR_RETURN(bool r, Test(e.name, target, args));
      return Value(r != e.negate);
    }
    case Expr::Kind::kNot: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      return Value(!v.Truthy());
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      FAK_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
      line_ = e.line;
      if (v.undefined()) return Error(v.undef().name);
      if (!v.is_number()) return Error("bad operand type for unary " + std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" + std::string(v.TypeName()) + "'");
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value(v.integer()) : v;
      if (v.is_float()) return Value(-v.number());
      if (v.integer() == std::numeric_limits<int64_t>::min()) return Error("integer overflow");
      return Value(-v.integer());
    }
    case Expr::Kind::kAnd: {
      FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
      if (!a.Truthy()) return a;
      return Eval(*e.args[1]);
    }
    case Expr::Kind::kOr: {
      FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
      if (a.Truthy()) return a;
      return Eval(*e.args[1]);
    }
    case Expr::Kind::kCond: {
      FAK_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0]));
      if (c.Truthy()) return Eval(*e.args[1]);
      if (!e.args[2]) return Value(Undefined{"the conditional expression's false branch (no else)"});
      return Eval(*e.args[2]);
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
  }
  return Error("unknown expression");
}

namespace {

bool AddOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool SubOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool MulOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Result<Value> Interpreter::EvalBinary(const Expr& e) {
  FAK_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
  FAK_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
  line_ = e.line;
  const std::string& op = e.name;
  if (op == "==" || op == "!=") {
    FAK_RETURN_IF_ERROR(CheckNesting(a));
    FAK_RETURN_IF_ERROR(CheckNesting(b));
    return Value(Equal(a, b) == (op == "=="));
  }
  if (op == "~") {
    FAK_RETURN_IF_ERROR(CheckNesting(a));
    FAK_RETURN_IF_ERROR(CheckNesting(b));
    Text t = a.ToText();
    Text u = b.ToText();
    FAK_RETURN_IF_ERROR(CheckSize(t.bytes.size() + u.bytes.size()));
    t.Append(u);
    return Value(std::move(t));
  }
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.undefined()) {
      found = false;
    } else if (b.is_string()) {
      if (!a.is_string()) return Error("'in <string>' requires string as left operand, not " + std::string(a.TypeName()));
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      FAK_RETURN_IF_ERROR(CheckNesting(a));
      FAK_RETURN_IF_ERROR(CheckNesting(b));
      found = std::any_of(b.list().items.begin(), b.list().items.end(), [&](const Value& x) { return Equal(a, x); });
    } else if (b.is_dict() && !b.dict().is_namespace) {
      found = a.is_string() && b.dict().Find(a.str()) != nullptr;
    } else {
      return Error("argument of type '" + std::string(b.TypeName()) + "' is not iterable");
    }
    return Value(found == (op == "in"));
  }
  if (a.undefined()) return Error(a.undef().name);
  if (b.undefined()) return Error(b.undef().name);
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    FAK_RETURN_IF_ERROR(CheckNesting(a));
    FAK_RETURN_IF_ERROR(CheckNesting(b));
    Result<bool> r = (op == "<" || op == ">=") ? Less(a, b) : Less(b, a);
    if (!r.has_value()) return Error(std::string(r.error().message()));
    return Value(op == "<" || op == ">" ? *r : !*r);
  }
  auto type_error = [&]() {
    return Error("unsupported operand type(s) for " + op + ": '" + std::string(a.TypeName()) + "' and '" +
                 std::string(b.TypeName()) + "'");
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      FAK_RETURN_IF_ERROR(CheckSize(a.str().size() + b.str().size()));
      Text t = a.text();
      t.Append(b.text());
      return Value(std::move(t));
    }
    if (a.is_list() && b.is_list()) {
      FAK_RETURN_IF_ERROR(CountIterations(a.list().items.size() + b.list().items.size()));
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::MakeList(std::move(items), a.list().tuple);
    }
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq != nullptr && count->is_int()) {
      const int64_t n = std::max<int64_t>(0, count->integer());
      if (seq->is_string()) {
        if (n > 0 && seq->str().size() > options_.limits.max_output_bytes / static_cast<uint64_t>(n)) {
          return Exhausted("a repeated string larger than the limit of " + std::to_string(options_.limits.max_output_bytes) + " bytes");
        }
        std::string s;
        for (int64_t i = 0; i < n; ++i) s += seq->str();
        return Value(Text::Derived(std::move(s), {&seq->text()}));
      }
      const size_t size = seq->list().items.size();
      if (n > 0 && size > options_.limits.max_iterations / static_cast<uint64_t>(n)) return Exhausted("a repeated list too long");
      FAK_RETURN_IF_ERROR(CountIterations(size * static_cast<size_t>(n)));
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->list().items.begin(), seq->list().items.end());
      return Value::MakeList(std::move(items), seq->list().tuple);
    }
  }
  if (op == "%" && a.is_string()) {
    return Unsupported("jinja template line " + std::to_string(e.line) + ": printf-style string formatting ('...' % x) is not supported");
  }
  if (!a.is_number() || !b.is_number()) return type_error();
  const bool ints = a.is_int() && b.is_int();
  if (op == "/") {
    if (b.number() == 0) return Error("division by zero");
    return Value(a.number() / b.number());
  }
  if (ints) {
    const int64_t x = a.integer(), y = b.integer();
    int64_t r = 0;
    if (op == "+" && !AddOverflows(x, y, &r)) return Value(r);
    if (op == "-" && !SubOverflows(x, y, &r)) return Value(r);
    if (op == "*" && !MulOverflows(x, y, &r)) return Value(r);
    if (op == "//" || op == "%") {
      if (y == 0) return Error("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return Error("integer overflow");
      const int64_t q = FloorDiv(x, y);
      return op == "//" ? Value(q) : Value(x - q * y);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      if (x == 0 || x == 1) return Value(y == 0 ? int64_t{1} : x);
      if (x == -1) return Value(y % 2 == 0 ? int64_t{1} : int64_t{-1});
      int64_t acc = 1;  // |x| >= 2 overflows within 63 steps
      for (int64_t i = 0; i < y; ++i) {
        if (MulOverflows(acc, x, &acc)) return Error("integer overflow in **");
      }
      return Value(acc);
    }
    if (op == "+" || op == "-" || op == "*") return Error("integer overflow in " + op);
  }
  const double x = a.number(), y = b.number();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (op == "//" || op == "%") {
    if (y == 0) return Error("float division or modulo by zero");
    const double q = std::floor(x / y);
    if (op == "//") return Value(q);
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  return type_error();
}

Result<Text> Template::Render(const Value& context, const RenderOptions& options) const {
  Interpreter in(options);
  return in.Run(*body_, context);
}

}  // namespace fak::jinja
