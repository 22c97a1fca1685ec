// Grammar::Parse: GBNF text → GrammarRules. A recursive-descent parser over the text (nesting
// bounded), rewriting groups and repetition into helper rules as it goes, then three checks over
// the result: every referenced rule defined, a root, and no left recursion.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fak/grammar/grammar.h"
#include "src/grammar/rules.h"
#include "src/grammar/stack_set.h"

namespace fak {
namespace {

using internal::CharSet;
using internal::Element;
using internal::ElementKind;
using Sequence = std::vector<Element>;
using Alternates = std::vector<Sequence>;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  Result<internal::GrammarRules> Run();

 private:
  // Errors name the rule being parsed and where.
  Status Error(std::string what, size_t at) const;
  std::string Where(size_t at) const;

  void SkipSpace();  // whitespace, newlines and # comments
  bool AtRuleStart();  // `name ::=` ahead (after SkipSpace)
  std::string_view ReadName();
  Result<uint32_t> RuleId(std::string_view name, size_t at);
  Result<uint32_t> NewHelperRule();

  Result<Alternates> ParseAlternates(int depth);
  Result<Sequence> ParseSequence(int depth);
  // One item, with its postfix applied: appended to `seq`.
  Status ParseItem(int depth, Sequence* seq);
  Result<Sequence> ParsePrimary(int depth);
  Result<uint32_t> ParseChar(size_t* i, bool in_class);  // one (escaped) UTF-8 character at *i
  Result<uint32_t> ParseCount();
  Status ApplyRepetition(Sequence item, uint32_t min, std::optional<uint32_t> max, size_t at, Sequence* seq);
  uint32_t AddCharSet(CharSet set);
  Status Budget(size_t elements, size_t at);

