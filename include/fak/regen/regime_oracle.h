// Validation of regenerated KV: against the same model's recompute, and across numeric regimes.
//
// Inside one regime a regenerated cache must equal a fresh prefill bit for bit (architecture §2);
// across kernel tiers only argmax agreement within a stated tolerance is promised, and the oracle
// says which of EXACT / EQUIVALENT{tol} / DIVERGENT holds. Never compared with the old model's KV.
#ifndef FAK_REGEN_REGIME_ORACLE_H_
#define FAK_REGEN_REGIME_ORACLE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/model.h"

namespace fak {

// Checks a regenerated cache against a fresh recompute of `tokens` under the same model and regime:
// OK when equal bit for bit (KVCache digest); VerificationFailed naming both digests otherwise.
FAK_EXPORT Status VerifyRegenerated(const Model& model, const KVCache& regenerated, std::span<const int32_t> tokens);

enum class OracleOutcome { kExact, kEquivalent, kDivergent };
// Cross-regime comparison of logits: EXACT when max|Δ| == 0; EQUIVALENT{tol} when every position's
// argmax agrees and max|Δ| <= tol; DIVERGENT otherwise.
struct FAK_EXPORT OracleVerdict {
  OracleOutcome outcome = OracleOutcome::kDivergent;
  float tolerance = 0;
  float max_abs_delta = 0;
  size_t positions = 0, argmax_agreements = 0;
  // "EXACT", "EQUIVALENT{tol=0.001}: max|Δ|=2.1e-06, argmax 12/12", "DIVERGENT: ...".
  std::string ToString() const;
};
// Compares two [positions][vocab] logit arrays. InvalidArgument on a size mismatch or vocab 0.
FAK_EXPORT Result<OracleVerdict> CompareLogits(std::span<const float> a, std::span<const float> b, size_t vocab, float tolerance);
// Prefills `tokens` under kernel tier `tier_a`, then `tier_b` (names as SetKernelTier takes), and
// compares every position's logits. Restores the active tier. Unsupported when the CPU lacks a tier.
// Not safe while other threads run forward passes (the tier is process-wide).
FAK_EXPORT Result<OracleVerdict> CompareTiers(const Model& model, std::span<const int32_t> tokens, std::string_view tier_a,
                                   std::string_view tier_b, float tolerance);

}  // namespace fak

#endif  // FAK_REGEN_REGIME_ORACLE_H_
