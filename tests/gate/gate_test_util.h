// Helpers for the manifest-gate tests: a tiny model with a prefilled cache, a fixed manifest that
// needs no model, and a way to flip any one axis of a binding.
#ifndef FAK_TESTS_CACHE_GATE_TEST_UTIL_H_
#define FAK_TESTS_CACHE_GATE_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "fak/gate/kv_manifest.h"
#include "fak/gate/resident_claim.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"

namespace fak::testing {

// A tiny model, its tokenizer and a cache prefilled with `n_tokens` tokens.
struct GateWorld {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> tokens;
  KVCache cache;

  static GateWorld Make(uint64_t seed = 7, size_t n_tokens = 12, uint32_t token_seed = 3) {
    auto model = std::move(*Model::Synthetic(TinyConfig(), seed));
    KVCache cache = model->NewCache();
    std::vector<int32_t> tokens = TokenSequence(n_tokens, token_seed, model->config().vocab_size);
    if (!model->Prefill(&cache, tokens, LogitsMode::kNone).has_value()) std::abort();
    return GateWorld{std::move(model), MakeByteTokenizer(), std::move(tokens), std::move(cache)};
  }

  // A manifest for tokens [from, from + n) of the cache, owned by `tenant`.
  KVManifest Manifest(size_t from, size_t n, const std::string& tenant = "acme",
                      Sharing sharing = Sharing::kTenantOnly) const {
    BindingTuple b = *BindCacheSpan(*model, *tokenizer, cache, from, n);
    return *MakeManifest(std::move(b), Digest::Of("source text"), tenant, sharing);
  }
  // The claim a caller holding the same context would make (checksum unknown: zero).
  ResidentClaim Claim(size_t from, size_t n, const std::string& tenant = "acme") const {
    BindingTuple b = *BindSpan(RegimeBinding(*model, *tokenizer), tokens, from, n);
    return ResidentClaim{std::move(b), tenant};
  }
};

// A valid manifest built from fixed values only (stable across machines and builds).
inline KVManifest FixedManifest() {
  KVManifest m;
  m.binding.model_id = Digest::Of("model");
  m.binding.tokenizer_id = Digest::Of("tokenizer");
  m.binding.precision = Precision{"f32", "f32", "avx2"};
  m.binding.position = PositionConvention{"rope", "split_half", 10000.0, "none"};
  m.binding.producer = Producer{"fak", "0.1.0", "kernels-r1 gcc-12.2.0"};
  const std::vector<int32_t> context = {1, 2, 3, 4, 5, 6, 7, 8};
  m.binding.span_digest = SpanDigestOf(context);
  m.binding.tokens = TokenRange{4, 4};
  m.binding.integrity_checksum = Digest::Of("kv bytes");
  m.source_digest = Digest::Of("source text");
  m.tenant = "acme";
  m.created_unix_ms = 1700000000000;
  return m;
}

// Changes one field of `b` so that exactly `axis` differs. `variant` picks which sub-field of a
// structured axis (precision, position convention, producer, tokens) changes.
inline void FlipAxis(BindingTuple* b, BindingAxis axis, int variant = 0) {
  switch (axis) {
    case BindingAxis::kModel: b->model_id.bytes[0] ^= 1; break;
    case BindingAxis::kTokenizer: b->tokenizer_id.bytes[5] ^= 1; break;
    case BindingAxis::kAdapter: b->adapter_id = Digest::Of("lora adapter"); break;
    case BindingAxis::kPrecision:
      if (variant % 3 == 0) b->precision.weight_dtype = "q8_0";
      if (variant % 3 == 1) b->precision.kv_dtype = "bf16";
      if (variant % 3 == 2) b->precision.kernel_tier = b->precision.kernel_tier == "avx2" ? "avx512" : "avx2";
      break;
    case BindingAxis::kPositionConvention:
      if (variant % 4 == 0) b->position.pairing = b->position.pairing == "adjacent" ? "split_half" : "adjacent";
      if (variant % 4 == 1) b->position.base *= 50;
      if (variant % 4 == 2) b->position.scaling = "linear:4";
      if (variant % 4 == 3) b->position.scheme = "alibi";
      break;
    case BindingAxis::kProducer:
      if (variant % 3 == 0) b->producer.version = "0.2.0";
      if (variant % 3 == 1) b->producer.kernel_build = "kernels-r0 cc-0.0";  // never a real build
      if (variant % 3 == 2) b->producer.library = "not-fak";
      break;
    case BindingAxis::kSpanDigest: b->span_digest.bytes[31] ^= 0x80; break;
    case BindingAxis::kTokens:
      if (variant % 2 == 0) b->tokens.from += 1;
      if (variant % 2 == 1) b->tokens.count += 1;
      break;
    case BindingAxis::kIntegrityChecksum: b->integrity_checksum.bytes[9] ^= 0x10; break;
  }
}
inline constexpr int kAxisVariants[kNumBindingAxes] = {1, 1, 1, 3, 4, 3, 1, 2, 1};

}  // namespace fak::testing

#endif  // FAK_TESTS_CACHE_GATE_TEST_UTIL_H_
