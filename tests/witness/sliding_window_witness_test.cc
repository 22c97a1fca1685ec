// Sliding-window memory (Model::NewCache(KVMemory::kSlidingWindow)): a Gemma 3 sliding layer keeps
// only the rows its queries still read, and every logit stays bit-identical to a full cache's —
// prefill, decode, batches, clones, appends. Controls show rows really were dropped (held_from > 0,
// fewer bytes) and that the compared logits still depend on tokens long out of every window (the
// global layers read them). Cuts back past what a layer holds are refused with FailedPrecondition,
// change nothing, and the segment ledger rebuilds from text instead — equal to never having seen
// the evicted segment. Runs in every kernel tier and KV regime (Witness*).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fak/model/model.h"
#include "fak/session/radix_tree.h"
#include "fak/session/segment_ledger.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/kv/kv_cache_access.h"
#include "tests/model/test_models.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MaxAbsDiff;
using testing::TokenSequence;

// Gemma 3, 7 layers (5 and 6 -> layer 5 global with pattern 6), window 8, a context long enough that
// a prefill slides past the forward step's slack (512 rows).
ModelConfig WindowedGemma() {
  ModelConfig c = testing::TinyConfig(4, 1, 16, RopePairing::kSplitHalf, 7);
  c.architecture = Architecture::kGemma3;
  c.hidden_size = 64;
  c.sliding_window = 8;
  c.sliding_window_pattern = 6;
  c.context_length = 2048;
  return c;
}

std::unique_ptr<Model> MakeModel() { return std::move(*Model::Synthetic(WindowedGemma(), 41)); }

constexpr size_t kSliding = 0, kGlobal = 5;  // a sliding and the global layer of WindowedGemma

TEST(Witness, SlidingWindowMemoryMatchesFullCache) {
  auto model = MakeModel();
  ASSERT_TRUE(model->config().IsSlidingLayer(kSliding));
  ASSERT_FALSE(model->config().IsSlidingLayer(kGlobal));
  const auto tokens = TokenSequence(1100, 3, 97);
  KVCache full = model->NewCache(), windowed = model->NewCache(KVMemory::kSlidingWindow);
  EXPECT_FALSE(full.windowed());
  EXPECT_TRUE(windowed.windowed());
  ASSERT_OK_AND_ASSIGN(auto want, model->Prefill(&full, tokens, LogitsMode::kAll));
  ASSERT_OK_AND_ASSIGN(auto got, model->Prefill(&windowed, tokens, LogitsMode::kAll));
  EXPECT_EQ(MaxAbsDiff(got, want), 0.0f);
  // Non-vacuity: the sliding layer really dropped rows (the global one none), and holds fewer bytes.
  EXPECT_GT(windowed.held_from(kSliding), 0u);
  EXPECT_EQ(windowed.held_from(kGlobal), 0u);
  EXPECT_LT(windowed.size_bytes(), full.size_bytes() / 2);
  EXPECT_LT(windowed.allocated_bytes(), full.allocated_bytes());
  // Decode on both, past another slide.
  for (int step = 0; step < 40; ++step) {
    const int32_t next = static_cast<int32_t>((step * 31 + 7) % 97);
    ASSERT_OK_AND_ASSIGN(auto w, model->Decode(&full, next));
    ASSERT_OK_AND_ASSIGN(auto g, model->Decode(&windowed, next));
    ASSERT_EQ(MaxAbsDiff(g, w), 0.0f) << "step " << step;
  }
  // Control: the last logits depend on the first token — long out of every window, read by the
  // global layer — so equal logits are not a sign that the early context is ignored.
  auto changed = tokens;
  changed[0] = (changed[0] + 1) % 97;
  KVCache other = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_OK_AND_ASSIGN(auto moved, model->Prefill(&other, changed, LogitsMode::kLast));
  const std::vector<float> last(want.end() - 97, want.end());
  EXPECT_GT(MaxAbsDiff(moved, last), 0.0f);
}

