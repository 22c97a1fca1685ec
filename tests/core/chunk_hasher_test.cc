// ChunkHasher: every chunk's digest is its SHA-256 (OpenSSL's, one at a time), whatever its length —
// empty, around a block boundary, at and past the multi-buffer limit — in batches of one and of
// many, chunks overlapping or not; with libipsec-mb built in, this CPU gets a multi-buffer manager.
#include "src/core/chunk_hasher.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace fak::internal {
namespace {

TEST(ChunkHasher, EveryDigestIsTheChunksSha256) {
  std::vector<std::byte> bytes(1 << 20);
  std::mt19937 rng(3);
  for (std::byte& b : bytes) b = std::byte(rng());
  const size_t lengths[] = {0, 1, 55, 56, 63, 64, 65, 1000, 32768, ChunkHasher::kMaxMultiBufferBytes,
                            ChunkHasher::kMaxMultiBufferBytes + 1, 200000};
  std::vector<std::span<const std::byte>> chunks;
  for (size_t round = 0; round < 4; ++round) {
    for (size_t n : lengths) chunks.push_back(std::span(bytes).subspan(rng() % (bytes.size() - n), n));
  }
  ChunkHasher hasher;
  for (const size_t batch : {size_t{1}, size_t{3}, size_t{16}, chunks.size()}) {
    std::vector<Digest> got(chunks.size());
    for (size_t at = 0; at < chunks.size(); at += batch) {
      const size_t n = std::min(batch, chunks.size() - at);
      hasher.Hash(std::span(chunks).subspan(at, n), std::span(got).subspan(at, n));
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(got[i], Digest::Of(chunks[i].data(), chunks[i].size())) << "batch " << batch << ", chunk " << i
                                                                         << " of " << chunks[i].size() << " bytes";
    }
  }
  // Non-vacuity: a flipped byte changes that chunk's digest and only that one.
  std::vector<Digest> before(16), after(16);
  std::vector<std::span<const std::byte>> sixteen;
  for (size_t i = 0; i < 16; ++i) sixteen.push_back(std::span(bytes).subspan(i * 32768, 32768));
  hasher.Hash(sixteen, before);
  bytes[5 * 32768 + 17] ^= std::byte{1};
  hasher.Hash(sixteen, after);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(before[i] != after[i], i == 5) << i;
}

TEST(ChunkHasher, MultiBufferWhereTheLibraryIsBuiltIn) {
#if FAK_WITH_IPSEC_MB
  // Every x86-64 CPU fak's AVX2 or AVX-512 tiers run on has one of the library's managers.
  EXPECT_TRUE(ChunkHasher::MultiBuffer());
#else
  EXPECT_FALSE(ChunkHasher::MultiBuffer());
#endif
}

}  // namespace
}  // namespace fak::internal
