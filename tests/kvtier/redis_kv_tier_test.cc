// The Redis KV tier on a real redis-server: worker B serves a prefix worker A computed (bit-exact),
// values chunked; a lost chunk is refused as truncated; an outage falls back to recompute; erasing
// a text erases its entries; a TTL expires entries (a Get keeps them alive) and the index forgets
// them lazily; a meta record that lies about the size is refused, not overrun; an entry opened for
// reading in ranges reads chunk parts.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fak/kvtier/redis_kv_tier.h"
#include "fak/kvtier/source_sweeper.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MakeWorker;
using testing::MaxAbsDiff;
using testing::RecomputeLogits;
using testing::Worker;

class RedisKVTierTest : public ::testing::Test {
 protected:
  RedisKVTierTest() : server_(dir_.path()), store_(MakeMemoryBlobStore()), corpus_(*store_), chain_(ScreenChain::Default()) {}
  void SetUp() override {
    FAK_REQUIRE_REDIS();
    ASSERT_TRUE(server_.Start());
    t_ = testing::Conversation(corpus_, "zeta");
  }
  std::unique_ptr<KVTierStore> Open() { return *OpenRedisKVTier(server_.Options(), /*chunk_bytes=*/4096); }
  // Worker A computes t_ and writes it through to Redis.
  void FillFromA(KVTierStore& tier) {
    Worker a = MakeWorker(corpus_, chain_, {.seed = 1, .spill_to = &tier, .write_through = true});
    ASSERT_TRUE(a.driver->Materialize("default", t_).has_value());
    a.spiller->Flush();
    ASSERT_EQ(a.spiller->Stats().failed, 0u) << a.spiller->Stats().last_error;
  }

  testing::ScopedTempDir dir_;
  testing::RedisServer server_;
  std::unique_ptr<BlobStore> store_;
  TextCorpus corpus_;
  ScreenChain chain_;
  TranscriptRef t_;
};

TEST_F(RedisKVTierTest, WorkerBServesWhatWorkerAComputed) {
  std::unique_ptr<KVTierStore> tier_a = Open(), tier_b = Open();  // two connections, as two processes
  FillFromA(*tier_a);
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_b.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t_));
  ASSERT_EQ(m.verdict, MaterializeVerdict::kFault) << m.detail;
  EXPECT_GT(b.pager->Stats().paged_bytes, 4096u * 4);  // several chunks
  const std::vector<float> want = RecomputeLogits(*b.model, m.tokens);
  EXPECT_EQ(MaxAbsDiff(m.logits, want), 0.0f);
  // Control: another model's logits for the same text differ.
  Worker other = MakeWorker(corpus_, chain_, {.seed = 2});
  EXPECT_GT(MaxAbsDiff(RecomputeLogits(*other.model, m.tokens), want), 0.0f);
}

TEST_F(RedisKVTierTest, LostChunkIsRefusedAsTruncated) {
  std::unique_ptr<KVTierStore> tier = Open();
  FillFromA(*tier);
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier->KeysFromSource(t_.segments[0]));
  ASSERT_EQ(keys.size(), 1u);
  testing::RawRedis raw(server_.port());
  EXPECT_EQ(raw.Command({"DEL", "faktest:kvt:c:{" + keys[0].id + "}:2"}), ":1");
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(b.pager->Stats().count(PageInFailure::kTruncated), 1u);
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*b.model, m.tokens)), 0.0f);
}

TEST_F(RedisKVTierTest, OutageFallsBackToRecompute) {
  std::unique_ptr<KVTierStore> tier = Open();
  FillFromA(*tier);
  server_.Stop();
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(b.pager->Stats().count(PageInFailure::kUnavailable), 1u);
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*b.model, m.tokens)), 0.0f);
}

TEST_F(RedisKVTierTest, ErasingATextErasesItsEntries) {
  std::unique_ptr<KVTierStore> tier = Open();
  FillFromA(*tier);
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier->KeysFromSource(t_.segments[3]));
  ASSERT_EQ(keys.size(), 1u);
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1});
  SourceSweeper sweeper(*w.tree, {tier.get()}, chain_.denylist());
  ASSERT_OK(chain_.denylist().Add(t_.segments[3], "test"));
  ASSERT_OK_AND_ASSIGN(SweepReport r, sweeper.SweepOnce());
  EXPECT_EQ(r.tier_entries, 1u);
  EXPECT_EQ(tier->Get(keys[0]).error().code(), StatusCode::kNotFound);
  // Control: nothing else was listed, so a second sweep erases nothing.
  EXPECT_EQ(sweeper.SweepOnce()->sources_erased, 0u);
  testing::RawRedis raw(server_.port());
  EXPECT_EQ(raw.Command({"EXISTS", "faktest:{kvt}:s:" + t_.segments[3].Hex()}), ":0");
}

