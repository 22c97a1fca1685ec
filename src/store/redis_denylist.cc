// RedisDenylist: the fleet quarantine authority (docs/store.md §5.3). One hash per entry under
// "<prefix>:q:{<hex>}" (fleet) or "<prefix>:t:<tenant>:q:{<hex>}" (tenant) holding the current
// state, and a list "<key>:log" holding every add and revocation; all of a digest's keys share its
// hash tag, so each change is one atomic script and a read of both scopes stays on one shard.
#include <algorithm>
#include <charconv>

#include "fak/store/redis_store.h"
#include "src/store/redis_connection.h"

namespace fak {
namespace {

using internal::RedisCommand;
using internal::RedisConnection;
using internal::RedisReply;

// KEYS: record, log. ARGV: reason, unix ms.
constexpr const char* kAddScript = R"lua(
redis.call('HSET', KEYS[1], 'state', 'quarantined', 'reason', ARGV[1], 'added_ms', ARGV[2])
redis.call('HDEL', KEYS[1], 'revoke_reason', 'revoked_ms')
redis.call('RPUSH', KEYS[2], 'add\t' .. ARGV[2] .. '\t' .. ARGV[1])
return 1)lua";

// KEYS: record, log. ARGV: reason, unix ms. Returns 0 when the digest is not quarantined.
constexpr const char* kRevokeScript = R"lua(
if redis.call('HGET', KEYS[1], 'state') ~= 'quarantined' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'revoked', 'revoke_reason', ARGV[1], 'revoked_ms', ARGV[2])
redis.call('RPUSH', KEYS[2], 'revoke\t' .. ARGV[2] .. '\t' .. ARGV[1])
return 1)lua";

int64_t ParseMillis(std::string_view s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string LogKey(const RedisOptions& o, const Digest& d, DenylistScope scope) {
  return RedisDenylistKey(o, d, scope) + ":log";
}

// Everything before the hash tag of a scope's record keys.
std::string KeyHead(const RedisOptions& o, DenylistScope scope) {
  return scope == DenylistScope::kFleet ? o.prefix + ":q:" : o.prefix + ":t:" + o.tenant + ":q:";
}

const char* ScopeName(DenylistScope scope) { return scope == DenylistScope::kFleet ? "fleet" : "tenant"; }

}  // namespace

struct RedisDenylist::Impl {
  std::unique_ptr<RedisConnection> conn;
  DenylistRole role = DenylistRole::kTenant;

  const RedisOptions& o() const { return conn->options(); }
  Status Unexpected(const std::string& what, const RedisReply& r) const {
    if (r.type == RedisReply::Type::kError) return internal::ErrorReplyStatus("redis " + conn->endpoint() + ": " + what, r);
    return Corruption("redis " + conn->endpoint() + ": " + what + ": unexpected reply " + internal::DescribeReply(r));
  }
  Result<DenylistRecord> ParseRecord(const Digest& digest, DenylistScope scope, const RedisReply& r) const;
  // FailedPrecondition when this handle may not write `scope`.
  Status CheckWrite(DenylistScope scope, const std::string& what) const {
    if (scope == DenylistScope::kTenant || role == DenylistRole::kFleetAdmin) return Status::Ok();
    return FailedPrecondition("denylist " + what + ": tenant '" + o().tenant +
                              "' may write only its own entries; a fleet entry needs DenylistRole::kFleetAdmin");
  }
  // The (state, reason) of the tenant's entry and the fleet's, in one round trip.
  Result<std::vector<RedisReply>> ReadBoth(const Digest& digest) const {
    std::vector<RedisCommand> batch = {{"HMGET", RedisDenylistKey(o(), digest, DenylistScope::kTenant), "state", "reason"},
                                       {"HMGET", RedisDenylistKey(o(), digest, DenylistScope::kFleet), "state", "reason"}};
    FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> r, conn->Run(batch, /*idempotent=*/true));
    for (const RedisReply& one : r) {
      if (one.type != RedisReply::Type::kArray || one.elements.size() != 2) return Unexpected("denylist read " + digest.Hex(), one);
    }
    return r;
  }
};

