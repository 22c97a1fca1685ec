// The KV tier's threads: the write-behind spiller (bounded queue that drops instead of blocking,
// spills under concurrent serving) and the source sweeper (a denylisted text's KV leaves the tree
// and the tier within one poll interval). Suite names start with "Concurrent" for the TSan run.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fak/kvtier/source_sweeper.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MakeWorker;
using testing::MaxAbsDiff;
using testing::RecomputeLogits;
using testing::Worker;

// a + b + c without operator+ chains (GCC 12 warns falsely about them under -O3, -Wrestrict).
std::string Cat(std::string a, std::string_view b, std::string_view c = {}) {
  a.append(b);
  a.append(c);
  return a;
}

// A tier whose Put waits until released (a slow disk), forwarding to a real one.
class GatedTier final : public KVTierStore {
 public:
  explicit GatedTier(KVTierStore& inner) : inner_(inner) {}
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_;
  }
  std::string_view name() const override { return "gated"; }
  Status Put(const TierKey& key, std::string_view bytes, std::span<const Digest> sources) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      ++waiting_;
      cv_.wait(l, [&] { return open_; });
      --waiting_;
    }
    return inner_.Put(key, bytes, sources);
  }
  Result<std::string> Get(const TierKey& key, uint64_t max_bytes) override { return inner_.Get(key, max_bytes); }
  Result<std::vector<uint64_t>> Ends() override { return inner_.Ends(); }
  Status Remove(const TierKey& key) override { return inner_.Remove(key); }
  Result<std::vector<TierKey>> KeysFromSource(const Digest& s) override { return inner_.KeysFromSource(s); }
  Result<std::vector<Digest>> Sources() override { return inner_.Sources(); }
  Result<size_t> EraseSource(const Digest& s) override { return inner_.EraseSource(s); }

 private:
  KVTierStore& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

class ConcurrentTierSpill : public ::testing::Test {
 protected:
  ConcurrentTierSpill() : store_(MakeMemoryBlobStore()), corpus_(*store_), chain_(ScreenChain::Default()) {
    tier_ = *OpenDirectoryKVTier(dir_.Sub("tier"));
  }
  testing::ScopedTempDir dir_;
  std::unique_ptr<BlobStore> store_;
  TextCorpus corpus_;
  ScreenChain chain_;
  std::unique_ptr<KVTierStore> tier_;
};

TEST_F(ConcurrentTierSpill, FullQueueDropsInsteadOfBlocking) {
  GatedTier gated(*tier_);
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1});
  TierSpiller spiller(gated, TierSpillerOptions{.max_queue_items = 1});
  std::vector<SpillItem> items;
  for (const char* name : {"a", "b", "c"}) {
    const TranscriptRef t = testing::PutTranscript(corpus_, name, {Cat("user: ", name, " asks something.\n")});
    Materialized m = *w.driver->Materialize("default", t);
    ASSERT_OK_AND_ASSIGN(NodeId node, w.tree->FindNode(m.tokens));
    items.push_back(SpillItem{*w.tree->ManifestOf(node), std::make_shared<const KVSlab>(*m.cache->CopySpan(0, m.tokens.size() - 1)), {}});
  }
  // Items carry the node's manifest; slabs here are only for the queue's accounting.
  spiller.Offer(items[0], SpillReason::kEvicted);
  while (gated.waiting() == 0) std::this_thread::yield();  // the worker holds item 0 in Put
  spiller.Offer(items[1], SpillReason::kEvicted);           // queued
  spiller.Offer(items[2], SpillReason::kEvicted);           // full: dropped, not blocked
  EXPECT_EQ(spiller.Stats().dropped, 1u);
  gated.Release();
  spiller.Flush();
  EXPECT_EQ(spiller.Stats().offered, 3u);
  EXPECT_EQ(spiller.Stats().written + spiller.Stats().failed, 2u);
}

TEST_F(ConcurrentTierSpill, SpillsUnderConcurrentServingAndEverythingPagesBackExactly) {
  std::vector<TranscriptRef> sessions;
  for (int i = 0; i < 6; ++i) {
    sessions.push_back(testing::PutTranscript(
        corpus_, Cat("s", std::to_string(i)),
        {"system: a shared system prompt for every session.\n", Cat("user: question number ", std::to_string(i), ".\n")}));
  }
  {
    Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .spill_to = tier_.get()});
    std::vector<std::thread> threads;
    for (int k = 0; k < 3; ++k) {
      threads.emplace_back([&, k] {
        for (size_t i = static_cast<size_t>(k); i < sessions.size(); i += 3) {
          EXPECT_TRUE(w.driver->Materialize("default", sessions[i]).has_value());
          w.tree->EvictToBudget(w.tree->BytesPerToken() * 60);  // pressure while others serve
        }
      });
    }
    for (std::thread& t : threads) t.join();
    w.tree->EvictToBudget(0);
    w.spiller->Flush();
    EXPECT_GT(w.spiller->Stats().written, 0u);
    EXPECT_EQ(w.spiller->Stats().failed, 0u);
    EXPECT_EQ(w.spiller->Stats().dropped, 0u);
  }
  Worker fresh = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  for (const TranscriptRef& t : sessions) {
    ASSERT_OK_AND_ASSIGN(Materialized m, fresh.driver->Materialize("default", t));
    EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*fresh.model, m.tokens)), 0.0f);
  }
  EXPECT_GT(fresh.driver->Stats().paged_tokens, 0u);
  EXPECT_GT(fresh.driver->Stats().count(MaterializeVerdict::kFault), 0u);
}

