// File helpers shared by the directory blob store and recall images, on top of an Env: make a
// directory (durably), replace a file atomically through a temporary in the store's tmp/, read a
// file no larger than the reader accepts.
#ifndef FAK_SRC_STORE_STORE_FILES_H_
#define FAK_SRC_STORE_STORE_FILES_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "fak/core/env.h"
#include "fak/core/status.h"
#include "src/core/path.h"

namespace fak::internal {

// Creates one directory level when absent and, when `sync`, makes its entry durable (SyncDir of
// the parent). FailedPrecondition when `path` exists and is not a directory.
Status EnsureDir(Env* env, const std::string& path, bool sync);

// Writes `parts` (concatenated) to a new uniquely named file in `tmp_dir`, syncs it when `sync`,
// renames it to `final_path` and syncs the destination directory when `sync`. Readers see the old
// file or the whole new one, never a part.
Status AtomicWriteFile(Env* env, const std::string& tmp_dir, const std::string& final_path,
                       std::initializer_list<std::string_view> parts, bool sync);

// AtomicWriteFile of one buffer that also says whether the rename happened (`*renamed`), so a
// caller can tell "nothing changed" (error, false) from "replaced, but the directory fsync failed"
// (error, true) — the second leaves the new file visible though perhaps not durable.
Status AtomicReplaceFile(Env* env, const std::string& tmp_dir, const std::string& final_path, std::string_view bytes,
                         bool sync, bool* renamed);

// The whole of `path` when it holds at most `max_bytes`; otherwise a `code` error naming both sizes,
// decided from the file's size (lstat) before a byte is read or allocated — a file's size is its
// writer's word, and a sparse file claims any size for free. Reads at most max_bytes + 1 even if
// the file grows meanwhile. NotFound and the Env's other errors pass through.
Result<std::string> ReadFileAtMost(Env* env, const std::string& path, uint64_t max_bytes, StatusCode code);

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_STORE_FILES_H_
