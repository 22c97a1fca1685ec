// Fuzzes the RFC 3161 token verifier (VerifyTimeAnchor) with the input as the DER TimeStampToken,
// against a fixed TSA root (fuzz/data/tsa_root.pem, written by fak_fuzz_seeds with the seeds) and
// a fixed digest, so seeded tokens verify and mutations reach every check after the DER parse.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fak/audit/time_anchor.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string roots = fak::fuzz::ReadFile(FAK_FUZZ_DATA_DIR "/tsa_root.pem");
  static const fak::Digest digest = fak::Digest::Of("fak fuzz time anchor");
  auto anchor = fak::VerifyTimeAnchor(fak::fuzz::AsText(data, size), digest, roots);
  if (anchor.has_value()) FAK_FUZZ_CHECK(!anchor->policy_oid.empty(), "an anchor without a policy");
  return 0;
}
