// The Redis KV tier: slab files shared by a fleet, chunked (docs/kv-tier.md §3).
//
// Keys under <prefix>:kvt: —  m:<id> "<end> <chunks> <bytes>" (written last, so a reader that finds
// it finds whole chunks unless the store was damaged); c:<id>:<i> the chunks; ends: the set of entry
// ends; s:<source hex>: the set of "<end>:<id>" derived from that text; sources: the set of sources.
#include <algorithm>
#include <charconv>
#include <set>

#include "fak/kvtier/redis_kv_tier.h"
#include "src/store/redis_connection.h"

namespace fak {
namespace {

using internal::RedisCommand;
using internal::RedisReply;

constexpr size_t kChunksPerRoundTrip = 8;

bool ParseU64(std::string_view s, uint64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

class RedisKVTier final : public KVTierStore {
 public:
  RedisKVTier(std::unique_ptr<internal::RedisConnection> conn, const RedisOptions& o, size_t chunk_bytes)
      : conn_(std::move(conn)), head_(o.prefix + ":kvt:"), chunk_bytes_(chunk_bytes) {}

  std::string_view name() const override { return "redis"; }

  Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    const size_t n_chunks = (bytes.size() + chunk_bytes_ - 1) / chunk_bytes_;
    for (size_t i = 0; i < n_chunks; i += kChunksPerRoundTrip) {
      std::vector<RedisCommand> batch;
      for (size_t c = i; c < std::min(n_chunks, i + kChunksPerRoundTrip); ++c) {
        batch.push_back({"SET", Chunk(key, c), std::string(bytes.substr(c * chunk_bytes_, chunk_bytes_))});
      }
      FAK_RETURN_IF_ERROR(Expect(batch, "SET chunk"));
    }
    std::vector<RedisCommand> tail;
    tail.push_back({"SET", Meta(key), std::to_string(key.end) + " " + std::to_string(n_chunks) + " " + std::to_string(bytes.size())});
    tail.push_back({"SADD", head_ + "ends", std::to_string(key.end)});
    for (const Digest& s : sources) {
      tail.push_back({"SADD", head_ + "s:" + s.Hex(), Member(key)});
      tail.push_back({"SADD", head_ + "sources", s.Hex()});
    }
    return Expect(tail, "SET meta");
  }

  Result<std::string> Get(const TierKey& key) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_ASSIGN_OR_RETURN(RedisReply meta, conn_->RunOne({"GET", Meta(key)}, true));
    if (meta.type == RedisReply::Type::kNil) return NotFound("redis kv tier: no entry " + key.id.substr(0, 16));
    uint64_t n_chunks = 0, n_bytes = 0;
    FAK_RETURN_IF_ERROR(ParseMeta(meta, key, &n_chunks, &n_bytes));
    std::string out;
    out.reserve(n_bytes);
    for (uint64_t i = 0; i < n_chunks; i += kChunksPerRoundTrip) {
      std::vector<RedisCommand> batch;
      for (uint64_t c = i; c < std::min<uint64_t>(n_chunks, i + kChunksPerRoundTrip); ++c) batch.push_back({"GET", Chunk(key, c)});
      FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> got, conn_->Run(batch, true));
      for (const RedisReply& r : got) {
        if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis kv tier GET chunk", r);
        if (r.type != RedisReply::Type::kString) return out;  // a lost chunk: the slab file says truncated
        out += r.str;
      }
    }
    return out;
  }

  Result<std::vector<uint64_t>> Ends() override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", head_ + "ends"}, true));
    std::set<uint64_t> ends;
    for (const RedisReply& e : r.elements) {
      uint64_t v = 0;
      if (ParseU64(e.str, &v)) ends.insert(v);
    }
    return std::vector<uint64_t>(ends.begin(), ends.end());
  }

  Status Remove(const TierKey& key) override {
    FAK_RETURN_IF_ERROR(ValidateTierKey(key));
    FAK_ASSIGN_OR_RETURN(RedisReply meta, conn_->RunOne({"GET", Meta(key)}, true));
    if (meta.type == RedisReply::Type::kNil) return NotFound("redis kv tier: no entry " + key.id.substr(0, 16));
    uint64_t n_chunks = 0, n_bytes = 0;
    Status parsed = ParseMeta(meta, key, &n_chunks, &n_bytes);
    RedisCommand del{"DEL", Meta(key)};  // the meta first in argv: a damaged entry still goes
    for (uint64_t c = 0; parsed.ok() && c < n_chunks; ++c) del.push_back(Chunk(key, c));
    return Expect({del}, "DEL");
  }

  Result<std::vector<TierKey>> KeysFromSource(const Digest& source) override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", head_ + "s:" + source.Hex()}, true));
    std::vector<TierKey> out;
    for (const RedisReply& e : r.elements) {
      const size_t colon = e.str.find(':');
      uint64_t end = 0;
      if (colon == std::string::npos || !ParseU64(std::string_view(e.str).substr(0, colon), &end)) continue;
      out.push_back(TierKey{e.str.substr(colon + 1), end});
    }
    return out;
  }

  Result<std::vector<Digest>> Sources() override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"SMEMBERS", head_ + "sources"}, true));
    std::vector<Digest> out;
    for (const RedisReply& e : r.elements)
      if (Result<Digest> d = Digest::FromHex(e.str); d.has_value()) out.push_back(*d);
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
    FAK_RETURN_IF_ERROR(Expect({{"DEL", head_ + "s:" + source.Hex()}, {"SREM", head_ + "sources", source.Hex()}}, "DEL source"));
    return removed;
  }

 private:
  std::string Meta(const TierKey& k) const { return head_ + "m:" + k.id; }
  std::string Chunk(const TierKey& k, uint64_t i) const { return head_ + "c:" + k.id + ":" + std::to_string(i); }
  static std::string Member(const TierKey& k) { return std::to_string(k.end) + ":" + k.id; }

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
  const std::string head_;
  const size_t chunk_bytes_;
};

}  // namespace

Result<std::unique_ptr<KVTierStore>> OpenRedisKVTier(const RedisOptions& options, size_t chunk_bytes) {
  if (chunk_bytes == 0 || chunk_bytes > (size_t{256} << 20)) return InvalidArgument("OpenRedisKVTier: chunk_bytes must be in [1, 256 MiB]");
  FAK_RETURN_IF_ERROR(internal::ValidateRedisOptions(options));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<internal::RedisConnection> conn, internal::RedisConnection::Open(options));
  return std::unique_ptr<KVTierStore>(std::make_unique<RedisKVTier>(std::move(conn), options, chunk_bytes));
}

}  // namespace fak
