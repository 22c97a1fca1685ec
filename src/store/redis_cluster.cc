// Redis Cluster routing (src/store/redis_cluster.h): slots, command keys, the slot map, redirects.
#include "src/store/redis_cluster.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "src/core/str_cat.h"
#include "src/store/redis_connection.h"

namespace fak::internal {
namespace {

constexpr int kMaxRedirects = 5;  // hops one command may take while a slot is being moved
constexpr auto kMinRefreshInterval = std::chrono::milliseconds(100);

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> t{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[static_cast<size_t>(i)] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return u;
}

bool ParseInt(std::string_view s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// "host:port" (the host may itself hold colons, IPv6); nullopt when malformed.
std::optional<ClusterNode> ParseEndpoint(std::string_view s) {
  const size_t colon = s.rfind(':');
  int64_t port = 0;
  if (colon == std::string_view::npos || !ParseInt(s.substr(colon + 1), &port) || port <= 0 || port > 65535) return std::nullopt;
  return ClusterNode{std::string(s.substr(0, colon)), static_cast<int>(port)};
}

}  // namespace

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

uint16_t KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<uint16_t>(Crc16(key) % kClusterSlots);
}

Result<std::vector<std::string_view>> CommandKeys(const RedisCommand& c) {
  if (c.empty()) return InvalidArgument("redis cluster: an empty command");
  const std::string name = Upper(c[0]);
  std::vector<std::string_view> keys;
  static constexpr const char* kFirstArgIsKey[] = {
      "GET",   "SET",    "EXPIRE", "PERSIST", "INCR",  "DECR",  "SADD",  "SREM", "SMEMBERS", "SCARD",     "SISMEMBER",
      "HSET",  "HDEL",   "HMGET",  "HGET",    "HGETALL", "HKEYS", "LRANGE", "RPUSH", "XADD", "XREVRANGE", "XRANGE",
      "TTL",   "PTTL",   "TYPE",   "XLEN",    "STRLEN"};
  static constexpr const char* kKeyless[] = {"PING", "INFO", "CLUSTER", "ASKING", "AUTH", "SELECT", "ECHO"};
  if (std::any_of(std::begin(kKeyless), std::end(kKeyless), [&](const char* k) { return name == k; })) return keys;
  if (std::any_of(std::begin(kFirstArgIsKey), std::end(kFirstArgIsKey), [&](const char* k) { return name == k; })) {
    if (c.size() < 2) return InvalidArgument("redis cluster: " + name + " without a key");
    keys.push_back(c[1]);
    return keys;
  }
  if (name == "DEL" || name == "EXISTS" || name == "UNLINK") {
    if (c.size() < 2) return InvalidArgument("redis cluster: " + name + " without a key");
    keys.assign(c.begin() + 1, c.end());
    return keys;
  }
  if (name == "EVAL" || name == "EVALSHA") {
    int64_t n = 0;
    if (c.size() < 3 || !ParseInt(c[2], &n) || n < 0 || static_cast<uint64_t>(n) > c.size() - 3)
      return InvalidArgument("redis cluster: " + name + " with a bad key count");
    keys.assign(c.begin() + 3, c.begin() + 3 + n);
    return keys;
  }
  if (name == "XREAD") {
    const auto streams = std::find_if(c.begin(), c.end(), [](const std::string& a) { return Upper(a) == "STREAMS"; });
    const size_t rest = static_cast<size_t>(c.end() - streams) - (streams == c.end() ? 0 : 1);
    if (streams == c.end() || rest == 0 || rest % 2 != 0) return InvalidArgument("redis cluster: XREAD without STREAMS key id pairs");
    keys.assign(streams + 1, streams + 1 + static_cast<std::ptrdiff_t>(rest / 2));
    return keys;
  }
  return InvalidArgument("redis cluster: cannot route " + name +
                         " (fak does not know which of its arguments are keys; SCAN goes through ScanKeys)");
}

Result<std::optional<uint16_t>> CommandSlot(const RedisCommand& command) {
  FAK_ASSIGN_OR_RETURN(std::vector<std::string_view> keys, CommandKeys(command));
  if (keys.empty()) return std::optional<uint16_t>();
  const uint16_t slot = KeySlot(keys[0]);
  for (std::string_view k : keys) {
    if (KeySlot(k) != slot) {
      return InvalidArgument("redis cluster: " + command[0] + " names keys in two slots ('" + std::string(keys[0]) + "' in " +
                             std::to_string(slot) + ", '" + std::string(k) + "' in " + std::to_string(KeySlot(k)) +
                             "); a multi-key command runs within one slot only: give its keys one {hash tag}");
    }
  }
  return std::optional<uint16_t>(slot);
}

Result<std::vector<SlotRange>> ParseClusterSlots(const RedisReply& reply, const ClusterNode& asked) {
  const auto bad = [](const std::string& why) { return Corruption("redis cluster: CLUSTER SLOTS reply: " + why); };
  if (reply.type != RedisReply::Type::kArray) return bad("not an array");
  std::vector<SlotRange> out;
  for (const RedisReply& r : reply.elements) {
    if (r.type != RedisReply::Type::kArray || r.elements.size() < 3 || r.elements[0].type != RedisReply::Type::kInteger ||
        r.elements[1].type != RedisReply::Type::kInteger || r.elements[2].type != RedisReply::Type::kArray ||
        r.elements[2].elements.size() < 2)
      return bad("a range is not [first, last, [host, port, ...], ...]");
    const int64_t first = r.elements[0].integer, last = r.elements[1].integer;
    const RedisReply& host = r.elements[2].elements[0];
    const RedisReply& port = r.elements[2].elements[1];
    if (first < 0 || last < first || last >= kClusterSlots) return bad("slots " + std::to_string(first) + "-" + std::to_string(last));
    if (host.type != RedisReply::Type::kString || port.type != RedisReply::Type::kInteger || port.integer <= 0 ||
        port.integer > 65535)
      return bad("a master's address is not a host and a port");
    SlotRange range{static_cast<uint16_t>(first), static_cast<uint16_t>(last),
                    ClusterNode{host.str.empty() || host.str == "?" ? asked.host : host.str, static_cast<int>(port.integer)}};
    out.push_back(std::move(range));
  }
  return out;
}

std::optional<ClusterRedirect> ParseRedirect(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::kError) return std::nullopt;
  const std::string_view s = reply.str;
  ClusterRedirect r;
  std::string_view rest;
  if (s.rfind("MOVED ", 0) == 0) {
    rest = s.substr(6);
  } else if (s.rfind("ASK ", 0) == 0) {
    r.ask = true;
    rest = s.substr(4);
  } else {
    return std::nullopt;
  }
  const size_t space = rest.find(' ');
  int64_t slot = 0;
  if (space == std::string_view::npos || !ParseInt(rest.substr(0, space), &slot) || slot < 0 || slot >= kClusterSlots)
    return std::nullopt;
  std::optional<ClusterNode> to = ParseEndpoint(rest.substr(space + 1));
  if (!to) return std::nullopt;
  r.slot = static_cast<uint16_t>(slot);
  r.to = std::move(*to);
  return r;
}

