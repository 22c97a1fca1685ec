// TierPager refusals: a slab in the tier is served only when it passes every check; each kind of
// bad slab — tampered (bytes, or bytes with the file's checksums rewritten to match), truncated,
// another model's, another tenant's, derived from a denylisted text — is refused with its typed
// reason, counted, and the context is recomputed from text with the exact logits.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::MakeWorker;
using testing::MaxAbsDiff;
using testing::RecomputeLogits;
using testing::Worker;

class TierPagerTest : public ::testing::Test {
 protected:
  TierPagerTest() : store_(MakeMemoryBlobStore()), corpus_(*store_), chain_(ScreenChain::Default()) {
    tier_ = *OpenDirectoryKVTier(dir_.Sub("tier"));
    t_ = testing::Conversation(corpus_, "gamma");
  }

  // Computes `t` with model `seed` as `tenant` and writes its nodes through to the tier.
  void Fill(uint64_t seed, const std::string& tenant, const TranscriptRef& t) {
    Worker w = MakeWorker(corpus_, chain_, {.seed = seed, .spill_to = tier_.get(), .write_through = true});
    ASSERT_TRUE(w.driver->Materialize(tenant, t).has_value());
    w.spiller->Flush();
    ASSERT_EQ(w.spiller->Stats().failed, 0u);
  }

  // A fresh worker materializes `t` as `tenant`: the page-in must be refused for `reason`, and the
  // recompute must be exact.
  void ExpectRefused(PageInFailure reason, const std::string& tenant = "default") {
    Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
    ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize(tenant, t_));
    EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute) << m.detail;
    EXPECT_EQ(m.reused_tokens, 0u);
    EXPECT_GT(w.pager->Stats().count(reason), 0u) << m.detail;
    EXPECT_EQ(w.pager->Stats().served_slabs, 0u);
    EXPECT_NE(m.detail.find(PageInFailureName(reason)), std::string::npos) << m.detail;
    EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*w.model, m.tokens)), 0.0f);
  }

  // Rewrites every slab file through `edit` (on the decoded file), re-encoding it with fresh
  // section checksums: what an attacker with write access to the tier could do.
  void Rewrite(const std::function<void(SlabFile&)>& edit) {
    for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
      ASSERT_OK_AND_ASSIGN(SlabFile f, DecodeSlabFile(testing::ReadAll(path)));
      edit(f);
      ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeSlabFile(f.manifest, f.sources, f.slab));
      testing::WriteAll(path, bytes);
    }
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<BlobStore> store_;
  TextCorpus corpus_;
  ScreenChain chain_;
  std::unique_ptr<KVTierStore> tier_;
  TranscriptRef t_;
};

TEST_F(TierPagerTest, ServesAnIntactSlab) {  // the control for every refusal below
  Fill(1, "default", t_);
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kFault) << m.detail;
  EXPECT_EQ(w.pager->Stats().served_slabs, 1u);
}

TEST_F(TierPagerTest, RefusesTamperedBytes) {
  Fill(1, "default", t_);
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    std::string bytes = testing::ReadAll(path);
    bytes[bytes.size() - 5] ^= 0x20;  // a bit of V
    testing::WriteAll(path, bytes);
  }
  ExpectRefused(PageInFailure::kChecksum);
}

TEST_F(TierPagerTest, RefusesTamperedKVWithRewrittenFileChecksums) {
  Fill(1, "default", t_);
  Rewrite([](SlabFile& f) { f.slab.k[3] ^= std::byte{1}; });  // the file verifies; the manifest's checksum does not
  ExpectRefused(PageInFailure::kChecksum);
}

TEST_F(TierPagerTest, RefusesTruncated) {
  Fill(1, "default", t_);
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    const std::string bytes = testing::ReadAll(path);
    testing::WriteAll(path, bytes.substr(0, bytes.size() / 2));
  }
  ExpectRefused(PageInFailure::kTruncated);
}

TEST_F(TierPagerTest, RefusesForeignModel) {
  // Another model's KV of the same text, planted under this model's key.
  Fill(2, "default", t_);
  Worker serving = MakeWorker(corpus_, chain_, {.seed = 1});
  const BindingTuple mine = serving.tree->ClaimFor("default").binding;
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    ASSERT_OK_AND_ASSIGN(SlabFile f, DecodeSlabFile(testing::ReadAll(path)));
    const TierKey key = TierKeyFor(mine, "default", f.manifest.binding.span_digest, f.manifest.binding.tokens.end());
    testing::WriteAll(dir_.Sub("tier/slabs/") + std::to_string(key.end) + "-" + key.id + ".kvslab", testing::ReadAll(path));
  }
  ExpectRefused(PageInFailure::kAxis);
}

