// Recall Save with a fleet denylist admitter whose Redis is down: the undecided verdict is never
// recorded (before issue 20 an image recorded it as "quarantine", sealing harmless text for good);
// Save answers Unavailable, writes nothing, and succeeds with an "admit" once Redis is back.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fak/recall/recall.h"
#include "fak/store/redis_store.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(RedisRecall, AnUndecidedVerdictIsNeverRecordedAsQuarantine) {
  FAK_REQUIRE_REDIS();
  testing::ScopedTempDir tmp;
  testing::RedisServer server(tmp.path());
  ASSERT_TRUE(server.Start());
  RedisOptions o = server.Options("t1");
  o.connect_timeout_ms = 200;
  o.command_timeout_ms = 200;
  o.max_retries = 0;
  o.breaker_cooldown_ms = 100;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<RedisDenylist> fleet, RedisDenylist::Open(o));
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK(chain.Add(fleet));
  ASSERT_OK_AND_ASSIGN(auto store, RecallStore::Open(tmp.Sub("recall")));
  const std::vector<RecallSegment> segs = {{"u1", SegmentKind::kUser, "weather?"},
                                           {"tool1", SegmentKind::kToolResult, "result: sunny, 24C"}};

  server.Kill();
  Result<Digest> down = store->Save("t", segs, chain);
  ASSERT_FALSE(down.has_value());
  EXPECT_EQ(down.error().code(), StatusCode::kUnavailable) << down.error().ToString();
  EXPECT_NE(down.error().message().find("nothing was saved"), std::string_view::npos) << down.error().ToString();
  EXPECT_EQ(store->Load("t", ScreenChain::Default()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->blobs().Stats().n_blobs, 0u);

  ASSERT_TRUE(server.Restart());
  Result<Digest> up = Unavailable("not tried");
  for (int i = 0; i < 60 && !up.has_value(); ++i) {  // the breaker lets a probe through after its cool-down
    up = store->Save("t", segs, chain);
    if (!up.has_value()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_OK(up.status());
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, store->Load("t", ScreenChain::Default()));
  ASSERT_EQ(t.segments.size(), 2u);
  for (const RecalledSegment& s : t.segments) {
    EXPECT_EQ(s.recorded.action, Verdict::Action::kAdmit) << s.id << ": " << s.recorded.reason;
  }
}

}  // namespace
}  // namespace fak
