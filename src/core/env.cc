// Env helpers that work on any Env (so a fault-injecting Env reaches them too).
#include "fak/core/env.h"

#include <cstring>

namespace fak {

Status CheckReadRange(uint64_t file_size, uint64_t offset, size_t n) {
  if (offset > file_size || n > file_size - offset) {
    return InvalidArgument("read of " + std::to_string(n) + " bytes at " + std::to_string(offset) + " passes the end of a " +
                           std::to_string(file_size) + "-byte file");
  }
  return Status::Ok();
}

namespace {

// Bytes in memory, its own (`owned`) or a caller's.
class MemoryFile final : public RandomAccessFile {
 public:
  explicit MemoryFile(std::string owned) : owned_(std::move(owned)), bytes_(owned_) {}
  explicit MemoryFile(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  Status ReadAt(uint64_t offset, std::span<std::byte> out) const override {
    FAK_RETURN_IF_ERROR(CheckReadRange(bytes_.size(), offset, out.size()));
    if (!out.empty()) std::memcpy(out.data(), bytes_.data() + offset, out.size());
    return Status::Ok();
  }

 private:
  const std::string owned_;
  const std::string_view bytes_;
};

}  // namespace

std::unique_ptr<RandomAccessFile> RandomAccessBytes(std::string bytes) { return std::make_unique<MemoryFile>(std::move(bytes)); }
std::unique_ptr<RandomAccessFile> RandomAccessView(std::string_view bytes) { return std::make_unique<MemoryFile>(bytes); }

Status WriteFileAtomically(Env* env, const std::string& tmp_path, const std::string& final_path,
                           const std::string& dir, std::span<const std::string_view> parts, bool sync,
                           bool* renamed) {
  if (renamed != nullptr) *renamed = false;
  Status s;
  {
    Result<std::unique_ptr<WritableFile>> file = env->NewWritableFile(tmp_path);
    if (!file.has_value()) return file.error();
    for (std::string_view part : parts) {
      s = (*file)->Append(part);
      if (!s.ok()) break;
    }
    if (s.ok() && sync) s = (*file)->Sync();
    if (s.ok()) s = (*file)->Close();
  }
  if (s.ok()) s = env->RenameFile(tmp_path, final_path);
  if (!s.ok()) {
    (void)env->RemoveFile(tmp_path);  // best effort: a leftover temporary was never acknowledged
    return s;
  }
  if (renamed != nullptr) *renamed = true;
  return sync ? env->SyncDir(dir) : Status::Ok();
}

}  // namespace fak
