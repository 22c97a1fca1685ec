// Redis outages against a real redis-server: a stalled server (SIGSTOP) delays each caller by one
// timeout at most, not by everyone's queue; the circuit breaker then fails fast and recovers after
// SIGCONT; a killed server answers Unavailable and the same handle works again after a restart; a
// full server is a clear ResourceExhausted, not a hang; denylist writes are scoped by tenant/role.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "fak/store/redis_store.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::RandomBytes;
using testing::RedisServer;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class RedisOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FAK_REQUIRE_REDIS();
    server_ = std::make_unique<RedisServer>(tmp_.path());
    ASSERT_TRUE(server_->Start());
  }
  // Short timeouts so each test stays well under a second per outage.
  RedisOptions Options(const std::string& tenant = "default") const {
    RedisOptions o = server_->Options(tenant);
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = kTimeoutMs;
    o.max_retries = 1;
    o.breaker_failure_threshold = 3;
    o.breaker_cooldown_ms = 300;
    return o;
  }
  static constexpr int kTimeoutMs = 300;
  testing::ScopedTempDir tmp_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisOutageTest, StalledServerDelaysEachCallByOneTimeoutThenTheBreakerFailsFastAndRecovers) {
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(Options()));
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put("kept through the stall"));
  server_->Pause();
  constexpr int kCallers = 4;
  std::vector<double> seconds(kCallers);
  std::vector<Status> errors(kCallers);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      Result<std::string> r = store->Get(d);
      seconds[i] = SecondsSince(t0);
      errors[i] = r.error();
    });
  }
  for (std::thread& t : callers) t.join();
  std::printf("stalled redis: %d concurrent calls returned after", kCallers);
  for (int i = 0; i < kCallers; ++i) {
    std::printf(" %.3f", seconds[i]);
    EXPECT_EQ(errors[i].code(), StatusCode::kUnavailable) << errors[i].ToString();
    EXPECT_NE(errors[i].message().find("timed out"), std::string_view::npos) << errors[i].ToString();
    // Serialized on one connection they would return after 1, 2, 3 and 4 timeouts.
    EXPECT_LT(seconds[i], 2.0 * kTimeoutMs / 1000) << "caller " << i << " waited behind another";
  }
  std::printf(" s (timeout %d ms)\n", kTimeoutMs);

  // Four consecutive failures opened the breaker: the next call fails fast, naming the endpoint.
  Clock::time_point t1 = Clock::now();
  Result<bool> fast = store->Contains(d);
  const double fast_s = SecondsSince(t1);
  ASSERT_FALSE(fast.has_value());
  EXPECT_EQ(fast.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(fast.error().message().find("circuit breaker open"), std::string_view::npos) << fast.error().ToString();
  EXPECT_NE(fast.error().message().find("127.0.0.1:" + std::to_string(server_->port())), std::string_view::npos);
  EXPECT_LT(fast_s, 0.05);

  server_->Resume();
  std::this_thread::sleep_for(std::chrono::milliseconds(350));  // past the cool-down: one probe goes through
  ASSERT_OK_AND_ASSIGN(std::string back, store->Get(d));
  EXPECT_EQ(back, "kept through the stall");
  ASSERT_OK_AND_ASSIGN(bool has, store->Contains(d));
  EXPECT_TRUE(has);
  std::printf("stalled redis: breaker failed fast in %.4f s and closed after SIGCONT\n", fast_s);
}

