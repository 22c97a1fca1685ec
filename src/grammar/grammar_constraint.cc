// TokenVocabulary (the trie) and the grammar's TokenMatcher: the mask walk, its cache, and Accept.
#include "fak/grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "src/grammar/stack_set.h"

namespace fak {

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::Build(const Tokenizer& tokenizer,
                                                                      std::span<const int32_t> spelled) {
  auto v = std::make_shared<TokenVocabulary>();
  v->vocab_size_ = tokenizer.vocab_size();
  v->bytes_.resize(v->vocab_size_);
  std::vector<int32_t> order;
  for (size_t id = 0; id < v->vocab_size_; ++id) {
    const auto token = static_cast<int32_t>(id);
    FAK_ASSIGN_OR_RETURN(v->bytes_[id], tokenizer.Decode(std::span<const int32_t>(&token, 1)));
    if (v->bytes_[id].empty() && std::find(spelled.begin(), spelled.end(), token) != spelled.end())
      v->bytes_[id] = tokenizer.TokenText(token);
    if (v->bytes_[id].size() > std::numeric_limits<uint16_t>::max())
      return InvalidArgument("TokenVocabulary: token " + std::to_string(id) + " is longer than 65535 bytes");
    if (!v->bytes_[id].empty()) order.push_back(token);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v->bytes_[a] < v->bytes_[b]; });
  // Sorted strings give the trie in preorder: each string shares its longest common prefix with
  // the path so far; the rest is appended as new nodes.
  std::vector<uint32_t> path;  // node index at each depth - 1
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = v->bytes_[id];
    size_t common = 0;
    if (previous != nullptr) {
      const size_t limit = std::min({s.size(), previous->size(), path.size()});
      while (common < limit && s[common] == (*previous)[common]) ++common;
    }
    while (path.size() > common) {
      v->nodes_[path.back()].subtree_end = static_cast<uint32_t>(v->nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      const auto index = static_cast<uint32_t>(v->nodes_.size());
      v->nodes_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint16_t>(d + 1), 0, 0, 0});
      path.push_back(index);
    }
    Node& end = v->nodes_[path.back()];
    if (end.tokens_end == end.tokens_begin) end.tokens_begin = end.tokens_end = static_cast<uint32_t>(v->token_ids_.size());
    v->token_ids_.push_back(id);
    ++end.tokens_end;
    previous = &s;
  }
  for (uint32_t index : path) v->nodes_[index].subtree_end = static_cast<uint32_t>(v->nodes_.size());
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

namespace {

constexpr size_t kMaxCachedMasks = 128;

class GrammarTokenMatcher final : public TokenMatcher {
 public:
  GrammarTokenMatcher(GrammarMatcher start, std::shared_ptr<const TokenVocabulary> vocabulary)
      : start_(std::move(start)), state_(start_.state()), vocabulary_(std::move(vocabulary)) {
    size_t depth = 0;
    for (const TokenVocabulary::Node& n : vocabulary_->nodes()) depth = std::max<size_t>(depth, n.depth);
    sets_.resize(depth + 1);
    partials_.resize(depth + 1);
    marks_.resize(depth + 1);
  }

  Status Mask(std::span<float> logits, std::span<const int32_t> stop_tokens) override {
    FAK_ASSIGN_OR_RETURN(const std::vector<uint64_t>* allowed, AllowedTokens());
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    const bool can_end = state_.set.accepting && state_.partial.remaining == 0;
    // Stop tokens have no text (they are not in the trie): where the grammar may end they keep
    // their logits, so save them across the masking.
    saved_.clear();
    for (int32_t t : stop_tokens)
      if (can_end && t >= 0 && static_cast<size_t>(t) < logits.size()) saved_.emplace_back(t, logits[t]);
    const size_t n = std::min(logits.size(), vocabulary_->size());
    bool any = false;
    for (size_t w = 0; w * 64 < n; ++w) {
      const uint64_t word = (*allowed)[w];
      any = any || word != 0;
      if (word == ~uint64_t{0}) continue;
      for (size_t i = w * 64; i < std::min(n, w * 64 + 64); ++i)
        if (!((word >> (i % 64)) & 1)) logits[i] = kMasked;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = kMasked;  // ids the tokenizer cannot spell
    for (const auto& [t, value] : saved_) logits[t] = value;
    if (!any && saved_.empty()) return InvalidArgument("grammar: no token of the vocabulary can continue the text here");
    return Status::Ok();
  }

  Status Accept(int32_t token) override {
    if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size() || vocabulary_->bytes(token).empty())
      return InvalidArgument("grammar: token " + std::to_string(token) + " has no text the grammar could take");
    GrammarMatcher::State next = state_;
    FAK_RETURN_IF_ERROR(FeedBytes(&next, vocabulary_->bytes(token)).WithContext("token " + std::to_string(token)));
    state_ = std::move(next);
    return Status::Ok();
  }

