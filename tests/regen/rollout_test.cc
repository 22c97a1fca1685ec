// Rollout policies, CanShare and the hot set: blue_green warms the new model before cutover,
// denylisted text is never backfilled, CanShare skips backfill only when every regime axis allows.
#include <gtest/gtest.h>

#include <algorithm>

#include "fak/regen/regime_oracle.h"
#include "fak/regen/rollout.h"
#include "tests/regen/regen_test_util.h"
#include "tests/test_util.h"
#include "src/core/str_cat.h"
#include "tests/support/manual_clock_env.h"

namespace fak {
namespace {

using testing::MakeServed;
using testing::PutTranscript;
using testing::Served;
using testing::ShiftedByteTokenizer;

constexpr int64_t kSec = 1'000'000'000;

class RolloutTest : public ::testing::Test {
 protected:
  RolloutTest()
      : store_(MakeMemoryBlobStore()), corpus_(*store_), chain_(ScreenChain::Default()),
        a_(MakeServed(1, MakeByteTokenizer())), b_(MakeServed(2, std::make_unique<ShiftedByteTokenizer>(7))),
        on_a_(a_.target(), corpus_, chain_), on_b_(b_.target(), corpus_, chain_) {}

  // Serves `n` sessions on A, each touched in the hot set at times 0..n-1 seconds.
  std::vector<TranscriptRef> ServeSessions(int n) {
    std::vector<TranscriptRef> out;
    for (int i = 0; i < n; ++i) {
      TranscriptRef t = PutTranscript(corpus_, internal::StrCat("s", std::to_string(i)),
                                      {"system: be brief.\n", internal::StrCat("user: session ", std::to_string(i), " asks a question.\n")});
      Materialized m = *on_a_.Materialize("default", t);
      hot_.Touch(t, m.tokens.size(), i * kSec);
      out.push_back(t);
    }
    return out;
  }

  std::unique_ptr<BlobStore> store_;
  TextCorpus corpus_;
  ScreenChain chain_;
  Served a_, b_;
  RegenDriver on_a_, on_b_;
  HotSetTracker hot_;
  testing::ManualClockEnv clock_;
};

TEST_F(RolloutTest, BlueGreenBackfillsTheHotSetThenCutsOver) {
  const auto sessions = ServeSessions(4);
  BackfillScheduler scheduler(&clock_, {});
  Rollout rollout(on_a_, on_b_, {RolloutPolicy::kBlueGreen});
  ASSERT_OK(rollout.Begin(hot_, scheduler));
  EXPECT_FALSE(rollout.cut_over());
  EXPECT_EQ(&rollout.Route("s0"), &on_a_);  // A serves while B warms
  RolloutStats st = rollout.Stats();
  EXPECT_EQ(st.phase, RolloutPhase::kWarming);
  EXPECT_EQ(st.backfill_tasks, 4u);
  scheduler.RunUntilIdle();
  rollout.Poll();
  ASSERT_TRUE(rollout.cut_over());
  for (const TranscriptRef& t : sessions) {
    ASSERT_OK_AND_ASSIGN(Materialized m, rollout.Route(t.session).Materialize("default", t));
    EXPECT_EQ(m.verdict, MaterializeVerdict::kHit) << t.session;
    ASSERT_TRUE(m.cache.has_value());
    EXPECT_OK(VerifyRegenerated(*b_.model, *m.cache, m.tokens));  // against B's recompute, not A's KV
  }
  EXPECT_GT(on_b_.Stats().backfilled_tokens, 0u);
  EXPECT_EQ(on_b_.Stats().count(MaterializeVerdict::kRecompute), 0u);
}

TEST_F(RolloutTest, BlueGreenBackfillsEachSessionUnderItsOwnTenant) {
  std::vector<TranscriptRef> sessions;
  for (const std::string tenant : {"acme", "globex"}) {
    TranscriptRef t = PutTranscript(corpus_, tenant + "-s", {"system: be brief.\n", "user: " + tenant + " asks.\n"});
    t.tenant = tenant;
    Materialized m = *on_a_.Materialize(tenant, t);
    hot_.Touch(t, m.tokens.size(), 0);
    sessions.push_back(t);
  }
  BackfillScheduler scheduler(&clock_, {});
  Rollout rollout(on_a_, on_b_, {RolloutPolicy::kBlueGreen});
  ASSERT_OK(rollout.Begin(hot_, scheduler));
  EXPECT_EQ(rollout.Stats().backfill_tasks, 2u);
  scheduler.RunUntilIdle();
  rollout.Poll();
  ASSERT_TRUE(rollout.cut_over());
  for (const TranscriptRef& t : sessions) {
    ASSERT_OK_AND_ASSIGN(Materialized m, on_b_.Materialize(t.tenant, t));
    EXPECT_EQ(m.verdict, MaterializeVerdict::kHit) << t.tenant << ": " << m.detail;
  }
  // Nothing was backfilled under the default tenant: its claim on the same text finds no KV.
  ASSERT_OK_AND_ASSIGN(Materialized other, on_b_.Materialize(kDefaultTenant, sessions[0]));
  EXPECT_EQ(other.verdict, MaterializeVerdict::kRecompute) << other.detail;
}

TEST_F(RolloutTest, DenylistedTextIsNeverBackfilled) {
  auto sessions = ServeSessions(3);
  ASSERT_OK(chain_.denylist().Add(sessions[1].segments[1], "takedown"));
  BackfillScheduler scheduler(&clock_, {});
  Rollout rollout(on_a_, on_b_, {RolloutPolicy::kBlueGreen});
  ASSERT_OK(rollout.Begin(hot_, scheduler));
  EXPECT_EQ(rollout.Stats().backfill_refused, 1u);
  EXPECT_EQ(rollout.Stats().backfill_tasks, 2u);
  scheduler.RunUntilIdle();
  rollout.Poll();
  ASSERT_TRUE(rollout.cut_over());
  // The listed session's own tokens are absent from B (only the shared system line is there).
  const std::vector<int32_t> listed = *on_b_.ContextTokens(sessions[1]);
  const size_t shared_prefix = b_.tokenizer->Encode("system: be brief.\nuser: session ")->size();
  EXPECT_LE(b_.tree->MatchLength(listed), shared_prefix);
  ASSERT_OK_AND_ASSIGN(Materialized m, on_b_.Materialize("default", sessions[1]));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRefuse);
  EXPECT_EQ(on_b_.Stats().backfill_refused, 1u);
  // Direct preparation is refused too, whatever the caller.
  Result<std::unique_ptr<BackfillTask>> direct = on_b_.PrepareBackfill("default", sessions[1]);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.error().code(), StatusCode::kFailedPrecondition);
}

