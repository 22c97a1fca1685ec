// RedisBlobStore against a real redis-server: round trips, dedup, counted pins shared between
// connections, verify-on-read (a value tampered with behind the library's back is never served),
// tenant isolation, pipelined batches, TTL and pins, Redis Cluster hash tags (a cluster-mode server
// rejects any script whose keys span slots), and clear, bounded errors when Redis is unreachable.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fak/store/redis_store.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::RandomBytes;
using testing::RawRedis;
using testing::RedisServer;

class RedisBlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FAK_REQUIRE_REDIS();
    server_ = std::make_unique<RedisServer>(tmp_.path());
    ASSERT_TRUE(server_->Start());
  }
  std::unique_ptr<BlobStore> Open(const std::string& tenant = "default") {
    Result<std::unique_ptr<BlobStore>> s = OpenRedisBlobStore(server_->Options(tenant));
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    return s.has_value() ? std::move(*s) : nullptr;
  }

  testing::ScopedTempDir tmp_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisBlobStoreTest, PutGetRoundTripAndDedup) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->backend(), "redis");
  std::vector<Digest> digests;
  for (size_t n : {size_t{0}, size_t{1}, size_t{256}, size_t{257}, size_t{70000}, size_t{1} << 20}) {
    const std::string payload = RandomBytes(n, static_cast<uint32_t>(n));
    ASSERT_OK_AND_ASSIGN(Digest d, store->Put(payload));
    EXPECT_EQ(d, Digest::Of(payload));
    ASSERT_OK_AND_ASSIGN(std::string back, store->Get(d));
    EXPECT_EQ(back, payload) << n;
    ASSERT_OK_AND_ASSIGN(bool has, store->Contains(d));
    EXPECT_TRUE(has);
    digests.push_back(d);
  }
  ASSERT_OK(store->Put(RandomBytes(257, 257)));
  EXPECT_EQ(store->Stats().n_dedup_hits, 1u);
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> listed, store->List());
  std::sort(digests.begin(), digests.end());
  EXPECT_EQ(listed, digests);
  const Digest absent = Digest::Of("never stored");
  EXPECT_EQ(store->Get(absent).error().code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(bool has_absent, store->Contains(absent));
  EXPECT_FALSE(has_absent);
}

TEST_F(RedisBlobStoreTest, PinsAreCountedAndSharedAcrossConnections) {
  auto a = Open(), b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_OK_AND_ASSIGN(Digest d, a->Put("pinned text"));
  ASSERT_OK(a->Pin(d));
  ASSERT_OK(a->Pin(d));
  EXPECT_EQ(b->Remove(d).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(b->Unpin(d));
  EXPECT_EQ(b->Remove(d).code(), StatusCode::kFailedPrecondition) << "one pin is left";
  ASSERT_OK(b->Unpin(d));
  EXPECT_EQ(a->Unpin(d).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(a->Remove(d));
  EXPECT_EQ(b->Get(d).error().code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Pin(d).code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Unpin(d).code(), StatusCode::kNotFound);
  EXPECT_EQ(b->Remove(d).code(), StatusCode::kNotFound);
}

TEST_F(RedisBlobStoreTest, TamperedValueIsNeverServed) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string payload = RandomBytes(4000, 7);
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put(payload));
  const RedisOptions o = server_->Options();
  RawRedis raw(server_->port());
  ASSERT_EQ(raw.Command({"SET", RedisBlobKey(o, d), payload.substr(0, 3999) + "X"}), "+OK");
  Result<std::string> got = store->Get(d);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kVerificationFailed) << got.error().ToString();
  EXPECT_NE(got.error().message().find(d.Hex()), std::string_view::npos);
  std::vector<Result<std::string>> many = store->GetMany(std::vector<Digest>{d});
  EXPECT_EQ(many[0].error().code(), StatusCode::kVerificationFailed);
  EXPECT_EQ(store->Stats().n_verify_failures, 2u);
  // A Put of the true bytes repairs the value.
  ASSERT_OK(store->Put(payload));
  ASSERT_OK_AND_ASSIGN(std::string repaired, store->Get(d));
  EXPECT_EQ(repaired, payload);
  // A key holding another type is Corruption, naming the key.
  const Digest other = Digest::Of("other");
  ASSERT_EQ(raw.Command({"LPUSH", RedisBlobKey(o, other), "x"}), ":1");
  got = store->Get(other);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kCorruption) << got.error().ToString();
  EXPECT_NE(got.error().message().find(RedisBlobKey(o, other)), std::string_view::npos) << got.error().ToString();
}

