// Env helpers that work on any Env (so a fault-injecting Env reaches them too).
#include "fak/core/env.h"

namespace fak {

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
