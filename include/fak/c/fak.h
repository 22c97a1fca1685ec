/* fak's C API: a stable C99 ABI over the C++ library, for C hosts and for bindings (Python, Rust,
 * Go, any FFI). docs/c-api.md has the conventions, the versioning policy and an example.
 *
 * Conventions (each function repeats what is particular to it):
 * - Handles are opaque pointers made by fak_*_new / fak_*_open / fak_model_load and released by
 *   the matching fak_*_free, which accepts NULL. A handle keeps alive what it was made from (a
 *   session its model, a radix lookup's session its tree), so handles may be freed in any order.
 * - Every fallible call returns fak_status. FAK_OK is 0; any other value names the kind of
 *   failure and fak_last_error() gives the message on the calling thread. A call that fails
 *   changes nothing (no handle, no output, no cache): out-parameters are written only on success,
 *   except *n_needed-style sizes, which a "buffer too small" failure fills in.
 * - Caller buffers: (buffer, capacity) pairs; when the result does not fit the call fails with
 *   FAK_RESOURCE_EXHAUSTED and reports the size it needs, so call once with capacity 0 to size.
 * - Text is (pointer, length) UTF-8 bytes and may contain NUL; strings marked "NUL-terminated"
 *   are C strings. Strings the library allocates are freed with fak_string_free.
 * - Option and info structs begin with struct_size: fill it with the matching fak_*_init (or
 *   sizeof), so a newer library reading an older caller's struct uses defaults for fields the
 *   caller does not know; an output struct's struct_size returns the bytes the library wrote
 *   (docs/c-api.md "Versioning").
 * - No C++ exception, abort or exit crosses this boundary; a broken invariant inside becomes
 *   FAK_FAILED_PRECONDITION, an exhausted allocation FAK_RESOURCE_EXHAUSTED.
 * - Every function states who owns what it returns and its thread-safety: "thread-safe" calls
 *   may run on any number of threads at once; "one thread at a time" needs the caller's own
 *   exclusion for that handle. Arguments are borrowed for the call unless said otherwise. */
#ifndef FAK_C_FAK_H_
#define FAK_C_FAK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions and errors ---------------------------------------------------------------------- */

/* The ABI this header describes: (major << 16) | minor. A library answers the same major and a
 * minor >= the header's when it can serve a program built against this header. */
#define FAK_ABI_VERSION_MAJOR 1
#define FAK_ABI_VERSION_MINOR 0
#define FAK_ABI_VERSION ((FAK_ABI_VERSION_MAJOR << 16) | FAK_ABI_VERSION_MINOR)

/* The ABI of the linked library (compare with FAK_ABI_VERSION). Thread-safe. */
uint32_t fak_abi_version(void);
/* The library's version, e.g. "0.1.0" (static storage). Thread-safe. */
const char* fak_version_string(void);

/* Mirrors fak::StatusCode value for value. */
typedef enum fak_status {
  FAK_OK = 0,
  FAK_INVALID_ARGUMENT = 1,     /* a malformed argument: NULL handle, bad id, bad option, bad JSON */
  FAK_NOT_FOUND = 2,            /* a file, request, node or digest that is not there */
  FAK_CORRUPTION = 3,           /* a damaged file or record */
  FAK_IO_ERROR = 4,             /* the OS refused a read, write, fsync or map */
  FAK_UNSUPPORTED = 5,          /* a format, architecture or feature fak does not implement */
  FAK_RESOURCE_EXHAUSTED = 6,   /* out of memory or context, over a budget, or a caller buffer too small */
  FAK_FAILED_PRECONDITION = 7,  /* the call is not valid in the object's present state */
  FAK_VERIFICATION_FAILED = 8,  /* a signature, digest, witness or certificate did not verify */
  FAK_UNAVAILABLE = 9           /* a dependency cannot be reached now; retry later */
} fak_status;

/* "OK", "InvalidArgument", ... (static storage); "Unknown" for a value outside the enum. Thread-safe. */
const char* fak_status_name(fak_status status);
/* The message of the last failed call on this thread ("" after none). Valid until the next fak
 * call on this thread; copy it to keep it. Thread-safe (each thread has its own). */
