// Redis Cluster: key slots per the cluster spec (CRC16, hash tags), fak's key families each in one
// slot, multi-key commands across slots refused before sending; and on a real 3-master cluster
// (started by the test): the blob store, the denylist and the KV tier round trip with their keys
// spread over the masters, a slot migrated under an open handle (ASK while it moves, MOVED after)
// is followed, and a stopped master answers Unavailable for its slots only, promptly.
#include <gtest/gtest.h>

#include <chrono>

#include "fak/kvtier/redis_kv_tier.h"
#include "fak/store/redis_store.h"
#include "src/store/redis_cluster.h"
#include "src/store/redis_connection.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/redis_cluster_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using internal::ClusterRedirect;
using internal::CommandSlot;
using internal::Crc16;
using internal::KeySlot;
using internal::ParseClusterSlots;
using internal::ParseRedirect;
using internal::RedisCommand;
using internal::RedisConnection;
using internal::RedisReply;

TEST(RedisClusterSlots, FollowTheClusterSpec) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the spec's check value
  EXPECT_EQ(KeySlot("foo"), 12182);      // as CLUSTER KEYSLOT answers
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(KeySlot("foo{}{bar}"), Crc16("foo{}{bar}") % 16384);  // an empty tag hashes the whole key
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), Crc16("{bar") % 16384);      // the tag ends at the first '}'
  EXPECT_EQ(KeySlot("foo{bar}{zap}"), Crc16("bar") % 16384);       // only the first tag counts
  EXPECT_EQ(KeySlot("foo{bar"), Crc16("foo{bar") % 16384);         // no closing brace: no tag
}

TEST(RedisClusterSlots, EveryKeyFamilyThatIsTouchedTogetherSharesASlot) {
  RedisOptions o;
  o.prefix = "fak";
  o.tenant = "acme";
  const Digest d = Digest::Of("a text");
  // A blob's value and pin count (the pin scripts touch both).
  EXPECT_EQ(KeySlot(RedisBlobKey(o, d)), KeySlot(RedisPinKey(o, d)));
  // A denylist entry's tenant and fleet records (read in one batch) and their logs (one script).
  const std::string tenant_key = RedisDenylistKey(o, d, DenylistScope::kTenant);
  const std::string fleet_key = RedisDenylistKey(o, d, DenylistScope::kFleet);
  EXPECT_EQ(KeySlot(tenant_key), KeySlot(fleet_key));
  EXPECT_EQ(KeySlot(tenant_key), KeySlot(tenant_key + ":log"));
  // Control: two digests land in different slots (the tag is the digest, not a constant).
  EXPECT_NE(KeySlot(RedisBlobKey(o, d)), KeySlot(RedisBlobKey(o, Digest::Of("another text"))));
}

TEST(RedisClusterSlots, AMultiKeyCommandAcrossSlotsIsRefusedNamingBothKeys) {
  Result<std::optional<uint16_t>> s = CommandSlot({"DEL", "foo", "bar"});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.error().message().find("'foo' in 12182, 'bar' in 5061"), std::string::npos) << s.error().ToString();
  EXPECT_FALSE(CommandSlot({"EVAL", "return 1", "2", "foo", "bar"}).has_value());
  EXPECT_FALSE(CommandSlot({"EVAL", "return 1", "3", "foo"}).has_value());  // more keys than arguments
  EXPECT_FALSE(CommandSlot({"FLUSHALL"}).has_value());                       // unknown: never guessed
  EXPECT_EQ(**CommandSlot({"EVAL", "return 1", "2", "{t}a", "{t}b", "arg"}), KeySlot("t"));
  EXPECT_EQ(**CommandSlot({"XREAD", "COUNT", "1", "STREAMS", "s", "0-0"}), KeySlot("s"));
  EXPECT_FALSE(CommandSlot({"PING"})->has_value());
}

