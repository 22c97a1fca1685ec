// The BlobStore contract, run against every backend: identity, dedupe, inline threshold, pins,
// LRU eviction past the byte bound, removal, listing, batch calls and concurrent use.
#include "fak/store/blob_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "tests/store/store_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using testing::RandomBytes;
using testing::ScopedTempDir;

struct Backend {
  std::string name;
  std::function<std::unique_ptr<BlobStore>(const std::string& dir, const BlobStoreOptions&)> open;
};

class BlobStoreContract : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<BlobStore> Open(const BlobStoreOptions& options = {}) { return GetParam().open(tmp_.Sub("store"), options); }
  ScopedTempDir tmp_;
};

TEST_P(BlobStoreContract, PutGetRoundTripsEverySize) {
  auto store = Open();
  for (size_t size : {0, 1, 255, 256, 257, 4096, 100000}) {
    const std::string payload = RandomBytes(size, static_cast<uint32_t>(size));
    ASSERT_OK_AND_ASSIGN(Digest d, store->Put(payload));
    EXPECT_EQ(d, Digest::Of(payload));
    ASSERT_OK_AND_ASSIGN(std::string back, store->Get(d));
    EXPECT_EQ(back, payload) << "size " << size;
    EXPECT_TRUE(*store->Contains(d));
  }
  const BlobStoreStats st = store->Stats();
  EXPECT_EQ(st.n_blobs, 7u);
  EXPECT_EQ(st.n_inline, 4u);  // 0, 1, 255, 256 bytes
  EXPECT_EQ(st.size_bytes, 0u + 1 + 255 + 256 + 257 + 4096 + 100000);
  EXPECT_EQ(store->backend(), GetParam().name);
}

TEST_P(BlobStoreContract, IdenticalPayloadIsStoredOnce) {
  auto store = Open();
  const std::string big = RandomBytes(5000, 1), small = "hello";
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(store->Put(big));
    ASSERT_OK(store->Put(small));
  }
  const BlobStoreStats st = store->Stats();
  EXPECT_EQ(st.n_blobs, 2u);
  EXPECT_EQ(st.n_puts, 6u);
  EXPECT_EQ(st.n_dedup_hits, 4u);
  EXPECT_EQ(st.size_bytes, 5005u);
}

TEST_P(BlobStoreContract, MissingDigestIsNotFound) {
  auto store = Open();
  const Digest d = Digest::Of("never stored");
  EXPECT_EQ(store->Get(d).error().code(), StatusCode::kNotFound);
  EXPECT_FALSE(*store->Contains(d));
  EXPECT_EQ(store->Pin(d).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Unpin(d).code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Remove(d).code(), StatusCode::kNotFound);
}

TEST_P(BlobStoreContract, LruEvictsLeastRecentlyUsedPastTheBound) {
  BlobStoreOptions options;
  options.capacity_bytes = 3 * 1000;
  auto store = Open(options);
  std::vector<Digest> d;
  for (uint32_t i = 0; i < 3; ++i) d.push_back(*store->Put(RandomBytes(1000, i)));
  ASSERT_OK(store->Get(d[0]));  // d[0] becomes most recent; d[1] is now the oldest
  ASSERT_OK_AND_ASSIGN(Digest d3, store->Put(RandomBytes(1000, 3)));
  EXPECT_TRUE(*store->Contains(d[0]));
  EXPECT_FALSE(*store->Contains(d[1]));
  EXPECT_TRUE(*store->Contains(d[2]));
  EXPECT_TRUE(*store->Contains(d3));
  const BlobStoreStats st = store->Stats();
  EXPECT_EQ(st.n_evicted, 1u);
  EXPECT_EQ(st.evicted_bytes, 1000u);
  EXPECT_LE(st.size_bytes, options.capacity_bytes);
}