const char* fak_last_error(void);
/* Frees a string the library allocated (certificate JSON). NULL is a no-op. Thread-safe. */
void fak_string_free(char* s);

/* A sha256 as 64 lowercase hex characters and a NUL. */
#define FAK_DIGEST_HEX_SIZE 65

/* The kernel tier in use: "scalar", "avx2" or "avx512" (static storage). Results are bit-exact
 * within one tier and differ in rounding across tiers. Thread-safe. */
const char* fak_kernel_tier(void);
/* FAK_OK, or the error that the environment variable FAK_KERNEL_TIER names an unknown tier or one
 * this CPU lacks (the library then runs the best supported tier). Thread-safe. */
fak_status fak_kernel_tier_check(void);

/* ---- Model, tokenizer, chat template ---------------------------------------------------------- */

/* A model with its tokenizer and chat template. Immutable: thread-safe. */
typedef struct fak_model fak_model;

typedef struct fak_model_options {
  size_t struct_size;
  /* NUL-terminated path of a GGUF file or Hugging Face checkpoint; NULL = the embedded default
   * model (synthetic weights, byte tokenizer, the "fak" chat template). Default: NULL. */
  const char* path;
  /* Threads of one forward pass; 0 = one per hardware thread. Default: 0. */
  size_t n_threads;
  /* Cap on the context length below the file's; 0 = the file's. Default: 0. */
  size_t max_context;
  /* Seed of the embedded model's weights (ignored with a path). Default: 2026, the weights the
   * fak tool and examples use. */
  uint64_t seed;
} fak_model_options;

/* Fills `options` with the defaults above (struct_size included). NULL is a no-op.
 * Thread-safe (touches only *options). */
void fak_model_options_init(fak_model_options* options);

/* Loads a model with its tokenizer (GGUF metadata, or tokenizer.json beside a checkpoint) and chat
 * template. `options` NULL = all defaults. On success *out owns the model: free it with
 * fak_model_free. Errors: INVALID_ARGUMENT (out NULL, bad struct_size), NOT_FOUND / IO_ERROR (path,
 * or no tokenizer), CORRUPTION / UNSUPPORTED (the file). A model file without a recognised chat
 * template still loads; fak_chat_render then fails with its reason. Thread-safe. */
fak_status fak_model_load(const fak_model_options* options, fak_model** out);
/* Drops the caller's reference; sessions, engines and trees made from it keep it alive.
 * Thread-safe; must not race with calls on the same handle. */
void fak_model_free(fak_model* model);

typedef struct fak_model_info {
  size_t struct_size;
  size_t vocab_size;      /* logits per position */
  size_t context_length;  /* tokens a session can hold */
  size_t n_layers;
  int32_t bos_id, eos_id; /* -1: none */
  int add_bos;            /* nonzero when prompts should start with bos_id */
  char model_digest[FAK_DIGEST_HEX_SIZE];  /* sha256 of config and weights (first call hashes them) */
} fak_model_info;

/* Fills `info` (set info->struct_size first; fields past it are not written). Thread-safe. */
fak_status fak_model_info_get(const fak_model* model, fak_model_info* info);

/* Token ids of `text` (no BOS added; special-token texts become their ids). Writes at most
 * `capacity` ids to `tokens` and their count to *n_tokens; RESOURCE_EXHAUSTED with the count
 * needed in *n_tokens when capacity is too small (tokens may be NULL when capacity is 0).
 * Borrows model. Thread-safe. */
fak_status fak_tokenize(const fak_model* model, const char* text, size_t text_len, int32_t* tokens,
                        size_t capacity, size_t* n_tokens);
/* The bytes `tokens` stand for, NUL-terminated: *n_bytes excludes the NUL, so capacity must be at
 * least *n_bytes + 1 (RESOURCE_EXHAUSTED reports *n_bytes otherwise). INVALID_ARGUMENT for an id
 * outside the vocabulary. Borrows model. Thread-safe. */
fak_status fak_detokenize(const fak_model* model, const int32_t* tokens, size_t n_tokens, char* text,
                          size_t capacity, size_t* n_bytes);

typedef struct fak_chat_message {
  const char* role;     /* NUL-terminated: "system", "user", "assistant" or "tool" */
  const char* content;  /* NUL-terminated */
} fak_chat_message;

