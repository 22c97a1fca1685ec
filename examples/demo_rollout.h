// The demo's model-rollout section (examples/demo_rollout.cc).
#ifndef FAK_EXAMPLES_DEMO_ROLLOUT_H_
#define FAK_EXAMPLES_DEMO_ROLLOUT_H_

#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::demo {

// Prints section `number`: flush, lazy and blue_green rollouts from `model_a` to a model with new
// weights, served from the corpus text. False when a check fails.
bool RolloutSection(int number, const Model& model_a, const Tokenizer& tok);

}  // namespace fak::demo

#endif  // FAK_EXAMPLES_DEMO_ROLLOUT_H_