TEST_F(RedisKVTierTest, AnExpiredEntryIsAbsentAndTheContextIsRecomputedExactly) {
  RedisOptions o = server_.Options();
  o.ttl_seconds = 1;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenRedisKVTier(o, /*chunk_bytes=*/4096));
  FillFromA(*tier);
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier->KeysFromSource(t_.segments[0]));
  ASSERT_EQ(keys.size(), 1u);
  testing::RawRedis raw(server_.port());
  // Every key of the entry expires; the chunks and the end marker a second after the meta record.
  EXPECT_EQ(raw.Command({"TTL", "faktest:{kvt}:m:" + keys[0].id}), ":1");
  EXPECT_EQ(raw.Command({"TTL", "faktest:kvt:c:{" + keys[0].id + "}:0"}), ":2");
  EXPECT_EQ(raw.Command({"TTL", "faktest:{kvt}:e:" + std::to_string(keys[0].end)}), ":2");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute) << m.detail;
  EXPECT_EQ(m.reused_tokens, 0u);
  EXPECT_EQ(b.pager->Stats().served_slabs, 0u);
  EXPECT_EQ(b.pager->Stats().count(PageInFailure::kAbsent), 1u);
  EXPECT_EQ(b.pager->Stats().count(PageInFailure::kTruncated), 0u);  // absent, not damaged
  const std::vector<float> want = RecomputeLogits(*b.model, m.tokens);
  EXPECT_EQ(MaxAbsDiff(m.logits, want), 0.0f);
  Worker other = MakeWorker(corpus_, chain_, {.seed = 2});  // control: the comparison can fail
  EXPECT_GT(MaxAbsDiff(RecomputeLogits(*other.model, m.tokens), want), 0.0f);
  // The sets forgot the expired entry lazily: the page-in's Ends() dropped its end; Sources()
  // drops its members and sources. Nothing of it is left in Redis.
  EXPECT_TRUE(tier->Ends()->empty());
  EXPECT_TRUE(tier->KeysFromSource(t_.segments[0])->empty());
  EXPECT_TRUE(tier->Sources()->empty());
  EXPECT_EQ(raw.Command({"EXISTS", "faktest:{kvt}:ends"}), ":0");
  EXPECT_EQ(raw.Command({"EXISTS", "faktest:{kvt}:sources"}), ":0");
  EXPECT_EQ(raw.Command({"EXISTS", "faktest:{kvt}:s:" + t_.segments[1].Hex()}), ":0");
}

TEST_F(RedisKVTierTest, AGetKeepsAnEntryAlive) {
  RedisOptions o = server_.Options();
  o.ttl_seconds = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenRedisKVTier(o, /*chunk_bytes=*/4096));
  const TierKey key{Digest::Of("entry").Hex(), 7};
  const std::string bytes(10000, 'k');  // three chunks
  ASSERT_OK(tier->Put(key, bytes, {}));
  for (int i = 0; i < 3; ++i) {  // 3 × 1.2 s > the 2 s TTL: each read renews it
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    ASSERT_OK_AND_ASSIGN(std::string got, tier->Get(key));
    EXPECT_EQ(got, bytes) << i;
  }
  EXPECT_EQ(*tier->Ends(), std::vector<uint64_t>{7});
  std::this_thread::sleep_for(std::chrono::milliseconds(3200));  // control: unread, it expires
  EXPECT_EQ(tier->Get(key).error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(tier->Ends()->empty());
}

TEST_F(RedisKVTierTest, AMetaRecordThatUndersizesTheEntryIsRefusedNotOverrun) {
  std::unique_ptr<KVTierStore> tier = Open();
  const TierKey key{Digest::Of("entry").Hex(), 7};
  const std::string bytes(10000, 'k');
  ASSERT_OK(tier->Put(key, bytes, {}));
  testing::RawRedis raw(server_.port());
  EXPECT_EQ(raw.Command({"SET", "faktest:{kvt}:m:" + key.id, "7 3 9000"}), "+OK");
  EXPECT_EQ(tier->Get(key).error().code(), StatusCode::kCorruption);
  // The connection that stopped mid-reply was dropped; the next call works on a fresh one.
  EXPECT_EQ(raw.Command({"SET", "faktest:{kvt}:m:" + key.id, "7 3 10000"}), "+OK");
  ASSERT_OK_AND_ASSIGN(std::string got, tier->Get(key));
  EXPECT_EQ(got, bytes);
  // A meta record that oversizes it: the chunks' lengths contradict it.
  EXPECT_EQ(raw.Command({"SET", "faktest:{kvt}:m:" + key.id, "7 3 20000"}), "+OK");
  EXPECT_EQ(tier->Get(key).error().code(), StatusCode::kCorruption);
}

