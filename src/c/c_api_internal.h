// The C API's handles and its boundary helpers: what every src/c/*.cc shares. Private to src/c.
//
// A handle is a plain struct holding shared_ptrs to what it depends on, so a C host may free
// handles in any order: a session keeps its model (and, for a radix lookup, its tree) alive.
#ifndef FAK_SRC_C_C_API_INTERNAL_H_
#define FAK_SRC_C_C_API_INTERNAL_H_

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/audit/journal.h"
#include "fak/audit/signing_key.h"
#include "fak/c/fak.h"
#include "fak/core/status.h"
#include "fak/engine/engine.h"
#include "fak/kv/kv_cache.h"
#include "fak/model/loaded_model.h"
#include "fak/model/model.h"
#include "fak/model/sampler.h"
#include "fak/session/radix_tree.h"
#include "fak/session/segment_ledger.h"
#include "fak/store/blob_store.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/chat_template.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::capi {

// A loaded model with the tokenizer and chat template that go with it: the library's bundle
// (fak::LoadModel), always with a tokenizer here. Immutable once built.
using LoadedModel = ::fak::LoadedModel;

// A radix tree and the model it holds KV of (declared first: destroyed after the tree).
struct RadixHolder {
  std::shared_ptr<const LoadedModel> model;
  std::unique_ptr<RadixTree> tree;
};

// Records `status` as this thread's last error and returns its C code (FAK_OK for OK).
fak_status Report(const Status& status);

// Runs f() (returning Status) with nothing escaping: an exception becomes an error Status naming
// `fn`. Every exported function's body runs inside it.
template <class F>
fak_status Guard(const char* fn, F&& f) noexcept {
  try {
    Status s = f();
    if (s.ok()) return FAK_OK;
    return Report(Status(s.code(), std::string(fn) + ": " + std::string(s.message())));
  } catch (const std::bad_alloc&) {
    return Report(ResourceExhausted(std::string(fn) + ": out of memory"));
  } catch (const std::length_error& e) {
    return Report(ResourceExhausted(std::string(fn) + ": a size is too large (" + e.what() + ")"));
  } catch (const std::exception& e) {
    return Report(FailedPrecondition(std::string(fn) + ": unexpected error: " + e.what()));
  } catch (...) {
    return Report(FailedPrecondition(std::string(fn) + ": unexpected error"));
  }
}

// InvalidArgument naming a NULL argument.
inline Status NullArgument(const char* name) { return InvalidArgument(std::string(name) + " is NULL"); }
#define FAK_C_REQUIRE(ptr) \
  if ((ptr) == nullptr) return ::fak::capi::NullArgument(#ptr)

// Copies a caller's versioned input struct over `out` (already holding the defaults): the fields
// the caller's struct_size covers. NULL keeps the defaults.
template <class T>
Status ReadVersioned(const T* in, T* out, const char* name) {
  if (in == nullptr) return Status();
  if (in->struct_size < sizeof(size_t))
    return InvalidArgument(std::string(name) + ".struct_size is " + std::to_string(in->struct_size) +
                           ": fill the struct with its fak_*_init function");
  if (in->struct_size > sizeof(T))
    return Unsupported(std::string(name) + ".struct_size " + std::to_string(in->struct_size) + " exceeds this library's " +
                       std::to_string(sizeof(T)) + ": built against a newer fak ABI (fak_abi_version)");
  std::memcpy(static_cast<void*>(out), in, in->struct_size);
  out->struct_size = sizeof(T);
  return Status();
}

// Writes `full` to a caller's versioned output struct: the fields its struct_size covers. On
// return struct_size holds the bytes written, so a caller built against a newer header sees which
// of its fields this library filled.
template <class T>
Status WriteVersioned(const T& full, T* out, const char* name) {
  if (out->struct_size < sizeof(size_t))
    return InvalidArgument(std::string(name) + "->struct_size is " + std::to_string(out->struct_size) +
                           ": set it to sizeof the struct");
  const size_t n = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  std::memcpy(static_cast<void*>(out), &full, n);
  out->struct_size = n;
  return Status();
}

// Copies `values` into a caller buffer of `capacity`, reporting the count in *n (also on "too small").
template <class T>
Status CopyOut(std::span<const T> values, T* buffer, size_t capacity, size_t* n, const char* what) {
  if (n == nullptr) return InvalidArgument(std::string("the count pointer for ") + what + " is NULL");
  if (values.size() > capacity) {
    *n = values.size();
    return ResourceExhausted(std::string(what) + " need " + std::to_string(values.size()) + " elements, the buffer holds " +
                             std::to_string(capacity));
  }
  if (!values.empty()) {
    if (buffer == nullptr) return InvalidArgument(std::string("the buffer for ") + what + " is NULL");
    std::memcpy(buffer, values.data(), values.size() * sizeof(T));
  }
  *n = values.size();
  return Status();
}

// Copies `text` and a NUL into a caller buffer (capacity >= size + 1); *n_bytes excludes the NUL.
Status CopyText(std::string_view text, char* buffer, size_t capacity, size_t* n_bytes, const char* what);

// Writes a digest's hex and NUL to a FAK_DIGEST_HEX_SIZE buffer.
void WriteHex(const std::string& hex, char* out);

// A NUL-terminated hex digest from the caller, parsed.
Result<Digest> ParseDigest(const char* hex, const char* what);

// A caller's messages as ChatMessages (InvalidArgument naming a NULL field or unknown role).
Result<std::vector<ChatMessage>> ReadMessages(const fak_chat_message* messages, size_t n_messages);

// A caller's tenant (NULL = the default), checked.
Result<std::string> ReadTenant(const char* tenant);

// The caller's sampling parameters (NULL = greedy), validated (c_api_session.cc).
Result<SamplingParams> ReadSampling(const fak_sampling_params* in);
// Writes `lp` as fak_logprobs does (out[0] the chosen token's, then the top); INVALID_ARGUMENT when
// `capacity` cannot hold it.
Status WriteLogprobs(const TokenLogprobs& lp, fak_token_logprob* out, size_t capacity, size_t* n_out);

}  // namespace fak::capi

// ---- The handles (global: the C header declares them as `struct fak_x`). ----

struct fak_model {
  std::shared_ptr<const fak::capi::LoadedModel> loaded;
};

struct fak_radix {
  std::shared_ptr<fak::capi::RadixHolder> holder;
};

struct fak_session {
  std::shared_ptr<const fak::capi::LoadedModel> model;
  std::shared_ptr<fak::capi::RadixHolder> tree;  // set when the cache reads a tree's slabs
  fak::KVCache cache;
  fak::Lease lease;            // keeps the tree path from eviction; released before `tree`
  std::vector<float> logits;   // the latest next-token logits; empty when none
};

#endif  // FAK_SRC_C_C_API_INTERNAL_H_