/* Renders a conversation with the model's chat template (plus the prompt that opens the
 * assistant's turn when add_generation_prompt is nonzero), NUL-terminated like fak_detokenize.
 * FAILED_PRECONDITION when the model has no chat template (the message says why);
 * INVALID_ARGUMENT for an unknown role or a conversation the template refuses.
 * Borrows model and messages. Thread-safe. */
fak_status fak_chat_render(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                           int add_generation_prompt, char* text, size_t capacity, size_t* n_bytes);
/* The same conversation as token ids, tokenized as the engine does: the template's markup becomes
 * its special tokens, a message's content never does (no BOS to add). Buffers as fak_tokenize.
 * Borrows model and messages. Thread-safe. */
fak_status fak_chat_tokenize(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                             int add_generation_prompt, int32_t* tokens, size_t capacity, size_t* n_tokens);

/* ---- Sessions (KV caches), prefill and decode ------------------------------------------------ */

/* One sequence's KV cache plus its latest logits. One thread at a time. */
typedef struct fak_session fak_session;

/* An empty session on `model`, which it holds a reference to. Caller frees *out with
 * fak_session_free. Thread-safe (the model is shared read-only). */
fak_status fak_session_new(const fak_model* model, fak_session** out);
/* A deep copy of `session` (its cache and latest logits). Cost: the whole cache. Caller frees *out
 * with fak_session_free. Reads `session`: not concurrently with a call that changes it. */
fak_status fak_session_clone(const fak_session* session, fak_session** out);
/* A copy of the first n_tokens of `session`, with no latest logits. INVALID_ARGUMENT when n_tokens
 * exceeds the tokens held. Caller frees *out with fak_session_free. Reads `session`: not
 * concurrently with a call that changes it. */
fak_status fak_session_prefix(const fak_session* session, size_t n_tokens, fak_session** out);
/* NULL is a no-op; invalidates borrowed logits. Not concurrently with any call on the session. */
void fak_session_free(fak_session* session);

/* Tokens the session holds. Reads only. Not concurrently with a call that changes the session. */
fak_status fak_session_size(const fak_session* session, size_t* n_tokens);
/* The ids it holds; buffers as fak_tokenize.
 * Reads only. Not concurrently with a call that changes the session. */
fak_status fak_session_tokens(const fak_session* session, int32_t* tokens, size_t capacity, size_t* n_tokens);
/* sha256 of the cache (shape, positions, K, Kraw, V): equal digests, equal caches.
 * Reads only. Not concurrently with a call that changes the session. */
fak_status fak_session_digest(const fak_session* session, char digest[FAK_DIGEST_HEX_SIZE]);
/* Drops tokens [n_tokens, size) and the latest logits. INVALID_ARGUMENT when n_tokens > size.
 * Changes the session: one thread at a time; invalidates borrowed logits. */
fak_status fak_session_truncate(fak_session* session, size_t n_tokens);

/* Appends `tokens` (n_tokens >= 1) as one batch and computes the next-token logits: copied to
 * `logits` when it is non-NULL (capacity >= vocab_size, checked before anything runs, else
 * RESOURCE_EXHAUSTED), and kept in the session either way (fak_session_logits). INVALID_ARGUMENT
 * for an id outside the vocabulary; RESOURCE_EXHAUSTED past the context length. Within one kernel
 * tier the logits equal, bit for bit, feeding the same tokens one at a time with fak_decode.
 * Changes the session: one thread at a time; invalidates borrowed logits. Different sessions may
 * prefill on different threads at once. */
fak_status fak_prefill(fak_session* session, const int32_t* tokens, size_t n_tokens, float* logits,
                       size_t capacity);
/* Appends one token; logits as fak_prefill.
 * Changes the session: one thread at a time; invalidates borrowed logits. */
fak_status fak_decode(fak_session* session, int32_t token, float* logits, size_t capacity);
/* Borrows the latest logits (vocab_size floats, in *n_logits): valid until the next call that
 * changes this session (prefill, decode, truncate) or frees it. FAILED_PRECONDITION when the
 * session has none (new, prefix or truncated). The session keeps ownership. Reads only. */
fak_status fak_session_logits(const fak_session* session, const float** logits, size_t* n_logits);

