// GrammarConstraint: the token mask equals, token for token, what feeding each token's bytes to
// the grammar allows (the trie walk and its cache against brute force); allowed logits keep their
// bits; stop tokens only where the grammar may end; and a Generation under a grammar produces a
// sentence of it and ends where the grammar does.
#include "fak/grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fak/grammar/json_schema.h"
#include "fak/model/generation.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// A vocabulary of given byte strings; the last id is EOS, with no text.
class ListTokenizer final : public Tokenizer {
 public:
  explicit ListTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) { pieces_.emplace_back(); }
  Result<std::vector<int32_t>> Encode(std::string_view) const override { return Unsupported("test tokenizer"); }
  Result<std::string> Decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) return InvalidArgument("id");
      out += pieces_[id];
    }
    return out;
  }
  size_t vocab_size() const override { return pieces_.size(); }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return static_cast<int32_t>(pieces_.size() - 1); }
  const Digest& id() const override { return digest_; }
  std::string_view kind() const override { return "list"; }

 private:
  std::vector<std::string> pieces_;
  Digest digest_;
};

ListTokenizer JsonishTokenizer() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
  for (const char* p : {"{\"", "\":", "\": ", "true", "false", "null", "123", "0.5", " \"", "\xC3\xA9", "\xC3",
                        "ab", "abc", "\n  ", "}", "},", "\",", "\"}", "name", "\"name\"", "[1,", "]}", "  ", "e\xC3",
                        "\xE2\x82", "\xE2\x82\xAC"})
    pieces.emplace_back(p);
  return ListTokenizer(std::move(pieces));
}

// The tokens that Accept takes, one GrammarMatcher copy per token: the definition Mask must meet.
std::vector<bool> BruteForce(const GrammarMatcher& at, const TokenVocabulary& vocab) {
  std::vector<bool> ok(vocab.size(), false);
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (vocab.bytes(static_cast<int32_t>(id)).empty()) continue;
    GrammarMatcher m = at;
    ok[id] = m.Accept(vocab.bytes(static_cast<int32_t>(id))).ok();
  }
  return ok;
}

TEST(GrammarConstraintTest, TrieIsPreorderWithEveryToken) {
  ListTokenizer tok = JsonishTokenizer();
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(tok));
  size_t tokens = 0;
  for (const auto& n : vocab->nodes()) {
    EXPECT_LE(n.subtree_end, vocab->nodes().size());
    tokens += n.tokens_end - n.tokens_begin;
  }
  EXPECT_EQ(tokens, tok.vocab_size() - 1);  // all but EOS, which has no bytes
}

TEST(GrammarConstraintTest, MaskEqualsBruteForceAlongADocument) {
  ListTokenizer tok = JsonishTokenizer();
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(tok));
  ASSERT_OK_AND_ASSIGN(std::string gbnf, JsonSchemaToGbnf(R"({"type":"object","properties":{
      "name":{"type":"string"},"ok":{"type":"boolean"},"n":{"type":["number","null"]}},"required":["name","ok"]})"));
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(gbnf));
  auto constraint = std::make_shared<GrammarConstraint>(grammar, vocab);
  ASSERT_OK_AND_ASSIGN(auto matcher, constraint->NewMatcher());
  ASSERT_OK_AND_ASSIGN(GrammarMatcher reference, GrammarMatcher::Start(grammar));
  const int32_t eos = tok.eos_id();
  // A document as tokens: multi-byte pieces, a character split across tokens, revisited states.
  const std::vector<std::string> doc = {"{\"", "name", "\":", " \"", "ab", "\xC3", "\xA9", "abc", "\xE2\x82", "\xAC",
                                        "\",", "\n  ", "\"", "o", "k", "\": ", "true", ",", "\"", "n", "\":", "0.5", "}"};
  size_t masked_somewhere = 0, allowed_somewhere = 0;
  for (size_t step = 0; step <= doc.size(); ++step) {
    std::vector<float> logits = testing::RandomVector(tok.vocab_size(), static_cast<uint32_t>(step));
    const std::vector<float> original = logits;
    ASSERT_OK(matcher->Mask(logits, std::vector<int32_t>{eos}));
    const std::vector<bool> want = BruteForce(reference, *vocab);
    for (size_t id = 0; id + 1 < tok.vocab_size(); ++id) {
      if (want[id]) {
        ASSERT_EQ(std::memcmp(&logits[id], &original[id], sizeof(float)), 0) << "step " << step << " token " << id;
        ++allowed_somewhere;
      } else {
        ASSERT_EQ(logits[id], -std::numeric_limits<float>::infinity()) << "step " << step << " token " << id;
        ++masked_somewhere;
      }
    }
    // EOS only once the document is whole.
    EXPECT_EQ(std::isinf(logits[eos]), step < doc.size()) << "step " << step;
    if (step == doc.size()) break;
    const int32_t id = [&] {
      for (size_t i = 0; i < tok.vocab_size(); ++i)
        if (vocab->bytes(static_cast<int32_t>(i)) == doc[step]) return static_cast<int32_t>(i);
      return -1;
    }();
    ASSERT_GE(id, 0) << doc[step];
    ASSERT_OK(matcher->Accept(id)) ;
    ASSERT_OK(reference.Accept(doc[step]));
  }
  EXPECT_GT(masked_somewhere, 0u);
  EXPECT_GT(allowed_somewhere, 0u);
  EXPECT_FALSE(matcher->Complete());  // trailing whitespace may still follow
}

