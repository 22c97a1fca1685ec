// FaultInjectionEnv: an Env for tests that fails chosen calls and simulates power loss, over a
// real Env (normally Env::Default() on a temporary directory). The idea is leveldb's.
//
// Power loss: the env remembers, per file, how many bytes were durable at its last successful
// Sync, and every directory change (file or directory created, renamed over, removed) until the
// directory it lands in is SyncDir'd. PowerLoss() cuts every file back to its synced length and
// undoes the unsynced directory changes, newest first — what a kernel that lost its page cache
// could leave. Files that existed before the env first touched them count as durable.
//
// Faults: FailNth(op, n, kind) makes the n-th next call of `op` fail with EIO or ENOSPC, write
// only half of its data first (kShortWrite), or fail and take every later mutating call with it
// (kCrash: the machine is off until PowerLoss()). count(op) tells a test how many calls a workload
// makes, so it can sweep a fault over every point.
//
// Thread-safe. Reads, listings, mappings, locks and clocks pass through unfaulted.
#ifndef FAK_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_
#define FAK_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/env.h"

namespace fak::testing {

// The calls a fault can hit. kCreate is NewWritableFile, NewAppendableFile and NewPrivateFile.
enum class EnvOp { kAppend, kSync, kRename, kSyncDir, kCreate, kRemove, kTruncate, kCreateDir, kRemoveDir };
inline constexpr size_t kNumEnvOps = 9;
std::string_view EnvOpName(EnvOp op);

enum class FaultKind {
  kIOError,     // EIO, nothing done
  kNoSpace,     // ENOSPC, nothing done
  kShortWrite,  // Append only: the first half of the data lands, then ENOSPC
  kCrash,       // EIO, and every later mutating call fails too until PowerLoss()
};

class FaultInjectionEnv : public EnvWrapper {
 public:
  explicit FaultInjectionEnv(Env* target = Env::Default()) : EnvWrapper(target) {}

  // ---- faults and counters ----
  // Fails the `nth` next call of `op` (1 = the very next one). Several faults may be pending.
  void FailNth(EnvOp op, uint64_t nth, FaultKind kind = FaultKind::kIOError);
  void ClearFaults();
  // Calls of `op` so far (failed ones included).
  uint64_t count(EnvOp op) const;
  void ResetCounts();
  // True after a kCrash fault fired (until PowerLoss()).
  bool crashed() const;

  // ---- power loss ----
  // Drops every byte not covered by a Sync (keeping `keep_unsynced_bytes` of each file's unsynced
  // tail: a torn write) and undoes every directory change not covered by a SyncDir of the
  // directory it landed in, newest first. Afterwards everything on disk counts as durable, the
  // crash state and pending faults are cleared, and counters keep counting.
  Status PowerLoss(size_t keep_unsynced_bytes = 0);
  // Replaces `path` with `content`, durably, bypassing faults (for tamper tests).
  Status WriteDurably(const std::string& path, std::string_view content);

  // ---- clock ----
  // NowUnixMicros returns start_us + step_us, then + 2*step_us, ... (rows get distinct times).
  void UseManualClock(int64_t start_us, int64_t step_us);

  // ---- Env ----
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewPrivateFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status TruncateFile(const std::string& path, uint64_t size_bytes) override;
  Status CreateDir(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  int64_t NowUnixMicros() override;

 private:
  class File;
  friend class File;

  struct Fault {
    EnvOp op;
    uint64_t at_count;  // fires when count(op) reaches this
    FaultKind kind;
  };
  // One directory change, undone by PowerLoss unless `dir` was synced after it.
  struct DirChange {
    enum Type { kCreateFile, kCreateDir, kRename, kRemoveFile, kRemoveDir } type;
    uint64_t seq;
    std::string dir;   // whose SyncDir makes it durable
    std::string path;  // created / removed / rename target
    std::string from;  // rename source
    std::optional<std::string> saved;        // durable bytes of a removed or renamed-over file
    std::optional<uint64_t> saved_synced;     // their tracked synced length
  };

  // Counts a call of `op` and returns the injected error, if any. REQUIRES: mu_ held.
  std::optional<FaultKind> CountAndCheckLocked(EnvOp op);
  Status InjectedError(FaultKind kind, EnvOp op, const std::string& path) const;
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, int how);
  // The bytes of `path` that would survive a power loss now (nullopt when absent). REQUIRES: mu_.
  std::optional<std::string> DurableContentLocked(const std::string& path);
  Status AfterSync(const std::string& path);
  Status Restore(const std::string& path, const std::string& content);

  mutable std::mutex mu_;
  std::array<uint64_t, kNumEnvOps> counts_{};  // GUARDED_BY(mu_)
  std::vector<Fault> faults_;                  // GUARDED_BY(mu_)
  bool crashed_ = false;                       // GUARDED_BY(mu_)
  std::map<std::string, uint64_t> synced_bytes_;  // GUARDED_BY(mu_): path → durable length
  std::vector<DirChange> changes_;             // GUARDED_BY(mu_): oldest first
  std::map<std::string, uint64_t> dir_synced_seq_;  // GUARDED_BY(mu_)
  uint64_t seq_ = 0;                           // GUARDED_BY(mu_)
  bool manual_clock_ = false;                  // GUARDED_BY(mu_)
  int64_t now_us_ = 0, step_us_ = 0;           // GUARDED_BY(mu_)
};

}  // namespace fak::testing

#endif  // FAK_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_
