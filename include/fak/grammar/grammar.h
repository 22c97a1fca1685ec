// Grammars for constrained generation: GBNF text (the syntax llama.cpp users write) parsed into
// rules, and a matcher that follows text through them byte by byte.
//
// Syntax (docs/grammar.md): `name ::= alternates`; alternates are sequences separated by `|`;
// items are "literals" (with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes, UTF-8 text), [classes]
// ([a-z], [^"\\], escapes as in literals), `.` (any character), rule names, and (groups); each may
// be followed by `*`, `+`, `?`, `{m}`, `{m,}` or `{m,n}`. `#` comments run to the end of the line.
// Rules may span lines; a rule ends where the next `name ::=` begins. The start rule is `root`.
//
// A grammar comes from someone else (a client's request), so parsing is bounded (GrammarLimits):
// rules, nesting, repetition counts, elements, and the matcher's set of stacks. Left recursion
// (a rule that can reach itself without consuming a character) is refused, naming the rule.
// Errors are InvalidArgument naming the rule and the line:column.
#ifndef FAK_GRAMMAR_GRAMMAR_H_
#define FAK_GRAMMAR_GRAMMAR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

namespace internal {
struct GrammarRules;
}

struct FAK_EXPORT GrammarLimits {
  size_t max_bytes = size_t{1} << 20;  // grammar text
  size_t max_rules = 4096;             // named and helper rules (each group and repetition adds one)
  size_t max_elements = size_t{1} << 20;
  int max_nesting = 64;                // parentheses open at once
  uint32_t max_repetition = 1000;      // m and n of {m,n}
  size_t max_stacks = 512;             // a matcher's set of alternative parses at one point
};

// Parsed rules. Immutable; thread-safe; cheap to copy (shared).
class FAK_EXPORT Grammar {
 public:
  static Result<Grammar> Parse(std::string_view gbnf, const GrammarLimits& limits = {});

  size_t rule_count() const;
  const GrammarLimits& limits() const { return limits_; }
  const internal::GrammarRules& rules() const { return *rules_; }

 private:
  Grammar(std::shared_ptr<const internal::GrammarRules> rules, GrammarLimits limits)
      : rules_(std::move(rules)), limits_(limits) {}
  std::shared_ptr<const internal::GrammarRules> rules_;
  GrammarLimits limits_;
};

// Where a text stands in a grammar: the set of parses still alive, as stacks of grammar positions.
// Feed it bytes; it says whether the text so far can still be completed (Accept fails otherwise)
// and whether it is a whole sentence (CanEnd). Not thread-safe; one per text. Copyable.
class FAK_EXPORT GrammarMatcher {
 public:
  // ResourceExhausted when the start already has more parses than max_stacks.
  static Result<GrammarMatcher> Start(const Grammar& grammar);

  // Feeds `bytes` (any split of UTF-8 text; a character may span calls). InvalidArgument naming
  // the offset when the grammar cannot continue with them (invalid UTF-8 included);
  // ResourceExhausted past max_stacks. Either way the matcher is left as it was.
  Status Accept(std::string_view bytes);
  // The text so far is a whole sentence of the grammar (no character half fed).
  bool CanEnd() const;
  // Nothing can follow: every parse has ended.
  bool Finished() const;

  // The machinery GrammarConstraint shares (src/grammar/stack_set.h).
  struct State;
  const State& state() const { return *state_; }

 private:
  explicit GrammarMatcher(Grammar grammar, std::shared_ptr<State> state)
      : grammar_(std::move(grammar)), state_(std::move(state)) {}
  Grammar grammar_;
  std::shared_ptr<State> state_;  // copy-on-write: Accept replaces it
};

}  // namespace fak

#endif  // FAK_GRAMMAR_GRAMMAR_H_
