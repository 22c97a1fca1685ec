/* fak C API: the serving engine and the radix tree it reuses prefixes from (conventions: fak/c/base.h). */
#ifndef FAK_C_ENGINE_H_
#define FAK_C_ENGINE_H_

#include "fak/c/base.h"
#include "fak/c/model.h"    /* fak_chat_message */
#include "fak/c/session.h"  /* fak_sampling_params */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Engine: many requests, one batched forward pass per step -------------------------------- */

/* Thread-safe: submit, cancel and wait from any thread. */
/* A radix tree (see "Radix tree" below); an engine may share one. */

typedef struct fak_engine_options {
  size_t struct_size;
  size_t max_running;      /* requests running at once (>= 1). Default: 16. */
  size_t max_queued;       /* requests waiting (>= 1); submit answers UNAVAILABLE past it. Default: 256. */
  size_t kv_budget_bytes;  /* KV of running requests and the prefix tree; 0 = unbounded. Default: 0. */
  int start_thread;        /* nonzero: the engine steps on its own thread; 0: fak_engine_wait steps it. Default: 1. */
  /* A tree of the same model to reuse prefixes from and give finished contexts to (the engine
   * keeps it alive); NULL = the engine's own. Its budget becomes kv_budget_bytes. Default: NULL. */
  fak_radix* tree;
} fak_engine_options;

/* Thread-safe (touches only *options). */
FAK_EXPORT void fak_engine_options_init(fak_engine_options* options);
/* An engine over `model` (with its own prefix tree), holding a reference to the model. Caller
 * frees *out with fak_engine_free. Thread-safe. */
FAK_EXPORT fak_status fak_engine_new(const fak_model* model, const fak_engine_options* options, fak_engine** out);
/* Cancels what is queued or running, joins the step thread, frees. No callback runs after it
 * returns. Must not be called from a token callback.
 * NULL is a no-op. Not concurrently with other calls on the engine. */
FAK_EXPORT void fak_engine_free(fak_engine* engine);

/* Called on the stepping thread for each generated token with the text it releases (possibly
 * empty; not NUL-terminated). Return nonzero to continue, 0 to cancel the request. Keep it short;
 * it may call fak_engine_cancel and fak_engine_submit, never fak_engine_wait or fak_engine_free. */
typedef int (*fak_token_callback)(void* user_data, uint64_t request_id, int32_t token, const char* text,
                                  size_t text_len);