/* ---- Sampling -------------------------------------------------------------------------------- */

typedef struct fak_sampling_params {
  size_t struct_size;
  float temperature;         /* 0 = greedy (argmax, ties to the lowest id). Default: 0. */
  size_t top_k;              /* 0 = all. Default: 0. */
  float top_p;               /* in (0, 1]. Default: 1. */
  float repetition_penalty;  /* > 1 discourages tokens in the history. Default: 1. */
  uint64_t seed;             /* Default: 0. */
} fak_sampling_params;

/* Thread-safe (touches only *params). */
void fak_sampling_params_init(fak_sampling_params* params);

/* A seeded sampler: same seed, logits and history, same tokens on every machine. One thread at a
 * time. */
typedef struct fak_sampler fak_sampler;

/* INVALID_ARGUMENT naming a bad parameter. `params` NULL = defaults (greedy).
 * Caller frees *out with fak_sampler_free. Thread-safe. */
fak_status fak_sampler_new(const fak_sampling_params* params, fak_sampler** out);
/* NULL is a no-op. */
void fak_sampler_free(fak_sampler* sampler);
/* Picks the next token from n_logits >= 1 logits given the ids seen so far (history may be NULL
 * when n_history is 0). Borrows logits and history for the call. One thread at a time per sampler. */
fak_status fak_sampler_sample(fak_sampler* sampler, const float* logits, size_t n_logits, const int32_t* history,
                              size_t n_history, int32_t* token);

/* ---- Engine: many requests, one batched forward pass per step -------------------------------- */

/* Thread-safe: submit, cancel and wait from any thread. */
typedef struct fak_engine fak_engine;
/* A radix tree (see "Radix tree" below); an engine may share one. */
typedef struct fak_radix fak_radix;

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
void fak_engine_options_init(fak_engine_options* options);
/* An engine over `model` (with its own prefix tree), holding a reference to the model. Caller
 * frees *out with fak_engine_free. Thread-safe. */
fak_status fak_engine_new(const fak_model* model, const fak_engine_options* options, fak_engine** out);
/* Cancels what is queued or running, joins the step thread, frees. No callback runs after it
 * returns. Must not be called from a token callback.
 * NULL is a no-op. Not concurrently with other calls on the engine. */
void fak_engine_free(fak_engine* engine);

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
  const char* const* stop_strings;    /* NUL-terminated; generation ends when the text contains one, */
  size_t n_stop_strings;              /* which is never emitted (nor what follows) */
  /* Nonzero: background work (warming the tree, backfill), admitted only while no interactive
   * request waits and preempted first. Default: 0 (interactive). */
  int background;
} fak_request;

/* Thread-safe (touches only *request). */
void fak_request_init(fak_request* request);
/* Queues a request; everything it points to is copied before the call returns. *id is never 0.
 * INVALID_ARGUMENT (bad prompt, ids, sampling, tenant), RESOURCE_EXHAUSTED (prompt + max_tokens
 * past the context or budget), UNAVAILABLE (queue full), FAILED_PRECONDITION (messages without a
 * chat template). Thread-safe. */
fak_status fak_engine_submit(fak_engine* engine, const fak_request* request, uint64_t* id);
/* Asks `id` to stop; it finishes as FAK_FINISH_CANCELLED. NOT_FOUND for an unknown or collected id.
 * Thread-safe; may be called from a token callback. */
fak_status fak_engine_cancel(fak_engine* engine, uint64_t id);

typedef enum fak_finish_reason {
  FAK_FINISH_STOP_TOKEN = 0,
  FAK_FINISH_STOP_STRING = 1,
  FAK_FINISH_LENGTH = 2,
  FAK_FINISH_CANCELLED = 3,
  FAK_FINISH_DEADLINE = 4,
  FAK_FINISH_ERROR = 5
} fak_finish_reason;

/* A finished request's outcome. Immutable: thread-safe. */
typedef struct fak_result fak_result;

/* Blocks until `id` finishes and hands over its result (once; NOT_FOUND afterwards). Free it with
 * fak_result_free. A request that failed is still a result, with FAK_FINISH_ERROR and its error.
 * Caller frees *out with fak_result_free. Thread-safe (each id is waited for by one caller). */
