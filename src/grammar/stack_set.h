// The pushdown machinery under GrammarMatcher and the token mask: stacks of grammar positions kept
// as persistent linked nodes in an arena (a push is one node; stacks share their tails), and a set
// of such stacks advanced one code point at a time. The mask's walk over the vocabulary trie
// truncates the arena as it backs out of a subtree, so a walk allocates nothing in steady state.
#ifndef FAK_SRC_GRAMMAR_STACK_SET_H_
#define FAK_SRC_GRAMMAR_STACK_SET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "fak/grammar/grammar.h"
#include "src/grammar/rules.h"

namespace fak::internal {

struct StackNode {
  uint32_t pos;    // an element: kChars at a stack's top, the element after a rule reference below
  int32_t parent;  // the node below; -1 at the bottom
};

// A set of parses: the top node of each stack (its element is always kChars), and whether some
// parse has ended (its stack emptied).
struct StackSet {
  std::vector<int32_t> tops;
  bool accepting = false;
  void Clear() {
    tops.clear();
    accepting = false;
  }
  bool Dead() const { return tops.empty() && !accepting; }
};

// A UTF-8 character being assembled from bytes.
struct Utf8Partial {
  uint32_t value = 0;
  uint8_t remaining = 0;  // continuation bytes still to come
  uint8_t length = 0;     // bytes of the whole sequence
};
enum class Utf8Feed { kComplete, kPartial, kInvalid };
// Adds `byte` to `p`; on kComplete, p->value is the code point (and p is reset by the next feed).
Utf8Feed FeedUtf8(Utf8Partial* p, uint8_t byte);

class StackStepper {
 public:
  StackStepper(const GrammarRules& rules, size_t max_stacks) : rules_(&rules), max_stacks_(max_stacks) {}

  // Adds the parses that start at `pos` on top of `parent` to `out`, following rule references
  // and ends until every stack tops on a character set.
  Status Settle(uint32_t pos, int32_t parent, StackSet* out);
  // `to` = the parses of `from` whose top matches `cp`, each moved past it and settled.
  Status Advance(const StackSet& from, uint32_t cp, StackSet* to);
  // Whether some parse of `from` could take a character beginning with the bytes in `p`.
  bool MayContinue(const StackSet& from, const Utf8Partial& p) const;

  std::vector<StackNode>& arena() { return arena_; }
  const std::vector<StackNode>& arena() const { return arena_; }
  // Rebuilds the arena with only the stacks of `set` (rewritten in place).
  void Compact(StackSet* set);
  // The stacks of `set` spelled out, a key equal for equal parse sets built in any arena.
  void AppendKey(const StackSet& set, std::string* key) const;

 private:
  bool SameStack(int32_t a, int32_t b) const;
  void AddTop(uint32_t pos, int32_t parent, StackSet* out);

  const GrammarRules* rules_;  // pointers, not references: states are assigned
  size_t max_stacks_;
  std::vector<StackNode> arena_;
  std::vector<std::pair<uint32_t, int32_t>> work_;  // Settle's pending (pos, parent)
};

}  // namespace fak::internal

namespace fak {
// GrammarMatcher's state: its stacks, their arena and a half-fed character.
struct GrammarMatcher::State {
  explicit State(const internal::GrammarRules& rules, size_t max_stacks) : stepper(rules, max_stacks) {}
  internal::StackStepper stepper;
  internal::StackSet set;
  internal::Utf8Partial partial;
};

// Feeds `bytes` to `state` (GrammarMatcher::Accept's contract, except that on error `state` is
// left part-way: callers feed a copy).
Status FeedBytes(GrammarMatcher::State* state, std::string_view bytes);
}  // namespace fak

#endif  // FAK_SRC_GRAMMAR_STACK_SET_H_