TEST_F(TierPagerTest, RefusesForeignTenant) {
  Fill(1, "acme", t_);
  {  // Under its own key another tenant simply finds nothing...
    Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
    ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("globex", t_));
    EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute);
    EXPECT_GT(w.pager->Stats().count(PageInFailure::kAbsent), 0u);
  }
  // ... and acme's slab planted under globex's key is refused by the gate's tenancy check.
  Worker serving = MakeWorker(corpus_, chain_, {.seed = 1});
  const BindingTuple mine = serving.tree->ClaimFor("globex").binding;
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    ASSERT_OK_AND_ASSIGN(SlabFile f, DecodeSlabFile(testing::ReadAll(path)));
    const TierKey key = TierKeyFor(mine, "globex", f.manifest.binding.span_digest, f.manifest.binding.tokens.end());
    testing::WriteAll(dir_.Sub("tier/slabs/") + std::to_string(key.end) + "-" + key.id + ".kvslab", testing::ReadAll(path));
  }
  ExpectRefused(PageInFailure::kTenant, "globex");
}

TEST_F(TierPagerTest, RefusesSlabFromDenylistedText) {
  // The same tokens from other texts: "…notes.\n" + "assistant…" as two messages, and as one. The
  // slab records the two-message sources; denying one of them refuses it for the one-message
  // transcript, whose own text is not denied (so Materialize itself does not refuse).
  Fill(1, "default", t_);
  std::string joined;
  for (const Digest& d : t_.segments) joined += *corpus_.GetSource(d);
  const Digest denied = t_.segments[2];
  t_ = testing::PutTranscript(corpus_, "joined", {joined});
  ASSERT_OK(chain_.denylist().Add(denied, "test: withdrawn"));
  ExpectRefused(PageInFailure::kDenied);
}

TEST_F(TierPagerTest, RefusesRewrittenSourceRuns) {
  // Dropping the runs (to hide a denied source) breaks the manifest's source binding.
  Fill(1, "default", t_);
  Rewrite([](SlabFile& f) { f.sources.clear(); });
  ExpectRefused(PageInFailure::kChecksum);
}

// Two conversations opening alike (one system prompt) split the first one's node where they
// diverge; written through, that shared prefix is a tier entry of its own, so a worker that saw
// neither pages it in for a third conversation, exactly. Control: before the split the tier holds
// only the first conversation's whole edge, which a third context cannot find.
TEST_F(TierPagerTest, ASharedPrefixASplitMakesIsWrittenThrough) {
  const TranscriptRef delta = testing::Conversation(corpus_, "delta");
  const TranscriptRef omega = testing::Conversation(corpus_, "omega");
  Worker a = MakeWorker(corpus_, chain_, {.seed = 1, .spill_to = tier_.get(), .write_through = true});
  ASSERT_OK_AND_ASSIGN(Materialized gamma_m, a.driver->Materialize("default", t_));
  a.spiller->Flush();
  {
    Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
    ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", omega));
    EXPECT_EQ(m.reused_tokens, 0u);
  }
  ASSERT_OK_AND_ASSIGN(Materialized delta_m, a.driver->Materialize("default", delta));
  a.spiller->Flush();
  ASSERT_EQ(a.spiller->Stats().failed, 0u);
  const size_t shared = static_cast<size_t>(
      std::mismatch(gamma_m.tokens.begin(), gamma_m.tokens.end(), delta_m.tokens.begin()).first - gamma_m.tokens.begin());
  ASSERT_GT(shared, 0u);
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> ends, tier_->Ends());
  EXPECT_NE(std::find(ends.begin(), ends.end(), shared), ends.end());
  Worker b = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, b.driver->Materialize("default", omega));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute) << m.detail;
  EXPECT_EQ(m.reused_tokens, shared);  // gamma's and delta's common prefix, which omega opens with too
  EXPECT_EQ(b.driver->Stats().paged_tokens, shared);
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*b.model, m.tokens)), 0.0f);
}

TEST_F(TierPagerTest, APublicPrefixIsSharedAcrossTenantsAndNothingElse) {
  const std::string system = *corpus_.GetSource(t_.segments[0]);
  AccessPolicy access;
  ASSERT_OK(access.DeclarePublicPrefix("system", std::vector<int32_t>(system.begin(), system.end())));  // byte ids
  {  // acme computes its conversation: the system prompt is stored in the public namespace
    Worker a = MakeWorker(corpus_, chain_, {.seed = 1, .spill_to = tier_.get(), .write_through = true, .access = &access});
    ASSERT_TRUE(a.driver->Materialize("acme", t_).has_value());
    a.spiller->Flush();
  }
  ASSERT_EQ(tier_->Ends()->size(), 2u);  // [0, system) public, [system, end) acme's
  Worker g = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get(), .access = &access});
  ASSERT_OK_AND_ASSIGN(Materialized m, g.driver->Materialize("globex", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute);
  EXPECT_EQ(m.reused_tokens, system.size());  // the public part came from the tier; acme's part did not
  EXPECT_EQ(g.driver->Stats().paged_tokens, system.size());
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*g.model, m.tokens)), 0.0f);
}

