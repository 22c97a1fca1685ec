// BlobJournal: the directory store's append-only record of what does not get a file of its own —
// inline payloads (≤ kInlineMaxBytes), pin counts and removals (format in docs/store.md).
//
// Each record carries its own checksum, and an inline payload is also its own digest's preimage,
// so replay detects any damage. A record cut short at the end of the file is the signature of a
// process killed mid-append (never acknowledged) and is dropped; a complete record that fails its
// checksum is Corruption naming the file and offset, or skipped when salvaging.
//
// A failed append (short write, ENOSPC, EIO, failed fdatasync) is rolled back: the file is cut to
// the end of the last acknowledged record and synced, so the failed record is not there after a
// reopen and later appends land on a clean tail. When the rollback itself fails, the journal is
// poisoned: every later Append fails (FailedPrecondition) until the store is reopened, whose
// replay then sees the torn tail of a record that was never acknowledged.
//
// Thread-safety: none; the store serializes calls. Cost: one write (+ fdatasync) per record.
#ifndef FAK_SRC_STORE_BLOB_JOURNAL_H_
#define FAK_SRC_STORE_BLOB_JOURNAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/env.h"
#include "fak/core/status.h"
#include "src/store/store_format.h"

namespace fak::internal {

// What replaying the journal leaves.
struct JournalState {
  struct Inline {
    uint64_t seq = 0;  // order of the put, for LRU rebuild
    std::string payload;
  };
  std::unordered_map<Digest, Inline> inline_payloads;
  std::unordered_map<Digest, uint32_t> pins;  // non-zero counts only
  uint64_t n_records = 0;          // records read (live or superseded)
  uint64_t n_corrupt_records = 0;  // skipped by salvage
  uint64_t torn_tail_bytes = 0;    // dropped from the end
};

class BlobJournal {
 public:
  ~BlobJournal() = default;
  BlobJournal(const BlobJournal&) = delete;
  BlobJournal& operator=(const BlobJournal&) = delete;

  // Opens or creates the journal at `path` (temporaries go to `tmp_dir`) through `env` (not owned)
  // and replays it into `state`. A torn tail is truncated away before any new record is appended.
  static Result<std::unique_ptr<BlobJournal>> Open(Env* env, const std::string& path, const std::string& tmp_dir,
                                                   bool sync, bool salvage, JournalState* state);

  // Appends one record; durable on return when `sync`. On failure the journal is as it was.
  Status Append(RecordType type, const Digest& digest, std::string_view payload);
  // Replaces the journal by one holding only `live`'s inline payloads and pins (atomic), which
  // also erases every superseded or removed record's bytes from the file. On failure before the
  // rename nothing changed; after it (a failed directory fsync or reopen) the journal is poisoned,
  // since the new content is visible but perhaps not durable.
  Status Rewrite(const JournalState& live);

 private:
  BlobJournal(Env* env, std::string path, std::string tmp_dir, bool sync)
      : env_(env), path_(std::move(path)), tmp_dir_(std::move(tmp_dir)), sync_(sync) {}
  Status Reopen();
  // Cuts the file back to good_end_ after a failed append; poisons the journal if that fails.
  Status RollBack(Status cause);

  Env* const env_;
  std::string path_, tmp_dir_;
  bool sync_;
  std::unique_ptr<WritableFile> file_;  // appending
  uint64_t good_end_ = 0;               // end of the last acknowledged record
  Status poisoned_;                     // non-OK: appends refused until reopen
};

// Serializes one record (exposed for tests that craft damaged journals).
std::string EncodeJournalRecord(RecordType type, const Digest& digest, std::string_view payload);
std::string JournalHeader();

}  // namespace fak::internal

#endif  // FAK_SRC_STORE_BLOB_JOURNAL_H_
