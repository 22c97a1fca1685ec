// KVBytes' allocation: 2 MiB-aligned with a 2 MiB-page hint from 2 MiB up, plain below.
#include "fak/kv/kv_bytes.h"

#include <sys/mman.h>

namespace fak {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

void* AllocateKVBytes(size_t bytes) {
  if (bytes < kHugePage) return ::operator new(bytes);
  void* p = ::operator new(bytes, std::align_val_t{kHugePage});
  // A hint, before the first write so the pages fault in whole; a kernel without THP refuses it
  // and nothing else changes.
  (void)madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return p;
}

void FreeKVBytes(void* p, size_t bytes) noexcept {
  if (bytes < kHugePage) {
    ::operator delete(p);
  } else {
    ::operator delete(p, std::align_val_t{kHugePage});
  }
}

}  // namespace fak
