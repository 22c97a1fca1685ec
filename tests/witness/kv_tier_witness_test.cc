// Exactness witnesses for the KV tier (docs/kv-tier.md): prefix KV paged in from a tier — by
// another worker, or by a restarted process from the directory tier — gives next-token logits
// equal, max|Δ| == 0 over the full vector, to recomputing the context from text, and the same
// cache bits. Controls: the compared quantity depends on the paged KV (another model's KV for the
// same text gives other logits, and the served path really was a page-in, not a recompute).
#include <gtest/gtest.h>

#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MakeWorker;
using testing::MaxAbsDiff;
using testing::RecomputeLogits;
using testing::Worker;

TEST(Witness, PagedPrefixEqualsRecompute) {
  testing::ScopedTempDir dir;
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("tier")));
  const TranscriptRef t = testing::Conversation(corpus, "alpha");

  // Worker A computes the conversation and writes its nodes through to the tier.
  Worker a = MakeWorker(corpus, chain, {.seed = 1, .spill_to = tier.get(), .write_through = true});
  ASSERT_OK_AND_ASSIGN(Materialized computed, a.driver->Materialize("default", t));
  ASSERT_EQ(computed.verdict, MaterializeVerdict::kRecompute);
  a.spiller->Flush();
  EXPECT_GT(a.spiller->Stats().written, 0u);

  // Worker B (its own model object, tree and pager) pages the whole context in: FAULT, then HIT.
  Worker b = MakeWorker(corpus, chain, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized paged, b.driver->Materialize("default", t));
  ASSERT_EQ(paged.verdict, MaterializeVerdict::kFault) << paged.detail;
  EXPECT_EQ(paged.reused_tokens, paged.tokens.size() - 1);
  EXPECT_EQ(paged.prefilled_tokens, 1u);
  const std::vector<float> want = RecomputeLogits(*b.model, paged.tokens);
  KVCache want_cache = b.model->NewCache();
  ASSERT_TRUE(b.model->Prefill(&want_cache, paged.tokens, LogitsMode::kNone).has_value());
  EXPECT_EQ(MaxAbsDiff(paged.logits, want), 0.0f);
  EXPECT_EQ(paged.cache->ComputeDigest(), want_cache.ComputeDigest());
  ASSERT_OK_AND_ASSIGN(Materialized hit, b.driver->Materialize("default", t));
  EXPECT_EQ(hit.verdict, MaterializeVerdict::kHit);
  EXPECT_EQ(MaxAbsDiff(hit.logits, want), 0.0f);
  EXPECT_EQ(b.driver->Stats().count(MaterializeVerdict::kFault), 1u);
  EXPECT_EQ(b.pager->Stats().paged_tokens, paged.tokens.size());

  // A longer conversation whose prefix is in the tier: the prefix is paged in, the new turn
  // prefilled; equal to recomputing everything.
  TranscriptRef longer = t;
  longer.segments.push_back(*corpus.PutSource("assistant: three crash fixes and a faster start.\n"));
  Worker c = MakeWorker(corpus, chain, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized extended, c.driver->Materialize("default", longer));
  EXPECT_EQ(extended.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(extended.reused_tokens, paged.tokens.size());  // the whole earlier context came from the tier
  EXPECT_EQ(c.driver->Stats().paged_tokens, paged.tokens.size());
  EXPECT_EQ(MaxAbsDiff(extended.logits, RecomputeLogits(*c.model, extended.tokens)), 0.0f);

  // Control: the logits depend on the KV paged in — another model's KV of the same text differs.
  Worker other = MakeWorker(corpus, chain, {.seed = 2});
  EXPECT_GT(MaxAbsDiff(RecomputeLogits(*other.model, paged.tokens), want), 0.0f);
  // ... and the page-in path is what served B: without the tier, B's first call recomputes.
  Worker cold = MakeWorker(corpus, chain, {.seed = 1});
  ASSERT_OK_AND_ASSIGN(Materialized recomputed, cold.driver->Materialize("default", t));
  EXPECT_EQ(recomputed.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(recomputed.prefilled_tokens, recomputed.tokens.size());
}

TEST(Witness, RestartWarmEqualsCold) {
  testing::ScopedTempDir dir;
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  const TranscriptRef t = testing::Conversation(corpus, "beta");
  size_t context_tokens = 0;
  {  // Process 1: serve, then lose the KV from memory under budget pressure (write-behind spill).
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("tier")));
    Worker p1 = MakeWorker(corpus, chain, {.seed = 1, .spill_to = tier.get()});
    ASSERT_OK_AND_ASSIGN(Materialized m, p1.driver->Materialize("default", t));
    context_tokens = m.tokens.size();
    p1.tree->EvictToBudget(0);
    EXPECT_EQ(p1.tree->Stats().unique_tokens, 0u);
    p1.spiller->Flush();
    EXPECT_GT(p1.spiller->Stats().written, 0u);
    EXPECT_EQ(p1.spiller->Stats().failed, 0u);
  }  // everything of process 1 is gone but the directory

  // Process 2: new objects, the tier reopened from the directory.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("tier")));
  Worker warm = MakeWorker(corpus, chain, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized w, warm.driver->Materialize("default", t));
  ASSERT_EQ(w.verdict, MaterializeVerdict::kFault) << w.detail;
  EXPECT_EQ(w.prefilled_tokens, 1u);
  EXPECT_EQ(w.tokens.size(), context_tokens);

  Worker cold = MakeWorker(corpus, chain, {.seed = 1});
  ASSERT_OK_AND_ASSIGN(Materialized c, cold.driver->Materialize("default", t));
  ASSERT_EQ(c.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(MaxAbsDiff(w.logits, c.logits), 0.0f);
  EXPECT_EQ(w.cache->ComputeDigest(), c.cache->ComputeDigest());

  // Control: a restart with another model finds nothing it may use and recomputes other logits.
  Worker foreign = MakeWorker(corpus, chain, {.seed = 2, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized f, foreign.driver->Materialize("default", t));
  EXPECT_EQ(f.verdict, MaterializeVerdict::kRecompute);
  EXPECT_GT(MaxAbsDiff(f.logits, c.logits), 0.0f);
}

}  // namespace
}  // namespace fak
