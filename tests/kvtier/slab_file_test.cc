// Slab files and the directory KV tier: round trip, every decode problem typed, atomic durable
// writes through the Env (a failed write leaves nothing), the source index across a reopen.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <thread>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "fak/kvtier/kv_tier_store.h"
#include "fak/kvtier/slab_file.h"
#include "tests/kvtier/kv_tier_test_util.h"
#include "tests/store/store_test_util.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// A two-layer slab of 5 tokens at position 7 with its manifest and source runs.
struct Sample {
  KVSlab slab;
  KVManifest manifest;
  std::vector<SourceSpan> sources;
};

Sample MakeSample() {
  Sample s;
  s.slab.shape = KVShape{2, 2, 4, 64};
  s.slab.start_position = 7;
  s.slab.tokens = {5, 6, 7, 8, 9};
  const size_t n = 2 * 2 * 5 * 4;
  auto bytes = [](std::vector<float> f) {  // K/Kraw/V of an f32 slab, as its bytes
    KVBytes b(f.size() * sizeof(float));
    std::memcpy(b.data(), f.data(), b.size());
    return b;
  };
  s.slab.k = bytes(testing::RandomVector(n, 1));
  s.slab.kraw = bytes(testing::RandomVector(n, 2));
  s.slab.v = bytes(testing::RandomVector(n, 3));
  std::vector<int32_t> context{1, 2, 3, 4, 1, 2, 3, 5, 6, 7, 8, 9};
  BindingTuple b;
  b.model_id = Digest::Of("model");
  b.tokenizer_id = Digest::Of("tokenizer");
  b.precision = Precision{"f32", "f32", "scalar"};
  b.position = PositionConvention{"rope", "adjacent", 10000, "none"};
  b.producer = Producer{"fak", "0.1.0", "kernels-r1 test"};
  b = *BindSpan(b, context, 7, 5);
  b.integrity_checksum = KVSlabChecksum(s.slab);
  s.sources = {SourceSpan{7, 5, Digest::Of("text")}};
  s.manifest = *MakeManifest(b, SourceSetDigest(s.sources, 7, 5, b.span_digest), "acme");
  return s;
}

TEST(SlabFile, RoundTrips) {
  const Sample s = MakeSample();
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeSlabFile(s.manifest, s.sources, s.slab));
  ASSERT_OK_AND_ASSIGN(SlabFile f, DecodeSlabFile(bytes));
  EXPECT_EQ(f.manifest, s.manifest);
  EXPECT_EQ(f.sources, s.sources);
  EXPECT_EQ(f.slab.tokens, s.slab.tokens);
  EXPECT_EQ(f.slab.start_position, 7u);
  EXPECT_EQ(f.slab.k, s.slab.k);
  EXPECT_EQ(f.slab.kraw, s.slab.kraw);
  EXPECT_EQ(f.slab.v, s.slab.v);
  EXPECT_EQ(KVSlabChecksum(f.slab), s.manifest.binding.integrity_checksum);
}

