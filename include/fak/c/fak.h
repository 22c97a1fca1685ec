/* fak's C API: a stable C99 ABI over the C++ library, for C hosts and for bindings (Python, Rust,
 * Go, any FFI). Include this one header; the conventions every function follows (handles, status
 * codes, buffers, versioning, thread-safety) are at the top of fak/c/base.h, and docs/c-api.md has
 * the policy and an example. */
#ifndef FAK_C_FAK_H_
#define FAK_C_FAK_H_

#include "fak/c/base.h"
#include "fak/c/model.h"
#include "fak/c/session.h"
#include "fak/c/engine.h"
#include "fak/c/eviction.h"
#include "fak/c/text_store.h"

#endif /* FAK_C_FAK_H_ */