RedisDenylist::RedisDenylist(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisDenylist::~RedisDenylist() = default;

Result<std::shared_ptr<RedisDenylist>> RedisDenylist::Open(const RedisOptions& options, DenylistRole role) {
  auto impl = std::make_unique<Impl>();
  impl->role = role;
  FAK_ASSIGN_OR_RETURN(impl->conn, RedisConnection::Open(options));
  return std::shared_ptr<RedisDenylist>(new RedisDenylist(std::move(impl)));
}

Result<bool> RedisDenylist::IsQuarantined(const Digest& digest) const {
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> r, impl_->ReadBoth(digest));
  return r[0].elements[0].str == "quarantined" || r[1].elements[0].str == "quarantined";
}

Status RedisDenylist::Add(const Digest& digest, std::string reason) {
  return Add(digest, std::move(reason), DenylistScope::kTenant);
}

Status RedisDenylist::Add(const Digest& digest, std::string reason, DenylistScope scope) {
  const RedisOptions& o = impl_->o();
  FAK_RETURN_IF_ERROR(impl_->CheckWrite(scope, "Add " + digest.Hex()));
  // Re-sending an add repeats one history line at worst; the state is the same.
  FAK_ASSIGN_OR_RETURN(RedisReply r,
                       impl_->conn->RunOne({"EVAL", kAddScript, "2", RedisDenylistKey(o, digest, scope), LogKey(o, digest, scope),
                                            std::move(reason), std::to_string(internal::UnixMillisNow())},
                                           /*idempotent=*/true));
  if (r.type != RedisReply::Type::kInteger) return impl_->Unexpected("denylist Add " + digest.Hex(), r);
  return Status::Ok();
}

Status RedisDenylist::Revoke(const Digest& digest, std::string_view reason, DenylistScope scope) {
  const RedisOptions& o = impl_->o();
  FAK_RETURN_IF_ERROR(impl_->CheckWrite(scope, "Revoke " + digest.Hex()));
  FAK_ASSIGN_OR_RETURN(RedisReply r,
                       impl_->conn->RunOne({"EVAL", kRevokeScript, "2", RedisDenylistKey(o, digest, scope), LogKey(o, digest, scope),
                                            std::string(reason), std::to_string(internal::UnixMillisNow())},
                                           /*idempotent=*/false));
  if (r.type != RedisReply::Type::kInteger) return impl_->Unexpected("denylist Revoke " + digest.Hex(), r);
  if (r.integer == 0)
    return NotFound("denylist Revoke: digest " + digest.Hex() + " is not quarantined in the " + ScopeName(scope) + " scope");
  return Status::Ok();
}

Result<DenylistRecord> RedisDenylist::Impl::ParseRecord(const Digest& digest, DenylistScope scope,
                                                        const RedisReply& r) const {
  if (r.type != RedisReply::Type::kArray || r.elements.size() % 2 != 0)
    return Unexpected("denylist record " + digest.Hex(), r);
  DenylistRecord rec;
  rec.digest = digest;
  rec.scope = scope;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    const std::string& field = r.elements[i].str;
    const std::string& value = r.elements[i + 1].str;
    if (field == "state") rec.quarantined = value == "quarantined";
    else if (field == "reason") rec.reason = value;
    else if (field == "added_ms") rec.added_unix_ms = ParseMillis(value);
    else if (field == "revoke_reason") rec.revoke_reason = value;
    else if (field == "revoked_ms") rec.revoked_unix_ms = ParseMillis(value);
  }
  return rec;
}

Result<std::optional<DenylistRecord>> RedisDenylist::Lookup(const Digest& digest, DenylistScope scope) {
  FAK_ASSIGN_OR_RETURN(RedisReply r, impl_->conn->RunOne({"HGETALL", RedisDenylistKey(impl_->o(), digest, scope)}, true));
  if (r.type == RedisReply::Type::kArray && r.elements.empty()) return std::optional<DenylistRecord>();
  FAK_ASSIGN_OR_RETURN(DenylistRecord rec, impl_->ParseRecord(digest, scope, r));
  return std::optional<DenylistRecord>(std::move(rec));
}

