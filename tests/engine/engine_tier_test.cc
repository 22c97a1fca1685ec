// Engine + KV tier (EngineOptions::pager, RadixTreeOptions::spill): engine A serves a long prompt and
// its tree writes the KV through to a directory tier; engine B — a fresh tree over the same model —
// gets the same prompt and pages the prefix in instead of prefilling it. Exactness: B's greedy
// tokens and every logit they were sampled from equal A's and a cold engine's (max|Δ| == 0).
// Controls: without a pager nothing is paged; a tampered slab is refused, counted, recomputed; a
// slab of another tenant is never served.
// Sources: a request given as messages indexes its KV by each message's text (Digest::Of(content),
// the planner's SourceDigest), so a denylisted or erased text's KV leaves the tree and the tier and
// is never paged in; another conversation's stays and is.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fak/engine/engine.h"
#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/source_sweeper.h"
#include "fak/screen/screen.h"
#include "fak/tokenizer/chat_template.h"
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
    ModelConfig config = testing::TinyConfig();
    config.vocab_size = 258;  // the byte tokenizer's ids, BOS and EOS: message requests are spelled in them
    ASSERT_OK_AND_ASSIGN(model_, Model::Synthetic(config, 11));
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

  // A request given as messages (rendered by the "fak" template). Two conversations below are of
  // two tenants: in one namespace they would share the template's opening tokens, and the write-through
  // tier would hold the second one's slab only from where the two diverge.
  EngineRequest Chat(const std::string& system, const std::string& user, std::string tenant = "default") const {
    EngineRequest r;
    r.tenant = std::move(tenant);
    r.messages = {{ChatRole::kSystem, system}, {ChatRole::kUser, user}};
    r.max_tokens = kMaxTokens;
    r.record_logits = true;
    return r;
  }
  std::shared_ptr<const ChatTemplate> Template() const {
    Result<ChatTemplate> chat = ChatTemplate::ForFamily("fak", *tokenizer_);
    EXPECT_TRUE(chat.has_value());
    return std::make_shared<const ChatTemplate>(*chat);
  }

  // Engine A: serves each of `rs` with its tree writing every node through to the tier. With
  // `keep`, the engine is handed over (its tree still holds the KV) instead of destroyed.
  std::vector<EngineResult> ServeAndSpillAll(const std::vector<EngineRequest>& rs, TierSpiller& spiller,
                                             std::unique_ptr<Engine>* keep = nullptr) {
    EngineOptions o;
    o.start_thread = false;
    o.chat_template = Template();
    o.tree_options.spill = &spiller;
    o.tree_options.write_through = true;
    auto engine = *Engine::Create(*model_, *tokenizer_, o);
    std::vector<EngineResult> out;
    for (const EngineRequest& r : rs) {
      Result<RequestId> id = engine->Submit(r);
      EXPECT_TRUE(id.has_value()) << id.error().ToString();
      if (id.has_value()) out.push_back(*engine->Wait(*id));
    }
    spiller.Flush();
    EXPECT_GT(spiller.Stats().written, 0u);
    EXPECT_EQ(spiller.Stats().failed, 0u) << spiller.Stats().last_error;
    if (keep != nullptr) *keep = std::move(engine);
    return out;
  }
  EngineResult ServeAndSpill(const EngineRequest& r) {
    TierSpiller spiller(*tier_);  // declared first: the engine's tree offers to it until destroyed
    return ServeAndSpillAll({r}, spiller)[0];
  }

  // A fresh engine (new tree), with a pager over the tier when `with_pager` (asking `denylist`).
  // `evict_before_admission` drops the tree's KV between Submit and the first step, as budget
  // pressure would.
  Served Serve(const EngineRequest& r, bool with_pager, bool evict_before_admission = false,
               const Denylist* denylist = nullptr) {
    TierPager pager(*tier_, access_, denylist);
    EngineOptions o;
    o.start_thread = false;
    o.chat_template = Template();
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

// Two conversations' KV, written through by engine A: a text of the first is denylisted. Without a
// sweep, page-in refuses its slab (its manifest names the text) and the engine recomputes the same
// tokens; the other conversation's slab is still served.
TEST_F(EngineTierTest, ADenylistedMessageTextIsRefusedAtPageInAndRecomputed) {
  const std::string secret(180, 'q');
  const EngineRequest a = Chat("You answer in one line.", "Leaked: " + secret, "alice");
  const EngineRequest b = Chat("You answer in two lines.", "Nothing secret here, only " + std::string(180, 'z'), "bob");
  TierSpiller spiller(*tier_);
  const std::vector<EngineResult> first = ServeAndSpillAll({a, b}, spiller);
  // The tier indexes the engine's slabs by message text.
  const Digest denied = Digest::Of(a.messages[1].content);
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier_->KeysFromSource(denied));
  EXPECT_FALSE(keys.empty());
  QuarantineDenylist denylist;
  ASSERT_OK(denylist.Add(denied, "test: quarantined"));

  const Served refused = Serve(a, /*with_pager=*/true, false, &denylist);
  EXPECT_EQ(refused.stats.paged_tokens, 0u);
  EXPECT_EQ(refused.stats.page_in_refusals, 1u);
  EXPECT_EQ(refused.stats.page_in_failures[static_cast<int>(PageInFailure::kDenied)], 1u);
  EXPECT_EQ(refused.result.usage.cached_tokens, 0u);
  EXPECT_EQ(refused.result.tokens, first[0].tokens);
  EXPECT_EQ(MaxLogitDiff(refused.result, first[0]), 0.0f);
  // Control: the other conversation's slab passes the same denylist and is served exactly.
  const Served served = Serve(b, /*with_pager=*/true, false, &denylist);
  EXPECT_EQ(served.stats.paged_tokens, served.result.usage.prompt_tokens);
  EXPECT_EQ(served.stats.page_in_refusals, 0u);
  EXPECT_EQ(served.result.tokens, first[1].tokens);
  EXPECT_EQ(MaxLogitDiff(served.result, first[1]), 0.0f);
}