TEST(GrammarConstraintTest, RefusedTokenChangesNothing) {
  ListTokenizer tok = JsonishTokenizer();
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(tok));
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(R"(root ::= "ab" "c")"));
  ASSERT_OK_AND_ASSIGN(auto matcher, GrammarConstraint(grammar, vocab).NewMatcher());
  EXPECT_FALSE(matcher->Accept('x').ok());
  EXPECT_FALSE(matcher->Accept(tok.eos_id()).ok());  // no text
  ASSERT_OK(matcher->Accept('a'));
  ASSERT_OK(matcher->Accept('b'));
  EXPECT_FALSE(matcher->Complete());
  ASSERT_OK(matcher->Accept('c'));
  EXPECT_TRUE(matcher->Complete());
}

TEST(GrammarConstraintTest, NoTokenCanContinueIsAnError) {
  // A grammar whose next character no token spells (the vocabulary has no U+1F600).
  ListTokenizer tok({"a", "b"});
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(tok));
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(R"(root ::= "\U0001F600")"));
  ASSERT_OK_AND_ASSIGN(auto matcher, GrammarConstraint(grammar, vocab).NewMatcher());
  std::vector<float> logits(tok.vocab_size(), 0.0f);
  Status s = matcher->Mask(logits, std::vector<int32_t>{tok.eos_id()});
  EXPECT_NE(s.message().find("no token of the vocabulary can continue"), std::string::npos) << s.ToString();
}

TEST(GrammarConstraintTest, GenerationFollowsTheGrammarAndEndsWithIt) {
  ListTokenizer tok = JsonishTokenizer();
  ASSERT_OK_AND_ASSIGN(auto vocab, TokenVocabulary::Build(tok));
  ASSERT_OK_AND_ASSIGN(Grammar grammar, Grammar::Parse(R"(root ::= "[" ("ab" | "true") ("," ("ab" | "true")){0,3} "]")"));
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    GenerateParams params;
    params.max_new_tokens = 64;
    params.sampling.temperature = 1.0f;
    params.sampling.seed = seed;
    params.stop_tokens = {tok.eos_id()};
    params.constraint = std::make_shared<GrammarConstraint>(grammar, vocab);
    ASSERT_OK_AND_ASSIGN(Generation gen, Generation::Create(params, {}, &tok));
    std::vector<int32_t> history = {0};
    while (!gen.done()) {
      std::vector<float> logits = testing::RandomVector(tok.vocab_size(), static_cast<uint32_t>(seed * 1000 + history.size()));
      ASSERT_OK_AND_ASSIGN(GenerationStep step, gen.Step(logits, history));
      history.push_back(step.token);
    }
    EXPECT_EQ(gen.finish(), FinishReason::kStopToken);
    ASSERT_OK_AND_ASSIGN(GrammarMatcher check, GrammarMatcher::Start(grammar));
    ASSERT_TRUE(check.Accept(gen.text()).ok()) << gen.text();
    EXPECT_TRUE(check.Finished()) << gen.text() << " " << ::testing::PrintToString(gen.tokens());
  }
}

}  // namespace
}  // namespace fak