TEST_P(BlobStoreContract, PinnedBlobsAreNeverEvicted) {
  BlobStoreOptions options;
  options.capacity_bytes = 4096;
  auto store = Open(options);
  const std::string pinned_bytes = RandomBytes(3000, 7), pinned_small = "tiny pinned payload";
  ASSERT_OK_AND_ASSIGN(Digest pinned, store->Put(pinned_bytes));
  ASSERT_OK_AND_ASSIGN(Digest small, store->Put(pinned_small));
  ASSERT_OK(store->Pin(pinned));
  ASSERT_OK(store->Pin(small));
  for (uint32_t i = 0; i < 50; ++i) ASSERT_OK(store->Put(RandomBytes(i % 2 ? 900 : 100, 100 + i)));
  ASSERT_OK_AND_ASSIGN(std::string a, store->Get(pinned));
  ASSERT_OK_AND_ASSIGN(std::string b, store->Get(small));
  EXPECT_EQ(a, pinned_bytes);
  EXPECT_EQ(b, pinned_small);
  const BlobStoreStats st = store->Stats();
  EXPECT_EQ(st.n_pinned, 2u);
  EXPECT_EQ(st.pinned_bytes, pinned_bytes.size() + pinned_small.size());
  EXPECT_GT(st.n_evicted, 40u);
  // Control: once unpinned, the same blob is evictable like any other.
  ASSERT_OK(store->Unpin(pinned));
  for (uint32_t i = 0; i < 10; ++i) ASSERT_OK(store->Put(RandomBytes(900, 500 + i)));
  EXPECT_FALSE(*store->Contains(pinned));
  EXPECT_TRUE(*store->Contains(small));
}

TEST_P(BlobStoreContract, PinsAreCountedAndGuardRemoval) {
  auto store = Open();
  ASSERT_OK_AND_ASSIGN(Digest d, store->Put(RandomBytes(2000, 3)));
  EXPECT_EQ(store->Unpin(d).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store->Pin(d));
  ASSERT_OK(store->Pin(d));
  EXPECT_EQ(store->Remove(d).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store->Unpin(d));
  EXPECT_EQ(store->Remove(d).code(), StatusCode::kFailedPrecondition);  // one pin left
  ASSERT_OK(store->Unpin(d));
  ASSERT_OK(store->Remove(d));
  EXPECT_FALSE(*store->Contains(d));
  EXPECT_EQ(store->Get(d).error().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Stats().n_blobs, 0u);
}

TEST_P(BlobStoreContract, RemoveThenPutAgain) {
  auto store = Open();
  for (size_t size : {10, 3000}) {
    const std::string p = RandomBytes(size, 9);
    ASSERT_OK_AND_ASSIGN(Digest d, store->Put(p));
    ASSERT_OK(store->Remove(d));
    EXPECT_FALSE(*store->Contains(d));
    ASSERT_OK(store->Put(p));
    ASSERT_OK_AND_ASSIGN(std::string back, store->Get(d));
    EXPECT_EQ(back, p);
  }
}

TEST_P(BlobStoreContract, ListAndBatchCalls) {
  auto store = Open();
  std::vector<std::string> payloads;
  for (uint32_t i = 0; i < 6; ++i) payloads.push_back(RandomBytes(i * 150, i));
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> digests, store->PutMany(views));
  ASSERT_EQ(digests.size(), 6u);
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> listed, store->List());
  std::sort(listed.begin(), listed.end());
  std::vector<Digest> want = digests;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want);
  std::vector<Digest> ask = digests;
  ask.push_back(Digest::Of("absent"));
  std::vector<Result<std::string>> got = store->GetMany(ask);
  ASSERT_EQ(got.size(), 7u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(*got[i], payloads[i]);
  EXPECT_EQ(got[6].error().code(), StatusCode::kNotFound);
}

TEST_P(BlobStoreContract, ConcurrentPutsAndGets) {
  auto store = Open();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 40; ++i) {
        // Half the payloads are shared between threads (dedupe races), half are private.
        const std::string p = RandomBytes(i % 3 == 0 ? 100 : 2000, i % 2 ? i : 1000 * t + i);
        Result<Digest> d = store->Put(p);
        Result<std::string> back = d.has_value() ? store->Get(*d) : Result<std::string>(d.error());
        if (!back.has_value() || *back != p) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->Stats().n_puts, 160u);
}

std::unique_ptr<BlobStore> OpenMemory(const std::string&, const BlobStoreOptions& o) { return MakeMemoryBlobStore(o); }
std::unique_ptr<BlobStore> OpenDirectory(const std::string& dir, const BlobStoreOptions& o) {
  Result<std::unique_ptr<BlobStore>> s = OpenDirectoryBlobStore(dir, o);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return s.has_value() ? std::move(*s) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(BlobStore, BlobStoreContract,
                         ::testing::Values(Backend{"memory", OpenMemory}, Backend{"directory", OpenDirectory}),
                         [](const ::testing::TestParamInfo<Backend>& info) { return info.param.name; });

}  // namespace
}  // namespace fak
