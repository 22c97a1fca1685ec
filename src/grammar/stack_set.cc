// StackStepper: settling stacks on character sets, advancing them by a code point, keys and
// compaction. Left recursion is refused at parse time, so Settle's work list always drains.
#include "src/grammar/stack_set.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace fak::internal {

Utf8Feed FeedUtf8(Utf8Partial* p, uint8_t byte) {
  if (p->remaining == 0) {
    if (byte < 0x80) {
      p->value = byte;
      return Utf8Feed::kComplete;
    }
    if ((byte & 0xE0) == 0xC0 && byte >= 0xC2) {
      *p = {byte & 0x1Fu, 1, 2};
    } else if ((byte & 0xF0) == 0xE0) {
      *p = {byte & 0x0Fu, 2, 3};
    } else if ((byte & 0xF8) == 0xF0 && byte <= 0xF4) {
      *p = {byte & 0x07u, 3, 4};
    } else {
      return Utf8Feed::kInvalid;
    }
    return Utf8Feed::kPartial;
  }
  if ((byte & 0xC0) != 0x80) return Utf8Feed::kInvalid;
  p->value = (p->value << 6) | (byte & 0x3Fu);
  if (--p->remaining > 0) return Utf8Feed::kPartial;
  // Only the shortest form of a scalar value: an overlong "[" must not pass for "[".
  const uint32_t shortest = p->length == 2 ? 0x80 : p->length == 3 ? 0x800 : 0x10000;
  if (p->value < shortest || p->value > 0x10FFFF || (p->value >= 0xD800 && p->value <= 0xDFFF)) return Utf8Feed::kInvalid;
  return Utf8Feed::kComplete;
}

bool StackStepper::SameStack(int32_t a, int32_t b) const {
  while (a != b) {
    if (a < 0 || b < 0 || arena_[a].pos != arena_[b].pos) return false;
    a = arena_[a].parent;
    b = arena_[b].parent;
  }
  return true;
}

void StackStepper::AddTop(uint32_t pos, int32_t parent, StackSet* out) {
  for (int32_t top : out->tops)
    if (arena_[top].pos == pos && SameStack(arena_[top].parent, parent)) return;
  arena_.push_back({pos, parent});
  out->tops.push_back(static_cast<int32_t>(arena_.size() - 1));
}

Status StackStepper::Settle(uint32_t pos, int32_t parent, StackSet* out) {
  work_.clear();
  work_.emplace_back(pos, parent);
  // Each step either settles a stack or descends into a rule; without left recursion the
  // descents are finite, but an ambiguous grammar can still multiply parses: bound the work.
  size_t budget = 64 * max_stacks_ + 1024;
  while (!work_.empty()) {
    if (--budget == 0 || out->tops.size() > max_stacks_) {
      return ResourceExhausted("grammar: more than " + std::to_string(max_stacks_) +
                               " parses alive at once (an ambiguous grammar; GrammarLimits.max_stacks)");
    }
    auto [p, under] = work_.back();
    work_.pop_back();
    const Element& e = rules_->elements[p];
    switch (e.kind) {
      case ElementKind::kChars:
        AddTop(p, under, out);
        break;
      case ElementKind::kEnd:
        if (under < 0) {
          out->accepting = true;
        } else {
          work_.emplace_back(arena_[under].pos, arena_[under].parent);
        }
        break;
      case ElementKind::kRule: {
        int32_t cont = under;  // a reference in tail position returns straight to `under`
        if (rules_->elements[p + 1].kind != ElementKind::kEnd) {
          arena_.push_back({p + 1, under});
          cont = static_cast<int32_t>(arena_.size() - 1);
        }
        const std::vector<uint32_t>& alts = rules_->alternates[e.index];
        for (auto it = alts.rbegin(); it != alts.rend(); ++it) work_.emplace_back(*it, cont);
        break;
      }
    }
  }
  return Status::Ok();
}

Status StackStepper::Advance(const StackSet& from, uint32_t cp, StackSet* to) {
  to->Clear();
  for (int32_t top : from.tops) {
    const StackNode node = arena_[top];
    if (!rules_->char_sets[rules_->elements[node.pos].index].Matches(cp)) continue;
    FAK_RETURN_IF_ERROR(Settle(node.pos + 1, node.parent, to));
  }
  return Status::Ok();
}

bool StackStepper::MayContinue(const StackSet& from, const Utf8Partial& p) const {
  // The code points the sequence can still become, in their shortest form only.
  const uint32_t shortest = p.length == 2 ? 0x80 : p.length == 3 ? 0x800 : 0x10000;
  const uint32_t lo = std::max(p.value << (6 * p.remaining), shortest);
  const uint32_t hi = std::min((p.value << (6 * p.remaining)) | ((1u << (6 * p.remaining)) - 1), uint32_t{0x10FFFF});
  if (lo > hi) return false;
  for (int32_t top : from.tops)
    if (rules_->char_sets[rules_->elements[arena_[top].pos].index].MayMatchIn(lo, hi)) return true;
  return false;
}

void StackStepper::Compact(StackSet* set) {
  std::vector<StackNode> fresh;
  std::unordered_map<int32_t, int32_t> moved;
  std::vector<int32_t> chain;
  // Copies a chain bottom-first so a shared tail is copied once (iterative: stacks can be deep).
  auto copy = [&](int32_t node) -> int32_t {
    chain.clear();
    for (; node >= 0 && !moved.contains(node); node = arena_[node].parent) chain.push_back(node);
    int32_t below = node < 0 ? -1 : moved[node];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      fresh.push_back({arena_[*it].pos, below});
      below = moved[*it] = static_cast<int32_t>(fresh.size() - 1);
    }
    return below;
  };
  for (int32_t& top : set->tops) top = copy(top);
  arena_ = std::move(fresh);
}

void StackStepper::AppendKey(const StackSet& set, std::string* key) const {
  std::vector<uint32_t> words;
  for (int32_t top : set.tops) {
    for (int32_t n = top; n >= 0; n = arena_[n].parent) words.push_back(arena_[n].pos);
    words.push_back(UINT32_MAX);
  }
  words.push_back(set.accepting ? 1 : 0);
  const size_t at = key->size();
  key->resize(at + words.size() * sizeof(uint32_t));
  std::memcpy(key->data() + at, words.data(), words.size() * sizeof(uint32_t));
}

}  // namespace fak::internal
