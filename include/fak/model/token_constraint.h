// A constraint on which tokens a generation may choose: the hook between logits and sampling.
//
// Generation (fak/model/generation.h) asks a request's TokenConstraint for a TokenMatcher when it
// starts; each step the matcher masks the logits (a forbidden token's logit becomes -inf; every
// other logit keeps its bits, so what is allowed is sampled exactly as without the constraint),
// the sampler draws, and the matcher accepts the token drawn. The grammar layer implements it
// (fak/grammar/grammar_constraint.h: GBNF grammars and JSON schemas).
#ifndef FAK_MODEL_TOKEN_CONSTRAINT_H_
#define FAK_MODEL_TOKEN_CONSTRAINT_H_

#include <cstdint>
#include <memory>
#include <span>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// One sequence's place in a constraint. Not thread-safe.
class FAK_EXPORT TokenMatcher {
 public:
  virtual ~TokenMatcher() = default;
  // Sets to -inf the logit of each token that may not come next, leaving the others untouched.
  // `stop_tokens` end the generation: they are allowed exactly where the constraint may end. An
  // error (no token of the vocabulary can continue, a limit of the constraint) ends the generation.
  virtual Status Mask(std::span<float> logits, std::span<const int32_t> stop_tokens) = 0;
  // The token chosen (one Mask allowed; a stop token changes nothing). On error, unchanged.
  virtual Status Accept(int32_t token) = 0;
  // Nothing may follow: the generation ends (as at a stop token).
  virtual bool Complete() const = 0;
};

// What a request is constrained by. Immutable and thread-safe: one may serve many sequences.
class FAK_EXPORT TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual Result<std::unique_ptr<TokenMatcher>> NewMatcher() const = 0;
};

}  // namespace fak

#endif  // FAK_MODEL_TOKEN_CONSTRAINT_H_
