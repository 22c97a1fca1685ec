// RedisBlobStore: BlobStore over Redis (docs/store.md §5). Values are the raw payload under
// "<prefix>:t:<tenant>:{<hex>}:v"; the pin count under "...{<hex>}:pins". The braces are a Redis
// Cluster hash tag, so both keys of a digest live in one slot and the small Lua scripts below can
// update them atomically on any shard. Every read is verified against its digest here, never
// trusted from the server.
#include <algorithm>
#include <atomic>

#include "fak/store/redis_store.h"
#include "src/store/redis_connection.h"

namespace fak {
namespace {

using internal::RedisCommand;
using internal::RedisConnection;
using internal::RedisReply;

// Put with a TTL. KEYS: value, pins. ARGV: payload, ttl seconds. Returns 1 when the value existed.
constexpr const char* kPutScript = R"lua(
local existed = redis.call('EXISTS', KEYS[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return existed)lua";

// KEYS: value, pins. Returns the new count, or -1 when the blob is absent.
constexpr const char* kPinScript = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('INCR', KEYS[2])
redis.call('PERSIST', KEYS[1])
return n)lua";

// KEYS: value, pins. ARGV: ttl seconds. Returns the new count, -1 when absent, -2 when unpinned.
constexpr const char* kUnpinScript = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = tonumber(redis.call('GET', KEYS[2]) or '0')
if n <= 0 then return -2 end
n = redis.call('DECR', KEYS[2])
if n <= 0 then
  redis.call('DEL', KEYS[2])
  local ttl = tonumber(ARGV[1])
  if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
end
return n)lua";

// KEYS: value, pins. Returns 0 when removed, -1 when absent, -2 when pinned.
constexpr const char* kRemoveScript = R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then return -2 end
redis.call('DEL', KEYS[1], KEYS[2])
return 0)lua";

// Payload bytes per pipelined PutMany round trip: hiredis 0.14 moves the unsent rest of its output
// buffer after every partial write, so multi-megabyte pipelines cost more than they save.
constexpr size_t kMaxBatchBytes = size_t{1} << 20;

std::string TenantPrefix(const RedisOptions& o) { return o.prefix + ":t:" + o.tenant + ":"; }

class RedisBlobStore final : public BlobStore {
 public:
  RedisBlobStore(std::unique_ptr<RedisConnection> conn, const BlobStoreOptions& store_options)
      : conn_(std::move(conn)), o_(conn_->options()), capacity_bytes_(store_options.capacity_bytes) {}

  Result<Digest> Put(std::string_view bytes) override {
    const std::string_view one[] = {bytes};
    FAK_ASSIGN_OR_RETURN(std::vector<Digest> d, PutMany(one));
    return d.front();
  }

  Result<std::string> Get(const Digest& digest) override {
    std::vector<Result<std::string>> r = GetMany(std::span<const Digest>(&digest, 1));
    return std::move(r.front());
  }

