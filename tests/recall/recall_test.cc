// Recall images: round trip, re-screening by a stricter chain, fail-closed loading (tampered,
// truncated, missing, swapped blobs; edited images; unknown versions), names that would escape the
// store directory, listing, removal and garbage collection, and rebuilding a ledger from text.
#include "fak/recall/recall.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/model/test_models.h"
#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::BlobFilePath;
using testing::ReadAll;
using testing::ScopedTempDir;
using testing::WriteAll;
namespace fs = std::filesystem;

// Padding keeps each text above the inline bound, so it has a file to damage.
std::vector<RecallSegment> Conversation(size_t pad_bytes = 300) {
  const std::string kPad(pad_bytes, '.');
  return {
      {"sys", SegmentKind::kSystem, "system: you are a careful assistant." + kPad},
      {"u1", SegmentKind::kUser, "user: fetch the deploy notes." + kPad},
      {"tool1", SegmentKind::kToolResult, "tool: notes say the key is AKIAIOSFODNN7EXAMPLE" + kPad},
      {"a1", SegmentKind::kAssistant, "assistant: the notes mention a credential." + kPad},
  };
}

struct Fixture {
  ScopedTempDir tmp;
  std::string dir = tmp.Sub("recall");
  std::unique_ptr<RecallStore> store = *RecallStore::Open(dir);
  std::string BlobPath(const std::string& text) const { return BlobFilePath(dir + "/blobs", Digest::Of(text)); }
};

TEST(Recall, SaveLoadRoundTrip) {
  Fixture f;
  ScreenChain chain = ScreenChain::Default();
  const auto segs = Conversation();
  ASSERT_OK_AND_ASSIGN(Digest image_digest, f.store->Save("session-1", segs, chain));
  EXPECT_EQ(image_digest, Digest::Of(ReadAll(f.dir + "/images/session-1.json")));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("session-1", chain));
  EXPECT_EQ(t.name, "session-1");
  EXPECT_EQ(t.format_version, 1u);
  EXPECT_FALSE(t.chain_changed());
  EXPECT_EQ(t.recorded_chain, chain.Describe());
  ASSERT_EQ(t.segments.size(), segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(t.segments[i].id, segs[i].id);
    EXPECT_EQ(t.segments[i].kind, segs[i].kind);
    // The quarantined tool result comes back as its sealed stub (RecallQuarantine below).
    EXPECT_EQ(t.segments[i].text, i == 2 ? SealedStub(Digest::Of(segs[i].text)) : segs[i].text);
    EXPECT_EQ(t.segments[i].source_digest, Digest::Of(segs[i].text));
    EXPECT_EQ(t.segments[i].recorded.quarantined(), i == 2);
    EXPECT_EQ(t.segments[i].current.quarantined(), i == 2);
  }
  EXPECT_EQ(t.segments[2].recorded.detector, "secrets");
  EXPECT_EQ(t.n_newly_quarantined(), 0u);
}

TEST(Recall, StricterChainQuarantinesOnLoad) {
  Fixture f;
  ScreenChain weak;  // only the (empty) denylist
  ASSERT_OK(f.store->Save("s", Conversation(), weak));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("s", ScreenChain::Default()));
  EXPECT_TRUE(t.chain_changed());
  EXPECT_FALSE(t.segments[2].recorded.quarantined());
  EXPECT_TRUE(t.segments[2].current.quarantined());
  EXPECT_EQ(t.n_newly_quarantined(), 1u);
  // A denylist entry added after the save also re-judges old text.
  ScreenChain strict = ScreenChain::Default();
  ASSERT_OK(strict.denylist().Add(Digest::Of(Conversation()[1].text), "retracted"));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t2, f.store->Load("s", strict));
  EXPECT_EQ(t2.segments[1].current.detector, "denylist");
  EXPECT_EQ(t2.n_newly_quarantined(), 2u);
}

