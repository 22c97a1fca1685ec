// Engine + KV tier (EngineOptions::pager, RadixTreeOptions::spill): engine A serves a long prompt and
// its tree writes the KV through to a directory tier; engine B — a fresh tree over the same model —
// gets the same prompt and pages the prefix in instead of prefilling it. Exactness: B's greedy
// tokens and every logit they were sampled from equal A's and a cold engine's (max|Δ| == 0).
// Controls: without a pager nothing is paged; a tampered slab is refused, counted, recomputed; a
// slab of another tenant is never served.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/tier_pager.h"
#include "fak/kvtier/tier_spiller.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/model/test_models.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

constexpr size_t kPromptTokens = 300;
constexpr size_t kMaxTokens = 8;

struct Served {
  EngineResult result;
  EngineStats stats;
  TierPagerStats pager;
};

class EngineTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(testing::TinyConfig(), 11));
    tokenizer_ = MakeByteTokenizer();
    ASSERT_OK_AND_ASSIGN(tier_, OpenDirectoryKVTier(dir_.Sub("tier"), Env::Default()));
  }

  EngineRequest Request(std::string tenant = "default") const {
    EngineRequest r;
    r.tenant = std::move(tenant);
    r.prompt = testing::TokenSequence(kPromptTokens, 7, model_->config().vocab_size);
    r.max_tokens = kMaxTokens;
    r.record_logits = true;
    return r;
  }

  // Engine A: serves `r` with its tree writing every node through to the tier.
  EngineResult ServeAndSpill(const EngineRequest& r) {
    TierSpiller spiller(*tier_);  // declared first: the engine's tree offers to it until destroyed
    EngineOptions o;
    o.start_thread = false;
    o.tree_options.spill = &spiller;
    o.tree_options.write_through = true;
    auto engine = *Engine::Create(*model_, *tokenizer_, o);
    EngineResult out = *engine->Wait(*engine->Submit(r));
    engine.reset();
    spiller.Flush();
    EXPECT_GT(spiller.Stats().written, 0u);
    EXPECT_EQ(spiller.Stats().failed, 0u) << spiller.Stats().last_error;
    return out;
  }

  // A fresh engine (new tree), with a pager over the tier when `with_pager`. `evict_before_admission`
  // drops the tree's KV between Submit and the first step, as budget pressure would.
  Served Serve(const EngineRequest& r, bool with_pager, bool evict_before_admission = false) {
    TierPager pager(*tier_, access_, /*denylist=*/nullptr);
    EngineOptions o;
    o.start_thread = false;
    o.pager = with_pager ? &pager : nullptr;
    auto engine = *Engine::Create(*model_, *tokenizer_, o);
    const RequestId id = *engine->Submit(r);
    if (evict_before_admission) engine->tree().EvictToBudget(0);
    Served s{*engine->Wait(id), engine->Stats(), pager.Stats()};
    EXPECT_EQ(s.result.finish, FinishReason::kLength) << s.result.error.ToString();
    return s;
  }

  static float MaxLogitDiff(const EngineResult& a, const EngineResult& b) {
    EXPECT_EQ(a.logits.size(), b.logits.size());
    float worst = 0;
    for (size_t i = 0; i < std::min(a.logits.size(), b.logits.size()); ++i) {
      worst = std::max(worst, testing::MaxAbsDiff(a.logits[i], b.logits[i]));
    }
    return worst;
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<KVTierStore> tier_;
  AccessPolicy access_;  // the engines' trees' (the default: tenant-only spans)
};

TEST_F(EngineTierTest, PagedPrefixServesTheSameTokensAsPrefill) {
  const EngineRequest r = Request();
  const EngineResult a = ServeAndSpill(r);
  const Served cold = Serve(r, /*with_pager=*/false);
  const Served b = Serve(r, /*with_pager=*/true);

  // B read the whole prompt from the tier and prefilled only its last token (for its logits).
  EXPECT_EQ(b.stats.paged_tokens, kPromptTokens);
  EXPECT_EQ(b.result.usage.paged_tokens, kPromptTokens);
  EXPECT_EQ(b.result.usage.cached_tokens, kPromptTokens - 1);
  EXPECT_EQ(b.stats.page_in_refusals, 0u);
  EXPECT_GT(b.pager.served_slabs, 0u);
  // Control: without the pager nothing is paged and everything is prefilled.
  EXPECT_EQ(cold.stats.page_ins, 0u);
  EXPECT_EQ(cold.stats.paged_tokens, 0u);
  EXPECT_EQ(cold.result.usage.cached_tokens, 0u);

  ASSERT_EQ(a.tokens.size(), kMaxTokens);
  EXPECT_EQ(b.result.tokens, a.tokens);
  EXPECT_EQ(b.result.tokens, cold.result.tokens);
  EXPECT_EQ(MaxLogitDiff(b.result, cold.result), 0.0f);
  EXPECT_EQ(MaxLogitDiff(b.result, a), 0.0f);
  // The compared logits depend on the prompt's KV: another prompt's differ.
  EngineRequest other = r;
  other.prompt[0] = (other.prompt[0] + 1) % static_cast<int32_t>(model_->config().vocab_size);
  EXPECT_GT(MaxLogitDiff(Serve(other, false).result, cold.result), 0.0f);
}

