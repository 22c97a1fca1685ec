// The gate probe's claim: the caller's own with the request's "claim" fields applied.
#include "src/server/gate_claim.h"

#include <string>

#include "fak/core/digest.h"

namespace fak::internal {
namespace {

// A claim field the gate probe takes: a tenant, a 64-hex digest or a precision string.
bool ApplyClaimField(const std::string& key, const Json& v, ResidentClaim* claim, HttpError* error) {
  const std::string param = "claim." + key;
  if (!v.is_string()) {
    *error = {400, "invalid_request_error", param + " must be a string", param, "invalid_value"};
    return false;
  }
  const std::string& text = v.get_ref<const std::string&>();
  Digest* digest = key == "model_id" ? &claim->binding.model_id
                   : key == "tokenizer_id" ? &claim->binding.tokenizer_id
                   : key == "adapter_id" ? &claim->binding.adapter_id : nullptr;
  if (digest != nullptr) {
    Result<Digest> d = Digest::FromHex(text);
    if (!d) {
      *error = {400, "invalid_request_error", param + " must be 64 hex digits (a sha256)", param, "invalid_value"};
      return false;
    }
    *digest = *d;
  } else if (key == "tenant") {
    if (!IsValidTenant(text)) {
      *error = {400, "invalid_request_error", param + ": invalid tenant name '" + text + "'", param, "invalid_value"};
      return false;
    }
    claim->tenant = text;
  } else if (key == "kernel_tier" || key == "weight_dtype" || key == "kv_dtype") {
    Precision& p = claim->binding.precision;
    (key == "kernel_tier" ? p.kernel_tier : key == "weight_dtype" ? p.weight_dtype : p.kv_dtype) = text;
  } else {
    *error = {400, "invalid_request_error", "unknown field '" + key + "' in claim (tenant, model_id, tokenizer_id, "
              "adapter_id, kernel_tier, weight_dtype, kv_dtype)", param, "invalid_request"};
    return false;
  }
  return true;
}
}  // namespace

bool ApplyClaim(const Json& fields, ResidentClaim* claim, HttpError* error) {
  if (!fields.is_object()) {
    *error = {400, "invalid_request_error", "claim must be an object", "claim", "invalid_value"};
    return false;
  }
  for (const auto& [key, v] : fields.items())
    if (!ApplyClaimField(key, v, claim, error)) return false;
  return true;
}

Json ClaimJson(const ResidentClaim& c) {
  return Json{{"tenant", c.tenant},
              {"model_id", c.binding.model_id.Hex()},
              {"tokenizer_id", c.binding.tokenizer_id.Hex()},
              {"adapter_id", c.binding.adapter_id.Hex()},
              {"kernel_tier", c.binding.precision.kernel_tier},
              {"weight_dtype", c.binding.precision.weight_dtype},
              {"kv_dtype", c.binding.precision.kv_dtype}};
}

}  // namespace fak::internal
