// FaultEnv: an in-memory AuditEnv that models the page cache (leveldb's fault-injection idea).
// Appended bytes are "unsynced" until Sync; Crash() drops them (optionally keeping a torn prefix,
// as a power cut mid-write can), and Sync/Append can be made to fail. The clock is manual.
#ifndef FAK_TESTS_AUDIT_FAULT_ENV_H_
#define FAK_TESTS_AUDIT_FAULT_ENV_H_

#include <map>
#include <mutex>
#include <string>

#include "fak/audit/audit.h"

namespace fak::testing {

class FaultEnv : public AuditEnv {
 public:
  struct File {
    std::string synced, unsynced;
  };

  Result<std::string> ReadFile(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return NotFound("no file " + path);
    return it->second.synced + it->second.unsynced;
  }

  Result<std::unique_ptr<AuditAppendFile>> OpenAppendable(const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path];  // create
    return std::unique_ptr<AuditAppendFile>(new MemFile(this, path));
  }

  Status Truncate(const std::string& path, uint64_t size_bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    File& f = files_[path];
    f.synced = (f.synced + f.unsynced).substr(0, size_bytes);
    f.unsynced.clear();
    return Status::Ok();
  }

  int64_t NowUnixMicros() override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_us_ += 1000;
  }

  // A power cut: every file loses what was not synced, except `keep_unsynced_bytes` of it.
  void Crash(size_t keep_unsynced_bytes = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [path, f] : files_) {
      f.synced += f.unsynced.substr(0, keep_unsynced_bytes);
      f.unsynced.clear();
    }
  }
  // Replaces a file's whole content (durably): for tamper tests.
  void SetContent(const std::string& path, std::string content) {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = File{std::move(content), ""};
  }
  void FailNextSync() { fail_next_sync_ = true; }
  void FailNextAppend() { fail_next_append_ = true; }
  int n_syncs() const { return n_syncs_; }

 private:
  class MemFile : public AuditAppendFile {
   public:
    MemFile(FaultEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    Status Append(std::string_view data) override {
      std::lock_guard<std::mutex> lock(env_->mu_);
      File& f = env_->files_[path_];
      if (env_->fail_next_append_) {
        env_->fail_next_append_ = false;
        f.unsynced.append(data.substr(0, data.size() / 2));  // a short write, then ENOSPC
        return IOError("write " + path_ + ": No space left on device (injected)");
      }
      f.unsynced.append(data);
      return Status::Ok();
    }
    Status Sync() override {
      std::lock_guard<std::mutex> lock(env_->mu_);
      if (env_->fail_next_sync_) {
        env_->fail_next_sync_ = false;
        return IOError("fsync " + path_ + ": Input/output error (injected)");
      }
      File& f = env_->files_[path_];
      f.synced += f.unsynced;
      f.unsynced.clear();
      ++env_->n_syncs_;
      return Status::Ok();
    }

   private:
    FaultEnv* env_;
    std::string path_;
  };

  std::mutex mu_;
  std::map<std::string, File> files_;
  int64_t now_us_ = 1'700'000'000'000'000;
  bool fail_next_sync_ = false, fail_next_append_ = false;
  int n_syncs_ = 0;
};

}  // namespace fak::testing

#endif  // FAK_TESTS_AUDIT_FAULT_ENV_H_
