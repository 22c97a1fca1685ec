// Exactness witness for regen (architecture §9): KV regenerated from text for a new model — by
// Materialize on a miss, or by the backfill scheduler in bounded chunks — equals that same model's
// fresh recompute bit for bit (cache digest) and gives the same next-token logits at max|Δ| == 0.
// It is never compared with the old model's KV. Control: the old model's cache of the same text
// differs, so the comparison depends on the model.
#include <gtest/gtest.h>

#include "fak/regen/regen_driver.h"
#include "fak/regen/regime_oracle.h"
#include "tests/regen/regen_test_util.h"
#include "tests/test_util.h"
#include "tests/support/manual_clock_env.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;

TEST(Witness, RegenEqualsRecompute) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  testing::Served a = testing::MakeServed(1, MakeByteTokenizer());
  testing::Served b = testing::MakeServed(2, std::make_unique<testing::ShiftedByteTokenizer>(7));
  RegenDriver on_a(a.target(), corpus, chain), on_b(b.target(), corpus, chain);
  const TranscriptRef t = testing::PutTranscript(
      corpus, "w", {"system: you are a careful assistant.\n", "user: summarise the release notes.\n",
                    "assistant: the release moves to March.\n", "user: and the fixes?\n"});
  ASSERT_OK_AND_ASSIGN(Materialized on_old, on_a.Materialize("default", t));

  // Path 1: backfill in 7-token chunks through the scheduler, then a HIT serves it.
  BackfillSchedulerOptions opt;
  opt.chunk_tokens = 7;
  opt.min_chunk_tokens = 7;
  testing::ManualClockEnv clock;
  BackfillScheduler scheduler(&clock, opt);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackfillTask> task, on_b.PrepareBackfill("default", t));
  scheduler.SubmitBackfill(std::move(task));
  scheduler.RunUntilIdle();
  EXPECT_GT(scheduler.Stats().backfill_chunks, 5u);
  ASSERT_OK_AND_ASSIGN(Materialized served, on_b.Materialize("default", t));
  ASSERT_EQ(served.verdict, MaterializeVerdict::kHit);

  // Path 2: lazy regen on a miss in a second tree of the same model.
  RadixTree fresh_tree(*b.model, *b.tokenizer);
  RegenDriver lazy(RegenTarget{b.model.get(), b.tokenizer.get(), &fresh_tree}, corpus, chain);
  ASSERT_OK_AND_ASSIGN(Materialized regen, lazy.Materialize("default", t));
  ASSERT_EQ(regen.verdict, MaterializeVerdict::kRecompute);

  // The reference: B's own one-shot recompute of B's tokens.
  KVCache want = b.model->NewCache();
  ASSERT_OK_AND_ASSIGN(std::vector<float> want_logits, b.model->Prefill(&want, regen.tokens, LogitsMode::kLast));
  for (const Materialized* m : {&served, &regen}) {
    ASSERT_TRUE(m->cache.has_value());
    EXPECT_EQ(m->tokens, regen.tokens);
    EXPECT_EQ(m->cache->ComputeDigest(), want.ComputeDigest());
    EXPECT_EQ(MaxAbsDiff(m->logits, want_logits), 0.0f);
    EXPECT_OK(VerifyRegenerated(*b.model, *m->cache, m->tokens));
  }
  // Control: the old model's cache of the same text is another artifact, and a cache that differs
  // by one token fails verification.
  EXPECT_NE(on_old.cache->ComputeDigest(), want.ComputeDigest());
  EXPECT_GT(MaxAbsDiff(on_old.logits, want_logits), 0.0f);
  std::vector<int32_t> altered = regen.tokens;
  altered[3] = (altered[3] + 1) % 256;
  EXPECT_EQ(VerifyRegenerated(*b.model, *regen.cache, altered).code(), StatusCode::kVerificationFailed);
}

}  // namespace
}  // namespace fak
