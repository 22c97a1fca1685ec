// RoPE: the one pinned rotation routine (architecture §2.3). Accuracy against the double
// reference for both pairings; determinism (a stored raw key re-rotated later, from another
// thread, under another active tier, from another table, gives the same bits as rotating it
// fresh); and non-vacuity (the position matters).
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ref/ref_kernels.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

constexpr double kBase = 10000.0;

std::vector<float> Rotated(std::vector<float> x, size_t n_heads, size_t head_dim, const RopeTable& table,
                           size_t position, RopePairing pairing) {
  ApplyRope(x.data(), n_heads, head_dim, table, position, pairing);
  return x;
}

TEST(RopeTest, InverseFrequencies) {
  std::vector<double> inv = RopeInverseFrequencies(64, kBase);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(inv[0], 1.0);
  for (size_t i = 1; i < inv.size(); ++i) {
    EXPECT_LT(inv[i], inv[i - 1]);
    EXPECT_NEAR(inv[i], std::pow(kBase, -2.0 * i / 64), 1e-15);
  }
}

TEST(RopeTest, TableShapeAndRowsIndependentOfLength) {
  // A table built for more positions has the same rows for the positions both cover, so a cache
  // that grows its table never changes the rotation of an existing position.
  std::vector<double> inv = RopeInverseFrequencies(64, kBase);
  RopeTable small(inv, 16), large(inv, 5000);
  EXPECT_EQ(small.half_dim(), 32u);
  EXPECT_EQ(small.n_positions(), 16u);
  EXPECT_EQ(large.n_positions(), 5000u);
  for (size_t p = 0; p < 16; ++p) {
    EXPECT_EQ(0, std::memcmp(small.cos_row(p), large.cos_row(p), 32 * sizeof(float))) << p;
    EXPECT_EQ(0, std::memcmp(small.sin_row(p), large.sin_row(p), 32 * sizeof(float))) << p;
  }
  // Row p holds float(cos/sin(p·inv_freq)), computed in double.
  for (size_t p : {0, 1, 17, 4999}) {
    for (size_t i = 0; i < 32; ++i) {
      EXPECT_EQ(large.cos_row(p)[i], static_cast<float>(std::cos(p * inv[i]))) << p << "," << i;
      EXPECT_EQ(large.sin_row(p)[i], static_cast<float>(std::sin(p * inv[i]))) << p << "," << i;
    }
  }
}

TEST(RopeTest, MatchesReferenceBothPairings) {
  for (size_t head_dim : {64, 128, 24}) {
    const size_t n_heads = 3;
    RopeTable table(RopeInverseFrequencies(head_dim, kBase), 9000);
    for (RopePairing pairing : {RopePairing::kAdjacent, RopePairing::kSplitHalf}) {
      const bool adjacent = pairing == RopePairing::kAdjacent;
      for (size_t pos : {0, 1, 2, 7, 100, 4096, 8999}) {
        std::vector<float> x = RandomVector(n_heads * head_dim, 10 + pos + head_dim, -2, 2);
        std::vector<float> y = Rotated(x, n_heads, head_dim, table, pos, pairing);
        for (size_t h = 0; h < n_heads; ++h) {
          const float* xh = x.data() + h * head_dim;
          std::vector<double> ref = ref::Rope(xh, head_dim, pos, kBase, adjacent);
          // Tolerance: 4u·(|x_a| + |x_b|) for each element of a pair. The table's cos and sin are
          // rounded to float (u relative each); the two products and the add/subtract round once
          // each, so the error is ≤ 3u·(|x_a| + |x_b|) + u·|result|.
          std::vector<double> tol(head_dim);
          const size_t half = head_dim / 2;
          for (size_t i = 0; i < half; ++i) {
            const size_t a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
            tol[a] = tol[b] = 4 * kU * (std::abs(xh[a]) + std::abs(xh[b])) + 1e-30;
          }
          ExpectWithin(y.data() + h * head_dim, ref, tol,
                       "rope hd=" + std::to_string(head_dim) + " pos=" + std::to_string(pos) + " head " +
                           std::to_string(h) + (adjacent ? " adjacent" : " split-half"));
        }
      }
    }
  }
}

TEST(RopeTest, PositionZeroIsExactlyTheIdentity) {
  RopeTable table(RopeInverseFrequencies(64, kBase), 4);
  std::vector<float> x = RandomVector(2 * 64, 3);
  for (RopePairing pairing : {RopePairing::kAdjacent, RopePairing::kSplitHalf}) {
    std::vector<float> y = Rotated(x, 2, 64, table, 0, pairing);
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size() * sizeof(float)));
  }
}