// One worker computes the conversation turn by turn, writing each new node through: the tier then
// holds a chain of edge slabs [0, a), [a, b), [b, end) — a page-in walks it slab by slab, reading
// the next slab while the current one is verified. Returns the chain's ends, ascending.
std::vector<uint64_t> FillChain(TextCorpus& corpus, const ScreenChain& chain, KVTierStore& tier, const TranscriptRef& t) {
  Worker a = MakeWorker(corpus, chain, {.seed = 1, .spill_to = &tier, .write_through = true});
  for (size_t k = 2; k <= t.segments.size(); ++k) {
    const TranscriptRef part{t.session, {t.segments.begin(), t.segments.begin() + static_cast<std::ptrdiff_t>(k)}};
    EXPECT_TRUE(a.driver->Materialize("default", part).has_value());
  }
  a.spiller->Flush();
  EXPECT_EQ(a.spiller->Stats().failed, 0u);
  return *tier.Ends();
}

TEST_F(TierPagerTest, PagesAChainOfSlabsExactly) {
  const std::vector<uint64_t> ends = FillChain(corpus_, chain_, *tier_, t_);
  ASSERT_EQ(ends.size(), 3u);
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kFault) << m.detail;
  EXPECT_EQ(w.pager->Stats().served_slabs, 3u);
  EXPECT_EQ(ends.back(), m.tokens.size());
  EXPECT_EQ(m.reused_tokens, m.tokens.size() - 1);  // the last token is prefilled for its logits
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*w.model, m.tokens)), 0.0f);
  // Control: another model's logits for the same context differ.
  Worker other = MakeWorker(corpus_, chain_, {.seed = 2});
  EXPECT_GT(MaxAbsDiff(RecomputeLogits(*other.model, m.tokens), m.logits), 0.0f);
}

TEST_F(TierPagerTest, AChainStopsAtARefusedSlabAndRecomputesTheRest) {
  const std::vector<uint64_t> ends = FillChain(corpus_, chain_, *tier_, t_);
  ASSERT_EQ(ends.size(), 3u);
  bool tampered = false;  // the middle slab [a, b): what was read ahead of the first must be refused
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    if (std::filesystem::path(path).filename().string().rfind(std::to_string(ends[1]) + "-", 0) != 0) continue;
    std::string bytes = testing::ReadAll(path);
    bytes[bytes.size() - 5] ^= 0x20;
    testing::WriteAll(path, bytes);
    tampered = true;
  }
  ASSERT_TRUE(tampered);
  Worker w = MakeWorker(corpus_, chain_, {.seed = 1, .page_from = tier_.get()});
  ASSERT_OK_AND_ASSIGN(Materialized m, w.driver->Materialize("default", t_));
  EXPECT_EQ(m.verdict, MaterializeVerdict::kRecompute) << m.detail;
  EXPECT_EQ(w.pager->Stats().served_slabs, 1u);
  EXPECT_EQ(m.reused_tokens, ends[0]);
  EXPECT_EQ(w.pager->Stats().count(PageInFailure::kChecksum), 1u);
  EXPECT_EQ(MaxAbsDiff(m.logits, RecomputeLogits(*w.model, m.tokens)), 0.0f);
}

TEST_F(TierPagerTest, AbsentIsAMissNotAnError) {
  ExpectRefused(PageInFailure::kAbsent);
}

// Sizes the tier reports are not trusted (issue 31: a sparse 1 TiB slab file answered HTTP 500 on
// every request for its prefix): a file larger than any slab of the serving shape ending there is
// refused unread as kOversized, and a header claiming sections larger than the file as kTruncated;
// either way the context is recomputed exactly.
TEST_F(TierPagerTest, RefusesASparseTerabyteSlabFileUnread) {
  Fill(1, "default", t_);
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);  // sparse: costs no disk, claims 1 TiB
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  ExpectRefused(PageInFailure::kOversized);
}

TEST_F(TierPagerTest, RefusesAHeaderThatClaimsHugeSections) {
  Fill(1, "default", t_);
  for (const std::string& path : testing::SlabFiles(dir_.Sub("tier"))) {
    std::string bytes = testing::ReadAll(path);
    const uint64_t huge = uint64_t{1} << 62;
    std::memcpy(bytes.data() + 16 + 3 * 8, &huge, 8);  // the K/Kraw/V section's length
    const Digest header = Digest::Of(std::string_view(bytes).substr(0, kSlabFileHeaderBytes - Digest::kSize));
    std::memcpy(bytes.data() + kSlabFileHeaderBytes - Digest::kSize, header.bytes.data(), Digest::kSize);
    testing::WriteAll(path, bytes);
  }
  ExpectRefused(PageInFailure::kTruncated);
}

}  // namespace
}  // namespace fak
