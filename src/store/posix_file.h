// Small POSIX file helpers for the directory store and recall images: atomic replace (temporary
// file + fsync + rename + directory fsync), whole-file reads that refuse symlinks, directory scans.
// Every error names the path and the failing call.
#ifndef FAK_SRC_STORE_POSIX_FILE_H_
#define FAK_SRC_STORE_POSIX_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/status.h"
#include "src/core/path.h"

namespace fak::internal {

// IOError naming `what`, `path` and errno.
Status ErrnoStatus(std::string_view what, const std::string& path);

// mkdir -p for one level; fsyncs the parent when `sync` and the directory was created.
Status EnsureDir(const std::string& path, bool sync);
Status SyncDir(const std::string& path);

// Writes `parts` (concatenated) to a new file in `tmp_dir`, fsyncs it when `sync`, renames it to
// `final_path` and fsyncs the destination directory when `sync`. Readers see the old file or the
// whole new one, never a part.
Status AtomicWriteFile(const std::string& tmp_dir, const std::string& final_path,
                       const std::vector<std::string_view>& parts, bool sync);

// The whole file; NotFound when absent; refuses symlinks (O_NOFOLLOW) so a planted link cannot
// lead a read outside the store.
Result<std::string> ReadFileNoFollow(const std::string& path);

struct DirEntry {
  std::string name;
  bool is_regular = false;  // lstat: a symlink is neither regular nor dir
  bool is_dir = false;
  int64_t mtime_ns = 0;
  uint64_t size_bytes = 0;
};
// Entries of `path` except "." and "..". NotFound when the directory is absent.
Result<std::vector<DirEntry>> ListDir(const std::string& path);


}  // namespace fak::internal

#endif  // FAK_SRC_STORE_POSIX_FILE_H_
