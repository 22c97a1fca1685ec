// Env::Default(): the POSIX Env. The only file in src/ that calls open, fsync, rename, flock, mmap
// and friends; everything else reaches the operating system through an Env so tests can fault it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "fak/core/env.h"

namespace fak {
namespace {

// IOError naming the call, the path and errno; NotFound for ENOENT so callers can tell absence
// from failure. `err` is passed in because building the message may clobber errno.
Status PosixError(std::string_view call, const std::string& path, int err) {
  std::string m = std::string(call) + " '" + path + "': " + std::strerror(err) + " (errno " + std::to_string(err) + ")";
  if (err == ENOENT) return NotFound(std::move(m));
  return IOError(std::move(m));
}

FileInfo InfoFromStat(std::string name, const struct stat& st) {
  FileInfo info;
  info.name = std::move(name);
  info.is_regular = S_ISREG(st.st_mode);
  info.is_dir = S_ISDIR(st.st_mode);
  info.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  info.size_bytes = static_cast<uint64_t>(st.st_size);
  info.mode = static_cast<uint32_t>(st.st_mode & 07777);
  return info;
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return FailedPrecondition("append to '" + path_ + "': file is closed");
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return PosixError("write", path_, errno);
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return FailedPrecondition("sync '" + path_ + "': file is closed");
    // fdatasync: the data and the size (needed to read it back), not the mtime.
    return ::fdatasync(fd_) == 0 ? Status::Ok() : PosixError("fdatasync", path_, errno);
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? Status::Ok() : PosixError("close", path_, errno);
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixMapping final : public ReadOnlyMapping {
 public:
  PosixMapping(void* addr, size_t size) : addr_(addr), size_(size) {}
  ~PosixMapping() override {
    if (addr_ != nullptr) ::munmap(addr_, size_);
  }
  std::span<const uint8_t> bytes() const override { return {static_cast<const uint8_t*>(addr_), size_}; }

 private:
  void* const addr_;  // nullptr for an empty file: mmap of 0 bytes fails, so nothing is mapped
  const size_t size_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, std::span<std::byte> out) const override {
    FAK_RETURN_IF_ERROR(CheckReadRange(size_, offset, out.size()));
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return PosixError("read", path_, errno);
      if (n == 0) return Corruption("'" + path_ + "' ended at " + std::to_string(offset + got) + " bytes; it was " +
                                    std::to_string(size_) + " when opened");
      got += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

 private:
  const std::string path_;
  const int fd_;
  const uint64_t size_;
};

class PosixEnv;

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(PosixEnv* env, int fd, std::pair<dev_t, ino_t> id) : env_(env), fd_(fd), id_(id) {}
  ~PosixFileLock() override;

 private:
  PosixEnv* const env_;
  const int fd_;
  const std::pair<dev_t, ino_t> id_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return OpenForWrite(path, O_WRONLY | O_CREAT | O_TRUNC, "open for writing");
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return OpenForWrite(path, O_WRONLY | O_CREAT | O_APPEND, "open for appending");
  }