// SourceSweeper over engine A's own tree and the directory tier: erasing one message's text removes
// its KV from both; a fresh engine with the pager then finds nothing for that conversation and
// recomputes the same tokens, while the other conversation's KV stays in tree and tier and is paged in.
TEST_F(EngineTierTest, AnErasedMessageTextLeavesTreeAndTierAndIsRecomputed) {
  const EngineRequest a = Chat("You are terse.", "Tool said: " + std::string(200, 'k'), "alice");
  const EngineRequest b = Chat("You are verbose.", "Tell me about " + std::string(200, 'm'), "bob");
  TierSpiller spiller(*tier_);
  std::unique_ptr<Engine> engine;
  const std::vector<EngineResult> first = ServeAndSpillAll({a, b}, spiller, &engine);
  const Digest erased = Digest::Of(a.messages[1].content);
  const Digest kept = Digest::Of(b.messages[1].content);
  const auto tree_has = [&](const Digest& d) {
    const std::vector<Digest> sources = engine->tree().Sources();
    return std::find(sources.begin(), sources.end(), d) != sources.end();
  };
  ASSERT_TRUE(tree_has(erased));
  ASSERT_TRUE(tree_has(kept));
  ASSERT_FALSE(tier_->KeysFromSource(erased)->empty());
  ASSERT_FALSE(tier_->KeysFromSource(kept)->empty());

  QuarantineDenylist denylist;  // nothing listed: EraseSource acts on its own
  SourceSweeper sweeper(engine->tree(), {tier_.get()}, denylist);
  ASSERT_OK_AND_ASSIGN(SweepReport report, sweeper.EraseSource(erased));
  EXPECT_EQ(report.sources_erased, 1u);
  EXPECT_GT(report.tree_tokens, 0u);
  EXPECT_GT(report.tier_entries, 0u);
  EXPECT_FALSE(tree_has(erased));
  EXPECT_TRUE(tier_->KeysFromSource(erased)->empty());
  // Control: the other conversation is untouched, in the tree and the tier.
  EXPECT_TRUE(tree_has(kept));
  EXPECT_FALSE(tier_->KeysFromSource(kept)->empty());
  // What came before the erased text — its system message, whose KV attended to nothing of it — stays.
  ASSERT_OK_AND_ASSIGN(RenderedChat rendered, Template()->Render(a.messages));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> prompt, EncodeRendered(*tokenizer_, rendered));
  ASSERT_OK_AND_ASSIGN(std::vector<std::vector<int32_t>> pieces, EncodePieces(*tokenizer_, rendered));
  EXPECT_EQ(engine->tree().MatchLength(prompt, "alice"), pieces[0].size());
  engine.reset();

  const Served recomputed = Serve(a, /*with_pager=*/true);
  EXPECT_EQ(recomputed.stats.paged_tokens, 0u);
  EXPECT_EQ(recomputed.stats.page_in_refusals, 0u);  // nothing there to refuse: erased
  EXPECT_EQ(recomputed.result.usage.cached_tokens, 0u);
  EXPECT_EQ(recomputed.result.tokens, first[0].tokens);
  EXPECT_EQ(MaxLogitDiff(recomputed.result, first[0]), 0.0f);
  const Served paged = Serve(b, /*with_pager=*/true);
  EXPECT_EQ(paged.stats.paged_tokens, paged.result.usage.prompt_tokens);
  EXPECT_EQ(paged.result.tokens, first[1].tokens);
  EXPECT_EQ(MaxLogitDiff(paged.result, first[1]), 0.0f);
}