TEST_F(ConcurrentTierSpill, AFailedWriteIsCountedAndServingGoesOn) {
  testing::FaultInjectionEnv env(Env::Default());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> faulty, OpenDirectoryKVTier(dir_.Sub("faulty"), &env));
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .spill_to = faulty.get(), .write_through = true});
  env.FailNth(testing::EnvOp::kSync, 1, testing::FaultKind::kNoSpace);
  const TranscriptRef t = testing::Conversation(corpus_, "theta");
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", t));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute);
  w.spiller->Flush();
  EXPECT_EQ(w.spiller->Stats().failed, 1u);
  EXPECT_FALSE(w.spiller->Stats().last_error.empty());
  EXPECT_TRUE(faulty->Ends()->empty());  // nothing half-written is visible
  ASSERT_OK_AND_ASSIGN(Materialized again, w.driver->Materialize("default", t));
  EXPECT_EQ(again.verdict, MaterializeVerdict::kHit);  // the tree never depended on the write
}

TEST_F(ConcurrentTierSpill, OfferPathCheckpointsAConversation) {
  const TranscriptRef t = testing::Conversation(corpus_, "eta");
  const TranscriptRef other = testing::PutTranscript(corpus_, "o", {"user: not this one.\n"});
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1});
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", t));
  ASSERT_TRUE(w.driver->Materialize("default", other).has_value());
  {
    TierSpiller spiller(*tier_);
    EXPECT_EQ(w.tree->OfferPath(m.tokens, "default", spiller), 1u);
  }  // the destructor drains the queue
  EXPECT_EQ(tier_->Ends()->size(), 1u);  // only that conversation's path
  Worker fresh = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  ASSERT_OK_AND_ASSIGN(Materialized paged, fresh.driver->Materialize("default", t));
  EXPECT_EQ(paged.verdict, MaterializeVerdict::kFault) << paged.detail;
  EXPECT_EQ(MaxAbsDiff(paged.logits, m.logits), 0.0f);
}

TEST(ConcurrentSourceSweep, DenylistedTextLeavesTreeAndTierWithinOneInterval) {
  testing::ScopedTempDir dir;
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("tier")));
  const TranscriptRef t = testing::Conversation(corpus, "delta");
  const TranscriptRef unrelated = testing::PutTranscript(corpus, "u", {"user: nothing in common here.\n"});
  Worker w = MakeWorker(corpus, chain, {.seed = 1, .spill_to = tier.get(), .write_through = true});
  ASSERT_TRUE(w.driver->Materialize("default", t).has_value());
  ASSERT_TRUE(w.driver->Materialize("default", unrelated).has_value());
  w.spiller->Flush();
  const Digest denied = t.segments[1];
  ASSERT_EQ(tier->KeysFromSource(denied)->size(), 1u);
  const size_t system_tokens = corpus.GetSource(t.segments[0])->size();  // byte tokenizer

  SourceSweeper sweeper(*w.tree, {tier.get()}, chain.denylist());
  constexpr auto kInterval = std::chrono::milliseconds(200);
  ASSERT_OK(sweeper.Start(kInterval));
  while (sweeper.Stats().sweeps == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_OK(chain.denylist().Add(denied, "test: quarantined"));
  const auto added = std::chrono::steady_clock::now();
  while (sweeper.Stats().sources_erased == 0 && std::chrono::steady_clock::now() - added < 10 * kInterval)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto took = std::chrono::steady_clock::now() - added;
  sweeper.Stop();
  EXPECT_LE(took, kInterval + std::chrono::milliseconds(300)) << "slower than one poll interval (plus one sweep)";
  EXPECT_EQ(sweeper.Stats().errors, 0u) << sweeper.Stats().last_error;
  // Gone from the tier, and from the tree: only what came before the denied text stays (its KV
  // never attended to it), and the unrelated session is untouched.
  EXPECT_TRUE(tier->KeysFromSource(denied)->empty());
  const std::vector<Digest> left = w.tree->Sources();
  EXPECT_EQ(std::count(left.begin(), left.end(), denied), 0);
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", unrelated));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kHit);
  std::vector<int32_t> ids = *w.driver->ContextTokens(t);
  EXPECT_EQ(w.tree->MatchLength(ids), system_tokens);
  // Control: the sweep erased only because the text was listed; a fresh tier entry of an
  // unlisted text survives another sweep.
  ASSERT_OK_AND_ASSIGN(SweepReport again, sweeper.SweepOnce());
  EXPECT_EQ(again.sources_erased, 0u);
  EXPECT_FALSE(tier->KeysFromSource(unrelated.segments[0])->empty());
}

TEST(ConcurrentSourceSweep, EraseSourceRemovesEveryDerivedSpan) {
  testing::ScopedTempDir dir;
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("tier")));
  const TranscriptRef t = testing::Conversation(corpus, "epsilon");
  Worker w = MakeWorker(corpus, chain, {.seed = 1, .spill_to = tier.get(), .write_through = true});
  ASSERT_TRUE(w.driver->Materialize("default", t).has_value());
  w.spiller->Flush();
  SourceSweeper sweeper(*w.tree, {tier.get()}, chain.denylist());
  ASSERT_OK_AND_ASSIGN(SweepReport r, sweeper.EraseSource(t.segments[0]));  // the very first text
  EXPECT_EQ(r.tier_entries, 1u);
  EXPECT_GT(r.tree_tokens, 0u);
  EXPECT_EQ(w.tree->Stats().unique_tokens, 0u);  // everything attended to the first text
  EXPECT_TRUE(tier->Ends()->empty());
}

}  // namespace
}  // namespace fak