  Result<std::unique_ptr<WritableFile>> NewPrivateFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST) return FailedPrecondition("'" + path + "' already exists; refusing to overwrite it");
      return PosixError("create private file", path, errno);
    }
    // 0600 whatever the umask or a default ACL would have made of it.
    if (::fchmod(fd, 0600) != 0) {
      Status s = PosixError("chmod 600", path, errno);
      ::close(fd);
      ::unlink(path.c_str());
      return s;
    }
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<std::string> ReadFile(const std::string& path) override { return Read(path, SIZE_MAX, O_NOFOLLOW); }
  Result<std::string> ReadFilePrefix(const std::string& path, size_t max_bytes) override {
    return Read(path, max_bytes, O_NOFOLLOW);
  }
  Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes) override { return Read(path, max_bytes, 0); }

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    FAK_ASSIGN_OR_RETURN(const RegularFile f, OpenRegular(path, O_NOFOLLOW));
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, f.fd, f.size));
  }

  Result<FileInfo> GetFileInfo(const std::string& path) override { return Stat(path, /*follow_links=*/false); }
  Result<FileInfo> GetTargetInfo(const std::string& path) override { return Stat(path, /*follow_links=*/true); }

  Result<std::unique_ptr<ReadOnlyMapping>> MapReadOnly(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = PosixError("fstat", path, errno);
      ::close(fd);
      return s;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return IOError("mmap '" + path + "': not a regular file");
    }
    const size_t size = static_cast<size_t>(st.st_size);
    void* addr = nullptr;
    if (size > 0) {
      addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (addr == MAP_FAILED) {
        Status s = PosixError("mmap", path, errno);
        ::close(fd);
        return s;
      }
    }
    ::close(fd);  // the mapping keeps the file alive
    return std::unique_ptr<ReadOnlyMapping>(new PosixMapping(addr, size));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) == 0) return Status::Ok();
    return PosixError("rename to '" + to + "' from", from, errno);
  }

  Status RemoveFile(const std::string& path) override {
    return ::unlink(path.c_str()) == 0 ? Status::Ok() : PosixError("unlink", path, errno);
  }

  Status TruncateFile(const std::string& path, uint64_t size_bytes) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return PosixError("open for truncate", path, errno);
    Status s;
    if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) s = PosixError("ftruncate", path, errno);
    ::close(fd);
    return s;
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return Status::Ok();
    const int err = errno;
    struct stat st;
    if (err == EEXIST && ::lstat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return Status::Ok();
      return FailedPrecondition("'" + path + "' exists and is not a directory");
    }
    return PosixError("mkdir", path, err);
  }

  Status RemoveDir(const std::string& path) override {
    return ::rmdir(path.c_str()) == 0 ? Status::Ok() : PosixError("rmdir", path, errno);
  }

  Status SyncDir(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError("open directory", path, errno);
    Status s;
    if (::fsync(fd) != 0) s = PosixError("fsync directory", path, errno);
    ::close(fd);
    return s;
  }

  Result<std::vector<FileInfo>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return PosixError("opendir", path, errno);
    std::vector<FileInfo> out;
    while (dirent* ent = ::readdir(dir)) {
      const std::string_view name = ent->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::fstatat(::dirfd(dir), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        out.push_back(InfoFromStat(std::string(name), st));
      } else {
        FileInfo info;  // vanished between readdir and lstat: neither regular nor a directory
        info.name = std::string(name);
        out.push_back(std::move(info));
      }
    }
    ::closedir(dir);
    return out;
  }

  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError("open lock file", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      Status s = PosixError("fstat lock file", path, errno);
      ::close(fd);
      return s;
    }
    // flock is per open file description, so a second open in this process would get the lock
    // again: the set of inodes locked here is what makes two holders in one process conflict.
    const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    std::lock_guard lock(locks_mu_);
    if (locked_.contains(id)) {
      ::close(fd);
      return FailedPrecondition("lock '" + path + "' is already held in this process");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return FailedPrecondition("lock '" + path + "' is held by another process");
      return PosixError("flock", path, err);
    }
    locked_.insert(id);
    return std::unique_ptr<FileLock>(new PosixFileLock(this, fd, id));
  }

  int64_t NowUnixMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  int64_t NowMonotonicNanos() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  void Unlock(std::pair<dev_t, ino_t> id) {
    std::lock_guard lock(locks_mu_);
    locked_.erase(id);
  }

 private:
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path, int flags, std::string_view call) {
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError(call, path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<FileInfo> Stat(const std::string& path, bool follow_links) {
    struct stat st;
    if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
      return PosixError(follow_links ? "stat" : "lstat", path, errno);
    }
    const size_t slash = path.find_last_of('/');
    return InfoFromStat(slash == std::string::npos ? path : path.substr(slash + 1), st);
  }

  struct RegularFile {
    int fd;
    uint64_t size;  // at open
  };
  // `path` opened for reading when it is a regular file. `nofollow`: O_NOFOLLOW for store files
  // (a link is refused), 0 for input files a caller named.
  static Result<RegularFile> OpenRegular(const std::string& path, int nofollow) {
    // O_NONBLOCK: opening a planted FIFO must not hang; it is rejected as not regular below.
    const int fd = ::open(path.c_str(), O_RDONLY | nofollow | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ELOOP) return Corruption("'" + path + "' is a symbolic link; links are never followed");
      return PosixError("open", path, err);
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Corruption("'" + path + "' is not a regular file");
    }
    return RegularFile{fd, static_cast<uint64_t>(st.st_size)};
  }

  Result<std::string> Read(const std::string& path, size_t max_bytes, int nofollow) {
    FAK_ASSIGN_OR_RETURN(const RegularFile f, OpenRegular(path, nofollow));
    const int fd = f.fd;
    std::string out;
    try {  // a file's size is its writer's word (a sparse file claims any size): fail, never throw
      out.resize(std::min(max_bytes, static_cast<size_t>(f.size)));
    } catch (const std::exception&) {
      ::close(fd);
      return ResourceExhausted("'" + path + "' is " + std::to_string(f.size) + " bytes, more than can be held in memory");
    }
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Status s = PosixError("read", path, errno);
        ::close(fd);
        return s;
      }
      if (n == 0) break;  // shrank since fstat
      got += static_cast<size_t>(n);
    }
    ::close(fd);
    out.resize(got);
    return out;
  }

  std::mutex locks_mu_;
  std::set<std::pair<dev_t, ino_t>> locked_;  // GUARDED_BY(locks_mu_)
};

PosixFileLock::~PosixFileLock() {
  ::close(fd_);  // releases the flock
  env_->Unlock(id_);
}

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: usable during shutdown
  return env;
}

}  // namespace fak
