/* fak C API: ledgers, eviction with a signed deletion certificate, verification (conventions: fak/c/base.h). */
#ifndef FAK_C_EVICTION_H_
#define FAK_C_EVICTION_H_

#include "fak/c/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Ledger, eviction with a deletion certificate, verification ------------------------------ */

/* Signs certificates and journals deletions: an ed25519 key and an append-only, hash-chained,
 * fsync'd journal file (held exclusively while open). Thread-safe (calls are serialized). */

/* Writes a new ed25519 key as PKCS#8 PEM (mode 0600) to `pem_path` and its public key's hex to
 * `public_key_hex` (may be NULL). FAILED_PRECONDITION / IO_ERROR when the file exists or cannot be
 * written. Thread-safe. */
FAK_EXPORT fak_status fak_key_generate(const char* pem_path, char public_key_hex[FAK_DIGEST_HEX_SIZE]);
/* Opens (or creates) the journal at `journal_path` and loads the key at `key_pem_path` (owner-only
 * file). FAILED_PRECONDITION when another opener holds the journal or the key file is too open;
 * CORRUPTION for a damaged journal.
 * Caller frees *out with fak_auditor_free (which releases the journal). Thread-safe. */
FAK_EXPORT fak_status fak_auditor_open(const char* journal_path, const char* key_pem_path, fak_auditor** out);
/* NULL is a no-op. Not concurrently with other calls on the auditor. */
FAK_EXPORT void fak_auditor_free(fak_auditor* auditor);
/* The signing key's public half, hex. Thread-safe. */
FAK_EXPORT fak_status fak_auditor_public_key(const fak_auditor* auditor, char public_key_hex[FAK_DIGEST_HEX_SIZE]);

/* Named segments (system prompt, user turn, tool result) laid end to end over one cache, each
 * evictable by name. One thread at a time. */

/* An empty ledger over a new cache of `model`, holding a reference to the model. Caller frees *out
 * with fak_ledger_free. Thread-safe. */
FAK_EXPORT fak_status fak_ledger_new(const fak_model* model, fak_ledger** out);
/* NULL is a no-op. Not concurrently with other calls on the ledger. */
FAK_EXPORT void fak_ledger_free(fak_ledger* ledger);
/* Tokenizes `text` (its sha256 is the segment's source digest) and prefills it as segment
 * `segment_id` (NUL-terminated, unique in the ledger); logits as fak_prefill. INVALID_ARGUMENT
 * for a duplicate or empty id or text that makes no tokens.
 * Changes the ledger: one thread at a time per ledger. */
FAK_EXPORT fak_status fak_ledger_append(fak_ledger* ledger, const char* segment_id, const char* text, size_t text_len,
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
FAK_EXPORT fak_status fak_ledger_evict(fak_ledger* ledger, const char* segment_id, fak_auditor* auditor, const char* reason,
                            char** certificate_json);
/* A new session holding a copy of the ledger's cache (to generate from it). Caller frees *out with
 * fak_session_free. Reads the ledger: not concurrently with a call that changes it. */
FAK_EXPORT fak_status fak_ledger_session(const fak_ledger* ledger, fak_session** out);

/* Verifies a certificate against the journal file it names a row of and the issuer keys trusted
 * (n_keys hex public keys): the signature, the never-saw witness, the journal's chain and row, and
 * the evicted count re-counted from the journal. FAK_OK when every check passes;
 * INVALID_ARGUMENT for malformed JSON or keys; VERIFICATION_FAILED naming the first fault.
 * Borrows its arguments for the call. Thread-safe. */
FAK_EXPORT fak_status fak_certificate_verify(const char* certificate_json, size_t json_len, const char* journal_path,
                                  const char* const* trusted_public_keys_hex, size_t n_keys);


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_EVICTION_H_ */