typedef struct fak_request {
  size_t struct_size;
  const char* tenant;                 /* NUL-terminated namespace of prefix reuse; NULL = "default" */
  const int32_t* prompt;              /* token ids, or NULL with messages */
  size_t n_prompt;
  const fak_chat_message* messages;   /* a conversation rendered with the model's template, or NULL */
  size_t n_messages;
  const fak_sampling_params* sampling; /* NULL = greedy; copied at submit */
  size_t max_tokens;                  /* 0: prefill only, giving the prompt's KV to the tree. Default: 64. */
  const int32_t* stop_tokens;         /* with messages and none given: EOS and end-of-turn tokens */
  size_t n_stop_tokens;
  fak_token_callback on_token;        /* may be NULL */
  void* user_data;                    /* passed to on_token */
  const char* const* stop_strings;    /* NUL-terminated, non-empty; generation ends when the text */
  size_t n_stop_strings;              /* contains one, which is never emitted (nor what follows) */
  /* Nonzero: background work (warming the tree, backfill), admitted only while no interactive
   * request waits and preempted first. Default: 0 (interactive). */
  int background;
  /* Nonzero: keep each generated token's log-probability (the model's distribution before any
   * sampling change) and those of the top_logprobs (at most 20) most likely tokens; read them with
   * fak_result_logprobs. Default: 0. */
  int logprobs;
  size_t top_logprobs;
  /* Appended in 1.2. A constraint on the reply (docs/grammar.md): every token it samples keeps the
   * text a prefix of a sentence of the grammar, and a stop token comes only where the sentence may
   * end. Either GBNF text (start rule `root`) or the text of a JSON schema (the subset OpenAI's
   * structured outputs use) whose instances the reply must be; at most one of the two. (pointer,
   * length) UTF-8, copied and parsed at submit: INVALID_ARGUMENT naming the rule and line:column,
   * or the unsupported keyword and where it is. NULL = unconstrained. Default: NULL. */
  const char* grammar;
  size_t grammar_len;
  const char* json_schema;
  size_t json_schema_len;
  /* Appended in 1.3. Tools offered to a request given as messages (docs/c-api.md, Tool calls): OpenAI's
   * `tools`, a JSON array of {"type": "function", "function": {"name", "description"?, "parameters"?}},
   * rendered through the model's chat template. (pointer, length) UTF-8, copied at submit. NULL = none.
   * Read the reply's calls with fak_result_tool_calls. Default: NULL. */
  const char* tools_json;
  size_t tools_json_len;
  /* NUL-terminated: "auto" (the model may call; once it writes its call marker the call is held to
   * the tools' schemas), "none" (tools not offered), "required" (the reply is calls, forced by a
   * grammar), or a function's name (the reply is one call of it). NULL = "auto". Forced calls and
   * grammar / json_schema together are INVALID_ARGUMENT. Default: NULL. */
  const char* tool_choice;
  int parallel_tool_calls; /* nonzero: "required" may write several calls (up to eight). Default: 1. */
  /* Appended in 1.4. Nonzero: embed instead of generate (docs/c-api.md, Embeddings). The prompt is
   * read in the engine's batches like any request's, and the request finishes with
   * FAK_FINISH_STOP_TOKEN, no tokens, and the embedding — the final hidden states after the output
   * norm, pooled — read with fak_result_embedding. The generation fields are ignored; its KV never
   * enters the prefix tree. Default: 0. */
  int embed;
  /* NUL-terminated "mean", "last" or "cls"; NULL = the model's own (a GGUF's pooling_type, else
   * "mean"). Another name is INVALID_ARGUMENT. Default: NULL. */
  const char* embed_pooling;
  int embed_normalize; /* nonzero: scaled to unit length, as OpenAI's embeddings are. Default: 1. */
} fak_request;

/* Thread-safe (touches only *request). */
FAK_EXPORT void fak_request_init(fak_request* request);
/* Queues a request; everything it points to is copied before the call returns. *id is never 0.
 * INVALID_ARGUMENT (bad prompt, ids, sampling, tenant, an empty stop string, a grammar or schema
 * that does not parse, both of them), RESOURCE_EXHAUSTED (prompt + max_tokens
 * past the context or budget), UNAVAILABLE (queue full), FAILED_PRECONDITION (messages without a
 * chat template). Thread-safe. */
FAK_EXPORT fak_status fak_engine_submit(fak_engine* engine, const fak_request* request, uint64_t* id);
/* Asks `id` to stop; it finishes as FAK_FINISH_CANCELLED. NOT_FOUND for an unknown or collected id.
 * Thread-safe; may be called from a token callback. */
FAK_EXPORT fak_status fak_engine_cancel(fak_engine* engine, uint64_t id);

typedef enum fak_finish_reason {
  FAK_FINISH_STOP_TOKEN = 0,
  FAK_FINISH_STOP_STRING = 1,
  FAK_FINISH_LENGTH = 2,
  FAK_FINISH_CANCELLED = 3,
  FAK_FINISH_DEADLINE = 4,
  FAK_FINISH_ERROR = 5
} fak_finish_reason;

/* A finished request's outcome. Immutable: thread-safe. */

/* Blocks until `id` finishes and hands over its result (once; NOT_FOUND afterwards). Free it with
 * fak_result_free. A request that failed is still a result, with FAK_FINISH_ERROR and its error.
 * Caller frees *out with fak_result_free. Thread-safe (each id is waited for by one caller). */
FAK_EXPORT fak_status fak_engine_wait(fak_engine* engine, uint64_t id, fak_result** out);
/* NULL is a no-op; invalidates the pointers fak_result_info_get lent. */
FAK_EXPORT void fak_result_free(fak_result* result);

