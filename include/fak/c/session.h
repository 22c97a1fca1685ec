/* fak C API: sessions (KV caches), prefill and decode, sampling (conventions: fak/c/base.h). */
#ifndef FAK_C_SESSION_H_
#define FAK_C_SESSION_H_

#include "fak/c/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Sessions (KV caches), prefill and decode ------------------------------------------------ */

/* One sequence's KV cache plus its latest logits. One thread at a time. */

/* An empty session on `model`, which it holds a reference to. Caller frees *out with
 * fak_session_free. Thread-safe (the model is shared read-only). */
FAK_EXPORT fak_status fak_session_new(const fak_model* model, fak_session** out);
/* As fak_session_new, with sliding-window memory: the model's sliding-window layers (Gemma 3) keep
 * only their window of KV — the same logits, memory that stops growing with the context. A prefix
 * or truncation reaching back past what a layer still holds is FAILED_PRECONDITION (rebuild from
 * the tokens instead). On a model without sliding layers it is fak_session_new. */
FAK_EXPORT fak_status fak_session_new_windowed(const fak_model* model, fak_session** out);
/* A deep copy of `session` (its cache and latest logits). Cost: the whole cache. Caller frees *out
 * with fak_session_free. Reads `session`: not concurrently with a call that changes it. */
FAK_EXPORT fak_status fak_session_clone(const fak_session* session, fak_session** out);
/* A copy of the first n_tokens of `session`, with no latest logits. INVALID_ARGUMENT when n_tokens
 * exceeds the tokens held. Caller frees *out with fak_session_free. Reads `session`: not
 * concurrently with a call that changes it. */
FAK_EXPORT fak_status fak_session_prefix(const fak_session* session, size_t n_tokens, fak_session** out);
/* NULL is a no-op; invalidates borrowed logits. Not concurrently with any call on the session. */
FAK_EXPORT void fak_session_free(fak_session* session);

/* Tokens the session holds. Reads only. Not concurrently with a call that changes the session. */
FAK_EXPORT fak_status fak_session_size(const fak_session* session, size_t* n_tokens);
/* Bytes of KV the session holds and has allocated (either may be NULL). Reads only. Not
 * concurrently with a call that changes the session. */
FAK_EXPORT fak_status fak_session_kv_bytes(const fak_session* session, size_t* held, size_t* allocated);
/* The ids it holds; buffers as fak_tokenize.
 * Reads only. Not concurrently with a call that changes the session. */
FAK_EXPORT fak_status fak_session_tokens(const fak_session* session, int32_t* tokens, size_t capacity, size_t* n_tokens);
/* sha256 of the cache (shape, positions, K, Kraw, V): equal digests, equal caches.
 * Reads only. Not concurrently with a call that changes the session. */
FAK_EXPORT fak_status fak_session_digest(const fak_session* session, char digest[FAK_DIGEST_HEX_SIZE]);
/* Drops tokens [n_tokens, size) and the latest logits. INVALID_ARGUMENT when n_tokens > size.
 * Changes the session: one thread at a time; invalidates borrowed logits. */
FAK_EXPORT fak_status fak_session_truncate(fak_session* session, size_t n_tokens);

/* Appends `tokens` (n_tokens >= 1) as one batch and computes the next-token logits: copied to
 * `logits` when it is non-NULL (capacity >= vocab_size, checked before anything runs, else
 * RESOURCE_EXHAUSTED), and kept in the session either way (fak_session_logits). INVALID_ARGUMENT
 * for an id outside the vocabulary; RESOURCE_EXHAUSTED past the context length. Within one kernel
 * tier the logits equal, bit for bit, feeding the same tokens one at a time with fak_decode.
 * Changes the session: one thread at a time; invalidates borrowed logits. Different sessions may
 * prefill on different threads at once. */
FAK_EXPORT fak_status fak_prefill(fak_session* session, const int32_t* tokens, size_t n_tokens, float* logits,
                       size_t capacity);
/* Appends one token; logits as fak_prefill.
 * Changes the session: one thread at a time; invalidates borrowed logits. */