TEST_F(RedisBlobStoreTest, TenantsCannotReadEachOther) {
  auto alice = Open("alice"), bob = Open("bob");
  ASSERT_TRUE(alice && bob);
  ASSERT_OK_AND_ASSIGN(Digest d, alice->Put("alice's secret"));
  EXPECT_EQ(bob->Get(d).error().code(), StatusCode::kNotFound);
  EXPECT_EQ(bob->GetMany(std::vector<Digest>{d})[0].error().code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(bool bob_has, bob->Contains(d));
  EXPECT_FALSE(bob_has);
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> bob_list, bob->List());
  EXPECT_TRUE(bob_list.empty());
  EXPECT_EQ(bob->Pin(d).code(), StatusCode::kNotFound);
  EXPECT_EQ(bob->Remove(d).code(), StatusCode::kNotFound);
  // The same bytes in both tenants are two independent blobs.
  ASSERT_OK(bob->Put("alice's secret"));
  ASSERT_OK(alice->Remove(d));
  EXPECT_TRUE(bob->Get(d).has_value());
  EXPECT_EQ(alice->Get(d).error().code(), StatusCode::kNotFound);
  // A tenant name cannot reach into another namespace (no ':', braces or glob characters).
  for (const std::string& bad : std::vector<std::string>{"", "bob:t:alice", "{x}", "a*", "a b", std::string(65, 'a')}) {
    Result<std::unique_ptr<BlobStore>> s = OpenRedisBlobStore(server_->Options(bad));
    ASSERT_FALSE(s.has_value()) << bad;
    EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.error().message().find("tenant"), std::string_view::npos) << s.error().ToString();
  }
  RedisOptions bad_prefix = server_->Options();
  bad_prefix.prefix = "fak:t:alice";
  EXPECT_EQ(OpenRedisBlobStore(bad_prefix).error().code(), StatusCode::kInvalidArgument);
}

TEST_F(RedisBlobStoreTest, BatchesArePipelined) {
  RedisOptions o = server_->Options();
  o.pipeline_depth = 64;
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(o));
  std::vector<std::string> payloads;
  for (uint32_t i = 0; i < 1000; ++i) payloads.push_back(RandomBytes(100 + i % 700, i));
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> digests, store->PutMany(views));
  ASSERT_EQ(digests.size(), payloads.size());
  digests.insert(digests.begin() + 500, Digest::Of("missing"));
  std::vector<Result<std::string>> got = store->GetMany(digests);
  ASSERT_EQ(got.size(), digests.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (i == 500) {
      EXPECT_EQ(got[i].error().code(), StatusCode::kNotFound);
      continue;
    }
    ASSERT_TRUE(got[i].has_value()) << i << ": " << got[i].error().ToString();
    EXPECT_EQ(*got[i], payloads[i < 500 ? i : i - 1]);
  }
  EXPECT_EQ(store->Stats().n_puts, 1000u);
  EXPECT_EQ(store->Stats().n_gets, 1001u);
}

TEST_F(RedisBlobStoreTest, TtlNeverAppliesToPinnedBlobs) {
  RedisOptions o = server_->Options();
  EXPECT_EQ(RedisBlobKey(o, Digest::Of("x")).find("{" + Digest::Of("x").Hex() + "}"), std::string("faktest:t:default:").size());
  ASSERT_OK_AND_ASSIGN(auto plain, OpenRedisBlobStore(o));
  ASSERT_OK_AND_ASSIGN(Digest forever, plain->Put("no ttl by default"));
  RawRedis raw(server_->port());
  EXPECT_EQ(raw.Command({"TTL", RedisBlobKey(o, forever)}), ":-1");
  o.ttl_seconds = 1000;
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(o));
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put("expiring text"));
  EXPECT_NE(raw.Command({"TTL", RedisBlobKey(o, d)}), ":-1");
  ASSERT_OK(store->Pin(d));
  EXPECT_EQ(raw.Command({"TTL", RedisBlobKey(o, d)}), ":-1");
  ASSERT_OK(store->Put("expiring text"));  // a re-put keeps a pinned blob TTL-free
  EXPECT_EQ(raw.Command({"TTL", RedisBlobKey(o, d)}), ":-1");
  ASSERT_OK(store->Unpin(d));
  EXPECT_NE(raw.Command({"TTL", RedisBlobKey(o, d)}), ":-1");
}