TEST_F(RedisOutageTest, KilledServerIsUnavailableAndTheSameHandleWorksAfterRestart) {
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(Options()));
  ASSERT_OK_AND_ASSIGN(auto denylist, RedisDenylist::Open(Options()));
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put("durable text"));
  ASSERT_OK(denylist->Add(d, "listed before the outage"));
  server_->Kill();
  for (int i = 0; i < 5; ++i) {  // refused, then the open breaker: always Unavailable, never slow
    const Clock::time_point t0 = Clock::now();
    Result<std::string> got = store->Get(d);
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error().code(), StatusCode::kUnavailable) << got.error().ToString();
    EXPECT_LT(SecondsSince(t0), 1.0);
  }
  Result<bool> listed = denylist->IsQuarantined(d);
  ASSERT_FALSE(listed.has_value()) << "an outage is not an answer";
  EXPECT_EQ(listed.error().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server_->Restart());
  Result<std::string> back = Unavailable("not tried");
  const Clock::time_point t0 = Clock::now();
  while (SecondsSince(t0) < 3.0) {  // the breaker lets a probe through once its cool-down ends
    back = store->Get(d);
    if (back.has_value()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ(*back, "durable text");
  std::printf("killed redis: the same handle served again %.3f s after the restart\n", SecondsSince(t0));
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  ASSERT_OK_AND_ASSIGN(bool q, denylist->IsQuarantined(d));
  EXPECT_TRUE(q);
}

TEST_F(RedisOutageTest, FullServerIsAClearErrorNotAHang) {
  testing::ScopedTempDir full_dir;
  RedisServer full(full_dir.path());
  ASSERT_TRUE(full.Start({"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}));
  RedisOptions o = full.Options();
  o.command_timeout_ms = kTimeoutMs;
  ASSERT_OK_AND_ASSIGN(auto store, OpenRedisBlobStore(o));
  ASSERT_OK_AND_ASSIGN(auto denylist, RedisDenylist::Open(o));
  const Clock::time_point t0 = Clock::now();
  Status put;
  for (uint32_t i = 0; i < 64 && put.ok(); ++i) put = store->Put(RandomBytes(64 * 1024, i)).status();
  ASSERT_FALSE(put.ok()) << "4 MiB fit under maxmemory 1mb";
  EXPECT_EQ(put.code(), StatusCode::kResourceExhausted) << put.ToString();
  EXPECT_NE(put.message().find("OOM"), std::string_view::npos) << put.ToString();
  const Status add = denylist->Add(Digest::Of("x"), std::string(1000, 'r'));
  EXPECT_EQ(add.code(), StatusCode::kResourceExhausted) << add.ToString();
  EXPECT_LT(SecondsSince(t0), 2.0);
}

TEST_F(RedisOutageTest, TenantsWriteOnlyTheirOwnEntriesUnlessFleetAdmin) {
  ASSERT_OK_AND_ASSIGN(auto alice, RedisDenylist::Open(Options("alice")));
  ASSERT_OK_AND_ASSIGN(auto bob, RedisDenylist::Open(Options("bob")));
  ASSERT_OK_AND_ASSIGN(auto admin, RedisDenylist::Open(Options("ops"), DenylistRole::kFleetAdmin));
  const Digest mine = Digest::Of("alice's bad tool output"), everyones = Digest::Of("known malware text");

  const Status refused = alice->Add(everyones, "alice tries to deny it for all", DenylistScope::kFleet);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_NE(refused.message().find("kFleetAdmin"), std::string_view::npos) << refused.ToString();
  ASSERT_OK_AND_ASSIGN(std::optional<DenylistRecord> none, admin->Lookup(everyones, DenylistScope::kFleet));
  EXPECT_FALSE(none.has_value()) << "a refused write leaves nothing behind";

  // A tenant's own entry quarantines for that tenant only.
  ASSERT_OK(alice->Add(mine, "alice's call"));
  ASSERT_OK_AND_ASSIGN(bool alice_sees, alice->IsQuarantined(mine));
  ASSERT_OK_AND_ASSIGN(bool bob_sees, bob->IsQuarantined(mine));
  EXPECT_TRUE(alice_sees);
  EXPECT_FALSE(bob_sees);
  EXPECT_FALSE(bob->Screen({"alice's bad tool output", SegmentKind::kToolResult, std::nullopt}).quarantined());
  EXPECT_EQ(bob->Revoke(mine, "bob cannot lift it").code(), StatusCode::kNotFound);

  // A fleet entry (admin only) quarantines for every tenant; only an admin may revoke it.
  ASSERT_OK(admin->Add(everyones, "fleet takedown", DenylistScope::kFleet));
  for (const auto& tenant : {alice, bob}) {
    ASSERT_OK_AND_ASSIGN(bool q, tenant->IsQuarantined(everyones));
    EXPECT_TRUE(q);
  }
  const Verdict v = bob->Screen({"known malware text", SegmentKind::kToolResult, std::nullopt});
  EXPECT_TRUE(v.quarantined());
  EXPECT_NE(v.reason.find("fleet denylist: fleet takedown"), std::string::npos) << v.reason;
  EXPECT_EQ(alice->Revoke(everyones, "alice tries to lift it", DenylistScope::kFleet).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(std::vector<DenylistRecord> fleet, bob->Entries(DenylistScope::kFleet));
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].scope, DenylistScope::kFleet);
  ASSERT_OK(admin->Revoke(everyones, "cleared", DenylistScope::kFleet));
  ASSERT_OK_AND_ASSIGN(bool lifted, bob->IsQuarantined(everyones));
  EXPECT_FALSE(lifted);
}

}  // namespace
}  // namespace fak