FAK_EXPORT fak_status fak_decode(fak_session* session, int32_t token, float* logits, size_t capacity);
/* Borrows the latest logits (vocab_size floats, in *n_logits): valid until the next call that
 * changes this session (prefill, decode, truncate) or frees it. FAILED_PRECONDITION when the
 * session has none (new, prefix or truncated). The session keeps ownership. Reads only. */
FAK_EXPORT fak_status fak_session_logits(const fak_session* session, const float** logits, size_t* n_logits);

/* ---- Sampling -------------------------------------------------------------------------------- */

typedef struct fak_sampling_params {
  size_t struct_size;
  float temperature;         /* 0 = greedy (argmax, ties to the lowest id). Default: 0. */
  size_t top_k;              /* 0 = all. Default: 0. */
  float top_p;               /* in (0, 1]. Default: 1. */
  float repetition_penalty;  /* > 1 discourages tokens in the history. Default: 1. */
  uint64_t seed;             /* Default: 0. */
  /* Appended fields (struct_size tells which a caller knows; docs/engine.md "Sampling" has the order). */
  float min_p;               /* in [0, 1]; 0 = off. Default: 0. */
  float presence_penalty;    /* OpenAI's, in [-2, 2], over the generated tokens. Default: 0. */
  float frequency_penalty;   /* OpenAI's, in [-2, 2], over the generated tokens. Default: 0. */
  size_t repetition_window;  /* last tokens of the history the repetition penalty reads; 0 = all. Default: 0. */
  const int32_t* logit_bias_tokens;  /* n_logit_bias distinct ids, each given logit_bias_values[i] */
  const float* logit_bias_values;    /* in [-100, 100]; -100 bans the token. Copied by the call reading them. */
  size_t n_logit_bias;               /* Default: 0. */
} fak_sampling_params;

/* Thread-safe (touches only *params). */
FAK_EXPORT void fak_sampling_params_init(fak_sampling_params* params);

/* A seeded sampler: same seed, logits and history, same tokens on every machine. One thread at a
 * time. */

/* INVALID_ARGUMENT naming a bad parameter (NaN, infinite, out of range, or a subnormal float).
 * `params` NULL = defaults (greedy).
 * Caller frees *out with fak_sampler_free. Thread-safe. */
FAK_EXPORT fak_status fak_sampler_new(const fak_sampling_params* params, fak_sampler** out);
/* NULL is a no-op. */
FAK_EXPORT void fak_sampler_free(fak_sampler* sampler);
/* Picks the next token from n_logits >= 1 logits given the ids seen so far (history may be NULL
 * when n_history is 0). A logit of -INFINITY masks its token out; a NaN or +INFINITY logit, or every
 * logit -INFINITY, is INVALID_ARGUMENT naming the index, and the sampler is unchanged. Borrows
 * logits and history for the call. One thread at a time per sampler. */
FAK_EXPORT fak_status fak_sampler_sample(fak_sampler* sampler, const float* logits, size_t n_logits, const int32_t* history,
                              size_t n_history, int32_t* token);
/* As fak_sampler_sample, where the last n_generated ids of the history are this generation's own
 * (presence and frequency penalties count those; fak_sampler_sample counts none).
 * INVALID_ARGUMENT when n_generated > n_history. */
FAK_EXPORT fak_status fak_sampler_sample_generated(fak_sampler* sampler, const float* logits, size_t n_logits,
                                                   const int32_t* history, size_t n_history, size_t n_generated,
                                                   int32_t* token);

/* A token's log-probability. */
typedef struct fak_token_logprob {
  int32_t token;
  double logprob;  /* -INFINITY for a masked logit */
} fak_token_logprob;
/* The log-softmax of n_logits logits (in double, before any sampling change): out[0] is `token`'s,
 * then the top_n most likely (ties to the lowest id); *n_out = 1 + min(top_n, n_logits), which
 * `capacity` must hold (else INVALID_ARGUMENT). Thread-safe. */
FAK_EXPORT fak_status fak_logprobs(const float* logits, size_t n_logits, int32_t token, size_t top_n,
                                   fak_token_logprob* out, size_t capacity, size_t* n_out);


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_SESSION_H_ */
