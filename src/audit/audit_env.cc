// AuditEnv::Default(): POSIX files with fsync, and the system clock.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "fak/audit/audit.h"

namespace fak {
namespace {

Status Errno(std::string_view op, const std::string& path) {
  return IOError(std::string(op) + " " + path + ": " + std::strerror(errno));
}

// Makes a new directory entry durable: fsync the parent directory.
Status SyncParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::Ok() : Errno("fsync directory", dir);
}

class PosixAppendFile final : public AuditAppendFile {
 public:
  PosixAppendFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixAppendFile() override { ::close(fd_); }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("write", path_);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  Status Sync() override { return ::fsync(fd_) == 0 ? Status::Ok() : Errno("fsync", path_); }

 private:
  std::string path_;
  int fd_;
};

class PosixAuditEnv final : public AuditEnv {
 public:
  Result<std::string> ReadFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return NotFound("no file " + path);
      return Errno("open", path);
    }
    std::string out;
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Status s = Errno("read", path);
        ::close(fd);
        return s;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
  }

  Result<std::unique_ptr<AuditAppendFile>> OpenAppendable(const std::string& path) override {
    const bool existed = ::access(path.c_str(), F_OK) == 0;
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open for append", path);
    if (!existed) {
      Status s = SyncParentDir(path);
      if (!s.ok()) {
        ::close(fd);
        return s;
      }
    }
    return std::unique_ptr<AuditAppendFile>(new PosixAppendFile(path, fd));
  }

  Status Truncate(const std::string& path, uint64_t size_bytes) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open for truncate", path);
    Status s;
    if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) s = Errno("truncate", path);
    else if (::fsync(fd) != 0) s = Errno("fsync", path);
    ::close(fd);
    return s;
  }

  int64_t NowUnixMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }
};

}  // namespace

AuditEnv* AuditEnv::Default() {
  static PosixAuditEnv* env = new PosixAuditEnv();  // never destroyed: usable during shutdown
  return env;
}

}  // namespace fak
