// Store file helpers: durable mkdir and atomic replace, both through the Env.
#include "src/store/store_files.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <span>

namespace fak::internal {
namespace {

// Unique across threads (counter) and processes (pid, salt) sharing one tmp/.
std::string UniqueTmpName() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return std::to_string(::getpid()) + "-" + std::to_string(salt % 1000000) + "-" +
         std::to_string(counter.fetch_add(1)) + ".tmp";
}

}  // namespace

Status EnsureDir(Env* env, const std::string& path, bool sync) {
  Result<FileInfo> info = env->GetFileInfo(path);
  if (info.has_value()) {
    if (!info->is_dir) return FailedPrecondition("'" + path + "' exists and is not a directory");
    return Status::Ok();
  }
  if (info.error().code() != StatusCode::kNotFound) return info.error();
  FAK_RETURN_IF_ERROR(env->CreateDir(path));
  return sync ? env->SyncDir(ParentDir(path)) : Status::Ok();
}

Status AtomicWriteFile(Env* env, const std::string& tmp_dir, const std::string& final_path,
                       std::initializer_list<std::string_view> parts, bool sync) {
  return WriteFileAtomically(env, JoinPath(tmp_dir, UniqueTmpName()), final_path, ParentDir(final_path),
                             std::span<const std::string_view>(parts.begin(), parts.size()), sync);
}

Status AtomicReplaceFile(Env* env, const std::string& tmp_dir, const std::string& final_path, std::string_view bytes,
                         bool sync, bool* renamed) {
  const std::string_view parts[] = {bytes};
  return WriteFileAtomically(env, JoinPath(tmp_dir, UniqueTmpName()), final_path, ParentDir(final_path), parts, sync,
                             renamed);
}

Result<std::string> ReadFileAtMost(Env* env, const std::string& path, uint64_t max_bytes, StatusCode code) {
  const auto too_big = [&](uint64_t size) {
    return Status(code, "'" + path + "' is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                            " its reader accepts; not read");
  };
  FAK_ASSIGN_OR_RETURN(FileInfo info, env->GetFileInfo(path));
  if (info.size_bytes > max_bytes) return too_big(info.size_bytes);
  const size_t cap = max_bytes >= SIZE_MAX ? SIZE_MAX : static_cast<size_t>(max_bytes) + 1;
  FAK_ASSIGN_OR_RETURN(std::string bytes, env->ReadFilePrefix(path, cap));
  if (bytes.size() > max_bytes) return too_big(bytes.size());  // grew since the lstat
  return bytes;
}

}  // namespace fak::internal