TEST(Witness, SlidingWindowPrefillEqualsDecodeAndBatch) {
  auto model = MakeModel();
  const auto tokens = TokenSequence(700, 4, 97);
  KVCache prefilled = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_OK_AND_ASSIGN(auto want, model->Prefill(&prefilled, tokens, LogitsMode::kLast));
  KVCache decoded = model->NewCache(KVMemory::kSlidingWindow);
  std::vector<float> got;
  for (int32_t t : tokens) {
    ASSERT_OK_AND_ASSIGN(got, model->Decode(&decoded, t));
  }
  EXPECT_EQ(MaxAbsDiff(got, want), 0.0f);
  // The digest covers each layer's window, not the slack: two histories, one digest.
  EXPECT_NE(prefilled.held_from(kSliding), decoded.held_from(kSliding));
  EXPECT_EQ(prefilled.ComputeDigest(), decoded.ComputeDigest());
  // Batched with a full cache of another prompt: each item as alone.
  KVCache a = model->NewCache(KVMemory::kSlidingWindow), b = model->NewCache();
  const auto other = TokenSequence(300, 5, 97);
  ASSERT_OK_AND_ASSIGN(auto batch, model->PrefillBatch(std::vector<BatchItem>{{&a, tokens, LogitsMode::kLast},
                                                                              {&b, other, LogitsMode::kLast}}));
  KVCache alone = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto other_want, model->Prefill(&alone, other, LogitsMode::kLast));
  EXPECT_EQ(MaxAbsDiff(batch[0], want), 0.0f);
  EXPECT_EQ(MaxAbsDiff(batch[1], other_want), 0.0f);
  EXPECT_EQ(a.ComputeDigest(), prefilled.ComputeDigest());
  EXPECT_EQ(b.ComputeDigest(), alone.ComputeDigest());
  // Control: a windowed cache's digest is not a full cache's (it covers less).
  KVCache full = model->NewCache();
  ASSERT_OK(model->Prefill(&full, tokens, LogitsMode::kNone));
  EXPECT_NE(full.ComputeDigest(), prefilled.ComputeDigest());
}

TEST(Witness, SlidingWindowCloneAndAppendMatch) {
  auto model = MakeModel();
  const auto tokens = TokenSequence(900, 6, 97);
  const auto more = TokenSequence(20, 7, 97);
  KVCache full = model->NewCache();
  ASSERT_OK(model->Prefill(&full, tokens, LogitsMode::kNone));
  ASSERT_OK_AND_ASSIGN(auto want, model->Prefill(&full, more, LogitsMode::kAll));

  KVCache windowed = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_OK(model->Prefill(&windowed, tokens, LogitsMode::kNone));
  KVCache clone = windowed.Clone();
  EXPECT_EQ(clone.ComputeDigest(), windowed.ComputeDigest());
  EXPECT_EQ(clone.held_from(kSliding), windowed.held_from(kSliding));
  ASSERT_OK_AND_ASSIGN(auto from_clone, model->Prefill(&clone, more, LogitsMode::kAll));
  EXPECT_EQ(MaxAbsDiff(from_clone, want), 0.0f);

  // A windowed cache's prefix of a full cache keeps only the windows, same logits onwards.
  KVCache copied = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_OK(internal::KVCacheAccess::AppendFrom(copied, full, 0, tokens.size()));
  EXPECT_EQ(copied.ComputeDigest(), windowed.ComputeDigest());
  ASSERT_OK_AND_ASSIGN(auto from_copy, model->Prefill(&copied, more, LogitsMode::kAll));
  EXPECT_EQ(MaxAbsDiff(from_copy, want), 0.0f);
}