RedisClusterRouter::RedisClusterRouter(const RedisOptions& options, ClusterNode seed) : options_(options) {
  slot_owner_.fill(-1);
  known_.push_back(std::move(seed));
}

RedisClusterRouter::~RedisClusterRouter() = default;

Result<std::unique_ptr<RedisClusterRouter>> RedisClusterRouter::Open(const RedisOptions& options, const RedisReply& slots) {
  if (options.database != 0)
    return InvalidArgument("RedisOptions.database " + std::to_string(options.database) + ": a Redis Cluster has only database 0");
  ClusterNode seed{options.host, options.port};
  FAK_ASSIGN_OR_RETURN(std::vector<SlotRange> ranges, ParseClusterSlots(slots, seed));
  std::unique_ptr<RedisClusterRouter> router(new RedisClusterRouter(options, std::move(seed)));
  FAK_RETURN_IF_ERROR(router->Apply(ranges));
  ++router->refreshes_;
  return router;
}

Status RedisClusterRouter::Apply(const std::vector<SlotRange>& ranges) {
  if (ranges.empty()) return Unavailable("redis cluster: no slot is assigned to any master (CLUSTER SLOTS is empty)");
  std::lock_guard lock(mu_);
  masters_.clear();
  slot_owner_.fill(-1);
  for (const SlotRange& r : ranges) {
    const std::string ep = r.master.Endpoint();
    auto it = std::find_if(masters_.begin(), masters_.end(), [&](const ClusterNode& m) { return m.Endpoint() == ep; });
    if (it == masters_.end()) it = masters_.insert(masters_.end(), r.master);
    std::fill(slot_owner_.begin() + r.first, slot_owner_.begin() + r.last + 1, static_cast<int16_t>(it - masters_.begin()));
    if (std::none_of(known_.begin(), known_.end(), [&](const ClusterNode& k) { return k.Endpoint() == ep; })) known_.push_back(r.master);
  }
  last_refresh_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

Status RedisClusterRouter::Refresh(bool force) {
  std::vector<ClusterNode> ask;
  {
    std::lock_guard lock(mu_);
    if (!force && std::chrono::steady_clock::now() - last_refresh_ < kMinRefreshInterval) return Status::Ok();
    last_refresh_ = std::chrono::steady_clock::now();  // one caller refreshes; the others go on with the map they have
    ask = known_;
  }
  std::string why;
  for (const ClusterNode& n : ask) {
    FAK_ASSIGN_OR_RETURN(RedisConnection * conn, Node(n));
    Result<RedisReply> r = conn->RunOne({"CLUSTER", "SLOTS"}, true);
    if (!r.has_value()) {
      why += StrCat(" ", n.Endpoint(), ": ", r.error().message(), ";");
      continue;
    }
    Result<std::vector<SlotRange>> ranges = ParseClusterSlots(*r, n);
    if (!ranges.has_value() || ranges->empty()) {
      why += StrCat(" ", n.Endpoint(), ": ", ranges.has_value() ? std::string_view("no slots") : ranges.error().message(), ";");
      continue;
    }
    ++refreshes_;
    return Apply(*ranges);
  }
  return Unavailable("redis cluster: no known node answered CLUSTER SLOTS:" + why);
}

Result<RedisConnection*> RedisClusterRouter::Node(const ClusterNode& node) {
  std::lock_guard lock(mu_);
  const std::string ep = node.Endpoint();
  auto it = nodes_.find(ep);
  if (it == nodes_.end()) {
    RedisOptions o = options_;
    o.host = node.host;
    o.port = node.port;
    o.unix_socket.clear();
    it = nodes_.emplace(ep, RedisConnection::ForNode(o)).first;
  }
  return it->second.get();
}

Result<ClusterNode> RedisClusterRouter::MasterOf(std::optional<uint16_t> slot) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      std::lock_guard lock(mu_);
      if (!slot.has_value() && !masters_.empty()) return masters_.front();
      if (slot.has_value() && slot_owner_[*slot] >= 0) return masters_[static_cast<size_t>(slot_owner_[*slot])];
    }
    if (attempt == 0) FAK_RETURN_IF_ERROR(Refresh(/*force=*/false));
  }
  return Unavailable("redis cluster: slot " + std::to_string(slot.value_or(0)) +
                     " has no master in the cluster's map (part of the cluster is down or not set up)");
}

