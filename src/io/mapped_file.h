// MappedFile: a whole file mapped read-only (mmap, MAP_PRIVATE), unmapped on destruction. The
// GGUF and safetensors readers hand out zero-copy views into it. Immutable; thread-safe.
#ifndef FAK_SRC_IO_MAPPED_FILE_H_
#define FAK_SRC_IO_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "fak/core/status.h"

namespace fak::internal {

class MappedFile {
 public:
  // IOError naming the path and the failing call.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(addr_), size_}; }

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fak::internal

#endif  // FAK_SRC_IO_MAPPED_FILE_H_