  Result<bool> Contains(const Digest& digest) override {
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"EXISTS", RedisBlobKey(o_, digest)}, true));
    if (r.type != RedisReply::Type::kInteger) return Unexpected("Contains " + digest.Hex(), r);
    return r.integer > 0;
  }

  Status Pin(const Digest& digest) override {
    FAK_ASSIGN_OR_RETURN(int64_t n, RunScript("Pin", kPinScript, digest, {}));
    if (n == -1) return NotFound("Pin: blob " + digest.Hex() + " is not in redis tenant '" + o_.tenant + "'");
    return Status::Ok();
  }

  Status Unpin(const Digest& digest) override {
    FAK_ASSIGN_OR_RETURN(int64_t n, RunScript("Unpin", kUnpinScript, digest, {std::to_string(o_.ttl_seconds)}));
    if (n == -1) return NotFound("Unpin: blob " + digest.Hex() + " is not in redis tenant '" + o_.tenant + "'");
    if (n == -2) return FailedPrecondition("Unpin: blob " + digest.Hex() + " is not pinned");
    return Status::Ok();
  }

  Status Remove(const Digest& digest) override {
    FAK_ASSIGN_OR_RETURN(int64_t n, RunScript("Remove", kRemoveScript, digest, {}));
    if (n == -1) return NotFound("Remove: blob " + digest.Hex() + " is not in redis tenant '" + o_.tenant + "'");
    if (n == -2) return FailedPrecondition("Remove: blob " + digest.Hex() + " is pinned");
    return Status::Ok();
  }

  Result<std::vector<Digest>> List() override;
  Result<std::vector<Digest>> PutMany(std::span<const std::string_view> payloads) override;
  std::vector<Result<std::string>> GetMany(std::span<const Digest> digests) override;

  BlobStoreStats Stats() const override {
    BlobStoreStats s;
    s.capacity_bytes = capacity_bytes_;
    s.n_puts = n_puts_.load();
    s.n_dedup_hits = n_dedup_hits_.load();
    s.n_gets = n_gets_.load();
    s.n_verify_failures = n_verify_failures_.load();
    return s;
  }

  std::string_view backend() const override { return "redis"; }

 private:
  Status Unexpected(const std::string& what, const RedisReply& r) const {
    if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis " + conn_->endpoint() + ": " + what, r);
    return Corruption("redis " + conn_->endpoint() + ": " + what + ": unexpected reply " + internal::DescribeReply(r));
  }

  // Runs one of the two-key scripts above; pin and remove are not idempotent, so never re-sent.
  Result<int64_t> RunScript(const std::string& what, const char* script, const Digest& digest,
                            std::vector<std::string> args) {
    RedisCommand cmd = {"EVAL", script, "2", RedisBlobKey(o_, digest), RedisPinKey(o_, digest)};
    for (std::string& a : args) cmd.push_back(std::move(a));
    FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne(cmd, /*idempotent=*/false));
    if (r.type != RedisReply::Type::kInteger) return Unexpected(what + " " + digest.Hex(), r);
    return r.integer;
  }

  Result<std::string> CheckValue(const Digest& digest, RedisReply reply);

  std::unique_ptr<RedisConnection> conn_;
  const RedisOptions& o_;  // conn_'s copy
  const uint64_t capacity_bytes_;
  std::atomic<uint64_t> n_puts_{0}, n_dedup_hits_{0}, n_gets_{0}, n_verify_failures_{0};
};

// Without a TTL a Put is a plain EXISTS + SET pair (a Lua script would copy the payload twice more
// on the server: ~2x the cost at 64 KiB); the EXISTS only feeds the dedup count. With a TTL the
// script decides atomically whether the blob is pinned (pinned blobs never expire).
Result<std::vector<Digest>> RedisBlobStore::PutMany(std::span<const std::string_view> payloads) {
  std::vector<Digest> digests;
  digests.reserve(payloads.size());
  const bool plain = o_.ttl_seconds == 0;
  const size_t per = plain ? 2 : 1;  // commands per payload
  const size_t depth = static_cast<size_t>(o_.pipeline_depth);
  for (size_t begin = 0, end = 0; begin < payloads.size(); begin = end) {
    // A batch ends at pipeline_depth payloads or kMaxBatchBytes, whichever comes first.
    size_t batch_bytes = 0;
    for (end = begin; end < payloads.size() && end - begin < depth && (end == begin || batch_bytes < kMaxBatchBytes); ++end)
      batch_bytes += payloads[end].size();
    std::vector<RedisCommand> batch;
    for (size_t i = begin; i < end; ++i) {
      digests.push_back(Digest::Of(payloads[i]));
      std::string key = RedisBlobKey(o_, digests[i]);
      if (plain) {
        batch.push_back({"EXISTS", key});
        batch.push_back({"SET", std::move(key), std::string(payloads[i])});
      } else {
        batch.push_back({"EVAL", kPutScript, "2", std::move(key), RedisPinKey(o_, digests[i]), std::string(payloads[i]),
                         std::to_string(o_.ttl_seconds)});
      }
    }
    // Idempotent: re-setting content-addressed bytes is harmless.
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, conn_->Run(batch, /*idempotent=*/true));
    for (size_t i = begin; i < end; ++i) {
      const RedisReply& existed = replies[(i - begin) * per];
      const RedisReply& stored = replies[(i - begin) * per + per - 1];
      if (plain && stored.type != RedisReply::Type::kStatus) return Unexpected("Put " + digests[i].Hex(), stored);
      if (existed.type != RedisReply::Type::kInteger) return Unexpected("Put " + digests[i].Hex(), existed);
      ++n_puts_;
      if (existed.integer == 1) ++n_dedup_hits_;
    }
  }
  return digests;
}

