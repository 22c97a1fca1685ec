// RedisFleet: heartbeats, the erasure stream and its confirmations (src/server/redis_fleet.h).
#include "src/server/redis_fleet.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include "src/store/redis_connection.h"

namespace fak {
namespace {

using internal::RedisCommand;
using internal::RedisConnection;
using internal::RedisReply;

constexpr int kReadBlockMs = 250;        // one XREAD's wait: bounds how late Stop is seen
constexpr int kAckPollMs = 20;           // Announce's poll of the confirmations
constexpr const char* kStreamCap = "100000";  // announcements kept (approximate MAXLEN)
constexpr const char* kAckTtlS = "3600";

bool IsValidWorkerId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
           c == '-';
  });
}

int64_t ParseInt(std::string_view s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

Status Unexpected(const RedisConnection& conn, const std::string& what, const RedisReply& r) {
  if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis " + conn.endpoint() + ": " + what, r);
  return Corruption("redis " + conn.endpoint() + ": " + what + ": unexpected reply " + internal::DescribeReply(r));
}

// A flat [field, value, ...] array as pairs; Corruption for anything else.
Result<std::vector<std::pair<std::string, std::string>>> Pairs(const RedisConnection& conn, const std::string& what,
                                                                const RedisReply& r) {
  if (r.type != RedisReply::Type::kArray || r.elements.size() % 2 != 0) return Unexpected(conn, what, r);
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < r.elements.size(); i += 2) {
    if (r.elements[i].type != RedisReply::Type::kString || r.elements[i + 1].type != RedisReply::Type::kString)
      return Unexpected(conn, what, r);
    out.emplace_back(r.elements[i].str, r.elements[i + 1].str);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<RedisFleet>> RedisFleet::Open(RedisFleetOptions options) {
  if (!IsValidWorkerId(options.worker_id))
    return InvalidArgument("fleet worker id '" + options.worker_id + "': expected 1-64 of [A-Za-z0-9_.:-]");
  if (options.heartbeat_ms <= 0 || options.live_after_ms <= options.heartbeat_ms || options.confirm_timeout_ms < 0)
    return InvalidArgument("fleet timing: heartbeat_ms > 0, live_after_ms > heartbeat_ms, confirm_timeout_ms >= 0");
  // The link's thread holds one connection in a blocking read; Announce and heartbeats need others.
  options.redis.pool_size = std::max(options.redis.pool_size, 4);
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(options.redis));
  // Announcements made before this worker joined concern KV it never held: start after the last.
  const std::string stream = options.redis.prefix + ":{fleet}:erasures";
  FAK_ASSIGN_OR_RETURN(RedisReply last, conn->RunOne({"XREVRANGE", stream, "+", "-", "COUNT", "1"}, true));
  std::string last_id = "0-0";
  if (last.type != RedisReply::Type::kArray) return Unexpected(*conn, "XREVRANGE " + stream, last);
  if (!last.elements.empty()) {
    const RedisReply& entry = last.elements[0];
    if (entry.type != RedisReply::Type::kArray || entry.elements.empty() || entry.elements[0].type != RedisReply::Type::kString)
      return Unexpected(*conn, "XREVRANGE " + stream, last);
    last_id = entry.elements[0].str;
  }
  std::unique_ptr<RedisFleet> fleet(new RedisFleet(std::move(options), std::move(conn), std::move(last_id)));
  FAK_RETURN_IF_ERROR(fleet->Heartbeat());
  return fleet;
}

RedisFleet::RedisFleet(RedisFleetOptions options, std::unique_ptr<RedisConnection> conn, std::string last_id)
    : options_(std::move(options)), conn_(std::move(conn)), last_id_(std::move(last_id)) {}

RedisFleet::~RedisFleet() {
  StopListening();
  (void)conn_->RunOne({"HDEL", Key("workers"), options_.worker_id}, true);
}

std::string RedisFleet::Key(std::string_view what) const { return options_.redis.prefix + ":{fleet}:" + std::string(what); }

Status RedisFleet::Heartbeat() {
  FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"HSET", Key("workers"), options_.worker_id,
                                                    std::to_string(internal::UnixMillisNow())}, true));
  if (r.type != RedisReply::Type::kInteger) return Unexpected(*conn_, "fleet heartbeat", r);
  return Status::Ok();
}

Result<std::vector<std::string>> RedisFleet::LiveWorkers() {
  FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"HGETALL", Key("workers")}, true));
  FAK_ASSIGN_OR_RETURN(auto workers, Pairs(*conn_, "fleet workers", r));
  const int64_t now = internal::UnixMillisNow();
  std::vector<std::string> live;
  for (const auto& [id, ms] : workers)
    if (now - ParseInt(ms) <= options_.live_after_ms || id == options_.worker_id) live.push_back(id);
  std::sort(live.begin(), live.end());
  return live;
}

Status RedisFleet::Listen(ApplyErasure apply) {
  if (thread_.joinable()) return FailedPrecondition("RedisFleet::Listen: already listening");
  thread_ = std::thread([this, apply = std::move(apply)] { Run(apply); });
  return Status::Ok();
}

void RedisFleet::StopListening() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void RedisFleet::Run(ApplyErasure apply) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_beat = Clock::now();
  while (!stop_) {
    if (Clock::now() >= next_beat) {
      (void)Heartbeat();  // an outage shows as this worker's silence; nothing to do here about it
      if (tree_snapshot_) (void)PublishTreeChanges();  // retried at the next beat
      next_beat = Clock::now() + std::chrono::milliseconds(options_.heartbeat_ms);
    }
    // A failed read keeps its place in the stream and tries again: nothing announced is skipped.
    if (!ApplyNext(apply).ok()) std::this_thread::sleep_for(std::chrono::milliseconds(kReadBlockMs));
  }
}

