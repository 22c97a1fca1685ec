// The C API's common part: versions, status names, the per-thread last error, buffer helpers.
#include <cstdlib>
#include <string>

#include "fak/core/version.h"
#include "fak/gate/kv_manifest.h"
#include "fak/kernels/kernel_tier.h"
#include "src/c/c_api_internal.h"

namespace fak::capi {
namespace {

// The message of this thread's last failed call (fak_last_error).
thread_local std::string g_last_error;  // NOLINT: per-thread by design, not shared state

}  // namespace

fak_status Report(const Status& status) {
  if (status.ok()) return FAK_OK;
  try {
    g_last_error.assign(status.message());
  } catch (...) {
    g_last_error.clear();  // out of memory while reporting: the code still says what happened
  }
  return static_cast<fak_status>(static_cast<int>(status.code()));
}

Status CopyText(std::string_view text, char* buffer, size_t capacity, size_t* n_bytes, const char* what) {
  if (n_bytes == nullptr) return InvalidArgument(std::string("the length pointer for ") + what + " is NULL");
  if (text.size() + 1 > capacity) {
    *n_bytes = text.size();
    return ResourceExhausted(std::string(what) + " needs " + std::to_string(text.size() + 1) +
                             " bytes with its NUL, the buffer holds " + std::to_string(capacity));
  }
  if (buffer == nullptr) return InvalidArgument(std::string("the buffer for ") + what + " is NULL");
  if (!text.empty()) std::memcpy(buffer, text.data(), text.size());
  buffer[text.size()] = '\0';
  *n_bytes = text.size();
  return Status();
}

void WriteHex(const std::string& hex, char* out) {
  std::memcpy(out, hex.c_str(), FAK_DIGEST_HEX_SIZE - 1);
  out[FAK_DIGEST_HEX_SIZE - 1] = '\0';
}

Result<Digest> ParseDigest(const char* hex, const char* what) {
  if (hex == nullptr) return NullArgument(what);
  Result<Digest> d = Digest::FromHex(hex);
  if (!d) return InvalidArgument(std::string(what) + ": " + std::string(d.error().message()));
  return d;
}

Result<std::vector<ChatMessage>> ReadMessages(const fak_chat_message* messages, size_t n_messages) {
  if (n_messages > 0 && messages == nullptr) return NullArgument("messages");
  std::vector<ChatMessage> out;
  out.reserve(n_messages);
  for (size_t i = 0; i < n_messages; ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (messages[i].role == nullptr) return NullArgument((at + ".role").c_str());
    if (messages[i].content == nullptr) return NullArgument((at + ".content").c_str());
    Result<ChatRole> role = ParseChatRole(messages[i].role);
    if (!role) return InvalidArgument(at + ": " + std::string(role.error().message()));
    out.push_back({*role, messages[i].content});
  }
  return out;
}

Result<std::string> ReadTenant(const char* tenant) {
  std::string name = tenant == nullptr ? std::string(kDefaultTenant) : std::string(tenant);
  if (!IsValidTenant(name)) return InvalidArgument("tenant '" + name + "' is not a valid tenant name");
  return name;
}

}  // namespace fak::capi

using fak::capi::Guard;

extern "C" {

uint32_t fak_abi_version(void) { return FAK_ABI_VERSION; }

const char* fak_version_string(void) {
  try {
    static const std::string version(fak::LibraryVersion());
    return version.c_str();
  } catch (...) {
    return "";
  }
}

const char* fak_status_name(fak_status status) {
  switch (status) {
    case FAK_OK: return "OK";
    case FAK_INVALID_ARGUMENT: return "InvalidArgument";
    case FAK_NOT_FOUND: return "NotFound";
    case FAK_CORRUPTION: return "Corruption";
    case FAK_IO_ERROR: return "IOError";
    case FAK_UNSUPPORTED: return "Unsupported";
    case FAK_RESOURCE_EXHAUSTED: return "ResourceExhausted";
    case FAK_FAILED_PRECONDITION: return "FailedPrecondition";
    case FAK_VERIFICATION_FAILED: return "VerificationFailed";
    case FAK_UNAVAILABLE: return "Unavailable";
  }
  return "Unknown";
}

const char* fak_last_error(void) { return fak::capi::g_last_error.c_str(); }

void fak_string_free(char* s) { std::free(s); }

const char* fak_kernel_tier(void) { return fak::ActiveKernelTier().data(); }  // NUL-terminated, static

fak_status fak_kernel_tier_check(void) {
  return Guard("fak_kernel_tier_check", [] { return fak::KernelTierEnvironmentStatus(); });
}

}  // extern "C"

// fak_status mirrors fak::StatusCode value for value (Report casts one to the other).
static_assert(FAK_OK == static_cast<int>(fak::StatusCode::kOk));
static_assert(FAK_INVALID_ARGUMENT == static_cast<int>(fak::StatusCode::kInvalidArgument));
static_assert(FAK_NOT_FOUND == static_cast<int>(fak::StatusCode::kNotFound));
static_assert(FAK_CORRUPTION == static_cast<int>(fak::StatusCode::kCorruption));
static_assert(FAK_IO_ERROR == static_cast<int>(fak::StatusCode::kIOError));
static_assert(FAK_UNSUPPORTED == static_cast<int>(fak::StatusCode::kUnsupported));
static_assert(FAK_RESOURCE_EXHAUSTED == static_cast<int>(fak::StatusCode::kResourceExhausted));
static_assert(FAK_FAILED_PRECONDITION == static_cast<int>(fak::StatusCode::kFailedPrecondition));
static_assert(FAK_VERIFICATION_FAILED == static_cast<int>(fak::StatusCode::kVerificationFailed));
static_assert(FAK_UNAVAILABLE == static_cast<int>(fak::StatusCode::kUnavailable));