typedef struct fak_result_info {
  size_t struct_size;
  fak_finish_reason finish;
  const int32_t* tokens;  /* generated ids (a stop token included); borrowed from the result */
  size_t n_tokens;
  const char* text;       /* the streamed text, NUL-terminated; borrowed from the result */
  size_t text_len;
  size_t prompt_tokens, cached_tokens;  /* cached: prompt tokens reused from the prefix tree */
  fak_status error;       /* with FAK_FINISH_ERROR */
  const char* error_message;  /* NUL-terminated; borrowed from the result */
} fak_result_info;

/* Fills `info` (set struct_size first). Pointers stay valid until fak_result_free.
 * Thread-safe (a result is immutable). */
FAK_EXPORT fak_status fak_result_info_get(const fak_result* result, fak_result_info* info);
/* An embedding request's vector (fak_request.embed): *data (borrowed from the result) and its
 * length, the model's hidden size. FAILED_PRECONDITION when the request did not embed or did not
 * finish with FAK_FINISH_STOP_TOKEN. Thread-safe. */
FAK_EXPORT fak_status fak_result_embedding(const fak_result* result, const float** data, size_t* n);
/* Generated token `index`'s log-probabilities, as fak_logprobs writes them (out[0] the token's, then
 * its request's top_logprobs). FAILED_PRECONDITION when the request did not ask for logprobs,
 * INVALID_ARGUMENT for an index past the tokens or a capacity too small. Thread-safe. */
FAK_EXPORT fak_status fak_result_logprobs(const fak_result* result, size_t index, fak_token_logprob* out,
                                          size_t capacity, size_t* n_out);

/* The calls in the reply of a request that offered tools (tool_choice not "none"), as JSON text
 * borrowed from the result (NUL-terminated, valid until fak_result_free): {"content": the text outside
 * the calls (null when there is none beside calls), "tool_calls": [{"id", "type": "function",
 * "function": {"name", "arguments": JSON text}}]} — OpenAI's message fields; "tool_calls" is empty when
 * the model wrote none. FAILED_PRECONDITION when the request offered no tools. Thread-safe. */
FAK_EXPORT fak_status fak_result_tool_calls(const fak_result* result, const char** json, size_t* json_len);

/* ---- Radix tree: prefix reuse across sessions ------------------------------------------------ */

/* fak_radix: thread-safe. Every reuse passes the manifest gate: a tree never serves KV across a
 * model, tokenizer, kernel tier or tenant. */

/* A tree for `model`'s KV keeping at most budget_bytes resident (0 = unbounded).
 * Caller frees *out with fak_radix_free; the tree holds a reference to the model. Thread-safe. */
FAK_EXPORT fak_status fak_radix_new(const fak_model* model, size_t budget_bytes, fak_radix** out);
/* NULL is a no-op; sessions from lookups keep the tree alive. Not concurrently with other calls
 * on this handle. */
FAK_EXPORT void fak_radix_free(fak_radix* radix);
/* A new session holding the longest cached prefix of `tokens` (n_tokens >= 1) that `tenant`
 * (NULL = "default") may reuse, at most n_tokens - 1 tokens so one is left to prefill; *matched
 * tells how many. The session reads the tree's KV in place and keeps that path from eviction until
 * it is freed. Prefill tokens[*matched:] on it next. Caller frees *out with fak_session_free. Thread-safe. */
FAK_EXPORT fak_status fak_radix_lookup(fak_radix* radix, const char* tenant, const int32_t* tokens, size_t n_tokens,
                            fak_session** out, size_t* matched);
/* Adds everything `session` holds to `tenant`'s namespace (NULL = "default"), then trims to the
 * budget. INVALID_ARGUMENT for a session of another model or an empty one.
 * Copies what it keeps; the session stays the caller's. Thread-safe for the tree; the session must
 * not change meanwhile. */
FAK_EXPORT fak_status fak_radix_insert(fak_radix* radix, const char* tenant, const fak_session* session);

typedef struct fak_radix_stats {
  size_t struct_size;
  size_t unique_tokens, resident_bytes, node_count;
  size_t lookups, hits, misses, hit_tokens, evicted_tokens;
} fak_radix_stats;

/* Thread-safe. */
FAK_EXPORT fak_status fak_radix_stats_get(const fak_radix* radix, fak_radix_stats* stats);


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_ENGINE_H_ */