// Decoding hashes the K/Kraw/V section for the gate as it copies it (in 1 MiB chunks, on several
// threads for a large slab): the slab's own checksum, small or large, f32 or f16, checked or not; a
// flipped KV byte gives another checksum (the gate's refusal), and the checked decode refuses it.
TEST(SlabFile, DecodingHashesTheKVItCopies) {
  Sample s = MakeSample();
  // 3000 tokens: 5.8 MB (f16) or 11.5 MB of KV, hashed concurrently; 8000: 10 MB per f32 tensor, read
  // and hashed in several chunks each, the last one short.
  for (const size_t tokens : {size_t{5}, size_t{3000}, size_t{8000}}) {
    for (const KVDtype dtype : {KVDtype::kF32, KVDtype::kF16}) {
      KVSlab slab = s.slab;
      slab.shape.dtype = dtype;
      slab.shape.max_tokens = tokens;
      slab.tokens.assign(tokens, 5);
      const size_t bytes = 2 * 2 * tokens * 4 * slab.shape.elem_bytes() * 20;
      slab.shape.head_dim = 4 * 20;
      for (auto [t, seed] : {std::pair{&slab.k, 1}, std::pair{&slab.kraw, 2}, std::pair{&slab.v, 3}}) {
        t->resize(bytes);
        const std::vector<float> r = testing::RandomVector(bytes / sizeof(float), seed);
        std::memcpy(t->data(), r.data(), bytes);
      }
      ASSERT_OK_AND_ASSIGN(std::string file, EncodeSlabFile(s.manifest, s.sources, slab));
      ASSERT_OK_AND_ASSIGN(SlabFile f, DecodeSlabFile(file, nullptr, /*check_kv_section=*/false));
      EXPECT_EQ(f.slab_checksum, KVSlabChecksum(slab)) << tokens << " tokens";
      EXPECT_EQ(f.slab.v, slab.v);
      file[file.size() - 1] ^= 1;  // the last V byte: outside every checksum the decode still checks
      ASSERT_OK_AND_ASSIGN(SlabFile damaged, DecodeSlabFile(file, nullptr, /*check_kv_section=*/false));
      EXPECT_NE(damaged.slab_checksum, KVSlabChecksum(slab));
      EXPECT_EQ(damaged.slab_checksum, KVSlabChecksum(damaged.slab));
      EXPECT_FALSE(DecodeSlabFile(file).has_value());  // the checked decode refuses it itself
      file[file.size() - 1] ^= 1;
      EXPECT_EQ(DecodeSlabFile(file)->slab_checksum, KVSlabChecksum(slab));
    }
  }
}

// Decoding from a file read in ranges (what a directory tier page-in does) gives what decoding its
// bytes gives; a file that shrinks after it was opened is truncated, not a short slab; a file
// damaged on disk is refused like its bytes are.
TEST(SlabFile, DecodesFromAFileReadInRanges) {
  testing::ScopedTempDir tmp;
  Env* env = Env::Default();
  Sample s = MakeSample();
  s.slab.tokens.assign(6000, 5);  // 7.7 MB of KV: several chunks, read and hashed on several threads
  s.slab.shape.head_dim = 80;
  const size_t bytes = 2 * 2 * 6000 * 80 * sizeof(float);
  for (auto [t, seed] : {std::pair{&s.slab.k, 1}, std::pair{&s.slab.kraw, 2}, std::pair{&s.slab.v, 3}}) {
    const std::vector<float> r = testing::RandomVector(bytes / sizeof(float), seed);
    t->resize(bytes);
    std::memcpy(t->data(), r.data(), bytes);
  }
  ASSERT_OK_AND_ASSIGN(std::string encoded, EncodeSlabFile(s.manifest, s.sources, s.slab));
  ASSERT_OK(WriteFileAtomically(env, tmp.Sub("tmp"), tmp.Sub("slab"), tmp.path(), std::array{std::string_view(encoded)}));
  for (const bool check_kv : {true, false}) {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(tmp.Sub("slab")));
    ASSERT_OK_AND_ASSIGN(SlabFile from_file, DecodeSlabFile(*file, nullptr, check_kv));
    ASSERT_OK_AND_ASSIGN(SlabFile from_bytes, DecodeSlabFile(encoded, nullptr, check_kv));
    EXPECT_EQ(from_file.manifest, from_bytes.manifest);
    EXPECT_EQ(from_file.sources, s.sources);
    EXPECT_EQ(from_file.slab.tokens, s.slab.tokens);
    EXPECT_TRUE(from_file.slab.k == s.slab.k && from_file.slab.kraw == s.slab.kraw && from_file.slab.v == s.slab.v);
    EXPECT_EQ(from_file.slab_checksum, from_bytes.slab_checksum);
    EXPECT_EQ(from_file.slab_checksum, KVSlabChecksum(s.slab));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(tmp.Sub("slab")));
  ASSERT_OK(env->TruncateFile(tmp.Sub("slab"), encoded.size() / 2));  // shrinks under the open file
  SlabFileProblem p = SlabFileProblem::kNone;
  EXPECT_FALSE(DecodeSlabFile(*file, &p).has_value());
  EXPECT_EQ(p, SlabFileProblem::kTruncated);

  encoded[encoded.size() / 2] ^= 1;  // a K byte, damaged on disk: the file's own checksum says so
  ASSERT_OK(WriteFileAtomically(env, tmp.Sub("tmp"), tmp.Sub("slab"), tmp.path(), std::array{std::string_view(encoded)}));
  ASSERT_OK_AND_ASSIGN(file, env->NewRandomAccessFile(tmp.Sub("slab")));
  EXPECT_FALSE(DecodeSlabFile(*file, &p).has_value());
  EXPECT_EQ(p, SlabFileProblem::kChecksum);
  ASSERT_OK_AND_ASSIGN(SlabFile unchecked, DecodeSlabFile(*file, &p, /*check_kv_section=*/false));
  EXPECT_NE(unchecked.slab_checksum, KVSlabChecksum(s.slab));  // the gate's refusal
}

