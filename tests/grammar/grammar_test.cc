// Grammar::Parse and GrammarMatcher: each construct of the GBNF syntax matched and refused where
// it should be, each refusal (syntax, limits, left recursion) naming the rule and position, and
// the matcher's all-or-nothing Accept.
#include "fak/grammar/grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace fak {
namespace {

// Whether `text` is a whole sentence of `gbnf`.
bool Matches(std::string_view gbnf, std::string_view text) {
  Result<Grammar> g = Grammar::Parse(gbnf);
  EXPECT_TRUE(g.has_value()) << g.error().ToString();
  if (!g) return false;
  Result<GrammarMatcher> m = GrammarMatcher::Start(*g);
  EXPECT_TRUE(m.has_value());
  return m->Accept(text).ok() && m->CanEnd();
}

std::string ParseError(std::string_view gbnf, const GrammarLimits& limits = {}) {
  Result<Grammar> g = Grammar::Parse(gbnf, limits);
  EXPECT_FALSE(g.has_value()) << gbnf;
  return g ? "" : std::string(g.error().message());
}

TEST(GrammarTest, LiteralsAndEscapes) {
  EXPECT_TRUE(Matches(R"(root ::= "abc")", "abc"));
  EXPECT_FALSE(Matches(R"(root ::= "abc")", "ab"));
  EXPECT_FALSE(Matches(R"(root ::= "abc")", "abcd"));
  EXPECT_TRUE(Matches(R"(root ::= "a\n\t\"\\")", "a\n\t\"\\"));
  EXPECT_TRUE(Matches(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches("root ::= \"h\xC3\xA9\"", "h\xC3\xA9"));  // UTF-8 in the grammar itself
  EXPECT_TRUE(Matches(R"(root ::= "")", ""));
}

TEST(GrammarTest, ClassesRangesNegationAndAny) {
  EXPECT_TRUE(Matches("root ::= [a-c0-9_]", "b"));
  EXPECT_TRUE(Matches("root ::= [a-c0-9_]", "_"));
  EXPECT_FALSE(Matches("root ::= [a-c0-9_]", "d"));
  EXPECT_TRUE(Matches(R"(root ::= [^"\\])", "x"));
  EXPECT_FALSE(Matches(R"(root ::= [^"\\])", "\""));
  EXPECT_TRUE(Matches(R"(root ::= [^a])", "\xE2\x82\xAC"));  // a multi-byte character
  EXPECT_TRUE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\xA9"));
  EXPECT_TRUE(Matches("root ::= . .", "a\xC3\xA9"));
  EXPECT_FALSE(Matches("root ::= .", ""));
  EXPECT_FALSE(Matches("root ::= .", "\xE0\x81\x9B"));  // an overlong "[" is not a character
  EXPECT_FALSE(Matches("root ::= .", "\xED\xA0\x80"));  // nor a surrogate
}

TEST(GrammarTest, AlternationSequencesGroupsAndRules) {
  const char* g = R"(
    root ::= greeting " " name   # a comment
    greeting ::= "hi" | "hello"
    name ::= ("bob" | "al") "!"?
  )";
  EXPECT_TRUE(Matches(g, "hi bob"));
  EXPECT_TRUE(Matches(g, "hello al!"));
  EXPECT_FALSE(Matches(g, "hey bob"));
  EXPECT_FALSE(Matches(g, "hi bob!!"));
  // Alternates may continue on the next line, before or after the bar.
  EXPECT_TRUE(Matches("root ::= \"a\"\n  | \"b\"\nother ::= \"c\"", "b"));
  EXPECT_TRUE(Matches("root ::= \"a\" |\n  \"b\"", "b"));
}