TEST(Recall, LoadFailsClosedOnTamperedTruncatedMissingOrSwappedBlobs) {
  const auto segs = Conversation();
  ScreenChain chain = ScreenChain::Default();
  using Damage = std::function<void(const Fixture&)>;
  const std::vector<std::pair<std::string, Damage>> damages = {
      {"tampered", [&](const Fixture& f) {
         std::string b = ReadAll(f.BlobPath(segs[1].text));
         b[100] ^= 1;
         WriteAll(f.BlobPath(segs[1].text), b);
       }},
      {"truncated", [&](const Fixture& f) { WriteAll(f.BlobPath(segs[0].text), ReadAll(f.BlobPath(segs[0].text)).substr(0, 90)); }},
      {"missing", [&](const Fixture& f) { fs::remove(f.BlobPath(segs[3].text)); }},
      {"swapped", [&](const Fixture& f) {
         const std::string a = ReadAll(f.BlobPath(segs[0].text)), b = ReadAll(f.BlobPath(segs[1].text));
         WriteAll(f.BlobPath(segs[0].text), b);
         WriteAll(f.BlobPath(segs[1].text), a);
       }},
  };
  for (const auto& [what, damage] : damages) {
    Fixture f;
    ASSERT_OK(f.store->Save("s", segs, chain));
    damage(f);
    // Reopen, as a new process would, then load.
    f.store.reset();
    ASSERT_OK_AND_ASSIGN(f.store, RecallStore::Open(f.dir));
    Result<RecalledTranscript> t = f.store->Load("s", chain);
    ASSERT_FALSE(t.has_value()) << what;
    EXPECT_EQ(t.error().code(), StatusCode::kVerificationFailed) << what << ": " << t.error().ToString();
    EXPECT_NE(t.error().message().find("segment '"), std::string_view::npos) << t.error().ToString();
  }
}

// Rewrites an image's JSON through `edit`, recomputing its checksum so only `edit` is at fault.
void EditImage(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json doc = nlohmann::json::parse(ReadAll(path));
  doc.erase("checksum");
  edit(doc);
  doc["checksum"] = Digest::Of(doc.dump()).Hex();
  WriteAll(path, doc.dump(1));
}