TEST_F(RolloutTest, CanShareOnlyWhenEveryRegimeAxisAllows) {
  // A redeploy: same config and seed (same weights digest), same tokenizer, same regime.
  Served a2 = MakeServed(1, MakeByteTokenizer());
  ShareDecision same = CanShare(*a_.model, *a_.tokenizer, *a2.model, *a2.tokenizer);
  EXPECT_TRUE(same.share) << same.detail;
  // Each axis alone forbids it.
  EXPECT_EQ(CanShare(*a_.model, *a_.tokenizer, *b_.model, *a_.tokenizer).axis, BindingAxis::kModel);
  EXPECT_EQ(CanShare(*a_.model, *a_.tokenizer, *a_.model, *b_.tokenizer).axis, BindingAxis::kTokenizer);
  const BindingTuple regime = RegimeBinding(*a_.model, *a_.tokenizer);
  BindingTuple other = regime;
  other.precision.kernel_tier = regime.precision.kernel_tier == "scalar" ? "avx2" : "scalar";
  EXPECT_EQ(CanShare(regime, other).axis, BindingAxis::kPrecision);
  other = regime;
  other.adapter_id = Digest::Of("lora");
  EXPECT_EQ(CanShare(regime, other).axis, BindingAxis::kAdapter);
  other = regime;
  other.position.base *= 2;
  EXPECT_EQ(CanShare(regime, other).axis, BindingAxis::kPositionConvention);
  other = regime;
  other.producer.version += "+1";
  EXPECT_EQ(CanShare(regime, other).axis, BindingAxis::kProducer);

  // Shared: blue_green submits no backfill and the warm cache keeps serving.
  const auto sessions = ServeSessions(3);
  RegenDriver on_a2(a2.target(), corpus_, chain_);
  BackfillScheduler scheduler(&clock_, {});
  Rollout shared(on_a_, on_a2, {RolloutPolicy::kBlueGreen});
  ASSERT_OK(shared.Begin(hot_, scheduler));
  EXPECT_TRUE(shared.Stats().shared);
  EXPECT_EQ(shared.Stats().backfill_tasks, 0u);
  EXPECT_TRUE(shared.cut_over());
  EXPECT_TRUE(scheduler.Idle());
  ASSERT_OK_AND_ASSIGN(Materialized m, shared.Route("s0").Materialize("default", sessions[0]));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kHit);
  // Control: not shared (new weights) — the same policy does backfill.
  BackfillScheduler scheduler2(&clock_, {});
  Rollout not_shared(on_a_, on_b_, {RolloutPolicy::kBlueGreen});
  ASSERT_OK(not_shared.Begin(hot_, scheduler2));
  EXPECT_FALSE(not_shared.Stats().shared);
  EXPECT_EQ(not_shared.Stats().backfill_tasks, 3u);
}