TEST(GrammarTest, Repetition) {
  EXPECT_TRUE(Matches(R"(root ::= "a"*)", ""));
  EXPECT_TRUE(Matches(R"(root ::= "a"*)", "aaaa"));
  EXPECT_FALSE(Matches(R"(root ::= "a"+)", ""));
  EXPECT_TRUE(Matches(R"(root ::= "ab"+)", "ababab"));
  EXPECT_FALSE(Matches(R"(root ::= "ab"+)", "aba"));
  EXPECT_TRUE(Matches(R"(root ::= "a"? "b")", "b"));
  for (int n = 0; n <= 5; ++n) {
    const std::string text(static_cast<size_t>(n), 'x');
    EXPECT_EQ(Matches(R"(root ::= "x"{3})", text), n == 3) << n;
    EXPECT_EQ(Matches(R"(root ::= "x"{2,})", text), n >= 2) << n;
    EXPECT_EQ(Matches(R"(root ::= "x"{1,3})", text), n >= 1 && n <= 3) << n;
    EXPECT_EQ(Matches(R"(root ::= "x"{0,2})", text), n <= 2) << n;
  }
  EXPECT_TRUE(Matches(R"(root ::= ("a" | "b"){2} "c")", "bac"));
}

TEST(GrammarTest, RecursionThatConsumesIsFine) {
  const char* g = R"g(root ::= "(" root ")" | "x")g";
  EXPECT_TRUE(Matches(g, "((x))"));
  EXPECT_FALSE(Matches(g, "((x)"));
}