// In cluster mode Redis refuses any script or multi-key command whose keys hash to different slots
// (CROSSSLOT), so this proves every operation keeps one digest's keys on one shard.
TEST(RedisClusterTest, EveryOperationStaysInOneHashSlot) {
  FAK_REQUIRE_REDIS();
  testing::ScopedTempDir tmp;
  RedisServer server(tmp.path());
  ASSERT_TRUE(server.Start({"--cluster-enabled", "yes", "--cluster-config-file", tmp.Sub("nodes.conf")}, /*max_port=*/55535));
  RawRedis raw(server.port());
  ASSERT_EQ(raw.Command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}), "+OK");
  for (int i = 0; i < 100 && raw.Command({"EXISTS", "probe"}) != ":0"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // until the cluster state is ok
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(server.Options()));
  ASSERT_OK_AND_ASSIGN(auto denylist, RedisDenylist::Open(server.Options()));
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put("cluster text"));
  ASSERT_OK(store->Pin(d));
  ASSERT_OK(store->Unpin(d));
  ASSERT_OK_AND_ASSIGN(std::string back, store->Get(d));
  EXPECT_EQ(back, "cluster text");
  ASSERT_OK(store->Remove(d));
  ASSERT_OK(denylist->Add(d, "cluster test"));
  ASSERT_OK(denylist->Revoke(d, "cluster test over"));
  const RedisOptions o = server.Options();
  const std::string slot = raw.Command({"CLUSTER", "KEYSLOT", RedisBlobKey(o, d)});
  EXPECT_EQ(raw.Command({"CLUSTER", "KEYSLOT", RedisPinKey(o, d)}), slot);
  EXPECT_EQ(raw.Command({"CLUSTER", "KEYSLOT", RedisDenylistKey(o, d, DenylistScope::kTenant)}), slot);
  EXPECT_EQ(raw.Command({"CLUSTER", "KEYSLOT", RedisDenylistKey(o, d, DenylistScope::kFleet)}), slot);
}

// A port with nothing on it: the open fails at once with Unavailable naming the endpoint.
TEST(RedisUnreachableTest, RefusedConnectionIsAClearError) {
  RedisOptions o;
  o.port = testing::FreeLoopbackPort();
  o.max_retries = 2;
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<BlobStore>> s = OpenRedisBlobStore(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.error().message().find("127.0.0.1:" + std::to_string(o.port)), std::string_view::npos) << s.error().ToString();
  EXPECT_NE(s.error().message().find("3 attempts"), std::string_view::npos) << s.error().ToString();
  EXPECT_LT(seconds, 2.0);
  EXPECT_EQ(RedisDenylist::Open(o).error().code(), StatusCode::kUnavailable);
}

// A peer that accepts connections but never answers: the command timeout ends the call.
TEST(RedisUnreachableTest, SilentServerTimesOutInsteadOfHanging) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);  // the kernel completes handshakes; nobody ever reads
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  RedisOptions o;
  o.port = ntohs(a.sin_port);
  o.command_timeout_ms = 300;
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<BlobStore>> s = OpenRedisBlobStore(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.error().message().find("timed out after 300 ms"), std::string_view::npos) << s.error().ToString();
  EXPECT_LT(seconds, 2.0);
}

TEST(RedisOptionsTest, BadOptionsNameTheirField) {
  RedisOptions o;
  o.port = 0;
  EXPECT_NE(OpenRedisBlobStore(o).error().message().find("port"), std::string_view::npos);
  o = RedisOptions();
  o.command_timeout_ms = 0;
  EXPECT_NE(OpenRedisBlobStore(o).error().message().find("command_timeout_ms"), std::string_view::npos);
  o = RedisOptions();
  o.pipeline_depth = 0;
  EXPECT_NE(RedisDenylist::Open(o).error().message().find("pipeline_depth"), std::string_view::npos);
}

}  // namespace
}  // namespace fak