TEST(SlabFile, EveryDamageIsTyped) {
  const Sample s = MakeSample();
  const std::string good = *EncodeSlabFile(s.manifest, s.sources, s.slab);
  auto problem_of = [](std::string_view bytes) {
    SlabFileProblem p = SlabFileProblem::kNone;
    EXPECT_FALSE(DecodeSlabFile(bytes, &p).has_value());
    return p;
  };
  EXPECT_EQ(problem_of(good.substr(0, good.size() - 1)), SlabFileProblem::kTruncated);
  EXPECT_EQ(problem_of(good.substr(0, 20)), SlabFileProblem::kTruncated);
  EXPECT_EQ(problem_of(good + "x"), SlabFileProblem::kMalformed);
  for (size_t at : {size_t{20}, kSlabFileHeaderBytes + 3, good.size() - 1}) {  // header, manifest, kv
    std::string bad = good;
    bad[at] ^= 1;
    EXPECT_EQ(problem_of(bad), SlabFileProblem::kChecksum) << at;
  }
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_EQ(problem_of(magic), SlabFileProblem::kUnsupported);
  // A version-1 file (its kv section hashed as one stream) or a later one, with a header that
  // hashes right: unsupported, before any of its sections is read.
  for (const char v : {1, 3}) {
    std::string version = good;
    version[8] = v;
    const Digest header = Digest::Of(std::string_view(version).substr(0, kSlabFileHeaderBytes - Digest::kSize));
    std::memcpy(version.data() + kSlabFileHeaderBytes - Digest::kSize, header.bytes.data(), Digest::kSize);
    EXPECT_EQ(problem_of(version), SlabFileProblem::kUnsupported) << int{v};
    EXPECT_NE(DecodeSlabFile(version).error().message().find("version " + std::to_string(v)), std::string::npos);
  }
  KVSlab ragged = s.slab;
  ragged.v.pop_back();
  EXPECT_EQ(EncodeSlabFile(s.manifest, s.sources, ragged).error().code(), StatusCode::kInvalidArgument);
}

TEST(DirectoryKVTier, PutGetEndsSourcesAcrossReopen) {
  testing::ScopedTempDir dir;
  const TierKey a{Digest::Of("a").Hex(), 12}, b{Digest::Of("b").Hex(), 30};
  const Digest text = Digest::Of("text"), other = Digest::Of("other");
  const Sample s = MakeSample();
  const std::string bytes = *EncodeSlabFile(s.manifest, s.sources, s.slab);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t")));
    ASSERT_OK(tier->Put(a, bytes, std::vector<Digest>{text}));
    ASSERT_OK(tier->Put(b, bytes, std::vector<Digest>{other}));
    EXPECT_EQ(*tier->Get(a), bytes);
    EXPECT_EQ(tier->Get(TierKey{a.id, 13}).error().code(), StatusCode::kNotFound);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t")));
  EXPECT_EQ(*tier->Ends(), (std::vector<uint64_t>{12, 30}));
  // The index is rebuilt from the files' source sections (which record Digest::Of("text") here).
  EXPECT_EQ(tier->KeysFromSource(text)->size(), 2u);
  ASSERT_OK_AND_ASSIGN(size_t erased, tier->EraseSource(text));
  EXPECT_EQ(erased, 2u);
  EXPECT_EQ(tier->Get(a).error().code(), StatusCode::kNotFound);
  EXPECT_TRUE(tier->Ends()->empty());
  EXPECT_EQ(tier->Remove(a).code(), StatusCode::kNotFound);
  EXPECT_EQ(OpenDirectoryKVTier("").error().code(), StatusCode::kInvalidArgument);
}