TEST_F(EngineTierTest, PrefixEvictedBeforeAdmissionIsPagedInAgain) {
  const EngineRequest r = Request();
  const EngineResult a = ServeAndSpill(r);
  const Served b = Serve(r, /*with_pager=*/true, /*evict_before_admission=*/true);
  // Once at Submit, once more at admission (the tree had given it back).
  EXPECT_EQ(b.stats.page_ins, 2u);
  EXPECT_EQ(b.stats.paged_tokens, 2 * kPromptTokens);
  EXPECT_EQ(b.result.usage.cached_tokens, kPromptTokens - 1);
  EXPECT_EQ(b.result.tokens, a.tokens);
  EXPECT_EQ(MaxLogitDiff(b.result, a), 0.0f);
}

TEST_F(EngineTierTest, TamperedSlabIsRefusedCountedAndRecomputed) {
  const EngineRequest r = Request();
  const EngineResult a = ServeAndSpill(r);
  const std::vector<std::string> files = testing::SlabFiles(dir_.Sub("tier"));
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files) {
    std::string bytes = testing::ReadAll(path);
    bytes[bytes.size() - 5] ^= 0x20;  // a bit of V
    testing::WriteAll(path, bytes);
  }
  const Served b = Serve(r, /*with_pager=*/true);
  EXPECT_EQ(b.stats.paged_tokens, 0u);
  EXPECT_EQ(b.stats.page_in_refusals, 1u);
  EXPECT_EQ(b.stats.page_in_failures[static_cast<int>(PageInFailure::kChecksum)], 1u);
  EXPECT_GT(b.pager.count(PageInFailure::kChecksum), 0u);
  EXPECT_EQ(b.result.usage.cached_tokens, 0u);
  EXPECT_EQ(b.result.tokens, a.tokens);
  EXPECT_EQ(MaxLogitDiff(b.result, a), 0.0f);
}

TEST_F(EngineTierTest, AnotherTenantsSlabIsNotServed) {
  const EngineResult a = ServeAndSpill(Request("alice"));
  const Served bob = Serve(Request("bob"), /*with_pager=*/true);
  EXPECT_EQ(bob.stats.page_ins, 1u);
  EXPECT_EQ(bob.stats.paged_tokens, 0u);
  EXPECT_EQ(bob.pager.served_slabs, 0u);
  EXPECT_EQ(bob.result.usage.cached_tokens, 0u);
  EXPECT_EQ(bob.result.tokens, a.tokens);  // recomputed from the prompt: the same answer
  // Control: the same tier does serve the tenant that wrote it.
  const Served alice = Serve(Request("alice"), /*with_pager=*/true);
  EXPECT_EQ(alice.stats.paged_tokens, kPromptTokens);
  EXPECT_EQ(alice.result.tokens, a.tokens);
}

// Submits page in on their own threads while the engine's step thread serves (TSan runs this).
TEST_F(EngineTierTest, ConcurrentSubmitsPageInBesideTheStepThread) {
  const EngineResult a = ServeAndSpill(Request());
  TierPager pager(*tier_, access_, /*denylist=*/nullptr);
  EngineOptions o;
  o.pager = &pager;
  auto engine = *Engine::Create(*model_, *tokenizer_, o);
  constexpr int kThreads = 4;
  std::vector<EngineResult> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Result<RequestId> id = engine->Submit(Request());
      if (id.has_value()) got[i] = *engine->Wait(*id);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const EngineResult& r : got) {
    EXPECT_EQ(r.tokens, a.tokens);
    EXPECT_EQ(MaxLogitDiff(r, a), 0.0f);
  }
  // At least the first Submit found the tree empty and paged the prompt in; the rest may have
  // found it in the tree already (which Submit ran first depends on the scheduler).
  EXPECT_GE(engine->Stats().paged_tokens, kPromptTokens);
  EXPECT_EQ(engine->Stats().page_in_refusals, 0u);
}

}  // namespace
}  // namespace fak