Result<std::string> RedisBlobStore::CheckValue(const Digest& digest, RedisReply reply) {
  const std::string key = RedisBlobKey(o_, digest);
  if (reply.type == RedisReply::Type::kNil)
    return NotFound("blob " + digest.Hex() + " is not in redis tenant '" + o_.tenant + "' (key " + key + ")");
  if (reply.type != RedisReply::Type::kString) return Unexpected("Get " + key, reply);
  if (Digest::Of(reply.str) != digest) {
    ++n_verify_failures_;
    return VerificationFailed("blob " + digest.Hex() + " in redis (key " + key + ", " + std::to_string(reply.str.size()) +
                              " bytes) does not hash to its digest");
  }
  return std::move(reply.str);
}

std::vector<Result<std::string>> RedisBlobStore::GetMany(std::span<const Digest> digests) {
  std::vector<Result<std::string>> out;
  out.reserve(digests.size());
  const size_t depth = static_cast<size_t>(o_.pipeline_depth);
  for (size_t begin = 0; begin < digests.size(); begin += depth) {
    const size_t end = std::min(digests.size(), begin + depth);
    std::vector<RedisCommand> batch;
    for (size_t i = begin; i < end; ++i) batch.push_back({"GET", RedisBlobKey(o_, digests[i])});
    Result<std::vector<RedisReply>> replies = conn_->Run(batch, /*idempotent=*/true);
    for (size_t i = begin; i < end; ++i) {
      ++n_gets_;
      if (!replies.has_value()) {
        out.push_back(replies.error().WithContext("Get " + digests[i].Hex()));
      } else {
        out.push_back(CheckValue(digests[i], std::move((*replies)[i - begin])));
      }
    }
  }
  return out;
}

// SCAN (every master of a cluster) with a pattern of the tenant's value keys. The tenant and
// prefix hold no glob characters (validated), and the hash tag's braces are literal in a glob.
Result<std::vector<Digest>> RedisBlobStore::List() {
  const std::string head = TenantPrefix(o_) + "{";
  FAK_ASSIGN_OR_RETURN(std::vector<std::string> keys, conn_->ScanKeys(head + "*}:v"));
  std::vector<Digest> out;
  for (const std::string& k : keys) {
    if (k.size() != head.size() + 64 + 3 || k.compare(0, head.size(), head) != 0) continue;
    Result<Digest> d = Digest::FromHex(std::string_view(k).substr(head.size(), 64));
    if (d.has_value()) out.push_back(*d);  // keys that are not ours are skipped, never guessed at
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());  // SCAN may repeat a key
  return out;
}

}  // namespace

std::string RedisBlobKey(const RedisOptions& options, const Digest& digest) {
  return TenantPrefix(options) + "{" + digest.Hex() + "}:v";
}

std::string RedisPinKey(const RedisOptions& options, const Digest& digest) {
  return TenantPrefix(options) + "{" + digest.Hex() + "}:pins";
}

Result<std::unique_ptr<BlobStore>> OpenRedisBlobStore(const RedisOptions& options, const BlobStoreOptions& store_options) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(options));
  return std::unique_ptr<BlobStore>(std::make_unique<RedisBlobStore>(std::move(conn), store_options));
}

}  // namespace fak