TEST_F(RolloutTest, CanaryRoutesAShareThenPromotes) {
  BackfillScheduler scheduler(&clock_, {});
  RolloutOptions opt;
  opt.policy = RolloutPolicy::kCanary;
  opt.canary_share = 0.25;
  opt.canary_duration_ns = 10 * kSec;
  Rollout rollout(on_a_, on_b_, opt);
  ASSERT_OK(rollout.Begin(hot_, scheduler));
  int on_new = 0;
  for (int i = 0; i < 400; ++i) on_new += &rollout.Route("session-" + std::to_string(i)) == &on_b_;
  EXPECT_GT(on_new, 60);
  EXPECT_LT(on_new, 140);
  EXPECT_EQ(&rollout.Route("x"), &rollout.Route("x"));  // sticky per session
  clock_.Advance(9 * kSec);
  rollout.Poll();
  EXPECT_FALSE(rollout.cut_over());
  clock_.Advance(kSec);
  rollout.Poll();
  EXPECT_TRUE(rollout.cut_over());
  EXPECT_EQ(rollout.Stats().cutover_ns, 10 * kSec);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(&rollout.Route("session-" + std::to_string(i)), &on_b_);
}

TEST_F(RolloutTest, FlushEmptiesTheOldCacheAndLazyKeepsIt) {
  ServeSessions(2);
  ASSERT_GT(a_.tree->Stats().unique_tokens, 0u);
  BackfillScheduler scheduler(&clock_, {});
  Rollout lazy(on_a_, on_b_, {RolloutPolicy::kLazy});
  ASSERT_OK(lazy.Begin(hot_, scheduler));
  EXPECT_GT(a_.tree->Stats().unique_tokens, 0u);  // rollback possible
  EXPECT_FALSE(lazy.Begin(hot_, scheduler).ok());  // once
  Rollout flush(on_a_, on_b_, {RolloutPolicy::kFlush});
  ASSERT_OK(flush.Begin(hot_, scheduler));
  EXPECT_TRUE(flush.cut_over());
  EXPECT_EQ(a_.tree->Stats().unique_tokens, 0u);
  EXPECT_TRUE(scheduler.Idle());
}

// A host's sink: records what it was given, answers as told, and finishes on demand.
class FakeSink final : public BackfillSink {
 public:
  Result<bool> Submit(const HotSetTracker::Entry& entry, std::function<void()> finished) override {
    sessions.push_back(entry.transcript.session);
    if (entry.transcript.session == refuse) return FailedPrecondition("quarantined");
    if (entry.transcript.session == skip) return false;
    unfinished.push_back(std::move(finished));
    return true;
  }
  void FinishOne() {
    std::function<void()> f = std::move(unfinished.back());
    unfinished.pop_back();
    f();
  }
  std::string refuse, skip;
  std::vector<std::string> sessions;
  std::vector<std::function<void()>> unfinished;
};

TEST_F(RolloutTest, BlueGreenWithASinkWaitsForEveryTaskItQueued) {
  ServeSessions(4);
  FakeSink sink;
  sink.refuse = "s1";
  sink.skip = "s2";
  RolloutOptions opt{RolloutPolicy::kBlueGreen};
  opt.clock = &clock_;
  Rollout rollout(on_a_, on_b_, opt);
  ASSERT_OK(rollout.Begin(hot_, sink));
  std::sort(sink.sessions.begin(), sink.sessions.end());
  EXPECT_EQ(sink.sessions, (std::vector<std::string>{"s0", "s1", "s2", "s3"}));  // the whole hot set
  RolloutStats st = rollout.Stats();
  EXPECT_EQ(st.backfill_tasks, 2u);
  EXPECT_EQ(st.backfill_refused, 1u);
  EXPECT_EQ(st.backfill_skipped, 1u);
  EXPECT_EQ(st.backfill_pending, 2u);
  sink.FinishOne();
  rollout.Poll();
  EXPECT_FALSE(rollout.cut_over());  // one still runs
  EXPECT_EQ(&rollout.Route("s0"), &on_a_);
  sink.FinishOne();
  rollout.Poll();
  EXPECT_TRUE(rollout.cut_over());
  EXPECT_EQ(rollout.Stats().backfill_pending, 0u);
  EXPECT_EQ(&rollout.Route("s0"), &on_b_);
}

