// RedisFleet against a real redis-server: an announced erasure is applied by every other listening
// worker and confirmed; who is waited for (live, listening) and who is not (gone, silent too long);
// announcements made after a worker joined are applied even when it starts listening later; an
// entry the link did not write is passed over; bad options and an unreachable Redis are errors.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "src/server/redis_fleet.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::RawRedis;
using testing::RedisServer;

template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class RedisFleetLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FAK_REQUIRE_REDIS();
    server_ = std::make_unique<RedisServer>(tmp_.path());
    ASSERT_TRUE(server_->Start());
  }
  RedisFleetOptions Options(const std::string& id) const {
    RedisFleetOptions o;
    o.redis = server_->Options();
    o.worker_id = id;
    o.heartbeat_ms = 100;
    o.live_after_ms = 1500;
    o.confirm_timeout_ms = 3000;
    return o;
  }
  // A link that records what it is asked to apply.
  struct Recorder {
    std::mutex mu;
    std::vector<FleetErasure> applied;
    FleetLink::ApplyErasure Apply() {
      return [this](const FleetErasure& e) {
        std::lock_guard lock(mu);
        applied.push_back(e);
        return std::string("3 tokens");
      };
    }
    size_t size() {
      std::lock_guard lock(mu);
      return applied.size();
    }
  };
  testing::ScopedTempDir tmp_;
  std::unique_ptr<RedisServer> server_;
};

TEST_F(RedisFleetLinkTest, AnErasureIsAppliedByEveryOtherWorkerAndConfirmed) {
  ASSERT_OK_AND_ASSIGN(auto a, RedisFleet::Open(Options("a")));
  ASSERT_OK_AND_ASSIGN(auto b, RedisFleet::Open(Options("b")));
  ASSERT_OK_AND_ASSIGN(auto c, RedisFleet::Open(Options("c")));
  Recorder at_a, at_b, at_c;
  ASSERT_OK(a->Listen(at_a.Apply()));
  ASSERT_OK(b->Listen(at_b.Apply()));
  ASSERT_OK(c->Listen(at_c.Apply()));
  const Digest d = Digest::Of("forget me");
  const FleetConfirmation conf = a->Announce(FleetErasure{d, std::string("alice")}, /*wait=*/true);
  EXPECT_EQ(conf.error, "");
  EXPECT_FALSE(conf.event_id.empty());
  EXPECT_EQ(conf.confirmed, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(conf.pending.empty());
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b.applied[0].source, d);
  EXPECT_EQ(at_b.applied[0].tenant, std::optional<std::string>("alice"));
  EXPECT_EQ(at_c.size(), 1u);
  EXPECT_EQ(at_a.size(), 0u);  // the origin removed its own copies itself
  // A quarantine (everyone's copy) travels without a tenant; not waited for, it is still applied.
  const FleetConfirmation q = b->Announce(FleetErasure{Digest::Of("injected"), std::nullopt}, /*wait=*/false);
  EXPECT_EQ(q.confirmed, std::vector<std::string>{"b"});
  ASSERT_TRUE(WaitFor([&] { return at_a.size() == 1 && at_c.size() == 2; }, std::chrono::seconds(10)));
  EXPECT_EQ(at_a.applied[0].tenant, std::nullopt);
}

TEST_F(RedisFleetLinkTest, GoneWorkersAreNotWaitedForAndSilentOnesArePending) {
  ASSERT_OK_AND_ASSIGN(auto a, RedisFleet::Open(Options("a")));
  Recorder at_a;
  ASSERT_OK(a->Listen(at_a.Apply()));
  {
    ASSERT_OK_AND_ASSIGN(auto gone, RedisFleet::Open(Options("gone")));
    ASSERT_OK_AND_ASSIGN(std::vector<std::string> live, a->LiveWorkers());
    EXPECT_EQ(live, (std::vector<std::string>{"a", "gone"}));
  }  // leaves the fleet
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> live, a->LiveWorkers());
  EXPECT_EQ(live, std::vector<std::string>{"a"});
  EXPECT_TRUE(a->Announce(FleetErasure{Digest::Of("x"), std::string("t")}, true).pending.empty());
  // Joined but not listening (a worker stuck before it serves): waited for until its heartbeat is
  // older than live_after_ms, then no longer.
  RedisFleetOptions o = Options("silent");
  ASSERT_OK_AND_ASSIGN(auto silent, RedisFleet::Open(o));
  RedisFleetOptions quick = Options("b");
  quick.confirm_timeout_ms = 200;
  ASSERT_OK_AND_ASSIGN(auto b, RedisFleet::Open(quick));
  FleetConfirmation conf = b->Announce(FleetErasure{Digest::Of("y"), std::string("t")}, true);
  EXPECT_EQ(conf.confirmed, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(conf.pending, std::vector<std::string>{"silent"});
  std::this_thread::sleep_for(std::chrono::milliseconds(o.live_after_ms + 200));
  conf = b->Announce(FleetErasure{Digest::Of("z"), std::string("t")}, true);
  EXPECT_TRUE(conf.pending.empty());
}

TEST_F(RedisFleetLinkTest, AnnouncementsSinceJoiningAreAppliedWhenListeningStarts) {
  ASSERT_OK_AND_ASSIGN(auto a, RedisFleet::Open(Options("a")));
  (void)a->Announce(FleetErasure{Digest::Of("before b joined"), std::nullopt}, false);
  ASSERT_OK_AND_ASSIGN(auto b, RedisFleet::Open(Options("b")));
  (void)a->Announce(FleetErasure{Digest::Of("after b joined"), std::nullopt}, false);
  // An entry the link did not write: passed over, not retried forever, not applied.
  RawRedis raw(server_->port());
  EXPECT_EQ(raw.Command({"XADD", "faktest:{fleet}:erasures", "*", "origin", "a", "digest", "not-hex"}).substr(0, 1), "$");
  (void)a->Announce(FleetErasure{Digest::Of("after the junk"), std::nullopt}, false);
  Recorder at_b;
  ASSERT_OK(b->Listen(at_b.Apply()));
  ASSERT_TRUE(WaitFor([&] { return at_b.size() == 2; }, std::chrono::seconds(10)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(at_b.size(), 2u);
  EXPECT_EQ(at_b.applied[0].source, Digest::Of("after b joined"));
  EXPECT_EQ(at_b.applied[1].source, Digest::Of("after the junk"));
}

TEST_F(RedisFleetLinkTest, BadOptionsAndAnUnreachableRedisAreErrors) {
  for (const std::string& id : {std::string(), std::string("has space"), std::string(65, 'w')}) {
    RedisFleetOptions o = Options(id);
    EXPECT_EQ(RedisFleet::Open(o).status().code(), StatusCode::kInvalidArgument) << id;
  }
  RedisFleetOptions timing = Options("w");
  timing.live_after_ms = timing.heartbeat_ms;
  EXPECT_EQ(RedisFleet::Open(timing).status().code(), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(auto a, RedisFleet::Open(Options("a")));
  server_->Stop();
  RedisFleetOptions o = Options("late");
  EXPECT_EQ(RedisFleet::Open(o).status().code(), StatusCode::kUnavailable);
  const FleetConfirmation conf = a->Announce(FleetErasure{Digest::Of("x"), std::nullopt}, true);
  EXPECT_TRUE(conf.event_id.empty());
  EXPECT_NE(conf.error, "");
  EXPECT_EQ(conf.confirmed, std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace fak