TEST(Recall, EditedOrMalformedImagesAreRejected) {
  Fixture f;
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK(f.store->Save("s", Conversation(), chain));
  const std::string path = f.dir + "/images/s.json";
  const std::string good = ReadAll(path);

  std::string edited = good;  // an edit without recomputing the checksum
  edited.replace(edited.find("\"u1\""), 4, "\"u9\"");
  WriteAll(path, edited);
  EXPECT_EQ(f.store->Load("s", chain).error().code(), StatusCode::kCorruption);

  WriteAll(path, good.substr(0, good.size() / 2));
  EXPECT_EQ(f.store->Load("s", chain).error().code(), StatusCode::kCorruption);

  WriteAll(path, good);
  EditImage(path, [](nlohmann::json& d) { d["version"] = 2; });
  Result<RecalledTranscript> v2 = f.store->Load("s", chain);
  EXPECT_EQ(v2.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(v2.error().message().find("version 2"), std::string_view::npos) << v2.error().ToString();

  WriteAll(path, good);
  EditImage(path, [](nlohmann::json& d) { d["segments"][0]["source"] = "../../../../etc/passwd"; });
  Result<RecalledTranscript> esc = f.store->Load("s", chain);
  EXPECT_EQ(esc.error().code(), StatusCode::kCorruption);
  EXPECT_NE(esc.error().message().find("segments[0]"), std::string_view::npos) << esc.error().ToString();

  WriteAll(path, good);
  EditImage(path, [](nlohmann::json& d) { d["segments"][1]["kind"] = "root"; });
  EXPECT_EQ(f.store->Load("s", chain).error().code(), StatusCode::kCorruption);

  WriteAll(path, good);
  EditImage(path, [](nlohmann::json& d) { d["segments"][1]["size_bytes"] = 5; });
  EXPECT_EQ(f.store->Load("s", chain).error().code(), StatusCode::kVerificationFailed);

  // An image copied under another name is a swap, not that session.
  WriteAll(path, good);
  fs::copy_file(path, f.dir + "/images/other.json");
  EXPECT_EQ(f.store->Load("other", chain).error().code(), StatusCode::kCorruption);
  ASSERT_OK(f.store->Load("s", chain));
}

TEST(Recall, NamesThatWouldEscapeTheStoreAreRefused) {
  Fixture f;
  ScreenChain chain;
  const std::vector<RecallSegment> segs = {{"a", SegmentKind::kUser, "hi"}};
  const std::vector<std::string> bad = {"../evil", "/etc/passwd", "a/b", ".hidden", "", "..", std::string(200, 'x'), std::string("nul\0x", 5)};
  for (const std::string& name : bad) {
    EXPECT_EQ(f.store->Save(name, segs, chain).error().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(f.store->Load(name, chain).error().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(f.store->RemoveImage(name).code(), StatusCode::kInvalidArgument) << name;
  }
  EXPECT_FALSE(fs::exists(f.tmp.Sub("evil.json")));
  // Segment ids are validated too.
  const std::vector<RecallSegment> dup = {{"a", SegmentKind::kUser, "x"}, {"a", SegmentKind::kUser, "y"}};
  EXPECT_EQ(f.store->Save("ok", dup, chain).error().code(), StatusCode::kInvalidArgument);
  const std::vector<RecallSegment> empty_id = {{"", SegmentKind::kUser, "x"}};
  EXPECT_EQ(f.store->Save("ok", empty_id, chain).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.store->Load("never-saved", chain).error().code(), StatusCode::kNotFound);
}

TEST(Recall, ListRemoveAndCollectGarbage) {
  Fixture f;
  ScreenChain chain;
  const auto segs = Conversation();
  ASSERT_OK(f.store->Save("a", segs, chain));
  ASSERT_OK(f.store->Save("b", std::span(segs).subspan(0, 2), chain));
  ASSERT_OK_AND_ASSIGN(auto names, f.store->ListImages());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*f.store->CollectGarbage(), 0u);
  ASSERT_OK(f.store->RemoveImage("a"));
  EXPECT_EQ(f.store->RemoveImage("a").code(), StatusCode::kNotFound);
  EXPECT_EQ(*f.store->CollectGarbage(), 2u);  // tool1 and a1 were only in "a"
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("b", chain));
  EXPECT_EQ(t.segments.size(), 2u);
}

TEST(Recall, PrefillTranscriptLeavesOutQuarantinedSegments) {
  Fixture f;
  ModelConfig c = testing::TinyConfig();
  c.vocab_size = 258;
  ASSERT_OK_AND_ASSIGN(auto model, Model::Synthetic(c, 11));
  auto tok = MakeByteTokenizer();
  ScreenChain chain = ScreenChain::Default();
  ASSERT_OK(f.store->Save("s", Conversation(/*pad_bytes=*/0), chain));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("s", chain));
  ASSERT_OK_AND_ASSIGN(SegmentLedger ledger, PrefillTranscript(*model, *tok, t));
  ASSERT_EQ(ledger.segments().size(), 3u);
  EXPECT_EQ(ledger.Find("tool1"), nullptr);
  size_t n_tokens = 0;
  for (size_t i : {0, 1, 3}) n_tokens += t.segments[i].text.size();
  EXPECT_EQ(ledger.cache().size(), n_tokens);
  EXPECT_EQ(ledger.Find("a1")->source_digest, Digest::Of(Conversation(0)[3].text));
}

// Every byte under the store's directory, in every file: blobs, the blob journal, images.
bool DirHolds(const std::string& dir, std::string_view needle) {
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && ReadAll(e.path().string()).find(needle) != std::string::npos) return true;
  }
  return false;
}

