// KVDtype: the element type a KV cache stores its keys (K, Kraw) and values (V) in.
//
// Part of the numeric regime (architecture §2) and of the cache binding's precision axis: f16 and
// bf16 halve the cache, and a value is rounded once, when it is written, so every witness that
// holds for f32 holds inside each regime — but results differ between regimes, so KV of one is
// never served to another. Attention reads the stored elements directly (kernels.md).
#ifndef FAK_KERNELS_KV_DTYPE_H_
#define FAK_KERNELS_KV_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fak {

enum class KVDtype : uint8_t {
  kF32 = 0,   // 4 bytes; the values exactly as computed
  kF16 = 1,   // 2 bytes; IEEE binary16, round to nearest even
  kBF16 = 2,  // 2 bytes; bfloat16, round to nearest even
};

constexpr size_t KVDtypeBytes(KVDtype d) { return d == KVDtype::kF32 ? 4 : 2; }

// "f32", "f16" or "bf16": the binding's kv_dtype label.
constexpr std::string_view KVDtypeName(KVDtype d) {
  switch (d) {
    case KVDtype::kF16: return "f16";
    case KVDtype::kBF16: return "bf16";
    default: return "f32";
  }
}

// The dtype a label names, or nothing for an unknown label.
constexpr std::optional<KVDtype> ParseKVDtype(std::string_view name) {
  for (KVDtype d : {KVDtype::kF32, KVDtype::kF16, KVDtype::kBF16})
    if (KVDtypeName(d) == name) return d;
  return std::nullopt;
}

}  // namespace fak

#endif  // FAK_KERNELS_KV_DTYPE_H_