  std::string_view text_;
  const GrammarLimits& limits_;
  size_t i_ = 0;
  std::string current_rule_;
  std::vector<std::string> names_;
  std::vector<std::optional<Alternates>> bodies_;  // empty until defined
  std::vector<size_t> first_use_;                  // where each rule was first named
  std::map<std::string, uint32_t, std::less<>> ids_;
  std::vector<CharSet> char_sets_;
  std::map<std::string, uint32_t> helper_counts_;
  size_t n_elements_ = 0;
};

std::string Parser::Where(size_t at) const {
  size_t line = 1, col = 1;
  for (size_t k = 0; k < at && k < text_.size(); ++k) {
    if (text_[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

Status Parser::Error(std::string what, size_t at) const {
  std::string rule = current_rule_.empty() ? "" : " in rule '" + current_rule_ + "'";
  return InvalidArgument("grammar" + rule + " at " + Where(at) + ": " + what);
}

void Parser::SkipSpace() {
  while (i_ < text_.size()) {
    const char c = text_[i_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i_;
    } else if (c == '#') {
      while (i_ < text_.size() && text_[i_] != '\n') ++i_;
    } else {
      break;
    }
  }
}

bool Parser::AtRuleStart() {
  size_t k = i_;
  while (k < text_.size() && IsNameChar(text_[k])) ++k;
  if (k == i_) return false;
  while (k < text_.size() && (text_[k] == ' ' || text_[k] == '\t')) ++k;
  return text_.substr(k, 3) == "::=";
}

std::string_view Parser::ReadName() {
  const size_t from = i_;
  while (i_ < text_.size() && IsNameChar(text_[i_])) ++i_;
  return text_.substr(from, i_ - from);
}

Result<uint32_t> Parser::RuleId(std::string_view name, size_t at) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (names_.size() >= limits_.max_rules)
    return Error("more than " + std::to_string(limits_.max_rules) + " rules (GrammarLimits.max_rules)", at);
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  bodies_.emplace_back();
  first_use_.push_back(at);
  ids_.emplace(std::string(name), id);
  return id;
}

Result<uint32_t> Parser::NewHelperRule() {
  const std::string name = current_rule_ + "/" + std::to_string(++helper_counts_[current_rule_]);
  return RuleId(name, i_);
}

Status Parser::Budget(size_t elements, size_t at) {
  if (elements > limits_.max_elements - std::min(limits_.max_elements, n_elements_))
    return Error("more than " + std::to_string(limits_.max_elements) + " elements (GrammarLimits.max_elements)", at);
  n_elements_ += elements;
  return Status::Ok();
}

uint32_t Parser::AddCharSet(CharSet set) {
  char_sets_.push_back(std::move(set));
  return static_cast<uint32_t>(char_sets_.size() - 1);
}

Result<uint32_t> Parser::ParseChar(size_t* i, bool in_class) {
  const size_t at = *i;
  if (*i >= text_.size()) return Error("unexpected end of grammar", at);
  const auto c = static_cast<uint8_t>(text_[*i]);
  if (c == '\\') {
    if (*i + 1 >= text_.size()) return Error("unfinished escape", at);
    const char e = text_[*i + 1];
    *i += 2;
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 'r': return uint32_t{'\r'};
      case 't': return uint32_t{'\t'};
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint32_t>(e);
      case 'x': case 'u': case 'U': {
        const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (size_t k = 0; k < digits; ++k, ++*i) {
          const char h = *i < text_.size() ? text_[*i] : '\0';
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return Error(std::string("\\") + e + " needs " + std::to_string(digits) + " hex digits", at);
          v = v * 16 + static_cast<uint32_t>(d);
        }
        if (v > 0x10FFFF) return Error("escape beyond U+10FFFF", at);
        return v;
      }
      default: return Error(std::string("unknown escape \\") + e, at);
    }
  }
  if (!in_class && (c == '\n' || c == '\r')) return Error("newline inside a literal", at);
  internal::Utf8Partial p;
  for (;;) {
    if (*i >= text_.size()) return Error("truncated UTF-8", at);
    const internal::Utf8Feed f = internal::FeedUtf8(&p, static_cast<uint8_t>(text_[(*i)++]));
    if (f == internal::Utf8Feed::kInvalid) return Error("invalid UTF-8", at);
    if (f == internal::Utf8Feed::kComplete) return p.value;
  }
}

Result<uint32_t> Parser::ParseCount() {
  const size_t at = i_;
  uint64_t v = 0;
  if (i_ >= text_.size() || text_[i_] < '0' || text_[i_] > '9') return Error("expected a repetition count", at);
  while (i_ < text_.size() && text_[i_] >= '0' && text_[i_] <= '9') {
    v = v * 10 + static_cast<uint64_t>(text_[i_++] - '0');
    if (v > limits_.max_repetition)
      return Error("repetition count above " + std::to_string(limits_.max_repetition) + " (GrammarLimits.max_repetition)", at);
  }
  return static_cast<uint32_t>(v);
}

Result<Sequence> Parser::ParsePrimary(int depth) {
  const size_t at = i_;
  const char c = text_[i_];
  Sequence seq;
  if (c == '"') {
    ++i_;
    while (i_ < text_.size() && text_[i_] != '"') {
      FAK_ASSIGN_OR_RETURN(uint32_t cp, ParseChar(&i_, /*in_class=*/false));
      seq.push_back({ElementKind::kChars, AddCharSet(CharSet{false, {{cp, cp}}})});
    }
    if (i_ >= text_.size()) return Error("unterminated string literal", at);
    ++i_;
  } else if (c == '[') {
    ++i_;
    CharSet set;
    if (i_ < text_.size() && text_[i_] == '^') {
      set.negated = true;
      ++i_;
    }
    while (i_ < text_.size() && text_[i_] != ']') {
      FAK_ASSIGN_OR_RETURN(uint32_t lo, ParseChar(&i_, /*in_class=*/true));
      uint32_t hi = lo;
      if (i_ + 1 < text_.size() && text_[i_] == '-' && text_[i_ + 1] != ']') {
        ++i_;
        FAK_ASSIGN_OR_RETURN(hi, ParseChar(&i_, /*in_class=*/true));
        if (hi < lo) return Error("character range with its end before its start", at);
      }
      set.ranges.emplace_back(lo, hi);
    }
    if (i_ >= text_.size()) return Error("unterminated character class", at);
    ++i_;
    if (set.ranges.empty() && !set.negated) return Error("empty character class []", at);
    seq.push_back({ElementKind::kChars, AddCharSet(std::move(set))});
  } else if (c == '.') {
    ++i_;
    seq.push_back({ElementKind::kChars, AddCharSet(CharSet{true, {}})});
  } else if (c == '(') {
    if (depth >= limits_.max_nesting)
      return Error("groups nested deeper than " + std::to_string(limits_.max_nesting) + " (GrammarLimits.max_nesting)", at);
    ++i_;
    FAK_ASSIGN_OR_RETURN(Alternates alts, ParseAlternates(depth + 1));
    SkipSpace();
    if (i_ >= text_.size() || text_[i_] != ')') return Error("expected ')' to close the group", at);
    ++i_;
    FAK_ASSIGN_OR_RETURN(uint32_t rule, NewHelperRule());
    bodies_[rule] = std::move(alts);
    seq.push_back({ElementKind::kRule, rule});
  } else if (IsNameChar(c)) {
    const std::string_view name = ReadName();
    FAK_ASSIGN_OR_RETURN(uint32_t rule, RuleId(name, at));
    seq.push_back({ElementKind::kRule, rule});
  } else {
    return Error(std::string("unexpected '") + c + "'", at);
  }
  FAK_RETURN_IF_ERROR(Budget(seq.size(), at));
  return seq;
}

// x{min,max}: min copies of x, then max - min nested optionals (x (x (x)?)?)?, or x* when unbounded.
Status Parser::ApplyRepetition(Sequence item, uint32_t min, std::optional<uint32_t> max, size_t at, Sequence* seq) {
  FAK_RETURN_IF_ERROR(Budget(item.size() * (static_cast<size_t>(max.value_or(min)) + 1), at));
  for (uint32_t k = 0; k < min; ++k) seq->insert(seq->end(), item.begin(), item.end());
  if (!max) {  // star ::= x star | ""
    FAK_ASSIGN_OR_RETURN(uint32_t star, NewHelperRule());
    Sequence loop = item;
    loop.push_back({ElementKind::kRule, star});
    bodies_[star] = Alternates{std::move(loop), Sequence{}};
    seq->push_back({ElementKind::kRule, star});
    return Status::Ok();
  }
  std::optional<uint32_t> inner;
  for (uint32_t k = min; k < *max; ++k) {  // built inside out
    FAK_ASSIGN_OR_RETURN(uint32_t opt, NewHelperRule());
    Sequence some = item;
    if (inner) some.push_back({ElementKind::kRule, *inner});
    bodies_[opt] = Alternates{std::move(some), Sequence{}};
    inner = opt;
  }
  if (inner) seq->push_back({ElementKind::kRule, *inner});
  return Status::Ok();
}

Status Parser::ParseItem(int depth, Sequence* seq) {
  const size_t at = i_;
  FAK_ASSIGN_OR_RETURN(Sequence item, ParsePrimary(depth));
  if (i_ >= text_.size()) {
    seq->insert(seq->end(), item.begin(), item.end());
    return Status::Ok();
  }
  const char c = text_[i_];
  if (c == '*' || c == '+' || c == '?') {
    ++i_;
    return ApplyRepetition(std::move(item), c == '+' ? 1 : 0, c == '?' ? std::optional<uint32_t>(1) : std::nullopt, at, seq);
  }
  if (c == '{') {
    ++i_;
    SkipSpace();
    FAK_ASSIGN_OR_RETURN(uint32_t min, ParseCount());
    SkipSpace();
    std::optional<uint32_t> max = min;
    if (i_ < text_.size() && text_[i_] == ',') {
      ++i_;
      SkipSpace();
      max.reset();
      if (i_ < text_.size() && text_[i_] != '}') {
        FAK_ASSIGN_OR_RETURN(max, ParseCount());
        if (*max < min) return Error("repetition {m,n} with n < m", at);
      }
      SkipSpace();
    }
    if (i_ >= text_.size() || text_[i_] != '}') return Error("expected '}' to close the repetition", at);
    ++i_;
    return ApplyRepetition(std::move(item), min, max, at, seq);
  }
  seq->insert(seq->end(), item.begin(), item.end());
  return Status::Ok();
}

Result<Sequence> Parser::ParseSequence(int depth) {
  Sequence seq;
  for (;;) {
    SkipSpace();
    if (i_ >= text_.size() || text_[i_] == '|' || text_[i_] == ')') return seq;
    if (depth == 0 && AtRuleStart()) return seq;
    FAK_RETURN_IF_ERROR(ParseItem(depth, &seq));
  }
}

Result<Alternates> Parser::ParseAlternates(int depth) {
  Alternates alts;
  for (;;) {
    FAK_ASSIGN_OR_RETURN(Sequence seq, ParseSequence(depth));
    alts.push_back(std::move(seq));
    if (i_ < text_.size() && text_[i_] == '|') {
      ++i_;
      continue;
    }
    return alts;
  }
}

Result<internal::GrammarRules> Parser::Run() {
  if (text_.size() > limits_.max_bytes)
    return InvalidArgument("grammar: " + std::to_string(text_.size()) + " bytes is larger than the limit of " +
                           std::to_string(limits_.max_bytes));
  for (;;) {
    SkipSpace();
    if (i_ >= text_.size()) break;
    const size_t at = i_;
    current_rule_.clear();
    if (!AtRuleStart()) return Error("expected a rule: name ::= ...", at);
    const std::string_view name = ReadName();
    FAK_ASSIGN_OR_RETURN(uint32_t id, RuleId(name, at));
    if (bodies_[id]) return Error("rule '" + std::string(name) + "' is defined twice", at);
    current_rule_ = std::string(name);
    SkipSpace();
    i_ += 3;  // ::=
    FAK_ASSIGN_OR_RETURN(Alternates alts, ParseAlternates(0));
    if (i_ < text_.size() && text_[i_] == ')') return Error("')' without a group to close", i_);
    bodies_[id] = std::move(alts);
  }
  current_rule_.clear();
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!bodies_[r]) return Error("rule '" + names_[r] + "' is used but never defined", first_use_[r]);
  }
  auto root = ids_.find("root");
  if (root == ids_.end()) return InvalidArgument("grammar: no rule 'root' (the start rule)");

  internal::GrammarRules out;
  out.names = names_;
  out.root = root->second;
  out.char_sets = std::move(char_sets_);
  out.alternates.resize(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    for (const Sequence& seq : *bodies_[r]) {
      out.alternates[r].push_back(static_cast<uint32_t>(out.elements.size()));
      out.elements.insert(out.elements.end(), seq.begin(), seq.end());
      out.elements.push_back({ElementKind::kEnd, 0});
    }
  }
  return out;
}

// Refuses a rule that can reach itself before consuming a character (the matcher would descend
// forever): a cycle in the graph "rule → rules it can start with", where a reference counts while
// everything before it in its alternate can match the empty string.
Status CheckLeftRecursion(const internal::GrammarRules& g) {
  const size_t n = g.names.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t pos : g.alternates[r]) {
        bool all = true;
        for (uint32_t p = pos; g.elements[p].kind != ElementKind::kEnd && all; ++p)
          all = g.elements[p].kind == ElementKind::kRule && nullable[g.elements[p].index];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> starts(n);
  for (size_t r = 0; r < n; ++r) {
    for (uint32_t pos : g.alternates[r]) {
      for (uint32_t p = pos; g.elements[p].kind == ElementKind::kRule; ++p) {
        starts[r].push_back(g.elements[p].index);
        if (!nullable[g.elements[p].index]) break;
      }
    }
  }
  // Iterative three-colour DFS (rules can be thousands deep).
  std::vector<uint8_t> colour(n, 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < n; ++s) {
    if (colour[s] != 0) continue;
    path.emplace_back(s, 0);
    colour[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == starts[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = starts[r][next++];
      if (colour[to] == 1) {
        return InvalidArgument("grammar: rule '" + g.names[to] +
                               "' is left-recursive (it can reach itself without consuming a character)");
      }
      if (colour[to] == 0) {
        colour[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Grammar> Grammar::Parse(std::string_view gbnf, const GrammarLimits& limits) {
  Parser parser(gbnf, limits);
  FAK_ASSIGN_OR_RETURN(internal::GrammarRules rules, parser.Run());
  FAK_RETURN_IF_ERROR(CheckLeftRecursion(rules));
  return Grammar(std::make_shared<const internal::GrammarRules>(std::move(rules)), limits);
}

size_t Grammar::rule_count() const { return rules_->names.size(); }

}  // namespace fak
