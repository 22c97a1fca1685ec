// The parsed form of a Jinja template: expressions and statements, each with its source line for
// error messages. Built by parser.cc, walked by interpreter.cc; immutable once built.
#ifndef FAK_SRC_TOKENIZER_JINJA_AST_H_
#define FAK_SRC_TOKENIZER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/tokenizer/jinja/value.h"

namespace fak::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args (a list literal, or a tuple when `tuple`)
    kDict,      // args: key, value, key, value...
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null parts absent)
    kCall,      // args[0](args[1..], named)
    kFilter,    // args[0] | name(args[1..], named)
    kTest,      // args[0] is [not] name(args[1..])   (negate)
    kNot,       // not args[0]
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kBinary,    // args[0] op args[1]: + - * / // % ** ~ == != < <= > >= in notin
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCond,      // args[1] if args[0] else args[2] (args[2] null: undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  std::string name;  // the name, attribute, filter, test or operator
  Value value;       // kLiteral
  bool negate = false;
  bool tuple = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> named;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kData,       // text
    kOutput,     // {{ expr }}
    kIf,         // branches: (cond, body)...; else_body
    kFor,        // targets in expr [if cond]: body; else_body
    kSet,        // targets = expr, or target.attr = expr (attr non-empty)
    kSetBlock,   // {% set target %}body{% endset %}
    kMacro,      // name(params = defaults): body
    kBreak,
    kContinue,
    kScope,      // a body run as is ({% generation %})
  };
  Kind kind = Kind::kData;
  int line = 0;
  std::string text;                   // kData
  ExprPtr expr;                       // kOutput, kFor iterable, kSet value
  ExprPtr cond;                       // kFor filter
  std::vector<std::string> targets;   // kFor / kSet names
  std::string attr;                   // kSet on a namespace
  std::string name;                   // kMacro
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (null default: required)
  std::vector<std::pair<ExprPtr, Body>> branches;       // kIf
  Body body, else_body;
};

}  // namespace fak::jinja

#endif  // FAK_SRC_TOKENIZER_JINJA_AST_H_
