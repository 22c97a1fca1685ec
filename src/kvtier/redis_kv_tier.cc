// The Redis KV tier: slab files shared by a fleet, chunked (docs/kv-tier.md §3).
//
// Keys (two hash tags, so a Redis Cluster spreads the bulk and keeps each script on one slot):
//   <prefix>:kvt:c:{<id>}:<i>  the chunks of entry <id>, all in its slot (one DEL removes them);
//   <prefix>:{kvt}:...          the index, all in one slot: m:<id> "<end> <chunks> <bytes>" (written
//   last, so a reader that finds it finds whole chunks unless the store was damaged); ends: the set
//   of entry ends, e:<end> a marker that some entry ends there; s:<source hex>: the set of
//   "<end>:<id>" derived from that text; sources: the set of sources. The check-and-remove scripts
//   below touch a meta or marker and a set together, so they must share a slot: the index is
//   small (tens of bytes per entry) while the chunks carry the megabytes.
//
// TTL (options.ttl_seconds > 0): m:, c: and e: keys expire; an Open (and so a Get) refreshes them. Chunks and
// markers live a second longer than the meta record, so an entry expires meta first and a reader
// that finds the meta finds its chunks. The sets never expire; their stale members (entries that
// expired or were removed) are dropped lazily — Ends() by the e: markers, KeysFromSource and
// Sources() by the m: records — each check-and-remove atomic in a script, so an entry written
// meanwhile keeps its index.
#include <algorithm>
#include <charconv>
#include <set>

#include "fak/kvtier/redis_kv_tier.h"
#include "src/store/redis_connection.h"

namespace fak {
namespace {

using internal::RedisCommand;
using internal::RedisReply;

// Chunks per pipelined round trip: 16 × 4 MiB in flight; a read receives them straight into place.
constexpr size_t kChunksPerRoundTrip = 16;
constexpr uint64_t kMaxChunkBytes = uint64_t{256} << 20;  // OpenRedisKVTier's bound on chunk_bytes

// Removes ARGV[1] from set KEYS[2] only while key KEYS[1] is absent (an atomic check-and-remove).
constexpr const char* kSremIfAbsent =
    "if redis.call('EXISTS', KEYS[1]) == 0 then return redis.call('SREM', KEYS[2], ARGV[1]) end return 0";
// Removes ARGV[1] from set KEYS[2] only while set KEYS[1] is empty.
constexpr const char* kSremIfEmpty =
    "if redis.call('SCARD', KEYS[1]) == 0 then return redis.call('SREM', KEYS[2], ARGV[1]) end return 0";

bool ParseU64(std::string_view s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// An entry's chunks read as one file: a read fetches the part of each chunk it covers (GETRANGE,
// pipelined), received from the socket straight into the caller's buffer, so a page-in decodes and
// hashes as the chunks arrive. A chunk that changed or vanished since the open is Corruption (the
// slab file says truncated). Valid while its store lives; thread-safe as the connection is.
class RedisTierFile final : public RandomAccessFile {
 public:
  RedisTierFile(internal::RedisConnection& conn, std::string chunk_prefix, std::string name, uint64_t chunk_bytes, uint64_t size)
      : conn_(conn), chunk_prefix_(std::move(chunk_prefix)), name_(std::move(name)), chunk_bytes_(chunk_bytes), size_(size) {}

  uint64_t size() const override { return size_; }

  Status ReadAt(uint64_t offset, std::span<std::byte> out) const override {
    FAK_RETURN_IF_ERROR(CheckReadRange(size_, offset, out.size()));
    const uint64_t end = offset + out.size();
    for (uint64_t at = offset; at < end;) {
      std::vector<RedisCommand> batch;
      std::vector<uint64_t> want;
      const uint64_t batch_from = at;
      while (at < end && batch.size() < kChunksPerRoundTrip) {
        const uint64_t c = at / chunk_bytes_, lo = at % chunk_bytes_, n = std::min(chunk_bytes_ - lo, end - at);
        batch.push_back({"GETRANGE", chunk_prefix_ + std::to_string(c), std::to_string(lo), std::to_string(lo + n - 1)});
        want.push_back(n);
        at += n;
      }
      const std::span<char> dest(reinterpret_cast<char*>(out.data()) + (batch_from - offset), at - batch_from);
      size_t written = 0;
      FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> got, conn_.RunInto(batch, true, dest, &written));
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i].type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis kv tier GETRANGE chunk", got[i]);
        if (got[i].type != RedisReply::Type::kString || static_cast<uint64_t>(got[i].integer) != want[i]) {
          return Corruption("redis kv tier: entry " + name_ + ": a chunk changed or vanished since it was opened");
        }
      }
    }
    return Status::Ok();
  }