TEST_F(RolloutTest, BlueGreenCutoverWaitsForItsVerification) {
  ServeSessions(2);
  for (const bool passes : {false, true}) {
    FakeSink sink;
    int checks = 0;
    RolloutOptions opt{RolloutPolicy::kBlueGreen};
    opt.clock = &clock_;
    opt.verify = [&] {
      ++checks;
      EXPECT_EQ(sink.unfinished.size(), 0u);  // only once the backfill is done
      return passes ? Status::Ok() : VerificationFailed("cache digest differs from the recompute");
    };
    Rollout rollout(on_a_, on_b_, opt);
    ASSERT_OK(rollout.Begin(hot_, sink));
    rollout.Poll();
    EXPECT_EQ(checks, 0);  // still warming
    sink.FinishOne();
    sink.FinishOne();
    rollout.Poll();
    rollout.Poll();  // settled: checked once
    EXPECT_EQ(checks, 1);
    const RolloutStats st = rollout.Stats();
    if (passes) {
      EXPECT_TRUE(rollout.cut_over());
      EXPECT_EQ(st.phase, RolloutPhase::kCutOver);
      EXPECT_TRUE(st.refusal.empty());
      EXPECT_EQ(&rollout.Route("s0"), &on_b_);
    } else {
      EXPECT_FALSE(rollout.cut_over());
      EXPECT_EQ(st.phase, RolloutPhase::kRefused);
      EXPECT_NE(st.refusal.find("cache digest differs"), std::string::npos) << st.refusal;
      EXPECT_EQ(st.cutover_ns, 0);
      EXPECT_EQ(&rollout.Route("s0"), &on_a_);  // the old model keeps serving
      rollout.Promote();                        // nor can it be promoted around the failed check
      EXPECT_FALSE(rollout.cut_over());
      EXPECT_EQ(RolloutPhaseName(st.phase), "refused");
    }
  }
}

TEST(RolloutNames, PolicyNamesRoundTrip) {
  for (RolloutPolicy p : {RolloutPolicy::kFlush, RolloutPolicy::kLazy, RolloutPolicy::kBlueGreen, RolloutPolicy::kCanary}) {
    ASSERT_OK_AND_ASSIGN(RolloutPolicy q, ParseRolloutPolicy(RolloutPolicyName(p)));
    EXPECT_EQ(p, q);
  }
  EXPECT_FALSE(ParseRolloutPolicy("yolo").ok());
  EXPECT_EQ(MaterializeVerdictName(MaterializeVerdict::kRecompute), "RECOMPUTE");
}

TEST(RegenHotSet, ScoreDecaysWithRecencyAndGrowsWithFrequency) {
  HotSetTracker hot(HotSetOptions{10.0});
  TranscriptRef once{"once", {Digest::Of("a")}}, often{"often", {Digest::Of("b")}}, recent{"recent", {Digest::Of("c")}};
  hot.Touch(once, 100, 0);
  for (int i = 0; i < 3; ++i) hot.Touch(often, 200, i * kSec);
  hot.Touch(recent, 300, 20 * kSec);
  const int64_t now = 20 * kSec;
  EXPECT_NEAR(hot.Score("once", now), 0.25, 1e-12);  // two half-lives
  EXPECT_NEAR(hot.Score("often", now), std::exp2(-2.0) + std::exp2(-1.9) + std::exp2(-1.8), 1e-12);
  EXPECT_NEAR(hot.Score("recent", now), 1.0, 1e-12);
  std::vector<HotSetTracker::Entry> all = hot.Select(now, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].transcript.session, "recent");
  EXPECT_EQ(all[1].transcript.session, "often");
  EXPECT_EQ(all[2].transcript.session, "once");
  EXPECT_EQ(hot.Select(now, 500).size(), 2u);      // token budget: 300 + 200
  EXPECT_EQ(hot.Select(now, 499).size(), 1u);
  EXPECT_EQ(hot.Select(now, 0, 3000, 10).size(), 1u);  // byte budget: 300 tokens x 10 bytes
  hot.Touch(once, 150, 20 * kSec);  // the session's latest transcript replaces the old one
  EXPECT_NEAR(hot.Score("once", now), 1.25, 1e-12);
  hot.Forget("once");
  EXPECT_EQ(hot.size(), 2u);
}

}  // namespace
}  // namespace fak