TEST(RedisClusterSlots, RedirectsAndSlotMapsAreParsedAndChecked) {
  RedisReply moved{RedisReply::Type::kError, "MOVED 3999 127.0.0.1:6381", 0, {}};
  std::optional<ClusterRedirect> r = ParseRedirect(moved);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ask);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(r->to.Endpoint(), "127.0.0.1:6381");
  EXPECT_TRUE(ParseRedirect({RedisReply::Type::kError, "ASK 1 ::1:7000", 0, {}})->ask);
  EXPECT_FALSE(ParseRedirect({RedisReply::Type::kError, "MOVED 16384 h:1", 0, {}}).has_value());
  EXPECT_FALSE(ParseRedirect({RedisReply::Type::kError, "ERR MOVED 1 h:1", 0, {}}).has_value());
  const auto slots = [](int64_t first, int64_t last, int64_t port) {
    RedisReply node{RedisReply::Type::kArray, "", 0,
                    {{RedisReply::Type::kString, "", 0, {}}, {RedisReply::Type::kInteger, "", port, {}}}};
    RedisReply range{RedisReply::Type::kArray, "", 0,
                     {{RedisReply::Type::kInteger, "", first, {}}, {RedisReply::Type::kInteger, "", last, {}}, node}};
    return RedisReply{RedisReply::Type::kArray, "", 0, {range}};
  };
  ASSERT_OK_AND_ASSIGN(auto ranges, ParseClusterSlots(slots(0, 16383, 7000), {"10.0.0.1", 6379}));
  EXPECT_EQ(ranges[0].master.Endpoint(), "10.0.0.1:7000");  // an empty host is the node asked
  EXPECT_EQ(ParseClusterSlots(slots(0, 16384, 7000), {}).error().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseClusterSlots(slots(5, 4, 7000), {}).error().code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseClusterSlots(slots(0, 1, 0), {}).error().code(), StatusCode::kCorruption);
}

// One cluster for the suite: starting one costs a few seconds. Each test uses its own prefix.
class RedisClusterLive : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::RedisServerBinary().empty()) return;
    cluster_ = new testing::RedisClusterForTest();
    started_ = cluster_->Start();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    FAK_REQUIRE_REDIS();
    ASSERT_TRUE(started_) << "the test cluster did not start";
  }
  static testing::RedisClusterForTest* cluster_;
  static bool started_;
};
testing::RedisClusterForTest* RedisClusterLive::cluster_ = nullptr;
bool RedisClusterLive::started_ = false;

TEST_F(RedisClusterLive, TheBlobStoreSpreadsOverTheMastersAndListsThemAll) {
  const RedisOptions o = cluster_->Options("blobs");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BlobStore> store, OpenRedisBlobStore(o));
  std::vector<std::string> payloads;
  for (int i = 0; i < 24; ++i) payloads.push_back("payload " + std::to_string(i) + std::string(static_cast<size_t>(i) * 40, 'x'));
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> digests, store->PutMany(views));  // one batch, split by master
  std::vector<int> per_node(3, 0);
  for (const Digest& d : digests) ++per_node[static_cast<size_t>(cluster_->OwnerOf(RedisBlobKey(o, d)))];
  for (int n : per_node) EXPECT_GT(n, 0) << "24 digests should reach every master";
  std::vector<Result<std::string>> got = store->GetMany(digests);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].has_value()) << got[i].error().ToString();
    EXPECT_EQ(*got[i], payloads[i]);
  }
  // Pin / Unpin / Remove run their two-key scripts on the digest's master.
  ASSERT_OK(store->Pin(digests[0]));
  EXPECT_EQ(store->Remove(digests[0]).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store->Unpin(digests[0]));
  ASSERT_OK(store->Remove(digests[0]));
  EXPECT_EQ(store->Get(digests[0]).error().code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> listed, store->List());  // SCAN on every master
  std::vector<Digest> want(digests.begin() + 1, digests.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want);
}

TEST_F(RedisClusterLive, TheDenylistSealsAndScreensAcrossMasters) {
  RedisOptions o = cluster_->Options("deny");
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<RedisDenylist> admin, RedisDenylist::Open(o, DenylistRole::kFleetAdmin));
  std::vector<Digest> sealed;
  for (int i = 0; i < 12; ++i) sealed.push_back(Digest::Of("sealed " + std::to_string(i)));
  for (size_t i = 0; i < sealed.size(); ++i)
    ASSERT_OK(admin->Add(sealed[i], "test", i % 2 == 0 ? DenylistScope::kFleet : DenylistScope::kTenant));
  ASSERT_OK(admin->Revoke(sealed[1], "changed our mind"));
  for (size_t i = 0; i < sealed.size(); ++i) EXPECT_EQ(*admin->IsQuarantined(sealed[i]), i != 1) << i;
  EXPECT_FALSE(*admin->IsQuarantined(Digest::Of("never sealed")));  // control
  EXPECT_EQ(admin->Entries(DenylistScope::kFleet)->size(), 6u);
  EXPECT_EQ(admin->Entries(DenylistScope::kTenant)->size(), 6u);
  EXPECT_EQ(admin->History(sealed[1])->size(), 2u);
  const Verdict v = admin->Screen(ScreenInput{.bytes = "x", .source_digest = sealed[0]});
  EXPECT_EQ(v.action, Verdict::Action::kQuarantine);
}