// A request given as token ids carries no source runs: nothing to index it by text.
TEST_F(EngineTierTest, ATokenIdRequestRecordsNoSources) {
  TierSpiller spiller(*tier_);
  std::unique_ptr<Engine> engine;
  ServeAndSpillAll({Request()}, spiller, &engine);
  EXPECT_TRUE(engine->tree().Sources().empty());
  EXPECT_TRUE(tier_->Sources()->empty());
  // Control: a message request in the same tree does record its texts.
  ASSERT_OK(engine->Wait(*engine->Submit(Chat("sys", "hello there"))).status());
  EXPECT_EQ(engine->tree().Sources().size(), 2u);
}

// A host that tokenizes a chat itself (fak serve) passes its runs with the token ids: they index the
// KV as the engine's own would. Runs outside the prompt, or runs beside messages, are refused.
TEST_F(EngineTierTest, ATokenIdRequestCarriesTheSourcesItIsGiven) {
  const EngineRequest chat = Chat("sys", "hello there");
  ASSERT_OK_AND_ASSIGN(RenderedChat rendered, Template()->Render(chat.messages));
  EngineRequest by_ids = chat;
  by_ids.messages.clear();
  ASSERT_OK_AND_ASSIGN(by_ids.prompt, EncodeRendered(*tokenizer_, rendered));
  ASSERT_OK_AND_ASSIGN(by_ids.sources, ChatSourceRuns(*tokenizer_, rendered, chat.messages, by_ids.prompt));
  ASSERT_EQ(by_ids.sources.size(), 2u);
  EXPECT_EQ(by_ids.sources[0].from, 0u);
  EXPECT_EQ(by_ids.sources[1].from, by_ids.sources[0].n_tokens);  // adjacent pieces
  EXPECT_LT(by_ids.sources[1].from + by_ids.sources[1].n_tokens, by_ids.prompt.size());  // the generation prompt follows
  EXPECT_EQ(by_ids.sources[1].source, Digest::Of("hello there"));

  EngineOptions o;
  o.start_thread = false;
  o.chat_template = Template();
  auto engine = *Engine::Create(*model_, *tokenizer_, o);
  EngineRequest outside = by_ids;
  outside.sources.push_back(SourceSpan{by_ids.prompt.size() - 1, 2, Digest::Of("x")});
  EXPECT_EQ(engine->Submit(outside).error().code(), StatusCode::kInvalidArgument);
  EngineRequest beside = chat;
  beside.sources = by_ids.sources;
  EXPECT_EQ(engine->Submit(beside).error().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->tree().Sources().empty());  // refused: nothing ran
  EXPECT_EQ(engine->Stats().admitted, 0u);

  const EngineResult from_ids = *engine->Wait(*engine->Submit(by_ids));
  std::vector<Digest> got = engine->tree().Sources();
  std::sort(got.begin(), got.end());
  std::vector<Digest> want = {Digest::Of("sys"), Digest::Of("hello there")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // The same runs the engine derives for the same messages: the same ids, the same tokens.
  const EngineResult from_messages = *engine->Wait(*engine->Submit(chat));
  EXPECT_EQ(from_messages.tokens, from_ids.tokens);
  EXPECT_EQ(engine->tree().Sources().size(), 2u);
}

}  // namespace
}  // namespace fak