TEST(DirectoryKVTier, RejectsKeysThatAreNotDigests) {
  testing::ScopedTempDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t")));
  for (const std::string& id : {std::string("../../escape"), std::string(64, 'A'), std::string(63, 'a'), std::string()}) {
    const TierKey bad{id, 5};
    EXPECT_EQ(tier->Put(bad, "x", {}).code(), StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(tier->Get(bad).error().code(), StatusCode::kInvalidArgument) << id;
    EXPECT_EQ(tier->Remove(bad).code(), StatusCode::kInvalidArgument) << id;
  }
  EXPECT_TRUE(tier->Ends()->empty());
  EXPECT_OK(ValidateTierKey(TierKey{std::string(64, 'a'), 5}));  // control: a digest-shaped id passes
}

TEST(DirectoryKVTier, AFailedWriteLeavesNothing) {
  testing::ScopedTempDir dir;
  testing::FaultInjectionEnv env(Env::Default());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t"), &env));
  const TierKey a{Digest::Of("a").Hex(), 12};
  for (testing::EnvOp op : {testing::EnvOp::kSync, testing::EnvOp::kRename}) {
    env.FailNth(op, 1);
    EXPECT_FALSE(tier->Put(a, "bytes", {}).ok());
    EXPECT_EQ(tier->Get(a).error().code(), StatusCode::kNotFound) << testing::EnvOpName(op);
  }
  env.ClearFaults();
  ASSERT_OK(tier->Put(a, "bytes", {}));
  EXPECT_EQ(*tier->Get(a), "bytes");
}

// Bytes of the entry files a directory tier holds, and whether each of `keys` is stored.
uint64_t EntryBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/slabs")) n += e.file_size();
  return n;
}
std::vector<bool> Present(KVTierStore& tier, const std::vector<TierKey>& keys) {
  std::vector<bool> out;
  for (const TierKey& k : keys) out.push_back(tier.Get(k).has_value());
  return out;
}