TEST_F(RedisClusterLive, AKVTierRoundTripServesBitExactFromEveryMaster) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  std::vector<TranscriptRef> texts;  // several, so their entries' slots differ
  for (int i = 0; i < 6; ++i) texts.push_back(testing::Conversation(corpus, "cluster " + std::to_string(i)));
  const TranscriptRef& t = texts[0];
  const RedisOptions o = cluster_->Options("kv");
  std::vector<int64_t> before(3);
  for (int i = 0; i < 3; ++i) before[static_cast<size_t>(i)] = cluster_->KeysOn(i);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier_a, OpenRedisKVTier(o, /*chunk_bytes=*/4096));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier_b, OpenRedisKVTier(o, /*chunk_bytes=*/4096));
  {
    testing::Worker a = testing::MakeWorker(corpus, chain, {.seed = 1, .spill_to = tier_a.get(), .write_through = true});
    for (const TranscriptRef& one : texts) ASSERT_TRUE(a.driver->Materialize("default", one).has_value());
    a.spiller->Flush();
    ASSERT_EQ(a.spiller->Stats().failed, 0u) << a.spiller->Stats().last_error;
  }
  int grew = 0;
  for (int i = 0; i < 3; ++i) grew += cluster_->KeysOn(i) > before[static_cast<size_t>(i)];
  EXPECT_GE(grew, 2) << "the entries' chunks should spread over the masters";
  testing::Worker b = testing::MakeWorker(corpus, chain, {.seed = 1, .page_from = tier_b.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t));
  ASSERT_EQ(m.verdict, MaterializeVerdict::kFault) << m.detail;
  const std::vector<float> want = testing::RecomputeLogits(*b.model, m.tokens);
  EXPECT_EQ(testing::MaxAbsDiff(m.logits, want), 0.0f);
  testing::Worker other = testing::MakeWorker(corpus, chain, {.seed = 2});  // control
  EXPECT_GT(testing::MaxAbsDiff(testing::RecomputeLogits(*other.model, m.tokens), want), 0.0f);
  // Erasing a text runs the index scripts (one slot) and the chunk DELs (the entry's slot).
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier_a->KeysFromSource(t.segments[1]));  // this text's own
  ASSERT_FALSE(keys.empty());
  ASSERT_OK_AND_ASSIGN(size_t erased, tier_a->EraseSource(t.segments[1]));
  EXPECT_EQ(erased, keys.size());
  for (const TierKey& key : keys) {
    EXPECT_EQ(tier_b->Get(key).error().code(), StatusCode::kNotFound);
    const std::string chunk = "kv:kvt:c:{" + key.id + "}:0";
    const int owner = cluster_->OwnerOf(chunk);
    ASSERT_GE(owner, 0);
    testing::RawRedis raw(cluster_->node(owner).port());
    EXPECT_EQ(raw.Command({"EXISTS", chunk}), ":0");  // the chunks went too, on their own master
  }
  // Control: another text's entries are untouched.
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> kept, tier_b->KeysFromSource(texts[1].segments[1]));
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(tier_b->Get(kept[0]).has_value());
}

TEST_F(RedisClusterLive, ACrossSlotCommandIsRefusedBeforeAnythingIsSent) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(cluster_->Options("x")));
  ASSERT_TRUE(conn->cluster_stats().has_value());
  ASSERT_OK(conn->RunOne({"SET", "x:foo", "1"}, true).status());
  Result<RedisReply> r = conn->RunOne({"DEL", "x:foo", "x:bar"}, false);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("{hash tag}"), std::string::npos) << r.error().ToString();
  EXPECT_EQ(conn->RunOne({"GET", "x:foo"}, true)->str, "1");  // nothing was deleted
  // Control: with one tag the same command runs.
  ASSERT_OK(conn->RunOne({"SET", "x:{t}a", "1"}, true).status());
  EXPECT_EQ(conn->RunOne({"DEL", "x:{t}a", "x:{t}b"}, false)->integer, 1);
}