Status RedisFleet::PublishTreeChanges() {
  std::vector<PublishedPrefix> now = tree_snapshot_();
  const TreeChanges changes = DiffPrefixes(tree_published_, now);
  std::vector<RedisCommand> batch;
  const auto event = [&](const char* op, const PublishedPrefix* p) {
    RedisCommand add = {"XADD", Key("tree"), "MAXLEN", "~", kStreamCap, "*", "worker", options_.worker_id, "op", op};
    if (p != nullptr)
      add.insert(add.end(), {"tenant", p->tenant, "prefix", p->digest.Hex(), "messages", std::to_string(p->messages), "tokens",
                             std::to_string(p->tokens)});
    batch.push_back(std::move(add));
  };
  if (!tree_reset_sent_) event("reset", nullptr);  // a (re)started worker holds nothing it said before
  for (const PublishedPrefix& p : changes.evicted) event("evict", &p);
  for (const PublishedPrefix& p : changes.inserted) event("insert", &p);
  if (batch.empty()) return Status::Ok();
  // Re-sent whole after a broken connection: a consumer applies the same changes twice, harmlessly.
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, conn_->Run(batch, /*idempotent=*/true));
  for (const RedisReply& r : replies)
    if (r.type != RedisReply::Type::kString) return Unexpected(*conn_, "XADD " + Key("tree"), r);
  tree_reset_sent_ = true;
  tree_published_ = std::move(now);
  return Status::Ok();
}

Status RedisFleet::ApplyNext(const ApplyErasure& apply) {
  const std::string stream = Key("erasures");
  FAK_ASSIGN_OR_RETURN(RedisReply r, conn_->RunOne({"XREAD", "COUNT", "64", "BLOCK", std::to_string(kReadBlockMs), "STREAMS",
                                                    stream, last_id_}, true));
  if (r.type == RedisReply::Type::kNil) return Status::Ok();  // nothing new within the wait
  // [[stream, [[id, [field, value, ...]], ...]]]
  if (r.type != RedisReply::Type::kArray || r.elements.size() != 1 || r.elements[0].type != RedisReply::Type::kArray ||
      r.elements[0].elements.size() != 2 || r.elements[0].elements[1].type != RedisReply::Type::kArray)
    return Unexpected(*conn_, "XREAD " + stream, r);
  for (const RedisReply& entry : r.elements[0].elements[1].elements) {
    if (entry.type != RedisReply::Type::kArray || entry.elements.size() != 2 || entry.elements[0].type != RedisReply::Type::kString)
      return Unexpected(*conn_, "XREAD " + stream, r);
    const std::string& id = entry.elements[0].str;
    // An entry this code did not write (malformed) is passed over, never retried forever.
    Result<std::vector<std::pair<std::string, std::string>>> fields = Pairs(*conn_, "XREAD " + stream, entry.elements[1]);
    if (!fields) {
      last_id_ = id;
      continue;
    }
    std::string origin, digest_hex, tenant, scope;
    for (const auto& [k, v] : *fields) {
      if (k == "origin") origin = v;
      if (k == "digest") digest_hex = v;
      if (k == "tenant") tenant = v;
      if (k == "scope") scope = v;
    }
    Result<Digest> digest = Digest::FromHex(digest_hex);
    if (origin != options_.worker_id && digest) {
      FleetErasure erasure{*digest, scope == "tenant" ? std::optional<std::string>(tenant) : std::nullopt};
      const std::string removed = apply(erasure);
      const std::string acks = Key("acks:" + id);
      const std::vector<RedisCommand> ack = {{"HSET", acks, options_.worker_id, removed}, {"EXPIRE", acks, kAckTtlS}};
      FAK_RETURN_IF_ERROR(conn_->Run(ack, true).status());  // not acknowledged: applied again after a retry, harmlessly
    }
    last_id_ = id;
  }
  return Status::Ok();
}

FleetConfirmation RedisFleet::Announce(const FleetErasure& erasure, bool wait) {
  FleetConfirmation out;
  out.confirmed.push_back(options_.worker_id);
  RedisCommand add = {"XADD", Key("erasures"), "MAXLEN", "~", kStreamCap, "*", "origin", options_.worker_id,
                      "digest", erasure.source.Hex(), "scope", erasure.tenant ? "tenant" : "all"};
  if (erasure.tenant) add.insert(add.end(), {"tenant", *erasure.tenant});
  Result<RedisReply> added = conn_->RunOne(add, /*idempotent=*/false);
  if (!added || added->type != RedisReply::Type::kString) {
    out.error = added ? Unexpected(*conn_, "XADD", *added).message() : std::string(added.error().message());
    return out;
  }
  out.event_id = added->str;
  if (!wait) return out;
  Result<std::vector<std::string>> live = LiveWorkers();
  if (!live) {
    out.error = std::string(live.error().message());
    return out;
  }
  std::vector<std::string> waiting;
  for (const std::string& w : *live)
    if (w != options_.worker_id) waiting.push_back(w);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.confirm_timeout_ms);
  for (;;) {
    Result<RedisReply> acks = conn_->RunOne({"HKEYS", Key("acks:" + out.event_id)}, true);
    if (acks && acks->type == RedisReply::Type::kArray) {
      for (const RedisReply& a : acks->elements) {
        auto it = std::find(waiting.begin(), waiting.end(), a.str);
        if (it == waiting.end()) continue;
        out.confirmed.push_back(*it);
        waiting.erase(it);
      }
    } else if (!acks) {
      out.error = std::string(acks.error().message());
    }
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kAckPollMs));
  }
  std::sort(out.confirmed.begin() + 1, out.confirmed.end());
  out.pending = std::move(waiting);
  return out;
}

}  // namespace fak
