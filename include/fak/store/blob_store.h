// BlobStore: content-addressed storage for the durable part of fak — the text (architecture §7).
//
// A blob's identity is the sha256 of its bytes, so a byte-identical payload is stored once and any
// tampering is detectable: every Get verifies the bytes against the digest asked for, and a
// mismatch is an error, never silent data. Small payloads (≤ kInlineMaxBytes) live inline in the
// index. Pinned digests are never evicted; the others are evicted least-recently-used once the
// payload bytes held pass a bound (default 1 GiB).
//
// Backends: in memory (tests, ephemeral sessions) and a directory (the embedded default: one file
// per blob in a fan-out tree, written atomically and fsynced, the index rebuilt from the files on
// open). The on-disk format is specified in docs/store.md. The fleet-shared Redis backend is in
// fak/redis_store.h; the batch calls (PutMany/GetMany) have loop defaults and Redis pipelines them.
#ifndef FAK_STORE_BLOB_STORE_H_
#define FAK_STORE_BLOB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/env.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// Payloads of at most this many bytes are kept inline in the index (the directory backend keeps
// them in its journal instead of one file each).
inline constexpr size_t kInlineMaxBytes = 256;

struct BlobStoreOptions {
  // Payload bytes held before unpinned blobs are evicted, least recently used first. A blob just
  // put is never its own victim, so one blob larger than the bound is still kept until the next
  // Put. Default: 1 GiB.
  uint64_t capacity_bytes = uint64_t{1} << 30;
  // Directory backend: fsync every blob file, journal append and directory change before a call
  // returns. Turning it off keeps atomicity (no half-written blob is ever visible) but an
  // acknowledged write may be lost on power failure (not on process death). Default: true.
  bool sync = true;
  // Directory backend: on open, skip journal records that fail their checksum (counted in
  // Stats().n_corrupt_records) instead of failing the open with Corruption. Default: false.
  bool salvage_journal = false;
  // Directory backend: the files, fsyncs and renames go through this Env. Default: nullptr =
  // Env::Default(). Not owned; must outlive the store.
  Env* env = nullptr;
};

struct BlobStoreStats {
  uint64_t n_blobs = 0;         // distinct digests held
  uint64_t n_inline = 0;        // of which inline (≤ kInlineMaxBytes)
  uint64_t n_pinned = 0;        // of which pinned
  uint64_t size_bytes = 0;      // payload bytes held
  uint64_t pinned_bytes = 0;    // payload bytes of pinned blobs
  uint64_t capacity_bytes = 0;  // the eviction bound
  uint64_t n_puts = 0, n_dedup_hits = 0, n_gets = 0;
  uint64_t n_evicted = 0, evicted_bytes = 0;
  uint64_t n_verify_failures = 0;  // reads whose bytes did not match their digest
  // Directory backend, from the last open: blob files rejected (bad header, wrong name, not a
  // regular file), journal records skipped by salvage, torn journal tail bytes dropped.
  uint64_t n_corrupt_files = 0, n_corrupt_records = 0, torn_tail_bytes = 0;
};

// Thread-safety: every method may be called concurrently. Failed calls change nothing.
class FAK_EXPORT BlobStore {
 public:
  virtual ~BlobStore() = default;

  // Stores `bytes` (once per distinct content) and returns its sha256. The blob becomes the most
  // recently used. When the call returns the blob is durable as far as the backend promises.
  virtual Result<Digest> Put(std::string_view bytes) = 0;
  // The bytes of `digest`, verified: NotFound when absent, VerificationFailed when the stored
  // bytes do not hash to `digest`, Corruption when the stored record is malformed.
  virtual Result<std::string> Get(const Digest& digest) = 0;
  // Whether the index holds `digest` (not verified; a Get may still fail).
  virtual Result<bool> Contains(const Digest& digest) = 0;
  // Pins are counted: each Pin needs one Unpin. A pinned blob is never evicted and cannot be
  // removed. NotFound when absent; Unpin of an unpinned blob is FailedPrecondition.
  virtual Status Pin(const Digest& digest) = 0;
  virtual Status Unpin(const Digest& digest) = 0;
  // Deletes the blob. NotFound when absent, FailedPrecondition while pinned.
  virtual Status Remove(const Digest& digest) = 0;
  // Every digest held, in no particular order.
  virtual Result<std::vector<Digest>> List() = 0;
  virtual BlobStoreStats Stats() const = 0;
  // "memory", "directory", ...
  virtual std::string_view backend() const = 0;

  // Batch forms; backends with round trips override them. PutMany stops at the first error.
  virtual Result<std::vector<Digest>> PutMany(std::span<const std::string_view> payloads);
  virtual std::vector<Result<std::string>> GetMany(std::span<const Digest> digests);
};

// An in-memory store. Cost: the payload bytes plus ~100 bytes per blob.
FAK_EXPORT std::unique_ptr<BlobStore> MakeMemoryBlobStore(const BlobStoreOptions& options = {});

// Opens (creating if needed) a directory store at `dir`. Rebuilds the index from the blob files and
// the journal, removes leftover temporary files, and fails with Corruption naming the file and
// offset when the journal is damaged (unless options.salvage_journal). Unsupported when `dir` holds
// a store of a newer format version.
FAK_EXPORT Result<std::unique_ptr<BlobStore>> OpenDirectoryBlobStore(const std::string& dir,
                                                          const BlobStoreOptions& options = {});

}  // namespace fak

#endif  // FAK_STORE_BLOB_STORE_H_
