/* fak's C API, base: versions, status codes and the handle types, included by every fak/c header
 * (programs include fak/c/fak.h). docs/c-api.md has the versioning policy and an example.
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
#ifndef FAK_C_BASE_H_
#define FAK_C_BASE_H_

#include <stddef.h>
#include <stdint.h>

#include "fak/core/export.h" /* FAK_EXPORT: what the library exports */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions and errors ---------------------------------------------------------------------- */

/* The ABI this header describes: (major << 16) | minor. A library answers the same major and a
 * minor >= the header's when it can serve a program built against this header. */
#define FAK_ABI_VERSION_MAJOR 1
#define FAK_ABI_VERSION_MINOR 4
#define FAK_ABI_VERSION ((FAK_ABI_VERSION_MAJOR << 16) | FAK_ABI_VERSION_MINOR)

/* The ABI of the linked library (compare with FAK_ABI_VERSION). Thread-safe. */
FAK_EXPORT uint32_t fak_abi_version(void);
/* The library's version, e.g. "0.1.0" (static storage). Thread-safe. */
FAK_EXPORT const char* fak_version_string(void);

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
FAK_EXPORT const char* fak_status_name(fak_status status);
/* The message of the last failed call on this thread ("" after none). Valid until the next fak
 * call on this thread; copy it to keep it. Thread-safe (each thread has its own). */
FAK_EXPORT const char* fak_last_error(void);
/* Frees a string the library allocated (certificate JSON). NULL is a no-op. Thread-safe. */
FAK_EXPORT void fak_string_free(char* s);

/* A sha256 as 64 lowercase hex characters and a NUL. */
#define FAK_DIGEST_HEX_SIZE 65

/* The kernel tier in use, a registered tier's name ("scalar", "avx2", "avx512_skx", "avx512" on
 * x86-64; static storage). Results are bit-exact within one tier and differ in rounding across
 * tiers. Thread-safe. */
FAK_EXPORT const char* fak_kernel_tier(void);
/* FAK_OK, or the error that the environment variable FAK_KERNEL_TIER names an unknown tier or one
 * this CPU lacks (the library then runs the best supported tier). Thread-safe. */
FAK_EXPORT fak_status fak_kernel_tier_check(void);


/* ---- Handles (opaque; each header below says what makes and frees them) ---- */

typedef struct fak_model fak_model;
typedef struct fak_session fak_session;
typedef struct fak_sampler fak_sampler;
typedef struct fak_engine fak_engine;
typedef struct fak_radix fak_radix;
typedef struct fak_result fak_result;
typedef struct fak_auditor fak_auditor;
typedef struct fak_ledger fak_ledger;
typedef struct fak_text_store fak_text_store;


#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FAK_C_BASE_H_ */
