// Fuzzes the HTTP server's request parser (ParseApiRequest, src/server/api_request.h): the first
// byte picks the endpoint, the rest is the body. Any bytes must give a request or an error naming
// why — never a crash or an exception — and an accepted request must hold only values the engine
// accepts (sampling that validates, max_tokens >= 1, at most 4 non-empty stop strings, a message
// or a prompt to render). A first byte of 0xFF fuzzes the gate probe's claim instead (ApplyClaim,
// src/server/gate_claim.h): a JSON body, and when applied, a valid tenant.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "src/core/json.h"
#include "src/server/api_request.h"
#include "src/server/gate_claim.h"

namespace {

int FuzzGateClaim(std::string_view text) {
  fak::Result<fak::internal::Json> fields = fak::internal::ParseJson(text, "claim");
  if (!fields) return 0;
  fak::ResidentClaim claim{{}, "default"};
  fak::internal::HttpError error;
  if (!fak::internal::ApplyClaim(*fields, &claim, &error)) {
    FAK_FUZZ_CHECK(!error.message.empty() && error.status == 400, "a refusal without a message");
    return 0;
  }
  FAK_FUZZ_CHECK(fak::IsValidTenant(claim.tenant), "an invalid tenant accepted");
  (void)fak::internal::DumpJson(fak::internal::ClaimJson(claim));
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] == 0xFF) return FuzzGateClaim(fak::fuzz::AsText(data + 1, size - 1));
  using fak::internal::ApiEndpoint;
  const ApiEndpoint endpoint = data[0] % 2 == 0 ? ApiEndpoint::kChatCompletions : ApiEndpoint::kCompletions;
  fak::internal::ApiRequest request;
  fak::internal::ApiRequestError error;
  if (!fak::internal::ParseApiRequest(endpoint, fak::fuzz::AsText(data + 1, size - 1), &request, &error)) {
    FAK_FUZZ_CHECK(!error.message.empty(), "a refusal without a message");
    return 0;
  }
  const fak::Status sampling = request.sampling.Validate();
  FAK_FUZZ_CHECK(sampling.ok(), sampling.ToString());
  FAK_FUZZ_CHECK(!request.max_tokens || *request.max_tokens >= 1, "max_tokens 0 accepted");
  FAK_FUZZ_CHECK(request.stop.size() <= 4, "more than 4 stop strings accepted");
  for (const std::string& stop : request.stop) FAK_FUZZ_CHECK(!stop.empty(), "an empty stop string accepted");
  FAK_FUZZ_CHECK(endpoint != ApiEndpoint::kChatCompletions || !request.messages.empty(), "a chat without messages");
  return 0;
}