// A slot moves under an open handle: while it is migrating, a key already moved is answered
// through ASK; once it is assigned to its new master, the old one answers MOVED and the handle
// follows and learns the new map.
TEST_F(RedisClusterLive, ASlotMigratedUnderAnOpenHandleIsFollowed) {
  const RedisOptions o = cluster_->Options("mig");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(o));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BlobStore> store, OpenRedisBlobStore(o));
  const std::string payload = "a text that moves between masters";
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put(payload));
  const std::string key = RedisBlobKey(o, d);
  const std::string slot = std::to_string(KeySlot(key));
  const int from = cluster_->OwnerOf(key);
  ASSERT_GE(from, 0);
  const int to = (from + 1) % 3;
  testing::RawRedis src(cluster_->node(from).port()), dst(cluster_->node(to).port());
  ASSERT_EQ(dst.Command({"CLUSTER", "SETSLOT", slot, "IMPORTING", cluster_->Id(from)}), "+OK");
  ASSERT_EQ(src.Command({"CLUSTER", "SETSLOT", slot, "MIGRATING", cluster_->Id(to)}), "+OK");
  ASSERT_EQ(src.Command({"MIGRATE", "127.0.0.1", std::to_string(cluster_->node(to).port()), key, "0", "5000"}), "+OK");
  // Mid-migration: the source no longer has the key and answers ASK.
  EXPECT_EQ(src.Command({"GET", key}).rfind("-ASK", 0), 0u);
  ASSERT_OK_AND_ASSIGN(RedisReply asked, conn->RunOne({"GET", key}, true));
  EXPECT_EQ(asked.str, payload);
  EXPECT_EQ(conn->cluster_stats()->asked, 1u);
  EXPECT_EQ(conn->cluster_stats()->moved, 0u);
  for (int i = 0; i < 3; ++i) {
    testing::RawRedis n(cluster_->node(i).port());
    ASSERT_EQ(n.Command({"CLUSTER", "SETSLOT", slot, "NODE", cluster_->Id(to)}), "+OK") << i;
  }
  EXPECT_EQ(src.Command({"GET", key}).rfind("-MOVED", 0), 0u);
  ASSERT_OK_AND_ASSIGN(RedisReply moved, conn->RunOne({"GET", key}, true));
  EXPECT_EQ(moved.str, payload);
  EXPECT_EQ(conn->cluster_stats()->moved, 1u);
  ASSERT_OK_AND_ASSIGN(RedisReply again, conn->RunOne({"GET", key}, true));  // the map was learnt
  EXPECT_EQ(again.str, payload);
  EXPECT_EQ(conn->cluster_stats()->moved, 1u);
  // The store opened before the move reads it too, through the same redirects.
  EXPECT_EQ(*store->Get(d), payload);
  ASSERT_OK(store->Pin(d));  // a script, re-sent after MOVED (it had not run)
  ASSERT_OK(store->Unpin(d));
}

