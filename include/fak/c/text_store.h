/* fak C API: the text store, the durable source text by sha256 (conventions: fak/c/base.h). */
#ifndef FAK_C_TEXT_STORE_H_
#define FAK_C_TEXT_STORE_H_

#include "fak/c/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Text store: the durable source text, by sha256 ------------------------------------------ */

/* Content-addressed text with token ids cached per (text digest, tokenizer). Thread-safe. */

/* Opens (creating if needed) a directory store at `dir` (atomic, fsync'd writes), or an in-memory
 * store when `dir` is NULL. Past capacity_bytes of text the least recently used texts are
 * evicted; 0 = never evict (text is the source of truth: choose a bound only for a cache tier).
 * CORRUPTION for a damaged store. Caller frees *out with fak_text_store_free. Thread-safe. */
FAK_EXPORT fak_status fak_text_store_open(const char* dir, uint64_t capacity_bytes, fak_text_store** out);
/* NULL is a no-op. Not concurrently with other calls on the store. */
FAK_EXPORT void fak_text_store_free(fak_text_store* store);
/* Stores `text` once per distinct content; its sha256 goes to `digest` (hex). Thread-safe. */
FAK_EXPORT fak_status fak_text_store_put(fak_text_store* store, const char* text, size_t text_len,
                              char digest[FAK_DIGEST_HEX_SIZE]);
/* The verified bytes of `digest` (hex, NUL-terminated), NUL-terminated like fak_detokenize.
 * NOT_FOUND when absent; VERIFICATION_FAILED when the stored bytes do not hash to it. Thread-safe. */
FAK_EXPORT fak_status fak_text_store_get(fak_text_store* store, const char* digest, char* text, size_t capacity,
                              size_t* n_bytes);
/* Erases the text and the token lists cached for it. NOT_FOUND when absent. Thread-safe. */
FAK_EXPORT fak_status fak_text_store_remove(fak_text_store* store, const char* digest);
/* The text's token ids under `model`'s tokenizer, cached after the first call; buffers as
 * fak_tokenize. Borrows model. Thread-safe. */
FAK_EXPORT fak_status fak_text_store_tokens(fak_text_store* store, const char* digest, const fak_model* model, int32_t* tokens,
                                 size_t capacity, size_t* n_tokens);


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_TEXT_STORE_H_ */
