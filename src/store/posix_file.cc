// POSIX file helpers: atomic replace, no-follow reads, directory scans.
#include "src/store/posix_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace fak::internal {
namespace {

// Writes all of `data`, retrying short writes and EINTR.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string UniqueTmpName() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return std::to_string(::getpid()) + "-" + std::to_string(salt % 1000000) + "-" +
         std::to_string(counter.fetch_add(1)) + ".tmp";
}

}  // namespace

Status ErrnoStatus(std::string_view what, const std::string& path) {
  return IOError(std::string(what) + " '" + path + "': " + std::strerror(errno));
}

Status SyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open directory", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoStatus("fsync directory", path);
  return Status::Ok();
}

Status EnsureDir(const std::string& path, bool sync) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return FailedPrecondition("'" + path + "' exists and is not a directory");
    return Status::Ok();
  }
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", path);
  if (!sync) return Status::Ok();
  const size_t slash = path.find_last_of('/');
  return SyncDir(slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash)));
}

Status AtomicWriteFile(const std::string& tmp_dir, const std::string& final_path,
                       const std::vector<std::string_view>& parts, bool sync) {
  const std::string tmp = JoinPath(tmp_dir, UniqueTmpName());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoStatus("create", tmp);
  bool ok = true;
  for (std::string_view p : parts) ok = ok && WriteAll(fd, p);
  Status status;
  if (!ok) status = ErrnoStatus("write", tmp);
  if (status.ok() && sync && ::fsync(fd) != 0) status = ErrnoStatus("fsync", tmp);
  ::close(fd);
  if (status.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) status = ErrnoStatus("rename to " + final_path + " from", tmp);
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  if (!sync) return Status::Ok();
  const size_t slash = final_path.find_last_of('/');
  return SyncDir(slash == std::string::npos ? "." : final_path.substr(0, slash));
}

Result<std::string> ReadFileNoFollow(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no file '" + path + "'");
    if (errno == ELOOP) return Corruption("'" + path + "' is a symbolic link; the store never follows links");
    return ErrnoStatus("open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Corruption("'" + path + "' is not a regular file");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = ErrnoStatus("read", path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Result<std::vector<DirEntry>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return NotFound("no directory '" + path + "'");
    return ErrnoStatus("opendir", path);
  }
  std::vector<DirEntry> out;
  while (dirent* ent = ::readdir(dir)) {
    std::string_view name = ent->d_name;
    if (name == "." || name == "..") continue;
    DirEntry e;
    e.name = std::string(name);
    struct stat st;
    if (::fstatat(::dirfd(dir), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      e.is_regular = S_ISREG(st.st_mode);
      e.is_dir = S_ISDIR(st.st_mode);
      e.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
      e.size_bytes = static_cast<uint64_t>(st.st_size);
    }
    out.push_back(std::move(e));
  }
  ::closedir(dir);
  return out;
}

}  // namespace fak::internal
