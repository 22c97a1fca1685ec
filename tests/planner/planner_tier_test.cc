// Planner + KV tier (PlannerOptions::pager, tree.spill): a planner writes its conversation's KV to a
// directory tier and goes away; a planner restarted over the same journal, text store and tier pages
// the conversation's prefix in instead of prefilling it, and answers with the same tokens as the
// first and as a cold planner — also for the conversation's next turn. Controls: a cold planner
// pages nothing; another tenant is not served the slabs; a tampered tier is refused, counted and
// recomputed.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/tier_pager.h"
#include "fak/kvtier/tier_spiller.h"
#include "fak/planner/planner.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/model/test_models.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

class PlannerTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelConfig c = testing::TinyConfig();
    c.vocab_size = 258;
    c.context_length = 2048;
    model_ = *Model::Synthetic(c, 5);
    tok_ = MakeByteTokenizer();
    ASSERT_OK_AND_ASSIGN(blobs_, OpenDirectoryBlobStore(dir_.Sub("corpus")));
    ASSERT_OK_AND_ASSIGN(tier_, OpenDirectoryKVTier(dir_.Sub("tier"), Env::Default()));
    key_ = std::make_unique<SigningKey>(*SigningKey::Generate());
    params_.generate.max_new_tokens = 8;
    conv_ = Conversation{"t1",
                         {{SegmentKind::kSystem, "you are a careful assistant who answers in one short line."},
                          {SegmentKind::kUser, "summarise the release notes of the spring version, please."}}};
  }

  // One planner's life over the shared journal, text store and tier: `spill` writes its tree through
  // to the tier, `page` reads the tier on a miss.
  CompleteResult Run(bool spill, bool page, PlannerStats* stats = nullptr) {
    TierSpiller spiller(*tier_);
    PlannerOptions opt;
    opt.journal_path = dir_.Sub("journal.log");
    if (spill) {
      opt.tree.spill = &spiller;
      opt.tree.write_through = true;
    }
    TierPager pager(*tier_, opt.tree.access, /*denylist=*/nullptr);
    if (page) opt.pager = &pager;
    auto planner = *Planner::Create(*model_, *tok_, *key_, *blobs_, opt);
    Result<CompleteResult> r = planner->Complete(conv_, params_);
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    if (stats != nullptr) *stats = planner->Stats();
    planner.reset();
    spiller.Flush();
    EXPECT_EQ(spiller.Stats().failed, 0u) << spiller.Stats().last_error;
    return r.has_value() ? *r : CompleteResult{};
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<KVTierStore> tier_;
  std::unique_ptr<SigningKey> key_;
  CompleteParams params_;
  Conversation conv_;
};

TEST_F(PlannerTierTest, RestartedPlannerPagesTheConversationInAndAnswersTheSame) {
  const CompleteResult first = Run(/*spill=*/true, /*page=*/false);
  ASSERT_FALSE(first.generated.empty());
  PlannerStats stats;
  const CompleteResult restarted = Run(/*spill=*/false, /*page=*/true, &stats);
  // The whole prompt came from the tier; only its last token was prefilled again (for its logits).
  EXPECT_EQ(restarted.paged_tokens, restarted.context_tokens);
  EXPECT_EQ(restarted.reused_tokens, restarted.context_tokens - 1);
  EXPECT_EQ(restarted.prefilled_tokens, 1u);
  EXPECT_EQ(stats.page_ins, 1u);
  EXPECT_EQ(stats.paged_tokens, restarted.context_tokens);
  EXPECT_EQ(stats.page_in_refusals, 0u);
  // Control: a cold planner (no tier) prefills everything — and all three answer alike.
  PlannerStats cold_stats;
  const CompleteResult cold = Run(/*spill=*/false, /*page=*/false, &cold_stats);
  EXPECT_EQ(cold.paged_tokens, 0u);
  EXPECT_EQ(cold_stats.page_ins, 0u);
  EXPECT_EQ(cold.prefilled_tokens, cold.context_tokens);
  EXPECT_EQ(restarted.generated, first.generated);
  EXPECT_EQ(restarted.generated, cold.generated);
  EXPECT_EQ(restarted.text, first.text);
}

TEST_F(PlannerTierTest, RestartedPlannerContinuesTheConversationFromTheTier) {
  const CompleteResult first = Run(/*spill=*/true, /*page=*/false);
  conv_.messages.push_back({SegmentKind::kAssistant, first.text});
  conv_.messages.push_back({SegmentKind::kUser, "and the fixes?"});
  const CompleteResult cold = Run(/*spill=*/false, /*page=*/false);
  const CompleteResult next = Run(/*spill=*/false, /*page=*/true);
  // The first turn's prompt at least came from the tier; the new messages were prefilled.
  EXPECT_GE(next.paged_tokens, first.context_tokens);
  EXPECT_LT(next.paged_tokens, next.context_tokens);
  EXPECT_EQ(next.reused_tokens + next.prefilled_tokens, next.context_tokens);
  EXPECT_EQ(cold.paged_tokens, 0u);
  EXPECT_EQ(next.generated, cold.generated);
  EXPECT_EQ(next.text, cold.text);
}

TEST_F(PlannerTierTest, AnotherTenantsConversationIsNotPagedIn) {
  const CompleteResult first = Run(/*spill=*/true, /*page=*/false);
  conv_.tenant = "t2";  // the same messages, another tenant
  PlannerStats stats;
  const CompleteResult other = Run(/*spill=*/false, /*page=*/true, &stats);
  EXPECT_EQ(stats.page_ins, 1u);
  EXPECT_EQ(other.paged_tokens, 0u);
  EXPECT_EQ(other.prefilled_tokens, other.context_tokens);
  EXPECT_EQ(other.generated, first.generated);  // recomputed: the same answer
}

TEST_F(PlannerTierTest, TamperedTierIsRefusedAndRecomputed) {
  const CompleteResult first = Run(/*spill=*/true, /*page=*/false);
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    std::string bytes = testing::ReadAll(path);
    bytes[bytes.size() - 5] ^= 0x20;  // a bit of V
    testing::WriteAll(path, bytes);
  }
  PlannerStats stats;
  const CompleteResult restarted = Run(/*spill=*/false, /*page=*/true, &stats);
  EXPECT_EQ(restarted.paged_tokens, 0u);
  EXPECT_EQ(restarted.page_in, PageInFailure::kChecksum);
  EXPECT_EQ(stats.page_in_refusals, 1u);
  EXPECT_EQ(restarted.prefilled_tokens, restarted.context_tokens);
  EXPECT_EQ(restarted.generated, first.generated);
}

}  // namespace
}  // namespace fak
