// Env: the one seam between fak and the operating system's files and clocks.
//
// Every durable path in fak (the directory blob store and its journal, recall images, the audit
// journal, key files, the KV tier) and every read of a model file goes through an Env, so a test
// can swap in one that fails a chosen write, fsync or rename, makes a write short, or forgets
// everything not yet synced (a power loss) — and see what the library does about it. The idea is
// leveldb's; the interface is ours and holds files, a lock and two clocks, nothing else.
//
// Env::Default() is POSIX: writes go to the kernel at once (no user-space buffer), Sync is
// fdatasync, SyncDir fsyncs a directory, LockFile is an exclusive flock. Every error Status names
// the path and the failing call. Implementations must be thread-safe; the files they hand out are
// not (one owner each).
#ifndef FAK_CORE_ENV_H_
#define FAK_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// A file open for writing at its end. Not thread-safe.
class FAK_EXPORT WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` or returns an error; after an error the file's tail is unknown (part of
  // `data` may be there) until the caller truncates it back.
  virtual Status Append(std::string_view data) = 0;
  // Makes everything appended so far durable. After a failure, nothing unsynced may be assumed
  // to have survived.
  virtual Status Sync() = 0;
  // Closes the file (also done by the destructor, which ignores errors).
  virtual Status Close() = 0;
};

// A file open for reading at any offset, its size fixed when it was opened: a reader that decodes
// as it reads (the KV tier's page-in puts a slab's K/Kraw/V straight into place) holds no second
// copy of the file. Thread-safe.
class FAK_EXPORT RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual uint64_t size() const = 0;
  // Fills all of `out` with the bytes from `offset`, or fails: InvalidArgument when the range passes
  // size(), Corruption when the file ends first (it shrank since it was opened), IOError otherwise.
  virtual Status ReadAt(uint64_t offset, std::span<std::byte> out) const = 0;
};

// `bytes` as a RandomAccessFile (what a store that reads whole entries hands a range reader).
FAK_EXPORT std::unique_ptr<RandomAccessFile> RandomAccessBytes(std::string bytes);
// The same over a caller's bytes, which must outlive it (no copy).
FAK_EXPORT std::unique_ptr<RandomAccessFile> RandomAccessView(std::string_view bytes);
// InvalidArgument unless [offset, offset + n) lies within a file of `file_size` bytes (for
// RandomAccessFile implementations).
FAK_EXPORT Status CheckReadRange(uint64_t file_size, uint64_t offset, size_t n);

// A whole file mapped read-only; the bytes stay valid while the object lives. Thread-safe.
class FAK_EXPORT ReadOnlyMapping {
 public:
  virtual ~ReadOnlyMapping() = default;
  virtual std::span<const uint8_t> bytes() const = 0;
};

// Held while the object lives; released (and the lock file kept) on destruction.
class FAK_EXPORT FileLock {
 public:
  virtual ~FileLock() = default;
};

struct FileInfo {
  std::string name;         // one path component
  bool is_regular = false;  // lstat: a symlink is neither regular nor a directory
  bool is_dir = false;
  int64_t mtime_ns = 0;
  uint64_t size_bytes = 0;
  uint32_t mode = 0;        // permission bits (st_mode & 07777): key files refuse group/other access
};

class FAK_EXPORT Env {
 public:
  virtual ~Env() = default;
  // The POSIX Env. Never null; process-wide; not owned by the caller.
  static Env* Default();

  // ---- files ----
  // Creates `path` or truncates it to empty.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens `path` for appending, creating it when absent.
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;
  // Creates `path` readable and writable by its owner only (0600), never following a link;
  // FailedPrecondition when anything is already there. For secrets (key files): never overwritten.
  virtual Result<std::unique_ptr<WritableFile>> NewPrivateFile(const std::string& path) = 0;
  // The whole file. NotFound when absent; refuses to follow a symlink and any file that is not
  // regular (Corruption: a link where a store keeps a file is damage, and a planted link must not
  // lead a read out of a store).
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // At most the first `max_bytes` bytes of the file (fewer when it is shorter); refuses links like
  // ReadFile. For checking headers without reading whole blobs.
  virtual Result<std::string> ReadFilePrefix(const std::string& path, size_t max_bytes) = 0;
  // The file open for reads at any offset; refuses links and anything not regular like ReadFile.
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) = 0;
  // What lstat says about `path` (a symlink is reported, not followed). NotFound when absent.
  virtual Result<FileInfo> GetFileInfo(const std::string& path) = 0;
  // Input files a caller names (a model's config.json, tokenizer.json, a GGUF's magic bytes):
  // symlinks are followed, since model caches (Hugging Face's) are built of them; anything not a
  // regular file is still refused. At most `max_bytes` bytes (SIZE_MAX: the whole file).
  virtual Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes) = 0;
  // What stat says about the file `path` leads to (links followed). NotFound when absent.
  virtual Result<FileInfo> GetTargetInfo(const std::string& path) = 0;
  // Maps the whole file read-only (models: the readers hand out views into it).
  virtual Result<std::unique_ptr<ReadOnlyMapping>> MapReadOnly(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (POSIX rename). Durable only after SyncDir of the parent.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // NotFound when absent.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Cuts (or extends with zeros) `path` to `size_bytes`. Durable only after a Sync of the file.
  virtual Status TruncateFile(const std::string& path, uint64_t size_bytes) = 0;
  // Creates one directory level; OK when it already exists as a directory, FailedPrecondition when
  // something else is there. Durable only after SyncDir of the parent.
  virtual Status CreateDir(const std::string& path) = 0;
  // Removes an empty directory.
  virtual Status RemoveDir(const std::string& path) = 0;
  // Makes the directory's entries (creations, renames, removals) durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // Entries of `path` except "." and ".."; NotFound when the directory is absent.
  virtual Result<std::vector<FileInfo>> ListDir(const std::string& path) = 0;
  // Takes an exclusive lock on `path` (created when absent) for as long as the FileLock lives.
  // FailedPrecondition naming the path when another holder (process or Env user) has it.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;

  // ---- clocks ----
  // Microseconds since the Unix epoch (timestamps that are written down).
  virtual int64_t NowUnixMicros() = 0;
  // Nanoseconds of a clock that never goes back (deadlines, durations).
  virtual int64_t NowMonotonicNanos() = 0;
};

// Forwards every call to another Env: derive from it to change a few calls (fault injection, a
// manual clock). The target is not owned and must outlive the wrapper.
class FAK_EXPORT EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override { return target_->NewWritableFile(path); }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override { return target_->NewAppendableFile(path); }
  Result<std::unique_ptr<WritableFile>> NewPrivateFile(const std::string& path) override { return target_->NewPrivateFile(path); }
  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Result<std::string> ReadFilePrefix(const std::string& path, size_t max_bytes) override { return target_->ReadFilePrefix(path, max_bytes); }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    return target_->NewRandomAccessFile(path);
  }
  Result<FileInfo> GetFileInfo(const std::string& path) override { return target_->GetFileInfo(path); }
  Result<std::string> ReadInputFile(const std::string& path, size_t max_bytes) override { return target_->ReadInputFile(path, max_bytes); }
  Result<FileInfo> GetTargetInfo(const std::string& path) override { return target_->GetTargetInfo(path); }
  Result<std::unique_ptr<ReadOnlyMapping>> MapReadOnly(const std::string& path) override { return target_->MapReadOnly(path); }
  Status RenameFile(const std::string& from, const std::string& to) override { return target_->RenameFile(from, to); }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status TruncateFile(const std::string& path, uint64_t size_bytes) override { return target_->TruncateFile(path, size_bytes); }
  Status CreateDir(const std::string& path) override { return target_->CreateDir(path); }
  Status RemoveDir(const std::string& path) override { return target_->RemoveDir(path); }
  Status SyncDir(const std::string& path) override { return target_->SyncDir(path); }
  Result<std::vector<FileInfo>> ListDir(const std::string& path) override { return target_->ListDir(path); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override { return target_->LockFile(path); }
  int64_t NowUnixMicros() override { return target_->NowUnixMicros(); }
  int64_t NowMonotonicNanos() override { return target_->NowMonotonicNanos(); }

 private:
  Env* target_;
};

// Env-level helpers used by every store (each error names the path).
// Writes `parts` (concatenated) to `tmp_path`, syncs it, renames it over `final_path` and syncs the
// directory of `final_path` (`dir`): readers see the old file or the whole new one, never a part.
// `tmp_path` is removed on failure. With `sync` false both syncs are skipped: still atomic, but an
// acknowledged write may be lost to a power cut (not to process death). `renamed` (optional) tells
// "nothing changed" (error, false) from "replaced, but the directory fsync failed" (error, true).
FAK_EXPORT Status WriteFileAtomically(Env* env, const std::string& tmp_path, const std::string& final_path,
                           const std::string& dir, std::span<const std::string_view> parts, bool sync = true,
                           bool* renamed = nullptr);

}  // namespace fak

#endif  // FAK_CORE_ENV_H_
