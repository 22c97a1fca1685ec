// KVTierStore: a lower tier that keeps radix nodes' slab files (slab_file.h) past eviction and
// restarts — a local directory through the Env, or Redis shared by a fleet (docs/kv-tier.md).
//
// An entry is keyed by what makes its KV what it is: the regime axes of its binding (model,
// tokenizer, adapter, precision, position convention, producer), its namespace (the tenant, or ""
// for a declared public prefix) and the span digest of its whole context up to its end — so a
// lookup finds a candidate by recomputing the key from the tokens it has, and a store never needs
// to be trusted: every entry is re-verified by the gate on page-in (tier_pager.h). Ends() lists the
// context lengths at which entries end (a hint for which keys to try). Each entry also records the
// source texts it was derived from, so erasing a text erases its KV (EraseSource).
//
// Thread-safety: implementations are thread-safe. Cost: Put and Get move the whole slab (and the
// directory tier fsyncs it).
#ifndef FAK_KVTIER_KV_TIER_STORE_H_
#define FAK_KVTIER_KV_TIER_STORE_H_

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
#include "fak/gate/binding_tuple.h"

namespace fak {

struct TierKey {
  std::string id;    // 64 lowercase hex digits
  uint64_t end = 0;  // the entry's span ends at this context length
  friend bool operator==(const TierKey&, const TierKey&) = default;
  friend auto operator<=>(const TierKey&, const TierKey&) = default;
};

// OK for a key TierKeyFor could make (a 64-lowercase-hex id); InvalidArgument naming it otherwise.
// Every store checks it first, so a key never names a path or key outside the tier.
FAK_EXPORT Status ValidateTierKey(const TierKey& key);

// sha256("fak.kvtier.key.v1" || regime axes of `binding` || namespace || span digest || u64le end),
// each string length-prefixed. The span fields of `binding` other than those given are ignored.
FAK_EXPORT TierKey TierKeyFor(const BindingTuple& binding, std::string_view ns, const Digest& span_digest, uint64_t end);

class FAK_EXPORT KVTierStore {
 public:
  virtual ~KVTierStore() = default;
  virtual std::string_view name() const = 0;  // "directory" | "redis"
  // Stores (or replaces) an entry, recording it under each of `sources`.
  virtual Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) = 0;
  // The entry's bytes; NotFound when absent. May return fewer bytes than were put when the entry
  // was damaged in the store (the slab file's own checks then say truncated). An entry the store
  // records as larger than `max_bytes` (a file's size, Redis's size record) is ResourceExhausted
  // naming both sizes, before anything is allocated or read for it: a store's sizes are not
  // trusted (a sparse 1 TiB file, a forged size record). Never more than max_bytes are returned.
  virtual Result<std::string> Get(const TierKey& key, uint64_t max_bytes) = 0;
  // The entry open for reading in ranges, with Get's bounds and errors; its size is what Get would
  // return. A page-in decodes a slab straight from it instead of holding the file twice. Default:
  // Get's bytes, in memory; the directory tier opens its file.
  virtual Result<std::unique_ptr<RandomAccessFile>> Open(const TierKey& key, uint64_t max_bytes);
  // Get without a caller's bound: entries up to kMaxTierEntryBytes.
  Result<std::string> Get(const TierKey& key) { return Get(key, kMaxTierEntryBytes); }
  // The most any store returns for one entry (a slab of a very large model's long span fits).
  static constexpr uint64_t kMaxTierEntryBytes = uint64_t{64} << 30;
  // The distinct ends of stored entries, ascending (may include ends of removed entries).
  virtual Result<std::vector<uint64_t>> Ends() = 0;
  // NotFound when absent.
  virtual Status Remove(const TierKey& key) = 0;
  // The entries recorded under `source`.
  virtual Result<std::vector<TierKey>> KeysFromSource(const Digest& source) = 0;
  // Every source recorded by a stored entry.
  virtual Result<std::vector<Digest>> Sources() = 0;
  // Removes every entry derived from `source` and forgets the source; the number removed.
  virtual Result<size_t> EraseSource(const Digest& source) = 0;
};

struct DirectoryKVTierOptions {
  // Bytes of entry files kept; 0 = unbounded. After each Put the least recently used entries are
  // removed until the rest fit — never the entry just written (one larger than the bound stays
  // alone). Recency is each entry's last Put or Get in this process; at open it is the files' mtime
  // (the last write: reads before a restart are not remembered). Entries another process wrote
  // after the open are counted once this process Gets them. Default: 0.
  uint64_t max_bytes = 0;
  // Bytes of entries of one namespace (a tenant, read from each entry's manifest; "" for public
  // prefixes) kept; 0 = no share. A Put past it removes that namespace's least recently used
  // entries only (never the one just written), so one tenant's spills cannot push out another's.
  // Default: 0.
  uint64_t max_bytes_per_namespace = 0;
};

// A directory tier: one file per entry, written through `env` (null: Env::Default()) as a temp file,
// fsync'd, renamed into place and the directory fsync'd, so an entry is whole or absent after a
// crash. Creates the directory when absent. The source index is rebuilt at open from the entries'
// (checksummed) source sections; entries another process adds later are found by Get, not indexed.
// With options.max_bytes, a Put whose entry was stored but whose eviction of an older one failed
// returns that failure (IOError naming the entry it could not remove); the next Put retries it.
FAK_EXPORT Result<std::unique_ptr<KVTierStore>> OpenDirectoryKVTier(const std::string& dir, Env* env = nullptr);
FAK_EXPORT Result<std::unique_ptr<KVTierStore>> OpenDirectoryKVTier(const std::string& dir, const DirectoryKVTierOptions& options,
                                                         Env* env = nullptr);

}  // namespace fak

#endif  // FAK_KVTIER_KV_TIER_STORE_H_
