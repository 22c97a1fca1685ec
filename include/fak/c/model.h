/* fak C API: models, their tokenizer and chat template (conventions: fak/c/base.h). */
#ifndef FAK_C_MODEL_H_
#define FAK_C_MODEL_H_

#include "fak/c/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Model, tokenizer, chat template ---------------------------------------------------------- */

/* A model with its tokenizer and chat template. Immutable: thread-safe. */

/* The most threads fak_model_options.n_threads may ask for (fak::kMaxModelThreads). */
#define FAK_MAX_MODEL_THREADS 1024

typedef struct fak_model_options {
  size_t struct_size;
  /* NUL-terminated model name, as the fak tool takes it: a path of a GGUF file or Hugging Face
   * checkpoint, "embedded" (the embedded default model: synthetic weights, byte tokenizer, the
   * "fak" chat template) or "embedded:SEED" (the same with the weights of SEED). NULL = "embedded".
   * The tool's shape-only names ("shape:...") have no tokenizer and are refused. Default: NULL. */
  const char* path;
  /* Threads of one forward pass, at most FAK_MAX_MODEL_THREADS (more is INVALID_ARGUMENT naming
   * the limit); 0 = one per hardware thread. Default: 0. */
  size_t n_threads;
  /* Cap on the context length below the file's; 0 = the file's. Default: 0. */
  size_t max_context;
  /* Seed of the embedded model's weights for path NULL or "embedded" ("embedded:SEED" names its
   * own; ignored with a file). Default: 2026, the weights the fak tool and examples use. */
  uint64_t seed;
  /* NUL-terminated KV cache element type: "f16", "f32" or "bf16" (docs/kv-regimes.md; another name
   * is INVALID_ARGUMENT). NULL = the environment variable FAK_KV_DTYPE when set, else "f16": half
   * f32's bytes, every exactness witness still holding inside the regime. Default: NULL. */
  const char* kv_dtype;
} fak_model_options;

/* Fills `options` with the defaults above (struct_size included). NULL is a no-op.
 * Thread-safe (touches only *options). */
FAK_EXPORT void fak_model_options_init(fak_model_options* options);

/* Loads a model with its tokenizer (GGUF metadata, or tokenizer.json beside a checkpoint) and chat
 * template (the file's own, else the family its architecture names; the same model bundle the fak
 * tool, Python and fak serve load: fak/model/loaded_model.h). `options` NULL = all defaults. On success *out owns the model: free it with
 * fak_model_free. Errors: INVALID_ARGUMENT (out NULL, bad struct_size, a malformed
 * "embedded:SEED", n_threads past FAK_MAX_MODEL_THREADS), RESOURCE_EXHAUSTED (the OS refused the
 * threads), FAILED_PRECONDITION (a name without a tokenizer), NOT_FOUND / IO_ERROR (path,
 * or no tokenizer), CORRUPTION / UNSUPPORTED (the file). A model file without a recognised chat
 * template still loads; fak_chat_render then fails with its reason. Thread-safe. */
FAK_EXPORT fak_status fak_model_load(const fak_model_options* options, fak_model** out);
/* Drops the caller's reference; sessions, engines and trees made from it keep it alive.
 * Thread-safe; must not race with calls on the same handle. */
FAK_EXPORT void fak_model_free(fak_model* model);

typedef struct fak_model_info {
  size_t struct_size;
  size_t vocab_size;      /* logits per position */
  size_t context_length;  /* tokens a session can hold */
  size_t n_layers;
  int32_t bos_id, eos_id; /* -1: none */
  int add_bos;            /* nonzero when prompts should start with bos_id */
  char model_digest[FAK_DIGEST_HEX_SIZE];  /* sha256 of config and weights (first call hashes them) */
  char kv_dtype[8];       /* NUL-terminated KV cache element type: "f16", "f32" or "bf16" */
} fak_model_info;

/* Fills `info` (set info->struct_size first; fields past it are not written). Thread-safe. */
FAK_EXPORT fak_status fak_model_info_get(const fak_model* model, fak_model_info* info);

/* Token ids of `text` (no BOS added; special-token texts become their ids). Writes at most
 * `capacity` ids to `tokens` and their count to *n_tokens; RESOURCE_EXHAUSTED with the count
 * needed in *n_tokens when capacity is too small (tokens may be NULL when capacity is 0).
 * Borrows model. Thread-safe. */
FAK_EXPORT fak_status fak_tokenize(const fak_model* model, const char* text, size_t text_len, int32_t* tokens,
                        size_t capacity, size_t* n_tokens);
/* The bytes `tokens` stand for, NUL-terminated: *n_bytes excludes the NUL, so capacity must be at
 * least *n_bytes + 1 (RESOURCE_EXHAUSTED reports *n_bytes otherwise). INVALID_ARGUMENT for an id
 * outside the vocabulary. Borrows model. Thread-safe. */
FAK_EXPORT fak_status fak_detokenize(const fak_model* model, const int32_t* tokens, size_t n_tokens, char* text,
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
FAK_EXPORT fak_status fak_chat_render(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                           int add_generation_prompt, char* text, size_t capacity, size_t* n_bytes);
/* The same conversation as token ids, tokenized as the engine does: the template's markup becomes
 * its special tokens, a message's content never does (no BOS to add). Buffers as fak_tokenize.
 * Borrows model and messages. Thread-safe. */
FAK_EXPORT fak_status fak_chat_tokenize(const fak_model* model, const fak_chat_message* messages, size_t n_messages,
                             int add_generation_prompt, int32_t* tokens, size_t capacity, size_t* n_tokens);


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_MODEL_H_ */