fak_status fak_engine_wait(fak_engine* engine, uint64_t id, fak_result** out);
/* NULL is a no-op; invalidates the pointers fak_result_info_get lent. */
void fak_result_free(fak_result* result);

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
fak_status fak_result_info_get(const fak_result* result, fak_result_info* info);

/* ---- Radix tree: prefix reuse across sessions ------------------------------------------------ */

/* fak_radix: thread-safe. Every reuse passes the manifest gate: a tree never serves KV across a
 * model, tokenizer, kernel tier or tenant. */

/* A tree for `model`'s KV keeping at most budget_bytes resident (0 = unbounded).
 * Caller frees *out with fak_radix_free; the tree holds a reference to the model. Thread-safe. */
fak_status fak_radix_new(const fak_model* model, size_t budget_bytes, fak_radix** out);
/* NULL is a no-op; sessions from lookups keep the tree alive. Not concurrently with other calls
 * on this handle. */
void fak_radix_free(fak_radix* radix);
/* A new session holding the longest cached prefix of `tokens` (n_tokens >= 1) that `tenant`
 * (NULL = "default") may reuse, at most n_tokens - 1 tokens so one is left to prefill; *matched
 * tells how many. The session reads the tree's KV in place and keeps that path from eviction until
 * it is freed. Prefill tokens[*matched:] on it next. Caller frees *out with fak_session_free. Thread-safe. */
fak_status fak_radix_lookup(fak_radix* radix, const char* tenant, const int32_t* tokens, size_t n_tokens,
                            fak_session** out, size_t* matched);
/* Adds everything `session` holds to `tenant`'s namespace (NULL = "default"), then trims to the
 * budget. INVALID_ARGUMENT for a session of another model or an empty one.
 * Copies what it keeps; the session stays the caller's. Thread-safe for the tree; the session must
 * not change meanwhile. */
fak_status fak_radix_insert(fak_radix* radix, const char* tenant, const fak_session* session);

typedef struct fak_radix_stats {
  size_t struct_size;
  size_t unique_tokens, resident_bytes, node_count;
  size_t lookups, hits, misses, hit_tokens, evicted_tokens;
} fak_radix_stats;

/* Thread-safe. */
fak_status fak_radix_stats_get(const fak_radix* radix, fak_radix_stats* stats);

/* ---- Ledger, eviction with a deletion certificate, verification ------------------------------ */

/* Signs certificates and journals deletions: an ed25519 key and an append-only, hash-chained,
 * fsync'd journal file (held exclusively while open). Thread-safe (calls are serialized). */
typedef struct fak_auditor fak_auditor;

/* Writes a new ed25519 key as PKCS#8 PEM (mode 0600) to `pem_path` and its public key's hex to
 * `public_key_hex` (may be NULL). FAILED_PRECONDITION / IO_ERROR when the file exists or cannot be
 * written. Thread-safe. */
fak_status fak_key_generate(const char* pem_path, char public_key_hex[FAK_DIGEST_HEX_SIZE]);
/* Opens (or creates) the journal at `journal_path` and loads the key at `key_pem_path` (owner-only
 * file). FAILED_PRECONDITION when another opener holds the journal or the key file is too open;
 * CORRUPTION for a damaged journal.
 * Caller frees *out with fak_auditor_free (which releases the journal). Thread-safe. */
fak_status fak_auditor_open(const char* journal_path, const char* key_pem_path, fak_auditor** out);
/* NULL is a no-op. Not concurrently with other calls on the auditor. */
void fak_auditor_free(fak_auditor* auditor);
/* The signing key's public half, hex. Thread-safe. */
fak_status fak_auditor_public_key(const fak_auditor* auditor, char public_key_hex[FAK_DIGEST_HEX_SIZE]);

/* Named segments (system prompt, user turn, tool result) laid end to end over one cache, each
 * evictable by name. One thread at a time. */
typedef struct fak_ledger fak_ledger;

/* An empty ledger over a new cache of `model`, holding a reference to the model. Caller frees *out
 * with fak_ledger_free. Thread-safe. */
