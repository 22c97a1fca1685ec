// KVBytes: the byte vector that holds a slab's K, Kraw or V. Growing it leaves the new bytes
// unwritten, since they are always overwritten whole right after (a copy out of a cache, a read from
// a KV tier): zeroing 200 MB first costs as much as the read, and on a single thread. Buffers of
// 2 MiB and more are 2 MiB-aligned and ask for 2 MiB pages, which fault in far faster.
#ifndef FAK_KV_KV_BYTES_H_
#define FAK_KV_KV_BYTES_H_

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "fak/core/export.h"

namespace fak {

// The allocation behind KVBytes; throws std::bad_alloc. Free with the same size.
FAK_EXPORT void* AllocateKVBytes(size_t bytes);
FAK_EXPORT void FreeKVBytes(void* p, size_t bytes) noexcept;

template <class T>
struct KVBytesAllocator {
  using value_type = T;
  KVBytesAllocator() = default;
  template <class U>
  KVBytesAllocator(const KVBytesAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(AllocateKVBytes(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { FreeKVBytes(p, n * sizeof(T)); }
  // Default-initialises: for bytes, nothing is written.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  friend bool operator==(const KVBytesAllocator&, const KVBytesAllocator<U>&) {
    return true;
  }
};

using KVBytes = std::vector<std::byte, KVBytesAllocator<std::byte>>;

}  // namespace fak

#endif  // FAK_KV_KV_BYTES_H_
