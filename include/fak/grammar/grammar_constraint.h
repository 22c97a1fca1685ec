// A grammar as a token constraint: which vocabulary tokens may come next, for the generation hook
// (fak/model/token_constraint.h).
//
// TokenVocabulary is the tokenizer's vocabulary as a byte trie, built once per tokenizer and
// shared by every request. The mask for a matcher state walks that trie once, carrying the
// grammar's stack set down each edge, so tokens sharing a prefix share its work, and a subtree
// is skipped as soon as its prefix is refused. Masks are cached per state for the sequence (a
// string's characters, a number's digits return to the same state step after step). Cost and
// numbers: docs/grammar.md.
#ifndef FAK_GRAMMAR_GRAMMAR_CONSTRAINT_H_
#define FAK_GRAMMAR_GRAMMAR_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/grammar/grammar.h"
#include "fak/model/token_constraint.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {

// The bytes of every token (Tokenizer::Decode of the id alone), as a trie in preorder. Tokens
// with no bytes (special tokens) are not in it: a grammar never allows them, unless the reply
// spells them (`spelled`, EngineRequest::spelled_tokens): those take their vocabulary text
// (Tokenizer::TokenText), so a grammar that requires a family's call marker allows the one token
// the model was trained to write for it. Immutable.
class FAK_EXPORT TokenVocabulary {
 public:
  struct Node {
    uint8_t byte;
    uint16_t depth;        // 1 for a first byte
    uint32_t subtree_end;  // the index past this node's subtree
    uint32_t tokens_begin; // into token_ids(): the tokens whose bytes end here
    uint32_t tokens_end;
  };
  // Cost: one Decode per id and a sort (about a second at a 262k vocabulary); build once per
  // tokenizer. InvalidArgument for a token longer than 65535 bytes.
  static Result<std::shared_ptr<const TokenVocabulary>> Build(const Tokenizer& tokenizer,
                                                              std::span<const int32_t> spelled = {});

  size_t size() const { return vocab_size_; }  // ids 0..size()-1
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

 private:
  size_t vocab_size_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  std::vector<std::string> bytes_;
};

// A grammar over a vocabulary. Thread-safe; shared by the sequences it constrains.
class FAK_EXPORT GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
      : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}
  Result<std::unique_ptr<TokenMatcher>> NewMatcher() const override;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
};

// A grammar that holds the text only from a trigger on (tool calls under tool_choice auto, the
// trigger the family's call marker): the text is free — no logit touched, so each keeps its bits —
// until it contains `trigger`; from the trigger's first byte it must be a sentence of `grammar`
// (whose sentences begin with the trigger), and once that sentence is whole it is free again until
// the next trigger. A token that completes the trigger and runs on into text the grammar refuses
// leaves the reply free. Triggers are found in tokens' text (TokenVocabulary), and in the one
// `trigger_token` (>= 0) that stands for the trigger: a vocabulary may hold a family's call marker
// as a special token with no text of its own. Thread-safe; shared by the sequences it constrains.
class FAK_EXPORT TriggeredGrammarConstraint final : public TokenConstraint {
 public:
  // InvalidArgument for an empty trigger, a grammar whose sentences do not begin with it, or a
  // trigger_token outside the vocabulary.
  static Result<std::shared_ptr<const TriggeredGrammarConstraint>> Create(std::string trigger, Grammar grammar,
                                                                          std::shared_ptr<const TokenVocabulary> vocabulary,
                                                                          int32_t trigger_token = -1);
  Result<std::unique_ptr<TokenMatcher>> NewMatcher() const override;

 private:
  TriggeredGrammarConstraint(std::string trigger, Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                             int32_t trigger_token)
      : trigger_(std::move(trigger)), grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)),
        trigger_token_(trigger_token) {}
  std::string trigger_;
  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  int32_t trigger_token_;  // -1: none
};

}  // namespace fak

#endif  // FAK_GRAMMAR_GRAMMAR_CONSTRAINT_H_
