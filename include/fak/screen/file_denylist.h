// FileDenylist: the quarantine denylist kept in a file, so a seal outlives the process.
//
// QuarantineDenylist lives in memory: after a restart every sealed text would be accepted again
// and its plaintext stored anew. A FileDenylist is the same list (it answers Screen and
// IsQuarantined from memory, exactly as QuarantineDenylist does) backed by an append-only file:
// Add writes one checksummed record and fsyncs it before it returns OK, so an acknowledged seal
// survives process death and power loss. Open replays the file. Format: docs/store.md §6.
//
// A record cut short at the end of the file is what a crash mid-Add leaves; that Add never
// returned OK, so the record is dropped (and cut off before anything is appended after it). Any
// other damage is Corruption naming the file and the record's offset: a denylist that silently
// lost entries would unseal texts, so it fails closed instead. A failed Add (short write, ENOSPC,
// EIO, failed fsync) is rolled back — the file is cut to the last acknowledged record and synced —
// so the list is as it was, in memory and after a reopen; when that rollback fails too, every later
// Add fails (FailedPrecondition) until the list is reopened.
//
// Thread-safety: every method may run concurrently; Screen and IsQuarantined never wait for an
// Add's fsync. Between processes: one opener (an exclusive lock on <path>.lock). Cost: Add is one
// write and one fdatasync; the whole list is held in memory.
#ifndef FAK_SCREEN_FILE_DENYLIST_H_
#define FAK_SCREEN_FILE_DENYLIST_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/screen/screen.h"

namespace fak {

class FAK_EXPORT FileDenylist final : public Denylist {
 public:
  // Reasons longer than this are cut to it (in memory and on disk alike): the seal is what must
  // not fail, the reason is a note for people.
  static constexpr size_t kMaxReasonBytes = 4096;

  // Opens the list at `path`, creating it (durably, with its directory entry) when absent; the
  // parent directory must exist. `env` (not owned, must outlive the list): every file call; null =
  // Env::Default(). Errors: Corruption naming the file and offset for a damaged file, Unsupported for
  // another format version, FailedPrecondition when another opener holds it.
  static Result<std::shared_ptr<FileDenylist>> Open(const std::string& path, Env* env = nullptr);
  ~FileDenylist() override;
  FileDenylist(const FileDenylist&) = delete;
  FileDenylist& operator=(const FileDenylist&) = delete;

  std::string_view name() const override { return "denylist"; }
  // QuarantineDenylist::Screen over the replayed entries: the same verdicts, word for word.
  Verdict Screen(const ScreenInput& input) const override { return memory_.Screen(input); }
  // Never Unavailable: answered from memory.
  Result<bool> IsQuarantined(const Digest& digest) const override { return memory_.Contains(digest); }
  // Lists `digest` durably: OK only once its record is fsynced. Listing it again with the same
  // reason writes nothing. On error nothing changed.
  Status Add(const Digest& digest, std::string reason) override;

  bool Contains(const Digest& digest) const { return memory_.Contains(digest); }
  size_t size() const { return memory_.size(); }
  std::vector<std::pair<Digest, std::string>> Entries() const { return memory_.Entries(); }
  const std::string& path() const { return path_; }
  // Bytes of a torn final record Open dropped (0 for a clean file).
  uint64_t torn_tail_bytes() const { return torn_tail_bytes_; }

 private:
  FileDenylist(Env* env, std::string path) : env_(env), path_(std::move(path)) {}
  // Cuts the file back to good_end_ after a failed append; poisons the list if that fails.
  Status RollBack(Status cause);  // REQUIRES: write_mu_ held

  Env* const env_;
  const std::string path_;
  std::unique_ptr<FileLock> lock_;
  uint64_t torn_tail_bytes_ = 0;
  QuarantineDenylist memory_;  // the replayed entries; its own lock serves readers
  std::mutex write_mu_;        // serialises Add: one record, one fsync at a time
  std::unique_ptr<WritableFile> file_;  // GUARDED_BY(write_mu_): appending
  uint64_t good_end_ = 0;               // GUARDED_BY(write_mu_): end of the last acknowledged record
  Status poisoned_;                     // GUARDED_BY(write_mu_): non-OK refuses every Add
};

}  // namespace fak

#endif  // FAK_SCREEN_FILE_DENYLIST_H_