  bool Complete() const override { return state_.set.tops.empty() && state_.partial.remaining == 0; }

 private:
  // The tokens whose bytes the grammar can take from here (cached per state).
  Result<const std::vector<uint64_t>*> AllowedTokens();
  Status Walk(std::vector<uint64_t>* bits);

  GrammarMatcher start_;  // keeps the grammar alive
  GrammarMatcher::State state_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::unordered_map<std::string, std::vector<uint64_t>> cache_;
  std::string key_;
  std::vector<std::pair<int32_t, float>> saved_;  // stop tokens' logits during Mask
  // The walk's per-depth scratch: stack sets, half-fed characters, arena sizes.
  std::vector<internal::StackSet> sets_;
  std::vector<internal::Utf8Partial> partials_;
  std::vector<size_t> marks_;
};

Result<const std::vector<uint64_t>*> GrammarTokenMatcher::AllowedTokens() {
  key_.clear();
  state_.stepper.AppendKey(state_.set, &key_);
  key_.push_back(static_cast<char>(state_.partial.remaining));
  key_.push_back(static_cast<char>(state_.partial.length));
  key_.append(reinterpret_cast<const char*>(&state_.partial.value), sizeof state_.partial.value);
  if (auto it = cache_.find(key_); it != cache_.end()) return &it->second;
  std::vector<uint64_t> bits((vocabulary_->size() + 63) / 64, 0);
  FAK_RETURN_IF_ERROR(Walk(&bits));
  if (cache_.size() >= kMaxCachedMasks) cache_.clear();
  return &cache_.emplace(key_, std::move(bits)).first->second;
}

Status GrammarTokenMatcher::Walk(std::vector<uint64_t>* bits) {
  internal::StackStepper& stepper = state_.stepper;
  std::vector<internal::StackNode>& arena = stepper.arena();
  const size_t base = arena.size();
  sets_[0] = state_.set;
  partials_[0] = state_.partial;
  marks_[0] = base;
  const std::vector<TokenVocabulary::Node>& nodes = vocabulary_->nodes();
  const std::vector<int32_t>& ids = vocabulary_->token_ids();
  Status status;
  for (size_t i = 0; i < nodes.size();) {
    const TokenVocabulary::Node& n = nodes[i];
    const size_t d = n.depth;
    arena.resize(marks_[d - 1]);  // drop what the previous sibling subtree pushed
    internal::Utf8Partial p = partials_[d - 1];
    const internal::Utf8Feed feed = internal::FeedUtf8(&p, n.byte);
    bool alive = false;
    if (feed == internal::Utf8Feed::kPartial) {
      alive = stepper.MayContinue(sets_[d - 1], p);
      if (alive) {
        sets_[d].tops = sets_[d - 1].tops;
        sets_[d].accepting = false;
      }
    } else if (feed == internal::Utf8Feed::kComplete) {
      status = stepper.Advance(sets_[d - 1], p.value, &sets_[d]);
      if (!status.ok()) break;
      p = {};
      alive = !sets_[d].Dead();
    }
    if (!alive) {
      i = n.subtree_end;
      continue;
    }
    partials_[d] = p;
    marks_[d] = arena.size();
    for (uint32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
      const auto id = static_cast<size_t>(ids[t]);
      (*bits)[id / 64] |= uint64_t{1} << (id % 64);
    }
    ++i;
  }
  arena.resize(base);
  return status;
}

// Free until the text holds the trigger; then the grammar's matcher, fed the text from the trigger
// on, until its sentence is whole; then free again.
class TriggeredTokenMatcher final : public TokenMatcher {
 public:
  TriggeredTokenMatcher(std::string trigger, Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                        int32_t trigger_token)
      : trigger_(std::move(trigger)), grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)),
        trigger_token_(trigger_token) {}

  Status Mask(std::span<float> logits, std::span<const int32_t> stop_tokens) override {
    // Free: nothing is touched, so every logit keeps its bits.
    return held_ ? held_->Mask(logits, stop_tokens) : Status::Ok();
  }

  Status Accept(int32_t token) override {
    if (held_) {
      FAK_RETURN_IF_ERROR(held_->Accept(token));
      if (held_->Complete()) held_.reset();
      return Status::Ok();
    }
    if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size()) return Status::Ok();  // a stop token
    // The trigger may straddle tokens: look in what is kept of the text before this token and its
    // bytes (the trigger's own when it is the token that stands for it).
    const std::string window = tail_ + (token == trigger_token_ ? trigger_ : vocabulary_->bytes(token));
    size_t keep_from = window.size() - std::min(window.size(), trigger_.size() - 1);
    const size_t at = window.find(trigger_);
    if (at != std::string::npos) {
      Result<GrammarMatcher> start = GrammarMatcher::Start(grammar_);
      // Text the grammar cannot take after the trigger (the token ran past it into something else)
      // leaves the reply free: it stays content.
      if (start && start->Accept(std::string_view(window).substr(at)).ok()) {
        auto held = std::make_unique<GrammarTokenMatcher>(std::move(*start), vocabulary_);
        tail_.clear();
        if (!held->Complete()) held_ = std::move(held);
        return Status::Ok();
      }
      keep_from = std::max(keep_from, at + 1);
    }
    tail_ = window.substr(std::min(keep_from, window.size()));
    return Status::Ok();
  }

  bool Complete() const override { return false; }  // free text may always go on

 private:
  std::string trigger_;
  Grammar grammar_;  // shared rules: a cheap copy
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  int32_t trigger_token_;  // -1: none
  std::string tail_;  // the text's last bytes, shorter than the trigger, while free
  std::unique_ptr<GrammarTokenMatcher> held_;  // set from the trigger until the sentence is whole
};

}  // namespace