fak_status fak_ledger_new(const fak_model* model, fak_ledger** out);
/* NULL is a no-op. Not concurrently with other calls on the ledger. */
void fak_ledger_free(fak_ledger* ledger);
/* Tokenizes `text` (its sha256 is the segment's source digest) and prefills it as segment
 * `segment_id` (NUL-terminated, unique in the ledger); logits as fak_prefill. INVALID_ARGUMENT
 * for a duplicate or empty id or text that makes no tokens.
 * Changes the ledger: one thread at a time per ledger. */
fak_status fak_ledger_append(fak_ledger* ledger, const char* segment_id, const char* text, size_t text_len,
                             float* logits, size_t capacity);
/* Evicts segment `segment_id` exactly (the later segments, whose KV attended to it, are
 * re-prefilled from their token ids), proves it (a cache prefilled fresh from the survivors must
 * equal the ledger's, next-token logits at max|delta| == 0), journals the deletion and signs a
 * certificate. *certificate_json receives its canonical JSON (free with fak_string_free); `reason`
 * (NUL-terminated, may be NULL) is journaled. The eviction is made on a copy and kept only with
 * its certificate, so on any failure the ledger is as it was. NOT_FOUND for an unknown id;
 * VERIFICATION_FAILED when the witness differs (no certificate; the journal records the refusal).
 * Caller frees *certificate_json with fak_string_free. One thread at a time per ledger; the auditor
 * may be shared. */
fak_status fak_ledger_evict(fak_ledger* ledger, const char* segment_id, fak_auditor* auditor, const char* reason,
                            char** certificate_json);
/* A new session holding a copy of the ledger's cache (to generate from it). Caller frees *out with
 * fak_session_free. Reads the ledger: not concurrently with a call that changes it. */
fak_status fak_ledger_session(const fak_ledger* ledger, fak_session** out);

/* Verifies a certificate against the journal file it names a row of and the issuer keys trusted
 * (n_keys hex public keys): the signature, the never-saw witness, the journal's chain and row, and
 * the evicted count re-counted from the journal. FAK_OK when every check passes;
 * INVALID_ARGUMENT for malformed JSON or keys; VERIFICATION_FAILED naming the first fault.
 * Borrows its arguments for the call. Thread-safe. */
fak_status fak_certificate_verify(const char* certificate_json, size_t json_len, const char* journal_path,
                                  const char* const* trusted_public_keys_hex, size_t n_keys);

/* ---- Text store: the durable source text, by sha256 ------------------------------------------ */

/* Content-addressed text with token ids cached per (text digest, tokenizer). Thread-safe. */
typedef struct fak_text_store fak_text_store;

/* Opens (creating if needed) a directory store at `dir` (atomic, fsync'd writes), or an in-memory
 * store when `dir` is NULL. Past capacity_bytes of text the least recently used texts are
 * evicted; 0 = never evict (text is the source of truth: choose a bound only for a cache tier).
 * CORRUPTION for a damaged store. Caller frees *out with fak_text_store_free. Thread-safe. */
fak_status fak_text_store_open(const char* dir, uint64_t capacity_bytes, fak_text_store** out);
/* NULL is a no-op. Not concurrently with other calls on the store. */
void fak_text_store_free(fak_text_store* store);
/* Stores `text` once per distinct content; its sha256 goes to `digest` (hex). Thread-safe. */
fak_status fak_text_store_put(fak_text_store* store, const char* text, size_t text_len,
                              char digest[FAK_DIGEST_HEX_SIZE]);
/* The verified bytes of `digest` (hex, NUL-terminated), NUL-terminated like fak_detokenize.
 * NOT_FOUND when absent; VERIFICATION_FAILED when the stored bytes do not hash to it. Thread-safe. */
fak_status fak_text_store_get(fak_text_store* store, const char* digest, char* text, size_t capacity,
                              size_t* n_bytes);
/* Erases the text and the token lists cached for it. NOT_FOUND when absent. Thread-safe. */
fak_status fak_text_store_remove(fak_text_store* store, const char* digest);
/* The text's token ids under `model`'s tokenizer, cached after the first call; buffers as
 * fak_tokenize. Borrows model. Thread-safe. */
fak_status fak_text_store_tokens(fak_text_store* store, const char* digest, const fak_model* model, int32_t* tokens,
                                 size_t capacity, size_t* n_tokens);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_FAK_H_ */
