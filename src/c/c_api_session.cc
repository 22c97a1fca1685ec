// The C API's sessions (KV caches), prefill, decode and sampling.
#include "fak/model/sampler.h"
#include "src/c/c_api_internal.h"

struct fak_sampler {
  fak::Sampler sampler;
};

namespace fak::capi {
namespace {

fak_session* NewSession(std::shared_ptr<const LoadedModel> model, KVCache cache) {
  return new fak_session{std::move(model), nullptr, std::move(cache), Lease(), {}};
}

// Checks a caller's logits buffer before anything runs, so "too small" changes nothing.
Status CheckLogitsBuffer(const LoadedModel& m, const float* logits, size_t capacity) {
  const size_t vocab = m.model->config().vocab_size;
  if (logits != nullptr && capacity < vocab)
    return ResourceExhausted("the logits buffer holds " + std::to_string(capacity) + " floats, the vocabulary needs " +
                             std::to_string(vocab));
  return Status();
}

// Keeps the new logits in the session and copies them out when asked.
void StoreLogits(fak_session* s, std::vector<float> next, float* logits) {
  if (logits != nullptr) std::memcpy(logits, next.data(), next.size() * sizeof(float));
  s->logits = std::move(next);
}

}  // namespace
}  // namespace fak::capi

using fak::Status;
using fak::capi::Guard;

extern "C" {

fak_status fak_session_new(const fak_model* model, fak_session** out) {
  return Guard("fak_session_new", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(out);
    *out = fak::capi::NewSession(model->loaded, model->loaded->model->NewCache());
    return Status();
  });
}

fak_status fak_session_new_windowed(const fak_model* model, fak_session** out) {
  return Guard("fak_session_new_windowed", [&]() -> Status {
    FAK_C_REQUIRE(model);
    FAK_C_REQUIRE(out);
    *out = fak::capi::NewSession(model->loaded, model->loaded->model->NewCache(fak::KVMemory::kSlidingWindow));
    return Status();
  });
}

fak_status fak_session_clone(const fak_session* session, fak_session** out) {
  return Guard("fak_session_clone", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_C_REQUIRE(out);
    std::unique_ptr<fak_session> copy(fak::capi::NewSession(session->model, session->cache.Clone()));
    copy->tree = session->tree;  // the clone may still read the tree's slabs
    copy->logits = session->logits;
    *out = copy.release();
    return Status();
  });
}

fak_status fak_session_prefix(const fak_session* session, size_t n_tokens, fak_session** out) {
  return Guard("fak_session_prefix", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_C_REQUIRE(out);
    FAK_ASSIGN_OR_RETURN(fak::KVCache prefix, session->cache.Prefix(n_tokens));
    std::unique_ptr<fak_session> copy(fak::capi::NewSession(session->model, std::move(prefix)));
    copy->tree = session->tree;
    *out = copy.release();
    return Status();
  });
}

void fak_session_free(fak_session* session) { delete session; }

fak_status fak_session_size(const fak_session* session, size_t* n_tokens) {
  return Guard("fak_session_size", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_C_REQUIRE(n_tokens);
    *n_tokens = session->cache.size();
    return Status();
  });
}

fak_status fak_session_kv_bytes(const fak_session* session, size_t* held, size_t* allocated) {
  return Guard("fak_session_kv_bytes", [&]() -> Status {
    FAK_C_REQUIRE(session);
    if (held != nullptr) *held = session->cache.size_bytes();
    if (allocated != nullptr) *allocated = session->cache.allocated_bytes();
    return Status();
  });
}

fak_status fak_session_tokens(const fak_session* session, int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return Guard("fak_session_tokens", [&]() -> Status {
    FAK_C_REQUIRE(session);
    return fak::capi::CopyOut<int32_t>(session->cache.tokens(), tokens, capacity, n_tokens, "token ids");
  });
}

fak_status fak_session_digest(const fak_session* session, char digest[FAK_DIGEST_HEX_SIZE]) {
  return Guard("fak_session_digest", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_C_REQUIRE(digest);
    fak::capi::WriteHex(session->cache.ComputeDigest().Hex(), digest);
    return Status();
  });
}

fak_status fak_session_truncate(fak_session* session, size_t n_tokens) {
  return Guard("fak_session_truncate", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_RETURN_IF_ERROR(session->cache.Truncate(n_tokens));
    session->logits.clear();
    return Status();
  });
}

fak_status fak_prefill(fak_session* session, const int32_t* tokens, size_t n_tokens, float* logits, size_t capacity) {
  return Guard("fak_prefill", [&]() -> Status {
    FAK_C_REQUIRE(session);
    if (n_tokens == 0) return fak::InvalidArgument("n_tokens is 0: a prefill needs at least one token");
    FAK_C_REQUIRE(tokens);
    const fak::capi::LoadedModel& m = *session->model;
    FAK_RETURN_IF_ERROR(fak::capi::CheckLogitsBuffer(m, logits, capacity));
    FAK_ASSIGN_OR_RETURN(std::vector<float> next,
                         m.model->Prefill(&session->cache, std::span<const int32_t>(tokens, n_tokens), fak::LogitsMode::kLast));
    fak::capi::StoreLogits(session, std::move(next), logits);
    return Status();
  });
}

fak_status fak_decode(fak_session* session, int32_t token, float* logits, size_t capacity) {
  return Guard("fak_decode", [&]() -> Status {
    FAK_C_REQUIRE(session);
    const fak::capi::LoadedModel& m = *session->model;
    FAK_RETURN_IF_ERROR(fak::capi::CheckLogitsBuffer(m, logits, capacity));
    FAK_ASSIGN_OR_RETURN(std::vector<float> next, m.model->Decode(&session->cache, token));
    fak::capi::StoreLogits(session, std::move(next), logits);
    return Status();
  });
}

