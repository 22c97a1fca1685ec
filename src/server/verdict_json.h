// The manifest gate's verdict as JSON, for fak's own endpoints (the conversation turn and the gate
// probe): {"verdict", "axis", "refuse_reason", "detail"}, with null where a field does not apply.
#ifndef FAK_SRC_SERVER_VERDICT_JSON_H_
#define FAK_SRC_SERVER_VERDICT_JSON_H_

#include <string>

#include "fak/gate/binding_tuple.h"
#include "fak/gate/resident_claim.h"
#include "src/core/json.h"

namespace fak::internal {

inline const char* ClaimOutcomeName(ClaimOutcome outcome) {
  switch (outcome) {
    case ClaimOutcome::kHit: return "hit";
    case ClaimOutcome::kMiss: return "miss";
    case ClaimOutcome::kRefuse: return "refuse";
    case ClaimOutcome::kCorrupt: return "corrupt";
  }
  return "unknown";
}

inline Json VerdictJson(const ClaimVerdict& v) {
  const bool miss = v.outcome == ClaimOutcome::kMiss, refuse = v.outcome == ClaimOutcome::kRefuse;
  return Json{{"verdict", ClaimOutcomeName(v.outcome)},
              {"axis", miss ? Json(std::string(BindingAxisName(v.axis))) : Json(nullptr)},
              {"refuse_reason", refuse ? Json(std::string(RefuseReasonName(v.refuse_reason))) : Json(nullptr)},
              {"detail", v.detail}};
}

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_VERDICT_JSON_H_