TEST(RopeTest, PairingsDifferAndPositionMatters) {
  // Non-vacuity: the comparisons below would pass trivially if rotation ignored its arguments.
  RopeTable table(RopeInverseFrequencies(64, kBase), 100);
  std::vector<float> x = RandomVector(64, 4);
  std::vector<float> adj = Rotated(x, 1, 64, table, 5, RopePairing::kAdjacent);
  std::vector<float> split = Rotated(x, 1, 64, table, 5, RopePairing::kSplitHalf);
  EXPECT_NE(adj, split);
  for (size_t p = 1; p < 100; ++p) {
    std::vector<float> a = Rotated(x, 1, 64, table, p - 1, RopePairing::kSplitHalf);
    std::vector<float> b = Rotated(x, 1, 64, table, p, RopePairing::kSplitHalf);
    ASSERT_NE(0, std::memcmp(a.data(), b.data(), 64 * sizeof(float))) << "positions " << p - 1 << " and " << p;
  }
  // Each head is rotated independently: rotating heads one at a time gives the same bits.
  std::vector<float> three = RandomVector(3 * 64, 5);
  std::vector<float> together = Rotated(three, 3, 64, table, 42, RopePairing::kAdjacent);
  for (size_t h = 0; h < 3; ++h) {
    std::vector<float> one(three.begin() + h * 64, three.begin() + (h + 1) * 64);
    one = Rotated(one, 1, 64, table, 42, RopePairing::kAdjacent);
    EXPECT_EQ(0, std::memcmp(one.data(), together.data() + h * 64, 64 * sizeof(float))) << "head " << h;
  }
}

// The KV cache re-rotates a stored raw key (Kraw) to its new position after an eviction and relies
// on getting exactly the key it would have computed fresh at that position.
TEST(RopeTest, ReRotatingARawKeyLaterIsBitIdentical) {
  const size_t n_heads = 4, head_dim = 128;
  const std::vector<double> inv = RopeInverseFrequencies(head_dim, 500000.0);
  RopeTable table(inv, 3000);
  const std::vector<float> kraw = RandomVector(n_heads * head_dim, 6, -3, 3);
  for (RopePairing pairing : {RopePairing::kAdjacent, RopePairing::kSplitHalf}) {
    for (size_t p : {0, 1, 63, 1000, 2999}) {
      const std::vector<float> fresh = Rotated(kraw, n_heads, head_dim, table, p, pairing);
      // Later, with other rotations in between.
      (void)Rotated(kraw, n_heads, head_dim, table, p + 1 < 3000 ? p + 1 : 0, pairing);
      const std::vector<float> again = Rotated(kraw, n_heads, head_dim, table, p, pairing);
      EXPECT_EQ(0, std::memcmp(fresh.data(), again.data(), fresh.size() * sizeof(float))) << "p=" << p;
      // From another thread.
      std::vector<float> threaded;
      std::thread worker([&] { threaded = Rotated(kraw, n_heads, head_dim, table, p, pairing); });
      worker.join();
      EXPECT_EQ(0, std::memcmp(fresh.data(), threaded.data(), fresh.size() * sizeof(float))) << "p=" << p;
      // From a separately built table covering p (as after a restart or a table regrow).
      RopeTable rebuilt(inv, p + 1);
      const std::vector<float> other = Rotated(kraw, n_heads, head_dim, rebuilt, p, pairing);
      EXPECT_EQ(0, std::memcmp(fresh.data(), other.data(), fresh.size() * sizeof(float))) << "p=" << p;
    }
  }
}

TEST(RopeTest, SameBitsWhicheverTierIsActive) {
  // Structural (ApplyRope is not in the kernel table), but pinned here so a future per-tier RoPE
  // cannot slip in unnoticed. Restores the active tier afterwards.
  const Tier saved = ActiveTier();
  RopeTable table(RopeInverseFrequencies(64, kBase), 300);
  const std::vector<float> x = RandomVector(2 * 64, 8);
  std::vector<std::vector<float>> results;
  for (Tier tier : SupportedTiers()) {
    ASSERT_OK(SetTier(tier));
    results.push_back(Rotated(x, 2, 64, table, 257, RopePairing::kSplitHalf));
  }
  ASSERT_OK(SetTier(saved));
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), x.size() * sizeof(float)));
}

}  // namespace
}  // namespace fak::kernels::testing