// A segment the chain quarantines at Save (a secret, an injection, a denylisted text) is stored as
// its digest and verdict only: its bytes are in no file of the store, in a blob or inline, and it
// comes back as its sealed stub, quarantined whatever chain loads it. Before this, Save wrote every
// segment's text, so an image kept a second copy of what the planner had erased.
TEST(RecallQuarantine, AQuarantinedSegmentIsStoredAsItsStubNeverItsBytes) {
  for (size_t pad : {size_t{300}, size_t{0}}) {  // a blob file, and an inline journal record
    Fixture f;
    ScreenChain chain = ScreenChain::Default();
    std::vector<RecallSegment> segs = Conversation(pad);
    const std::string erased = "user: my card number is 4111 1111 1111 1111" + std::string(pad, '.');
    segs.push_back({"u2", SegmentKind::kUser, erased});
    ASSERT_OK(chain.denylist().Add(Digest::Of(erased), "user request"));  // sealed by the planner earlier
    ASSERT_OK(f.store->Save("s", segs, chain));
    EXPECT_FALSE(DirHolds(f.dir, "AKIAIOSFODNN7EXAMPLE")) << pad;
    EXPECT_FALSE(DirHolds(f.dir, "4111 1111")) << pad;
    EXPECT_TRUE(DirHolds(f.dir, "fetch the deploy notes")) << pad;  // control: admitted text is stored
    // Loaded by a chain that would admit everything: still sealed, as the stub.
    ScreenChain lenient;
    ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("s", lenient));
    for (size_t i : {size_t{2}, size_t{4}}) {
      EXPECT_EQ(t.segments[i].text, SealedStub(Digest::Of(segs[i].text))) << i;
      EXPECT_EQ(t.segments[i].source_digest, Digest::Of(segs[i].text)) << i;
      EXPECT_TRUE(t.segments[i].recorded.quarantined() && t.segments[i].current.quarantined()) << i;
    }
    EXPECT_EQ(t.segments[4].recorded.detector, "denylist");
    EXPECT_EQ(t.segments[1].text, segs[1].text);
    EXPECT_FALSE(t.segments[1].current.quarantined());
  }
}

// An image saved before quarantined segments lost their blob still names one: Load never reads it
// (the stub comes back), and garbage collection takes the plaintext away.
TEST(RecallQuarantine, AnOlderImagesSealedTextIsNeverReadAndIsCollected) {
  Fixture f;
  ScreenChain chain = ScreenChain::Default();
  const auto segs = Conversation();
  ASSERT_OK(f.store->Save("s", segs, chain));
  ASSERT_OK(f.store->blobs().Put(segs[2].text).status());  // what the older Save wrote
  ASSERT_TRUE(DirHolds(f.dir, "AKIAIOSFODNN7EXAMPLE"));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript t, f.store->Load("s", chain));
  EXPECT_EQ(t.segments[2].text, SealedStub(Digest::Of(segs[2].text)));
  EXPECT_EQ(*f.store->CollectGarbage(), 1u);
  EXPECT_FALSE(DirHolds(f.dir, "AKIAIOSFODNN7EXAMPLE"));
  ASSERT_OK_AND_ASSIGN(RecalledTranscript again, f.store->Load("s", chain));  // the image still loads
  EXPECT_EQ(again.segments.size(), segs.size());
}

TEST(Recall, ImageTextsAreNeverEvicted) {
  Fixture f;
  ASSERT_OK(f.store->Save("t", Conversation(), ScreenChain::Default()));
  // Images depend on every text they name, so the recall store's blob store has no LRU bound.
  EXPECT_EQ(f.store->blobs().Stats().capacity_bytes, UINT64_MAX);
  EXPECT_EQ(f.store->blobs().Stats().n_evicted, 0u);
}

}  // namespace
}  // namespace fak
