// MappedFile: open + fstat + mmap with errno-named errors.
#include "src/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fak::internal {

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IOError(path + ": open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return IOError(path + ": fstat: " + std::strerror(e));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {  // mmap of 0 bytes fails; an empty file is an empty span
    void* addr = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return IOError(path + ": mmap: " + std::strerror(e));
    }
    file->addr_ = addr;
  }
  ::close(fd);  // the mapping keeps the file alive
  return file;
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) munmap(addr_, size_);
}

}  // namespace fak::internal