Result<RedisReply> RedisClusterRouter::Follow(const RedisCommand& command, RedisReply reply, bool idempotent) {
  for (int hop = 0; hop < kMaxRedirects; ++hop) {
    std::optional<ClusterRedirect> r = ParseRedirect(reply);
    if (!r) return reply;
    FAK_ASSIGN_OR_RETURN(RedisConnection * to, Node(r->to));
    // A redirected command was not executed, so re-sending it is safe even when not idempotent.
    if (r->ask) {
      ++asked_;
      const RedisCommand batch[] = {{"ASKING"}, command};
      FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> two, to->Run(batch, idempotent));
      if (two[0].type == RedisReply::Type::kError) return ErrorReplyStatus("redis " + to->endpoint() + ": ASKING", two[0]);
      reply = std::move(two[1]);
      continue;
    }
    ++moved_;
    {
      std::lock_guard lock(mu_);
      const std::string ep = r->to.Endpoint();
      auto it = std::find_if(masters_.begin(), masters_.end(), [&](const ClusterNode& m) { return m.Endpoint() == ep; });
      if (it == masters_.end()) it = masters_.insert(masters_.end(), r->to);
      slot_owner_[r->slot] = static_cast<int16_t>(it - masters_.begin());
    }
    (void)Refresh(/*force=*/false);  // the rest of the map likely moved too; the slot itself is known now
    FAK_ASSIGN_OR_RETURN(reply, to->RunOne(command, idempotent));
  }
  return Unavailable("redis cluster: " + CommandName(command) + " was still redirected after " + std::to_string(kMaxRedirects) +
                     " hops (the cluster is resharding); retry later");
}

Result<std::vector<RedisClusterRouter::Leg>> RedisClusterRouter::Plan(std::span<const RedisCommand> commands) {
  std::vector<std::optional<uint16_t>> slots;
  for (const RedisCommand& c : commands) {
    FAK_ASSIGN_OR_RETURN(std::optional<uint16_t> s, CommandSlot(c));
    slots.push_back(s);
  }
  std::vector<Leg> runs;
  for (size_t i = 0; i < commands.size(); ++i) {
    // A keyless command joins the run before it.
    if (!slots[i].has_value() && !runs.empty()) {
      ++runs.back().end;
      continue;
    }
    FAK_ASSIGN_OR_RETURN(ClusterNode master, MasterOf(slots[i]));
    if (!runs.empty() && runs.back().master.Endpoint() == master.Endpoint()) {
      ++runs.back().end;
    } else {
      runs.push_back(Leg{i, i + 1, std::move(master)});
    }
  }
  return runs;
}

