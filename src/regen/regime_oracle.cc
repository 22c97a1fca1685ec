// Validation of regenerated KV: bit-exact against a recompute within one regime, and the
// cross-regime oracle (EXACT / EQUIVALENT{tol} / DIVERGENT) across kernel tiers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "fak/kernels/kernel_tier.h"
#include "fak/regen/regime_oracle.h"

namespace fak {

Status VerifyRegenerated(const Model& model, const KVCache& regenerated, std::span<const int32_t> tokens) {
  if (tokens.empty()) return InvalidArgument("VerifyRegenerated: tokens is empty");
  KVCache fresh = model.NewCache();
  FAK_RETURN_IF_ERROR(model.Prefill(&fresh, tokens, LogitsMode::kNone).error());
  const Digest want = fresh.ComputeDigest(), got = regenerated.ComputeDigest();
  if (want != got) {
    return VerificationFailed("regenerated cache digest " + got.Hex() + " != recompute " + want.Hex() + " over " +
                              std::to_string(tokens.size()) + " tokens");
  }
  return Status::Ok();
}

std::string OracleVerdict::ToString() const {
  char buf[160];
  const char* name = outcome == OracleOutcome::kExact ? "EXACT" : outcome == OracleOutcome::kEquivalent ? "EQUIVALENT" : "DIVERGENT";
  if (outcome == OracleOutcome::kExact) return "EXACT";
  std::snprintf(buf, sizeof(buf), "%s{tol=%g}: max|delta|=%g, argmax %zu/%zu", name, static_cast<double>(tolerance),
                static_cast<double>(max_abs_delta), argmax_agreements, positions);
  return buf;
}

namespace {

size_t ArgMax(std::span<const float> row) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace

Result<OracleVerdict> CompareLogits(std::span<const float> a, std::span<const float> b, size_t vocab, float tolerance) {
  if (vocab == 0) return InvalidArgument("CompareLogits: vocab is 0");
  if (a.size() != b.size() || a.size() % vocab != 0 || a.empty()) {
    return InvalidArgument("CompareLogits: sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size()) +
                           " are not equal non-zero multiples of vocab " + std::to_string(vocab));
  }
  if (!(tolerance >= 0.0f)) return InvalidArgument("CompareLogits: tolerance must be >= 0");
  OracleVerdict v;
  v.tolerance = tolerance;
  v.positions = a.size() / vocab;
  bool finite = true;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!std::isfinite(d)) finite = false;
    v.max_abs_delta = std::max(v.max_abs_delta, d);
  }
  for (size_t p = 0; p < v.positions; ++p) {
    if (ArgMax(a.subspan(p * vocab, vocab)) == ArgMax(b.subspan(p * vocab, vocab))) ++v.argmax_agreements;
  }
  if (!finite) v.max_abs_delta = INFINITY;
  if (finite && v.max_abs_delta == 0.0f) {
    v.outcome = OracleOutcome::kExact;
  } else if (finite && v.argmax_agreements == v.positions && v.max_abs_delta <= tolerance) {
    v.outcome = OracleOutcome::kEquivalent;
  } else {
    v.outcome = OracleOutcome::kDivergent;
  }
  return v;
}

Result<OracleVerdict> CompareTiers(const Model& model, std::span<const int32_t> tokens, std::string_view tier_a,
                                   std::string_view tier_b, float tolerance) {
  if (tokens.empty()) return InvalidArgument("CompareTiers: tokens is empty");
  const std::string original(ActiveKernelTier());
  auto run = [&](std::string_view tier) -> Result<std::vector<float>> {
    FAK_RETURN_IF_ERROR(SetKernelTier(tier));
    KVCache cache = model.NewCache();
    return model.Prefill(&cache, tokens, LogitsMode::kAll);
  };
  Result<std::vector<float>> a = run(tier_a);
  Result<std::vector<float>> b = a.has_value() ? run(tier_b) : a;
  Status restored = SetKernelTier(original);
  if (!a.has_value()) return a.error();
  if (!b.has_value()) return b.error();
  FAK_RETURN_IF_ERROR(restored);
  return CompareLogits(*a, *b, model.config().vocab_size, tolerance);
}

}  // namespace fak
