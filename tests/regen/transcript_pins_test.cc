// TranscriptPins: a live session's texts survive LRU eviction of a bounded text store, so a regen
// rebuilds its context instead of answering ABSTAIN; releasing the session makes them evictable.
#include "fak/regen/transcript_pins.h"

#include <gtest/gtest.h>

#include "fak/regen/regen_driver.h"
#include "tests/regen/regen_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::PutTranscript;

class TranscriptPinsTest : public ::testing::Test {
 protected:
  static BlobStoreOptions Bounded() {
    BlobStoreOptions o;
    o.capacity_bytes = 4096;  // a few transcripts; the filler below pushes everything unpinned out
    return o;
  }
  // Puts enough other text to evict every unpinned blob.
  void Fill() {
    for (uint32_t i = 0; i < 16; ++i) ASSERT_OK(corpus_.PutSource(testing::RandomBytes(1024, i)).status());
  }
  Result<Materialized> Regen(const TranscriptRef& t) { return driver_.Materialize(t.tenant, t); }

  std::unique_ptr<BlobStore> store_ = MakeMemoryBlobStore(Bounded());
  TextCorpus corpus_{*store_};
  ScreenChain chain_ = ScreenChain::Default();
  testing::Served served_ = testing::MakeServed(1, MakeByteTokenizer());
  RegenDriver driver_{served_.target(), corpus_, chain_};
  TranscriptPins pins_{corpus_};
};

TEST_F(TranscriptPinsTest, HeldTextsSurviveEvictionSoRegenRebuildsInsteadOfAbstaining) {
  TranscriptRef live = PutTranscript(corpus_, "live", {"system: be brief.\n", "user: what is the capital of France?\n"});
  live.tenant = "acme";
  const TranscriptRef ended = PutTranscript(corpus_, "ended", {"system: be terse.\n", "user: and of Spain?\n"});
  ASSERT_OK(pins_.Hold(live));
  Fill();
  ASSERT_OK_AND_ASSIGN(Materialized rebuilt, Regen(live));
  EXPECT_EQ(rebuilt.verdict, MaterializeVerdict::kRecompute) << rebuilt.detail;
  ASSERT_OK_AND_ASSIGN(Materialized lost, Regen(ended));  // control: nobody held it
  EXPECT_EQ(lost.verdict, MaterializeVerdict::kAbstain) << lost.detail;

  ASSERT_OK(pins_.Release("acme", "live"));
  EXPECT_EQ(store_->Stats().n_pinned, 0u);
  Fill();
  EXPECT_FALSE(*store_->Contains(live.segments[1]));  // evictable again once the session ended
  EXPECT_EQ(pins_.Release("acme", "live").code(), StatusCode::kNotFound);
}

TEST_F(TranscriptPinsTest, EachSessionPinsItsLatestTranscriptOnce) {
  TranscriptRef t = PutTranscript(corpus_, "s", {"system: be brief.\n", "user: hi\n", "system: be brief.\n"});
  ASSERT_OK(pins_.Hold(t));
  ASSERT_OK(pins_.Hold(t));  // the same transcript again: no extra pins
  EXPECT_EQ(store_->Stats().n_pinned, 2u);
  ASSERT_OK(store_->Unpin(t.segments[0]));  // counted once: one Unpin frees it
  ASSERT_OK(store_->Pin(t.segments[0]));
  // The history grows, and an edit drops a text: the new one is pinned, the dropped one released.
  const Digest dropped = t.segments[1];
  t.segments[1] = *corpus_.PutSource("user: hello\n");
  t.segments.push_back(*corpus_.PutSource("assistant: hello!\n"));
  ASSERT_OK(pins_.Hold(t));
  EXPECT_EQ(store_->Stats().n_pinned, 3u);
  EXPECT_EQ(store_->Unpin(dropped).code(), StatusCode::kFailedPrecondition);  // not pinned any more
  // Another tenant's session of the same name holds its own pins.
  TranscriptRef other = t;
  other.tenant = "globex";
  ASSERT_OK(pins_.Hold(other));
  EXPECT_EQ(pins_.n_sessions(), 2u);
  ASSERT_OK(pins_.Release(std::string(kDefaultTenant), "s"));
  EXPECT_EQ(store_->Stats().n_pinned, 3u);  // still held by globex
}

TEST_F(TranscriptPinsTest, HoldingATextAlreadyGoneChangesNothing) {
  TranscriptRef t = PutTranscript(corpus_, "s", {"system: be brief.\n"});
  t.segments.push_back(Digest::Of("never stored"));
  EXPECT_EQ(pins_.Hold(t).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Stats().n_pinned, 0u);
  EXPECT_EQ(pins_.n_sessions(), 0u);
  t.session.clear();
  EXPECT_EQ(pins_.Hold(t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fak