Result<std::vector<DenylistRecord>> RedisDenylist::Entries(DenylistScope scope) {
  const std::string head = KeyHead(impl_->o(), scope) + "{";
  std::vector<Digest> digests;
  // The pattern ends in '}', so the ":log" lists do not match.
  FAK_ASSIGN_OR_RETURN(std::vector<std::string> keys, impl_->conn->ScanKeys(head + "*}"));
  for (const std::string& key : keys) {
    if (key.size() != head.size() + 65) continue;
    Result<Digest> d = Digest::FromHex(std::string_view(key).substr(head.size(), 64));
    if (d.has_value()) digests.push_back(*d);
  }
  std::sort(digests.begin(), digests.end());
  digests.erase(std::unique(digests.begin(), digests.end()), digests.end());
  std::vector<RedisCommand> batch;
  for (const Digest& d : digests) batch.push_back({"HGETALL", RedisDenylistKey(impl_->o(), d, scope)});
  FAK_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, impl_->conn->Run(batch, true));
  std::vector<DenylistRecord> out;
  for (size_t i = 0; i < digests.size(); ++i) {
    if (replies[i].type == RedisReply::Type::kArray && replies[i].elements.empty()) continue;  // removed meanwhile
    FAK_ASSIGN_OR_RETURN(DenylistRecord rec, impl_->ParseRecord(digests[i], scope, replies[i]));
    out.push_back(std::move(rec));
  }
  return out;
}

Result<std::vector<DenylistEvent>> RedisDenylist::History(const Digest& digest, DenylistScope scope) {
  const std::string key = LogKey(impl_->o(), digest, scope);
  FAK_ASSIGN_OR_RETURN(RedisReply r, impl_->conn->RunOne({"LRANGE", key, "0", "-1"}, true));
  if (r.type != RedisReply::Type::kArray) return impl_->Unexpected("denylist History " + key, r);
  std::vector<DenylistEvent> out;
  for (const RedisReply& line : r.elements) {
    const size_t t1 = line.str.find('\t');
    const size_t t2 = t1 == std::string::npos ? t1 : line.str.find('\t', t1 + 1);
    if (t2 == std::string::npos) return Corruption("denylist History " + key + ": malformed entry '" + line.str + "'");
    DenylistEvent e;
    const std::string_view kind = std::string_view(line.str).substr(0, t1);
    if (kind != "add" && kind != "revoke") return Corruption("denylist History " + key + ": unknown event '" + std::string(kind) + "'");
    e.kind = kind == "add" ? DenylistEvent::Kind::kAdd : DenylistEvent::Kind::kRevoke;
    e.unix_ms = ParseMillis(std::string_view(line.str).substr(t1 + 1, t2 - t1 - 1));
    e.reason = line.str.substr(t2 + 1);
    out.push_back(std::move(e));
  }
  return out;
}

Status RedisDenylist::CopyTo(QuarantineDenylist& local) {
  for (DenylistScope scope : {DenylistScope::kTenant, DenylistScope::kFleet}) {
    FAK_ASSIGN_OR_RETURN(std::vector<DenylistRecord> records, Entries(scope));
    for (DenylistRecord& r : records) {
      if (r.quarantined) FAK_RETURN_IF_ERROR(local.Add(r.digest, std::string(ScopeName(scope)) + ": " + r.reason));
    }
  }
  return Status::Ok();
}

Verdict RedisDenylist::Screen(const ScreenInput& input) const {
  const Digest digest = input.source_digest.has_value() ? *input.source_digest : Digest::Of(input.bytes);
  Result<std::vector<RedisReply>> r = impl_->ReadBoth(digest);
  if (!r.has_value()) {
    if (!impl_->o().screen_fail_closed) return Verdict::Admit();
    // Unknown is not bad: withhold the bytes this time, but never quarantine them for it.
    return Verdict::Unavailable(std::string(name()), "fleet denylist cannot be asked now (withheld, retry later): " +
                                                         r.error().ToString());
  }
  for (DenylistScope scope : {DenylistScope::kFleet, DenylistScope::kTenant}) {
    const RedisReply& one = (*r)[scope == DenylistScope::kTenant ? 0 : 1];
    if (one.elements[0].str == "quarantined")
      return Verdict::Quarantine(std::string(name()), "digest " + digest.Hex() + " is on the " + ScopeName(scope) +
                                                          " denylist: " + one.elements[1].str);
  }
  return Verdict::Admit();
}

std::string RedisDenylistKey(const RedisOptions& options, const Digest& digest, DenylistScope scope) {
  return KeyHead(options, scope) + "{" + digest.Hex() + "}";
}

}  // namespace fak