Result<std::unique_ptr<TokenMatcher>> GrammarConstraint::NewMatcher() const {
  FAK_ASSIGN_OR_RETURN(GrammarMatcher start, GrammarMatcher::Start(grammar_));
  return std::unique_ptr<TokenMatcher>(std::make_unique<GrammarTokenMatcher>(std::move(start), vocabulary_));
}

Result<std::shared_ptr<const TriggeredGrammarConstraint>> TriggeredGrammarConstraint::Create(
    std::string trigger, Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary, int32_t trigger_token) {
  if (trigger.empty()) return InvalidArgument("TriggeredGrammarConstraint: empty trigger");
  if (trigger_token >= 0 && static_cast<size_t>(trigger_token) >= vocabulary->size())
    return InvalidArgument("TriggeredGrammarConstraint: trigger token " + std::to_string(trigger_token) +
                           " is outside the vocabulary of " + std::to_string(vocabulary->size()));
  FAK_ASSIGN_OR_RETURN(GrammarMatcher check, GrammarMatcher::Start(grammar));
  if (!check.Accept(trigger).ok())
    return InvalidArgument("TriggeredGrammarConstraint: the grammar's sentences do not begin with the trigger '" + trigger + "'");
  return std::shared_ptr<const TriggeredGrammarConstraint>(
      new TriggeredGrammarConstraint(std::move(trigger), std::move(grammar), std::move(vocabulary), trigger_token));
}

Result<std::unique_ptr<TokenMatcher>> TriggeredGrammarConstraint::NewMatcher() const {
  return std::unique_ptr<TokenMatcher>(std::make_unique<TriggeredTokenMatcher>(trigger_, grammar_, vocabulary_, trigger_token_));
}

}  // namespace fak