TEST(GrammarTest, SyntaxErrorsNameRuleAndPosition) {
  EXPECT_NE(ParseError("root ::= \"abc").find("rule 'root' at 1:10: unterminated string literal"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [a-").find("rule 'root'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\" )").find("')' without a group"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\\q\"").find("unknown escape \\q"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [z-a]").find("end before its start"), std::string::npos);
  EXPECT_NE(ParseError("root ::= []").find("empty character class"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(ParseError("root ::= @").find("unexpected '@'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= item\n").find("rule 'item' is used but never defined"), std::string::npos);
  EXPECT_NE(ParseError("a ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"\nroot ::= \"b\"").find("at 2:1: rule 'root' is defined twice"), std::string::npos);
  EXPECT_NE(ParseError("just words").find("expected a rule"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\xFF\"").find("invalid UTF-8"), std::string::npos);
}

TEST(GrammarTest, LeftRecursionIsRefusedNamingTheRule) {
  EXPECT_NE(ParseError("root ::= root \"a\" | \"b\"").find("rule 'root' is left-recursive"), std::string::npos);
  // Through another rule, and behind a rule that can match nothing.
  EXPECT_NE(ParseError("root ::= expr\nexpr ::= opt expr \"+\" | \"1\"\nopt ::= \"-\"?").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
}

TEST(GrammarTest, LimitsAreEnforcedBeforeWork) {
  GrammarLimits small;
  small.max_rules = 3;
  EXPECT_NE(ParseError("root ::= a\na ::= b\nb ::= c\nc ::= \"x\"", small).find("more than 3 rules"), std::string::npos);
  small = {};
  small.max_nesting = 2;
  EXPECT_NE(ParseError("root ::= (((\"x\")))", small).find("nested deeper than 2"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\"{1001}").find("repetition count above 1000"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"x\"{99999999999999999999}").find("repetition count above"), std::string::npos);
  small = {};
  small.max_elements = 100;
  EXPECT_NE(ParseError("root ::= \"abcdefghij\"{20}", small).find("more than 100 elements"), std::string::npos);
  small = {};
  small.max_bytes = 8;
  EXPECT_NE(ParseError("root ::= \"abcdef\"", small).find("larger than the limit"), std::string::npos);
  // A chain of optional, possibly empty items: each "a" could be any of them, one parse each —
  // fine at 100, refused (not a blow-up) past max_stacks.
  EXPECT_TRUE(Matches("root ::= (\"a\"?){0,100} \"b\"", "aab"));
  ASSERT_OK_AND_ASSIGN(Grammar ambiguous, Grammar::Parse("root ::= (\"a\"?){0,1000} \"b\""));
  EXPECT_EQ(GrammarMatcher::Start(ambiguous).error().code(), StatusCode::kResourceExhausted);
  // Deep nesting within the limit parses (no recursion blow-up).
  std::string deep = "root ::= " + std::string(60, '(') + "\"x\"" + std::string(60, ')');
  EXPECT_TRUE(Matches(deep, "x"));
}

TEST(GrammarTest, AmbiguityIsBoundedByMaxStacks) {
  GrammarLimits limits;
  limits.max_stacks = 16;
  // After n x's, a "y" may close any of the n open levels: n + 1 parses alive.
  ASSERT_OK_AND_ASSIGN(Grammar g, Grammar::Parse("root ::= a\na ::= \"x\" a b | \"\"\nb ::= \"y\"?", limits));
  ASSERT_OK_AND_ASSIGN(GrammarMatcher m, GrammarMatcher::Start(g));
  ASSERT_OK(m.Accept(std::string(8, 'x')));
  Status s = m.Accept(std::string(64, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("parses alive"), std::string::npos);
}

TEST(GrammarTest, MatcherAcceptIsAllOrNothingAndStreams) {
  ASSERT_OK_AND_ASSIGN(Grammar g, Grammar::Parse(R"(root ::= "ab" "c"* "\u00e9")"));
  ASSERT_OK_AND_ASSIGN(GrammarMatcher m, GrammarMatcher::Start(g));
  ASSERT_OK(m.Accept("a"));
  EXPECT_FALSE(m.Accept("bx").ok());  // refused: nothing of it was taken
  ASSERT_OK(m.Accept("bcc"));
  ASSERT_OK(m.Accept("\xC3"));        // half a character
  EXPECT_FALSE(m.CanEnd());
  EXPECT_FALSE(m.Accept("\x41").ok());  // not a continuation byte
  ASSERT_OK(m.Accept("\xA9"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.Finished());
  EXPECT_FALSE(m.Accept("c").ok());
}

TEST(GrammarTest, FinishedOnlyWhenNothingCanFollow) {
  ASSERT_OK_AND_ASSIGN(Grammar g, Grammar::Parse(R"(root ::= "a" "b"?)"));
  ASSERT_OK_AND_ASSIGN(GrammarMatcher m, GrammarMatcher::Start(g));
  ASSERT_OK(m.Accept("a"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.Finished());
  ASSERT_OK(m.Accept("b"));
  EXPECT_TRUE(m.Finished());
}

// Untrusted grammars: mutations of valid ones (bytes from GBNF's own alphabet, so they reach deep
// into the parser) either parse or give an error; a parsed one matches random text without
// failing other than by Status. Deterministic; a few thousand cases in well under a second.
TEST(GrammarTest, MutatedGrammarsNeverCrash) {
  const std::vector<std::string> seeds = {
      "root ::= (\"a\" | [b-d]+ x)* \"e\"{1,3}\nx ::= \"(\" root? \")\" | .",
      "root ::= obj\nobj ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\nkv ::= [a-z]+ \":\" ws (obj | [0-9]+)\nws ::= [ \\n]*",
      "root ::= [^\"\\\\] \"\\u00e9\" (\"x\"?){2,4} # c\n"};
  const std::string alphabet = "()[]{}|*+?\"\\^-.,:=# \nabxz019";
  std::mt19937 rng(7);
  size_t parsed = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string g = seeds[rng() % seeds.size()];
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
      const size_t at = rng() % (g.size() + 1);
      switch (rng() % 3) {
        case 0: g.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (at < g.size()) g.erase(at, 1); break;
        default: if (at < g.size()) g[at] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    Result<Grammar> grammar = Grammar::Parse(g);
    if (!grammar) {
      ++refused;
      EXPECT_FALSE(grammar.error().message().empty());
      continue;
    }
    ++parsed;
    Result<GrammarMatcher> m = GrammarMatcher::Start(*grammar);
    if (!m) continue;
    for (int k = 0; k < 8; ++k) (void)m->Accept(std::string(1, alphabet[rng() % alphabet.size()]));
  }
  EXPECT_GT(parsed, 100u);  // the mutations do reach the matcher
  EXPECT_GT(refused, 100u);
}

}  // namespace
}  // namespace fak