// RunInto (the KV tier's zero-copy read) across a moving slot: mid-migration only the key already
// moved answers ASK, so only it is fetched again, and its value is slid into its place between the
// others'; after the move every key answers MOVED and the whole batch is followed, still in order.
TEST_F(RedisClusterLive, RunIntoPlacesARedirectedValueWhereItBelongs) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RedisConnection> conn, RedisConnection::Open(cluster_->Options("into")));
  const std::vector<std::string> keys = {"into:{moving}a", "into:{moving}b", "into:{moving}c"};
  const std::vector<std::string> values = {"first value", "the second, which moves", "third"};
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_OK(conn->RunOne({"SET", keys[i], values[i]}, true).status());
  const std::vector<RedisCommand> gets = {{"GET", keys[0]}, {"GET", keys[1]}, {"GET", keys[2]}};
  const auto read_all = [&](std::string* got) -> Result<std::vector<RedisReply>> {
    std::string buf(64, '\0');
    size_t written = 0;
    Result<std::vector<RedisReply>> r = conn->RunInto(gets, true, std::span<char>(buf.data(), buf.size()), &written);
    *got = buf.substr(0, written);
    return r;
  };
  const std::string want = values[0] + values[1] + values[2];
  std::string got;
  ASSERT_OK_AND_ASSIGN(std::vector<RedisReply> before, read_all(&got));
  ASSERT_EQ(got, want);  // control: no redirect
  const std::string slot = std::to_string(KeySlot(keys[0]));
  const int from = cluster_->OwnerOf(keys[0]);
  ASSERT_GE(from, 0);
  const int to = (from + 1) % 3;
  testing::RawRedis src(cluster_->node(from).port()), dst(cluster_->node(to).port());
  ASSERT_EQ(dst.Command({"CLUSTER", "SETSLOT", slot, "IMPORTING", cluster_->Id(from)}), "+OK");
  ASSERT_EQ(src.Command({"CLUSTER", "SETSLOT", slot, "MIGRATING", cluster_->Id(to)}), "+OK");
  ASSERT_EQ(src.Command({"MIGRATE", "127.0.0.1", std::to_string(cluster_->node(to).port()), keys[1], "0", "5000"}), "+OK");
  ASSERT_OK_AND_ASSIGN(std::vector<RedisReply> asked, read_all(&got));
  EXPECT_EQ(got, want);
  ASSERT_EQ(asked.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(asked[i].integer, static_cast<int64_t>(values[i].size())) << i;
  EXPECT_EQ(conn->cluster_stats()->asked, 1u);  // only the moved key was asked again
  // A moved value that does not fit what the others left is refused, never written past the end.
  std::string small(want.size() - 1, '\0');
  size_t written = 0;
  const Result<std::vector<RedisReply>> tight = conn->RunInto(gets, true, std::span<char>(small.data(), small.size()), &written);
  ASSERT_FALSE(tight.has_value());
  EXPECT_EQ(tight.error().code(), StatusCode::kCorruption) << tight.error().ToString();
  ASSERT_EQ(src.Command({"MIGRATE", "127.0.0.1", std::to_string(cluster_->node(to).port()), "", "0", "5000", "KEYS", keys[0],
                         keys[2]}), "+OK");
  for (int i = 0; i < 3; ++i) {
    testing::RawRedis n(cluster_->node(i).port());
    ASSERT_EQ(n.Command({"CLUSTER", "SETSLOT", slot, "NODE", cluster_->Id(to)}), "+OK") << i;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<RedisReply> moved, read_all(&got));
  EXPECT_EQ(got, want);
  EXPECT_GE(conn->cluster_stats()->moved, 1u);
}

// A master stops: its slots answer Unavailable naming it, promptly (its breaker then fails fast);
// the other masters' slots keep working; nothing hangs, nothing crashes.
TEST(RedisClusterOutage, AStoppedMasterIsUnavailableForItsSlotsOnly) {
  FAK_REQUIRE_REDIS();
  testing::RedisClusterForTest cluster;
  ASSERT_TRUE(cluster.Start());
  RedisOptions o = cluster.Options("down");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BlobStore> store, OpenRedisBlobStore(o));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<RedisDenylist> deny, RedisDenylist::Open(o));
  std::vector<Digest> digests;
  for (int i = 0; i < 12; ++i) digests.push_back(*store->Put("text " + std::to_string(i)));
  cluster.node(2).Stop();
  size_t down = 0, up = 0;
  for (const Digest& d : digests) {
    const int owner = cluster.OwnerOf(RedisBlobKey(o, d));
    const auto start = std::chrono::steady_clock::now();
    Result<std::string> got = store->Get(d);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::seconds(3)) << "an outage must answer within the configured bounds";
    if (owner == 2) {  // the stopped master's key
      ++down;
      ASSERT_FALSE(got.has_value());
      EXPECT_EQ(got.error().code(), StatusCode::kUnavailable) << got.error().ToString();
      EXPECT_NE(got.error().message().find(std::to_string(cluster.node(2).port())), std::string::npos) << got.error().ToString();
      // The seal of a text on that master is unknown: withheld, never quarantined.
      const Verdict v = deny->Screen(ScreenInput{.bytes = "x", .kind = SegmentKind::kUser, .source_digest = d});
      EXPECT_EQ(v.action, Verdict::Action::kUnavailable);
    } else {
      ++up;
      EXPECT_TRUE(got.has_value()) << got.error().ToString();
    }
  }
  EXPECT_GT(down, 0u);
  EXPECT_GT(up, 0u);
}

}  // namespace
}  // namespace fak