Status RedisClusterRouter::Unreachable(const Status& s) {
  // A failover may have moved the node's slots: the next call routes by a fresh map.
  if (s.code() == StatusCode::kUnavailable) (void)Refresh(/*force=*/false);
  return s;
}

Result<std::vector<RedisReply>> RedisClusterRouter::Run(std::span<const RedisCommand> commands, bool idempotent) {
  return Route(commands, idempotent, nullptr);
}

Result<std::vector<RedisReply>> RedisClusterRouter::RunInto(std::span<const RedisCommand> commands, bool idempotent,
                                                            std::span<char> dest, size_t* written) {
  Into into{dest, 0};
  Result<std::vector<RedisReply>> out = Route(commands, idempotent, &into);
  *written = into.written;
  return out;
}

Result<std::vector<RedisReply>> RedisClusterRouter::Route(std::span<const RedisCommand> commands, bool idempotent, Into* into) {
  FAK_ASSIGN_OR_RETURN(std::vector<Leg> legs, Plan(commands));
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (const Leg& leg : legs) {
    FAK_ASSIGN_OR_RETURN(RedisConnection * node, Node(leg.master));
    const std::span<const RedisCommand> part = commands.subspan(leg.begin, leg.end - leg.begin);
    size_t got = 0;
    Result<std::vector<RedisReply>> replies = into == nullptr ? node->Run(part, idempotent)
                                                              : node->RunInto(part, idempotent, into->dest.subspan(into->written), &got);
    if (!replies.has_value()) return Unreachable(replies.error());
    size_t at = 0;  // RunInto: where the leg's next value lies in dest (its values lie one after another)
    if (into != nullptr) {
      at = into->written;
      into->written += got;
    }
    for (size_t i = 0; i < part.size(); ++i) {
      RedisReply r = std::move((*replies)[i]);
      if (ParseRedirect(r).has_value()) {
        // A slot moved under this leg: only this command was refused (the others ran), so it alone
        // goes again, where the redirect says, and its value is slid into its place.
        FAK_ASSIGN_OR_RETURN(r, Follow(part[i], std::move(r), idempotent));
        if (into != nullptr) FAK_RETURN_IF_ERROR(PlaceAt(part[i], at, into, &r));
      }
      if (into != nullptr && r.type == RedisReply::Type::kString) at += static_cast<size_t>(r.integer);
      out.push_back(std::move(r));
    }
  }
  return out;
}

Status RedisClusterRouter::PlaceAt(const RedisCommand& command, size_t at, Into* into, RedisReply* reply) {
  if (reply->type == RedisReply::Type::kString) {
    const size_t n = reply->str.size();
    if (n > into->dest.size() - into->written)
      return Corruption("redis cluster: " + CommandName(command) + ": a value of " + std::to_string(n) + " bytes does not fit the " +
                        std::to_string(into->dest.size() - into->written) + " bytes left");
    // The later commands' values were received after `at`: move them up to make room.
    std::memmove(into->dest.data() + at + n, into->dest.data() + at, into->written - at);
    std::memcpy(into->dest.data() + at, reply->str.data(), n);
    into->written += n;
    reply->integer = static_cast<int64_t>(n);
    reply->str.clear();
    return Status::Ok();
  }
  if (reply->type != RedisReply::Type::kNil && reply->type != RedisReply::Type::kInteger && reply->type != RedisReply::Type::kError)
    return Corruption("redis cluster: " + CommandName(command) + ": unexpected reply " + DescribeReply(*reply));
  return Status::Ok();
}

Result<std::vector<std::string>> RedisClusterRouter::ScanKeys(const std::string& pattern) {
  std::vector<ClusterNode> masters;
  {
    std::lock_guard lock(mu_);
    masters = masters_;
  }
  std::vector<std::string> keys;
  for (const ClusterNode& m : masters) {
    FAK_ASSIGN_OR_RETURN(RedisConnection * node, Node(m));
    FAK_ASSIGN_OR_RETURN(std::vector<std::string> some, node->ScanKeys(pattern));
    keys.insert(keys.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
  }
  return keys;
}

ClusterStats RedisClusterRouter::Stats() const { return ClusterStats{moved_.load(), asked_.load(), refreshes_.load()}; }

}  // namespace fak::internal
