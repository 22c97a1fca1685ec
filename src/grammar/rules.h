// The compiled form of a grammar: rules of alternates, each a run of elements ending in kEnd, over
// one flat element array, so a matcher's position in the grammar is one index. Repetition and
// groups are already rewritten into plain rules (gbnf_parser.cc), so the matcher knows only
// character sets, rule references and ends.
#ifndef FAK_SRC_GRAMMAR_RULES_H_
#define FAK_SRC_GRAMMAR_RULES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fak::internal {

// A set of Unicode code points: inclusive ranges, or everything outside them when negated
// (`.` is a negated empty set).
struct CharSet {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;

  bool Matches(uint32_t cp) const {
    bool in = false;
    for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
    return in != negated;
  }
  // Whether some code point in [lo, hi] matches: a token may end inside a UTF-8 sequence.
  bool MayMatchIn(uint32_t lo, uint32_t hi) const {
    if (!negated) {
      for (const auto& [a, b] : ranges)
        if (a <= hi && b >= lo) return true;
      return false;
    }
    for (const auto& [a, b] : ranges)
      if (a <= lo && b >= hi) return false;  // wholly excluded (ranges of one class rarely need merging)
    return true;
  }
};

enum class ElementKind : uint8_t { kChars, kRule, kEnd };

struct Element {
  ElementKind kind = ElementKind::kEnd;
  uint32_t index = 0;  // kChars: into char_sets; kRule: the rule
};

struct GrammarRules {
  std::vector<std::string> names;                  // per rule (helper rules: "<rule>/<n>")
  std::vector<std::vector<uint32_t>> alternates;   // per rule: where each alternate starts in elements
  std::vector<Element> elements;
  std::vector<CharSet> char_sets;
  uint32_t root = 0;
};

}  // namespace fak::internal

#endif  // FAK_SRC_GRAMMAR_RULES_H_