fak_status fak_session_logits(const fak_session* session, const float** logits, size_t* n_logits) {
  return Guard("fak_session_logits", [&]() -> Status {
    FAK_C_REQUIRE(session);
    FAK_C_REQUIRE(logits);
    FAK_C_REQUIRE(n_logits);
    if (session->logits.empty())
      return fak::FailedPrecondition("the session has no logits yet (new, prefix or truncated): prefill or decode first");
    *logits = session->logits.data();
    *n_logits = session->logits.size();
    return Status();
  });
}

void fak_sampling_params_init(fak_sampling_params* params) {
  if (params == nullptr) return;
  const fak::SamplingParams d;
  *params = fak_sampling_params{};
  params->struct_size = sizeof(fak_sampling_params);
  params->temperature = d.temperature;
  params->top_k = d.top_k;
  params->top_p = d.top_p;
  params->repetition_penalty = d.repetition_penalty;
  params->seed = d.seed;
  params->min_p = d.min_p;
  params->presence_penalty = d.presence_penalty;
  params->frequency_penalty = d.frequency_penalty;
  params->repetition_window = d.repetition_window;
}

}  // extern "C"

namespace fak::capi {

// The caller's sampling parameters (NULL = greedy), validated.
Result<SamplingParams> ReadSampling(const fak_sampling_params* in) {
  fak_sampling_params p;
  fak_sampling_params_init(&p);
  FAK_RETURN_IF_ERROR(ReadVersioned(in, &p, "sampling"));
  SamplingParams s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.repetition_penalty = p.repetition_penalty;
  s.seed = p.seed;
  s.min_p = p.min_p;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.repetition_window = p.repetition_window;
  if (p.n_logit_bias > 0 && (p.logit_bias_tokens == nullptr || p.logit_bias_values == nullptr))
    return NullArgument("sampling.logit_bias_tokens or logit_bias_values");
  if (p.n_logit_bias > (size_t{1} << 24)) return fak::InvalidArgument("sampling.n_logit_bias is over 2^24");
  for (size_t i = 0; i < p.n_logit_bias; ++i) s.logit_bias.emplace_back(p.logit_bias_tokens[i], p.logit_bias_values[i]);
  FAK_RETURN_IF_ERROR(s.Validate());
  return s;
}

Status WriteLogprobs(const TokenLogprobs& lp, fak_token_logprob* out, size_t capacity, size_t* n_out) {
  const size_t need = 1 + lp.top.size();
  if (capacity < need) return fak::InvalidArgument("capacity " + std::to_string(capacity) + " < " + std::to_string(need));
  out[0] = {lp.chosen.token, lp.chosen.logprob};
  for (size_t i = 0; i < lp.top.size(); ++i) out[1 + i] = {lp.top[i].token, lp.top[i].logprob};
  *n_out = need;
  return Status();
}

}  // namespace fak::capi

extern "C" {

fak_status fak_sampler_new(const fak_sampling_params* params, fak_sampler** out) {
  return Guard("fak_sampler_new", [&]() -> Status {
    FAK_C_REQUIRE(out);
    FAK_ASSIGN_OR_RETURN(fak::SamplingParams s, fak::capi::ReadSampling(params));
    *out = new fak_sampler{fak::Sampler(s)};
    return Status();
  });
}

void fak_sampler_free(fak_sampler* sampler) { delete sampler; }

fak_status fak_sampler_sample_generated(fak_sampler* sampler, const float* logits, size_t n_logits,
                                        const int32_t* history, size_t n_history, size_t n_generated, int32_t* token) {
  return Guard("fak_sampler_sample", [&]() -> Status {
    FAK_C_REQUIRE(sampler);
    FAK_C_REQUIRE(token);
    if (n_logits == 0) return fak::InvalidArgument("n_logits is 0");
    FAK_C_REQUIRE(logits);
    if (history == nullptr && n_history > 0) return fak::capi::NullArgument("history");
    if (n_generated > n_history)
      return fak::InvalidArgument("n_generated " + std::to_string(n_generated) + " is more than n_history " +
                                  std::to_string(n_history));
    FAK_ASSIGN_OR_RETURN(*token, sampler->sampler.Sample(std::span<const float>(logits, n_logits),
                                                         std::span<const int32_t>(history, n_history), n_generated));
    return Status();
  });
}

fak_status fak_sampler_sample(fak_sampler* sampler, const float* logits, size_t n_logits, const int32_t* history,
                              size_t n_history, int32_t* token) {
  return fak_sampler_sample_generated(sampler, logits, n_logits, history, n_history, 0, token);
}

fak_status fak_logprobs(const float* logits, size_t n_logits, int32_t token, size_t top_n, fak_token_logprob* out,
                        size_t capacity, size_t* n_out) {
  return Guard("fak_logprobs", [&]() -> Status {
    FAK_C_REQUIRE(logits);
    FAK_C_REQUIRE(out);
    FAK_C_REQUIRE(n_out);
    if (n_logits == 0) return fak::InvalidArgument("n_logits is 0");
    if (token < 0 || static_cast<size_t>(token) >= n_logits)
      return fak::InvalidArgument("token " + std::to_string(token) + " is outside the " + std::to_string(n_logits) + " logits");
    const size_t need = 1 + std::min(top_n, n_logits);
    if (capacity < need) return fak::InvalidArgument("capacity " + std::to_string(capacity) + " < " + std::to_string(need));
    return fak::capi::WriteLogprobs(fak::LogprobsOf(std::span<const float>(logits, n_logits), token, top_n), out, capacity, n_out);
  });
}

}  // extern "C"
