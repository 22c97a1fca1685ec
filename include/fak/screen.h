// Screening: admitters judge segment bytes before (and whenever) they enter a model's context.
//
// An Admitter maps bytes plus metadata to admit or quarantine, with a reason and its own name. The
// ledger's write-time bridge calls one on every screened segment; a quarantine evicts the segment
// at once, so the cache equals one that never saw it. Admitters must be thread-safe.
#ifndef FAK_SCREEN_H_
#define FAK_SCREEN_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fak {

enum class SegmentKind { kSystem, kUser, kToolResult, kAssistant };
std::string_view SegmentKindName(SegmentKind kind);

struct Verdict {
  enum class Action { kAdmit, kQuarantine };
  Action action = Action::kAdmit;
  std::string detector;  // the admitter that decided (empty for a plain admit)
  std::string reason;    // why, naming what matched

  bool quarantined() const { return action == Action::kQuarantine; }
  static Verdict Admit() { return {}; }
  static Verdict Quarantine(std::string detector, std::string reason) {
    return {Action::kQuarantine, std::move(detector), std::move(reason)};
  }
};

struct ScreenInput {
  std::string_view bytes;
  SegmentKind kind = SegmentKind::kUser;
};

class Admitter {
 public:
  virtual ~Admitter() = default;
  virtual std::string_view name() const = 0;
  virtual Verdict Screen(const ScreenInput& input) const = 0;
};

// Quarantines bytes containing any of `phrases` (ASCII case-insensitive), e.g. prompt-injection
// markers such as "ignore all previous instructions".
std::unique_ptr<Admitter> MakePhraseAdmitter(std::string name, std::vector<std::string> phrases);
// The built-in prompt-injection phrase list.
std::unique_ptr<Admitter> MakePromptInjectionAdmitter();

}  // namespace fak

#endif  // FAK_SCREEN_H_