// An entry opened for reading in ranges reads what Get reads, across chunk boundaries; a chunk that
// vanishes after the open fails the read as Corruption (the slab file says truncated); a lost last
// chunk shortens the file, a lost first one empties it.
TEST_F(RedisKVTierTest, AnOpenedEntryReadsRangesAcrossChunks) {
  std::unique_ptr<KVTierStore> tier = Open();
  const TierKey key{Digest::Of("ranges").Hex(), 9};
  std::string bytes(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_OK(tier->Put(key, bytes, {}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> file, tier->Open(key, UINT64_MAX));
  ASSERT_EQ(file->size(), bytes.size());
  for (const auto& [offset, n] : std::vector<std::pair<size_t, size_t>>{{0, 10}, {4000, 200}, {100, 3 * 4096}, {12288, 100}, {0, bytes.size()}}) {
    std::string got(n, '\0');
    ASSERT_OK(file->ReadAt(offset, std::as_writable_bytes(std::span(got))));
    EXPECT_EQ(got, bytes.substr(offset, n)) << offset << "+" << n;
  }
  std::string past(2, '\0');
  EXPECT_EQ(file->ReadAt(bytes.size() - 1, std::as_writable_bytes(std::span(past))).code(), StatusCode::kInvalidArgument);
  testing::RawRedis raw(server_.port());
  EXPECT_EQ(raw.Command({"DEL", "faktest:kvt:c:{" + key.id + "}:1"}), ":1");
  std::string across(200, '\0');
  EXPECT_EQ(file->ReadAt(4000, std::as_writable_bytes(std::span(across))).code(), StatusCode::kCorruption);
  ASSERT_OK(file->ReadAt(0, std::as_writable_bytes(std::span(across))));  // chunk 0 is still there
  EXPECT_EQ(raw.Command({"DEL", "faktest:kvt:c:{" + key.id + "}:3"}), ":1");
  EXPECT_EQ(tier->Open(key, UINT64_MAX).value()->size(), 3u * 4096);
  EXPECT_EQ(raw.Command({"DEL", "faktest:kvt:c:{" + key.id + "}:0"}), ":1");
  EXPECT_EQ(tier->Open(key, UINT64_MAX).value()->size(), 0u);
}

// A size record is the writer's word (issue 31: a recorded size of 2^62 answered HTTP 500 on every
// request for the prefix): larger than a slab of the serving shape could be, the entry is refused
// before anything is allocated (kOversized) and the context is recomputed exactly; the store's own
// Get refuses it too.
TEST_F(RedisKVTierTest, ASizeRecordOf2To62IsRefusedUnreadAndTheContextRecomputes) {
  std::unique_ptr<KVTierStore> tier = Open();
  FillFromA(*tier);
  ASSERT_OK_AND_ASSIGN(std::vector<TierKey> keys, tier->KeysFromSource(t_.segments[0]));
  ASSERT_FALSE(keys.empty());
  testing::RawRedis raw(server_.port());
  for (const TierKey& key : keys) {
    EXPECT_EQ(raw.Command({"SET", "faktest:{kvt}:m:" + key.id, std::to_string(key.end) + " 1 4611686018427387904"}), "+OK");
  }
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute) << m.detail;
  EXPECT_GE(b.pager->Stats().count(PageInFailure::kOversized), 1u) << m.detail;
  EXPECT_EQ(b.pager->Stats().served_slabs, 0u);
  EXPECT_NE(m.detail.find("oversized"), std::string::npos) << m.detail;
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*b.model, m.tokens)), 0.0f);
  Result<std::string> got = tier->Get(keys[0]);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kResourceExhausted) << got.error().ToString();
  EXPECT_NE(got.error().message().find("records 4611686018427387904 bytes"), std::string::npos) << got.error().ToString();
}

}  // namespace
}  // namespace fak
