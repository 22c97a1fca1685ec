// The claim a gate probe (POST /fak/v1/gate) judges with: the caller's own, with the fields of the
// request's "claim" object applied — another tenant or another regime axis — and its JSON echo.
#ifndef FAK_SRC_SERVER_GATE_CLAIM_H_
#define FAK_SRC_SERVER_GATE_CLAIM_H_

#include "fak/gate/resident_claim.h"
#include "src/core/json.h"
#include "src/server/http_reply.h"

namespace fak::internal {

// Applies `fields` (an object: tenant, model_id, tokenizer_id, adapter_id as 64 hex digits,
// kernel_tier, weight_dtype, kv_dtype) to `claim`. On a bad field returns false and fills `error`
// (param "claim.FIELD"); `claim` may then be partly changed.
bool ApplyClaim(const Json& fields, ResidentClaim* claim, HttpError* error);

// {"tenant", "model_id", "tokenizer_id", "adapter_id", "kernel_tier", "weight_dtype", "kv_dtype"}.
Json ClaimJson(const ResidentClaim& claim);

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_GATE_CLAIM_H_