 private:
  internal::RedisConnection& conn_;
  const std::string chunk_prefix_;  // "<prefix>:kvt:c:{<id>}:"
  const std::string name_;          // the id's first 16 digits, for messages
  const uint64_t chunk_bytes_;      // the writer's chunk size
  const uint64_t size_;
};

class RedisKVTier final : public KVTierStore {
 public:
  RedisKVTier(std::unique_ptr<internal::RedisConnection> conn, const RedisOptions& o, size_t chunk_bytes)
      : conn_(std::move(conn)), index_(o.prefix + ":{kvt}:"), chunks_(o.prefix + ":kvt:c:"), chunk_bytes_(chunk_bytes), ttl_(o.ttl_seconds) {}

  std::string_view name() const override { return "redis"; }

  Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    const size_t n_chunks = (bytes.size() + chunk_bytes_ - 1) / chunk_bytes_;
    for (size_t i = 0; i < n_chunks; i += kChunksPerRoundTrip) {
      std::vector<RedisCommand> batch;
      for (size_t c = i; c < std::min(n_chunks, i + kChunksPerRoundTrip); ++c) {
        batch.push_back(WithTtl({"SET", Chunk(key, c), std::string(bytes.substr(c * chunk_bytes_, chunk_bytes_))}, ttl_ + 1));
      }
      FAK_RETURN_IF_ERROR(Expect(batch, "SET chunk"));
    }
    std::vector<RedisCommand> tail;
    // Chunks written early get their TTL again with the meta's, so they outlive it.
    if (ttl_ > 0)
      for (size_t c = 0; c < n_chunks; ++c) tail.push_back({"EXPIRE", Chunk(key, c), std::to_string(ttl_ + 1)});
    tail.push_back(WithTtl({"SET", Meta(key), std::to_string(key.end) + " " + std::to_string(n_chunks) + " " + std::to_string(bytes.size())}, ttl_));
    tail.push_back(WithTtl({"SET", EndMarker(key.end), ""}, ttl_ + 1));
    tail.push_back({"SADD", index_ + "ends", std::to_string(key.end)});
    for (const Digest& s : sources) {
      tail.push_back({"SADD", index_ + "s:" + s.Hex(), Member(key)});
      tail.push_back({"SADD", index_ + "sources", s.Hex()});
    }
    return Expect(tail, "SET meta");
  }

  // The entry's chunks read as one file (RedisTierFile). Its size is what the chunks hold as far as
  // the first and last tell: the meta's size when they agree with it, shorter when one of them is
  // gone (the slab file then says truncated), Corruption when their lengths contradict the meta.
  Result<std::unique_ptr<RandomAccessFile>> Open(const TierKey& key, uint64_t max_bytes) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    max_bytes = std::min(max_bytes, kMaxTierEntryBytes);
    FAK_ASSIGN_OR_RETURN(RedisReply meta, conn_->RunOne({"GET", Meta(key)}, true));
    if (meta.type == RedisReply::Type::kNil) return NotFound("redis kv tier: no entry " + key.id.substr(0, 16));
    uint64_t n_chunks = 0, n_bytes = 0;
    FAK_RETURN_IF_ERROR(ParseMeta(meta, key, &n_chunks, &n_bytes));
    // The size record is whoever wrote the key's word: checked before anything is sized by it.
    if (n_bytes > max_bytes) {
      return ResourceExhausted("redis kv tier: entry " + key.id.substr(0, 16) + " records " + std::to_string(n_bytes) +
                               " bytes, more than the " + std::to_string(max_bytes) + " a reader accepts; not read");
    }
    if (n_bytes > n_chunks * kMaxChunkBytes || (n_chunks > 0) != (n_bytes > 0)) {
      return Corruption("redis kv tier: entry " + key.id.substr(0, 16) + ": meta records " + std::to_string(n_bytes) +
                        " bytes in " + std::to_string(n_chunks) + " chunks");
    }
    // The writer's chunk size is chunk 0's length; the last chunk's length checks it against the meta.
    std::vector<RedisCommand> probe;
    if (n_chunks > 0) probe = {{"STRLEN", Chunk(key, 0)}, {"STRLEN", Chunk(key, n_chunks - 1)}};
    if (ttl_ > 0) {  // a read keeps the entry alive: refresh before reading, so it cannot expire midway
      probe.push_back({"EXPIRE", Meta(key), std::to_string(ttl_)});
      probe.push_back({"EXPIRE", EndMarker(key.end), std::to_string(ttl_ + 1)});
      for (uint64_t c = 0; c < n_chunks; ++c) probe.push_back({"EXPIRE", Chunk(key, c), std::to_string(ttl_ + 1)});
    }
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> got, conn_->Run(probe, true));
    for (const RedisReply& r : got) {
      if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis kv tier STRLEN/EXPIRE", r);
      if (r.type != RedisReply::Type::kInteger) return Corruption("redis kv tier: STRLEN/EXPIRE: not an integer reply");
    }
    if (ttl_ > 0 && got[n_chunks > 0 ? 2 : 0].integer == 0) {
      return NotFound("redis kv tier: entry " + key.id.substr(0, 16) + " expired");
    }
    uint64_t chunk = 0, size = 0;
    if (n_chunks > 0) {
      chunk = static_cast<uint64_t>(got[0].integer);
      const uint64_t last = static_cast<uint64_t>(got[1].integer);
      if (chunk == 0) {
        size = 0;  // chunk 0 is gone
      } else if (chunk > kMaxChunkBytes || (n_bytes + chunk - 1) / chunk != n_chunks ||
                 (last != 0 && last != n_bytes - (n_chunks - 1) * chunk)) {
        return Corruption("redis kv tier: entry " + key.id.substr(0, 16) + ": its chunks (" + std::to_string(chunk) + " and " +
                          std::to_string(last) + " bytes at the ends) do not hold the " + std::to_string(n_bytes) +
                          " bytes in " + std::to_string(n_chunks) + " chunks its meta records");
      } else {
        size = last == 0 ? (n_chunks - 1) * chunk : n_bytes;  // the last chunk is gone: the rest is read
      }
    }
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<RedisTierFile>(*conn_, chunks_ + "{" + key.id + "}:", key.id.substr(0, 16), chunk, size));
  }

  using KVTierStore::Get;
  Result<std::string> Get(const TierKey& key, uint64_t max_bytes) override {
    FAK_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, Open(key, max_bytes));
    std::string out;
    try {
      out.resize(file->size());  // bounded by max_bytes in Open
    } catch (const std::exception&) {
      return ResourceExhausted("redis kv tier: entry " + key.id.substr(0, 16) + ": cannot hold " + std::to_string(file->size()) +
                               " bytes in memory");
    }
    FAK_RETURN_IF_ERROR(file->ReadAt(0, std::as_writable_bytes(std::span(out))));
    return out;
  }

  Result<std::vector<uint64_t>> Ends() override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", index_ + "ends"}, true));
    std::set<uint64_t> ends;
    for (const RedisReply& e : r.elements) {
      uint64_t v = 0;
      if (ParseU64(e.str, &v)) ends.insert(v);
    }
    // An end whose marker is gone has no live entry (they expired or were removed): drop it.
    std::vector<uint64_t> listed(ends.begin(), ends.end());
    std::vector<RedisCommand> probe;
    for (uint64_t e : listed) probe.push_back({"EXISTS", EndMarker(e)});
    if (probe.empty()) return listed;
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> live, conn_->Run(probe, true));
    std::vector<uint64_t> out;
    std::vector<RedisCommand> drop;
    for (size_t i = 0; i < listed.size(); ++i) {
      if (live[i].type == RedisReply::Type::kInteger && live[i].integer == 0) {
        drop.push_back({"EVAL", kSremIfAbsent, "2", EndMarker(listed[i]), index_ + "ends", std::to_string(listed[i])});
      } else {
        out.push_back(listed[i]);
      }
    }
    // The answer above is already right; a cleanup that fails (a server refusing scripts, an
    // outage) only leaves the stale members for the next call, so it does not fail this one.
    if (!drop.empty()) (void)Expect(drop, "EVAL drop stale end");
    return out;
  }

  Status Remove(const TierKey& key) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_ASSIGN_OR_RETURN(RedisReply meta, conn_->RunOne({"GET", Meta(key)}, true));
    if (meta.type == RedisReply::Type::kNil) return NotFound("redis kv tier: no entry " + key.id.substr(0, 16));
    uint64_t n_chunks = 0, n_bytes = 0;
    Status parsed = ParseMeta(meta, key, &n_chunks, &n_bytes);
    // The meta first (readers stop finding the entry), then the chunks in their own slot; a
    // damaged meta still goes.
    std::vector<RedisCommand> del{{"DEL", Meta(key)}};
    if (parsed.ok() && n_chunks > 0) {
      del.push_back({"DEL"});
      for (uint64_t c = 0; c < n_chunks; ++c) del.back().push_back(Chunk(key, c));
    }
    return Expect(del, "DEL");
  }

  Result<std::vector<TierKey>> KeysFromSource(const Digest& source) override {
    const std::string set = index_ + "s:" + source.Hex();
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", set}, true));
    std::vector<TierKey> listed;
    std::vector<std::string> members;
    for (const RedisReply& e : r.elements) {
      const size_t colon = e.str.find(':');
      uint64_t end = 0;
      if (colon == std::string::npos || !ParseU64(std::string_view(e.str).substr(0, colon), &end)) continue;
      listed.push_back(TierKey{e.str.substr(colon + 1), end});
      members.push_back(e.str);
    }
    // A member whose meta record is gone (expired, removed) is dropped from the set.
    std::vector<RedisCommand> probe;
    for (const TierKey& k : listed) probe.push_back({"EXISTS", Meta(k)});
    if (probe.empty()) return listed;
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> live, conn_->Run(probe, true));
    std::vector<TierKey> out;
    std::vector<RedisCommand> drop;
    for (size_t i = 0; i < listed.size(); ++i) {
      if (live[i].type == RedisReply::Type::kInteger && live[i].integer == 0) {
        drop.push_back({"EVAL", kSremIfAbsent, "2", Meta(listed[i]), set, members[i]});
      } else {
        out.push_back(listed[i]);
      }
    }
    if (!drop.empty()) (void)Expect(drop, "EVAL drop stale member");  // best effort, as in Ends()
    return out;
  }

  Result<std::vector<Digest>> Sources() override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", index_ + "sources"}, true));
    std::vector<Digest> out;
    for (const RedisReply& e : r.elements) {
      Result<Digest> d = Digest::FromHex(e.str);
      if (!d.has_value()) continue;
      FAK_ASSIGN_OR_RETURN(std::vector<TierKey> keys, KeysFromSource(*d));  // drops expired members
      if (!keys.empty()) {
        out.push_back(*d);
        continue;
      }
      const std::string set = index_ + "s:" + e.str;  // no live entry left: forget the source
      (void)Expect({{"EVAL", kSremIfEmpty, "2", set, index_ + "sources", e.str}}, "EVAL drop stale source");  // best effort
    }
    return out;
  }

  Result<size_t> EraseSource(const Digest& source) override {
    FAK_ASSIGN_OR_RETURN(std::vector<TierKey> keys, KeysFromSource(source));
    size_t removed = 0;
    for (const TierKey& key : keys) {
      Status s = Remove(key);
      if (s.ok()) ++removed;
      else if (s.code() != StatusCode::kNotFound) return s;
    }
    FAK_RETURN_IF_ERROR(Expect({{"DEL", index_ + "s:" + source.Hex()}, {"SREM", index_ + "sources", source.Hex()}}, "DEL source"));
    return removed;
  }

 private:
  std::string Meta(const TierKey& k) const { return index_ + "m:" + k.id; }
  std::string Chunk(const TierKey& k, uint64_t i) const { return chunks_ + "{" + k.id + "}:" + std::to_string(i); }
  std::string EndMarker(uint64_t end) const { return index_ + "e:" + std::to_string(end); }
  static std::string Member(const TierKey& k) { return std::to_string(k.end) + ":" + k.id; }
  // `set` with an expiry of `seconds` when the tier has a TTL.
  RedisCommand WithTtl(RedisCommand set, int64_t seconds) const {
    if (ttl_ > 0) {
      set.push_back("EX");
      set.push_back(std::to_string(seconds));
    }
    return set;
  }

  Status ParseMeta(const RedisReply& meta, const TierKey& key, uint64_t* n_chunks, uint64_t* n_bytes) const {
    uint64_t end = 0;
    const std::string& s = meta.str;
    const size_t a = s.find(' '), b = a == std::string::npos ? a : s.find(' ', a + 1);
    if (meta.type != RedisReply::Type::kString || b == std::string::npos || !ParseU64(std::string_view(s).substr(0, a), &end) ||
        !ParseU64(std::string_view(s).substr(a + 1, b - a - 1), n_chunks) || !ParseU64(std::string_view(s).substr(b + 1), n_bytes) ||
        end != key.end || *n_chunks > (uint64_t{1} << 20)) {
      return Corruption("redis kv tier: entry " + key.id.substr(0, 16) + ": malformed meta record");
    }
    return Status::Ok();
  }

  // Runs a batch that must not answer with an error reply.
  Status Expect(const std::vector<RedisCommand>& batch, std::string_view what) {
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, conn_->Run(batch, /*idempotent=*/true));
    for (const RedisReply& r : replies) {
      if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis kv tier " + std::string(what), r);
    }
    return Status::Ok();
  }

  std::unique_ptr<internal::RedisConnection> conn_;
  const std::string index_;   // "<prefix>:{kvt}:", the index's keys (one slot)
  const std::string chunks_;  // "<prefix>:kvt:c:", then "{<id>}:<i>" (the entry's slot)
  const size_t chunk_bytes_;
  const int64_t ttl_;  // seconds; 0 = entries never expire
};

}  // namespace

Result<std::unique_ptr<KVTierStore>> OpenRedisKVTier(const RedisOptions& options, size_t chunk_bytes) {
  if (chunk_bytes == 0 || chunk_bytes > kMaxChunkBytes) return InvalidArgument("OpenRedisKVTier: chunk_bytes must be in [1, 256 MiB]");
  FAK_RETURN_IF_ERROR(internal::ValidateRedisOptions(options));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<internal::RedisConnection> conn, internal::RedisConnection::Open(options));
  return std::unique_ptr<KVTierStore>(std::make_unique<RedisKVTier>(std::move(conn), options, chunk_bytes));
}

}  // namespace fak