TEST(Witness, SlidingWindowCutsInPlaceWithinWhatIsHeldAndRefusesPastIt) {
  auto model = MakeModel();
  const auto tokens = TokenSequence(1000, 8, 97);
  KVCache windowed = model->NewCache(KVMemory::kSlidingWindow);
  ASSERT_OK(model->Prefill(&windowed, tokens, LogitsMode::kNone));
  const size_t floor = windowed.cut_floor();
  ASSERT_GT(floor, 0u);
  ASSERT_LT(floor, tokens.size());
  const Digest before = windowed.ComputeDigest();

  // Refused, each naming the layer, and the cache unchanged.
  for (Status s : {windowed.Truncate(floor - 1), windowed.Prefix(10).status(), windowed.CopySpan(0, 5).status(),
                   windowed.Evict(506, 494)}) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("sliding-window layer"), std::string::npos) << s.ToString();
  }
  auto tok = MakeByteTokenizer();
  RadixTree tree(*model, *tok);
  EXPECT_EQ(tree.Insert(tokens, windowed).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(windowed.size(), tokens.size());
  EXPECT_EQ(windowed.ComputeDigest(), before);

  // A session from this one's prefix: reused only down to the floor, rebuilt below it.
  std::vector<int32_t> diverging(tokens.begin(), tokens.begin() + 100);
  diverging.push_back(1);
  EXPECT_EQ(SessionFromPrefix(windowed, diverging).reused_tokens, 0u);
  std::vector<int32_t> late(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(floor) + 3);
  late.push_back(1);
  SessionStart start = SessionFromPrefix(windowed, late);
  EXPECT_EQ(start.reused_tokens, floor + 3);
  EXPECT_TRUE(start.cache.windowed());

  // Within what is held: a cut to the floor, then the same tokens again, equals never cutting.
  ASSERT_OK(windowed.Truncate(floor));
  const auto rest = std::span(tokens).subspan(floor);
  ASSERT_OK_AND_ASSIGN(auto again, model->Prefill(&windowed, rest, LogitsMode::kLast));
  KVCache full = model->NewCache();
  ASSERT_OK_AND_ASSIGN(auto want, model->Prefill(&full, tokens, LogitsMode::kLast));
  EXPECT_EQ(MaxAbsDiff(again, want), 0.0f);
  EXPECT_EQ(windowed.ComputeDigest(), before);
}

TEST(Witness, SlidingWindowLedgerRebuildsFromTextWhenTheCutReachesPastTheWindow) {
  auto model = MakeModel();
  const auto system = TokenSequence(400, 9, 97), user = TokenSequence(300, 10, 97), tool = TokenSequence(350, 11, 97);
  auto spec = [](std::string id, const std::vector<int32_t>& t) { return SegmentSpec{std::move(id), SegmentKind::kUser, t, {}}; };
  SegmentLedger ledger(*model, KVMemory::kSlidingWindow);
  ASSERT_OK(ledger.Append(spec("system", system)));
  ASSERT_OK(ledger.Append(spec("user", user)));
  ASSERT_OK(ledger.Append(spec("tool", tool)));
  ASSERT_GT(ledger.cut_floor(), 400u);  // "user" starts before what every layer holds

  // The tail is cut in place when held; "user" (attended by "tool", before the floor) is rebuilt.
  ASSERT_OK_AND_ASSIGN(EvictionReport report, ledger.Evict("user", Repair::kRecomputeTail));
  EXPECT_TRUE(report.exact);
  EXPECT_TRUE(report.rebuilt_from_text);
  EXPECT_EQ(report.n_recomputed, system.size() + tool.size());

  SegmentLedger never(*model, KVMemory::kSlidingWindow);
  ASSERT_OK(never.Append(spec("system", system)));
  ASSERT_OK(never.Append(spec("tool", tool)));
  EXPECT_EQ(ledger.cache().ComputeDigest(), never.cache().ComputeDigest());
  const std::vector<int32_t> next = {5, 6, 7};
  ASSERT_OK_AND_ASSIGN(auto got, ledger.ExtendLast(next));
  ASSERT_OK_AND_ASSIGN(auto want, never.ExtendLast(next));
  EXPECT_EQ(MaxAbsDiff(got, want), 0.0f);
  // Control: with "user" kept, the logits differ.
  SegmentLedger kept(*model, KVMemory::kSlidingWindow);
  ASSERT_OK(kept.Append(spec("system", system)));
  ASSERT_OK(kept.Append(spec("user", user)));
  ASSERT_OK(kept.Append(spec("tool", tool)));
  ASSERT_OK_AND_ASSIGN(auto with_user, kept.ExtendLast(next));
  EXPECT_GT(MaxAbsDiff(with_user, want), 0.0f);

  // The tail, when every layer still holds what the cut needs: cut in place, no rebuild.
  ASSERT_LE(kept.cut_floor(), 700u);
  ASSERT_OK_AND_ASSIGN(EvictionReport tail, kept.Evict("tool", Repair::kRequireExact));
  EXPECT_TRUE(tail.exact);
  EXPECT_FALSE(tail.rebuilt_from_text);
  SegmentLedger two(*model, KVMemory::kSlidingWindow);
  ASSERT_OK(two.Append(spec("system", system)));
  ASSERT_OK(two.Append(spec("user", user)));
  EXPECT_EQ(kept.cache().ComputeDigest(), two.cache().ComputeDigest());
}

}  // namespace
}  // namespace fak
