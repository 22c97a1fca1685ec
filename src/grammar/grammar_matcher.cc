// GrammarMatcher: bytes through the stack set, all or nothing per call.
#include <memory>
#include <string>

#include "fak/grammar/grammar.h"
#include "src/grammar/stack_set.h"

namespace fak {

Status FeedBytes(GrammarMatcher::State* state, std::string_view bytes) {
  internal::StackSet scratch;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const internal::Utf8Feed feed = internal::FeedUtf8(&state->partial, static_cast<uint8_t>(bytes[i]));
    if (feed == internal::Utf8Feed::kInvalid)
      return InvalidArgument("grammar: invalid UTF-8 at byte " + std::to_string(i) + " of the text fed");
    if (feed == internal::Utf8Feed::kPartial) {
      if (!state->stepper.MayContinue(state->set, state->partial))
        return InvalidArgument("grammar: the text cannot continue at byte " + std::to_string(i));
      continue;
    }
    FAK_RETURN_IF_ERROR(state->stepper.Advance(state->set, state->partial.value, &scratch));
    state->partial = {};
    if (scratch.Dead()) return InvalidArgument("grammar: the text cannot continue at byte " + std::to_string(i));
    std::swap(state->set, scratch);
  }
  state->stepper.Compact(&state->set);
  return Status::Ok();
}

Result<GrammarMatcher> GrammarMatcher::Start(const Grammar& grammar) {
  auto state = std::make_shared<State>(grammar.rules(), grammar.limits().max_stacks);
  const internal::GrammarRules& rules = grammar.rules();
  for (uint32_t alt : rules.alternates[rules.root]) FAK_RETURN_IF_ERROR(state->stepper.Settle(alt, -1, &state->set));
  return GrammarMatcher(grammar, std::move(state));
}

Status GrammarMatcher::Accept(std::string_view bytes) {
  auto next = std::make_shared<State>(*state_);
  FAK_RETURN_IF_ERROR(FeedBytes(next.get(), bytes));
  state_ = std::move(next);
  return Status::Ok();
}

bool GrammarMatcher::CanEnd() const { return state_->set.accepting && state_->partial.remaining == 0; }
bool GrammarMatcher::Finished() const { return state_->set.tops.empty(); }

}  // namespace fak