TEST(DirectoryKVTier, ABoundEvictsTheLeastRecentlyUsedButNeverTheNewEntry) {
  testing::ScopedTempDir dir;
  std::vector<TierKey> k;
  std::vector<Digest> src;
  for (int i = 0; i < 5; ++i) {
    k.push_back(TierKey{Digest::Of(std::to_string(i) + "k").Hex(), uint64_t(10 + i)});
    src.push_back(Digest::Of(std::to_string(i) + "s"));
  }
  const std::string kb(1000, 'x');
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t"), DirectoryKVTierOptions{.max_bytes = 3000}));
  for (int i = 0; i < 3; ++i) ASSERT_OK(tier->Put(k[i], kb, std::vector<Digest>{src[i]}));
  EXPECT_EQ(EntryBytes(dir.Sub("t")), 3000u);  // at the bound: nothing evicted
  ASSERT_TRUE(tier->Get(k[0]).has_value());     // k0 is now the most recent, k1 the least
  ASSERT_OK(tier->Put(k[3], kb, std::vector<Digest>{src[3]}));
  // Get itself refreshes recency, so probe k1 (the evicted one) before anything else.
  EXPECT_EQ(tier->Get(k[1]).error().code(), StatusCode::kNotFound);
  EXPECT_EQ(Present(*tier, {k[0], k[2], k[3]}), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(EntryBytes(dir.Sub("t")), 3000u);
  // The index followed: k1's source and end are gone.
  EXPECT_TRUE(tier->KeysFromSource(src[1])->empty());
  EXPECT_EQ(tier->Sources()->size(), 3u);
  EXPECT_EQ(*tier->Ends(), (std::vector<uint64_t>{10, 12, 13}));
  // An entry larger than the bound is kept, alone.
  ASSERT_OK(tier->Put(k[4], std::string(5000, 'y'), std::vector<Digest>{src[4]}));
  EXPECT_EQ(Present(*tier, k), (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(EntryBytes(dir.Sub("t")), 5000u);
  EXPECT_EQ(*tier->Sources(), std::vector<Digest>{src[4]});
  // Control: without a bound nothing is evicted.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> open, OpenDirectoryKVTier(dir.Sub("u")));
  for (int i = 0; i < 5; ++i) ASSERT_OK(open->Put(k[i], kb, {}));
  EXPECT_EQ(EntryBytes(dir.Sub("u")), 5000u);
}

TEST(DirectoryKVTier, ABoundAfterReopenEvictsTheOldestWritesFirst) {
  testing::ScopedTempDir dir;
  std::vector<TierKey> k;
  for (int i = 0; i < 4; ++i) k.push_back(TierKey{Digest::Of(std::to_string(i) + "k").Hex(), uint64_t(10 + i)});
  const Sample sample = MakeSample();  // its sources section records Digest::Of("text")
  const std::string kb = *EncodeSlabFile(sample.manifest, sample.sources, sample.slab);
  const Digest text = Digest::Of("text");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t")));
    for (int i : {2, 0, 1}) {  // written in this order: mtimes say k2 is the oldest
      ASSERT_OK(tier->Put(k[i], kb, std::vector<Digest>{text}));
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the file system's mtime granularity
    }
  }
  // Reopened with a bound of two entries: the next Put evicts the two oldest writes, k2 then k0.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t"), DirectoryKVTierOptions{.max_bytes = 2 * kb.size()}));
  EXPECT_EQ(tier->KeysFromSource(text)->size(), 3u);
  ASSERT_OK(tier->Put(k[3], kb, {}));
  EXPECT_EQ(Present(*tier, k), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(tier->KeysFromSource(text)->size(), 1u);
  // Replacing an entry counts its bytes once.
  ASSERT_OK(tier->Put(k[3], kb, {}));
  EXPECT_EQ(Present(*tier, k), (std::vector<bool>{false, true, false, true}));
}

// One tenant's spills evict that tenant's entries only: its share is a bound of its own, read from
// each entry's manifest (at Put and again at open).
TEST(DirectoryKVTier, ATenantsShareEvictsOnlyItsOwnEntries) {
  testing::ScopedTempDir dir;
  const Sample sample = MakeSample();  // tenant "acme"
  const std::string acme = *EncodeSlabFile(sample.manifest, sample.sources, sample.slab);
  KVManifest bob_manifest = sample.manifest;
  bob_manifest.tenant = "bob";
  const std::string bob = *EncodeSlabFile(bob_manifest, sample.sources, sample.slab);
  std::vector<TierKey> k;
  for (int i = 0; i < 5; ++i) k.push_back(TierKey{Digest::Of(std::to_string(i) + "share").Hex(), uint64_t(10 + i)});
  const DirectoryKVTierOptions share{.max_bytes_per_namespace = 2 * acme.size()};
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t"), share));
    ASSERT_OK(tier->Put(k[0], bob, {}));  // bob's, the oldest of all
    for (int i : {1, 2, 3}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the file system's mtime granularity
      ASSERT_OK(tier->Put(k[i], acme, {}));
    }
    // acme's third entry evicted acme's first, not bob's older one.
    EXPECT_EQ(Present(*tier, {k[0], k[1], k[2], k[3]}), (std::vector<bool>{true, false, true, true}));
  }
  // Reopened: the namespaces come from the files, so acme's next Put again evicts acme's oldest.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(dir.Sub("t"), share));
  ASSERT_OK(tier->Put(k[4], acme, {}));
  EXPECT_EQ(Present(*tier, k), (std::vector<bool>{true, false, false, true, true}));
  // Control: without a share, nothing is evicted.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> open, OpenDirectoryKVTier(dir.Sub("u")));
  for (int i : {1, 2, 3, 4}) ASSERT_OK(open->Put(k[i], acme, {}));
  EXPECT_EQ(Present(*open, {k[1], k[2], k[3], k[4]}), (std::vector<bool>{true, true, true, true}));
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

// A slab file assembled from raw sections with correct checksums (docs/kv-tier.md §2): what
// anyone can write, since the checksums are plain SHA-256 and prove nothing about the writer.
std::string AssembleSlabFile(const std::string (&sec)[4]) {
  std::string out("FAKKVSLB");
  const uint32_t version = kSlabFileVersion, n = 4;
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&n), 4);
  for (const std::string& x : sec) {
    const uint64_t len = x.size();
    out.append(reinterpret_cast<const char*>(&len), 8);
  }
  for (const std::string& x : sec) out.append(reinterpret_cast<const char*>(Digest::Of(x).bytes.data()), Digest::kSize);
  out.append(reinterpret_cast<const char*>(Digest::Of(out).bytes.data()), Digest::kSize);
  for (const std::string& x : sec) out += x;
  return out;
}

TEST(SlabFileBounds, AShapeWhoseTensorSizeOverflowsIsMalformed) {
  const Sample s = MakeSample();
  ASSERT_OK_AND_ASSIGN(std::string json, s.manifest.ToJson());
  std::string sec[4];
  sec[0] = json;
  const uint64_t n_runs = 0;
  sec[1].append(reinterpret_cast<const char*>(&n_runs), 8);
  // 4096 layers x 4096 heads x 65536 dims x 2^22 tokens x 4 bytes = 2^64 bytes per tensor: wraps
  // to 0, which an unchecked product would match against an empty K/Kraw/V section.
  const uint64_t n_tokens = uint64_t{1} << 22;
  for (uint64_t v : {uint64_t{4096}, uint64_t{4096}, uint64_t{65536}, uint64_t{64}, uint64_t{0}, n_tokens})
    sec[2].append(reinterpret_cast<const char*>(&v), 8);
  const uint32_t f32 = 1;
  sec[2].append(reinterpret_cast<const char*>(&f32), 4);
  sec[2].append(n_tokens * sizeof(int32_t), '\0');
  SlabFileProblem p = SlabFileProblem::kNone;
  Result<SlabFile> f = DecodeSlabFile(AssembleSlabFile(sec), &p);
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(p, SlabFileProblem::kMalformed);
  EXPECT_NE(f.error().message().find("kv: size does not match the slab's shape"), std::string::npos) << f.error().ToString();
}

TEST(SlabFileBounds, MaxSlabFileBytesCoversEveryRealSlabAndSaturates) {
  const Sample s = MakeSample();
  ASSERT_OK_AND_ASSIGN(std::string bytes, EncodeSlabFile(s.manifest, s.sources, s.slab));
  EXPECT_LE(bytes.size(), MaxSlabFileBytes(s.slab.shape, s.slab.size()));
  EXPECT_LT(MaxSlabFileBytes(s.slab.shape, s.slab.size()), MaxSlabFileBytes(s.slab.shape, s.slab.size() + 1));
  EXPECT_EQ(MaxSlabFileBytes(KVShape{4096, 4096, 65536, 0}, uint64_t{1} << 40), UINT64_MAX);
}

TEST(DirectoryKVTierBounds, AnEntryLargerThanTheCallerAcceptsIsRefusedUnread) {
  testing::ScopedTempDir tmp;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<KVTierStore> tier, OpenDirectoryKVTier(tmp.Sub("tier")));
  const TierKey key{Digest::Of("entry").Hex(), 5};
  ASSERT_OK(tier->Put(key, std::string(1000, 'x'), {}));
  ASSERT_OK_AND_ASSIGN(std::string got, tier->Get(key, 1000));
  EXPECT_EQ(got.size(), 1000u);
  Result<std::string> small = tier->Get(key, 999);
  ASSERT_FALSE(small.has_value());
  EXPECT_EQ(small.error().code(), StatusCode::kResourceExhausted) << small.error().ToString();
  // A sparse 1 TiB file: refused by its size under any bound (the store's own is 64 GiB), never read.
  const std::string path = testing::SlabFiles(tmp.Sub("tier")).front();
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  Result<std::string> huge = tier->Get(key);
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code(), StatusCode::kResourceExhausted) << huge.error().ToString();
  EXPECT_NE(huge.error().message().find("1099511627776 bytes"), std::string::npos) << huge.error().ToString();
}

}  // namespace
}  // namespace fak
