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
#include "tests/kernels/oracle/ref_kernels.h"
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

TEST(RopeTest, TableRowsAreBuiltOnFirstUseOnly) {
  // A file may claim a context of 2^24 positions: the table costs nothing until positions are used
  // (issue 20 D2: eager tables took gigabytes at load), and a row built late, in any order, has
  // the bits of the same row in a small table.
  std::vector<double> inv = RopeInverseFrequencies(256, kBase);
  RopeTable huge(inv, size_t{1} << 24), small(inv, 600);
  EXPECT_EQ(huge.built_positions(), 0u);
  for (size_t p : {599, 3, 256, 255}) {
    EXPECT_EQ(0, std::memcmp(huge.cos_row(p), small.cos_row(p), 128 * sizeof(float))) << p;
    EXPECT_EQ(0, std::memcmp(huge.sin_row(p), small.sin_row(p), 128 * sizeof(float))) << p;
  }
  EXPECT_EQ(huge.built_positions(), 3 * RopeTable::kChunkRows);  // chunks [0,256) [256,512) [512,768)
  const size_t last = (size_t{1} << 24) - 1;
  EXPECT_EQ(huge.cos_row(last)[0], static_cast<float>(std::cos(last * inv[0])));
  EXPECT_EQ(huge.built_positions(), 4 * RopeTable::kChunkRows);
}

TEST(RopeTest, TableChunksBuiltConcurrentlyAgree) {
  std::vector<double> inv = RopeInverseFrequencies(64, kBase);
  RopeTable shared(inv, 4096), alone(inv, 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&shared, t] {
      for (size_t p = t; p < 4096; p += 7) (void)shared.cos_row(p);
    });
  }
  for (auto& th : threads) th.join();
  for (size_t p = 0; p < 4096; ++p) ASSERT_EQ(0, std::memcmp(shared.cos_row(p), alone.cos_row(p), 32 * sizeof(float))) << p;
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

// Linear scaling (rope.scaling.type linear / HF rope_type linear) divides every inverse frequency by
// the factor, i.e. position p rotates as p / factor did.
TEST(RopeTest, LinearScalingDividesEveryInverseFrequency) {
  const std::vector<double> plain = RopeInverseFrequencies(64, kBase);
  const std::vector<double> none = RopeInverseFrequencies(64, kBase, 1.0, {});
  EXPECT_EQ(0, std::memcmp(plain.data(), none.data(), plain.size() * sizeof(double)));  // unscaled: same bits
  for (double factor : {8.0, 4.0, 2.5, 0.5}) {
    const std::vector<double> scaled = RopeInverseFrequencies(64, kBase, factor, {});
    ASSERT_EQ(scaled.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(scaled[i], plain[i] / factor) << factor << " " << i;
  }
  // A power-of-two factor scales exactly, so position 8q under x8 has the bits of position q unscaled.
  RopeTable unscaled(plain, 64), by8(RopeInverseFrequencies(64, kBase, 8.0, {}), 8 * 64);
  for (size_t q : {1, 5, 63}) {
    EXPECT_EQ(0, std::memcmp(unscaled.cos_row(q), by8.cos_row(8 * q), 32 * sizeof(float))) << q;
    EXPECT_EQ(0, std::memcmp(unscaled.sin_row(q), by8.sin_row(8 * q), 32 * sizeof(float))) << q;
  }
  EXPECT_NE(0, std::memcmp(unscaled.cos_row(5), by8.cos_row(5), 32 * sizeof(float)));  // non-vacuity
}

// Llama 3.1's own rope_scaling (factor 8, low 1, high 4, original context 8192, theta 5e5, head_dim
// 128): high-frequency dims (wavelength < 8192/4) unchanged, low-frequency ones (> 8192/1) divided
// by 8, the band between interpolated smoothly — and dividing by the factors is HF's
// _compute_llama3_parameters, which multiplies the medium band by (1 - s)/factor + s.
TEST(RopeTest, Llama3FactorsArePiecewiseAsHfComputesThem) {
  const double base = 500000.0, factor = 8.0, low = 1.0, high = 4.0, orig = 8192.0;
  const std::vector<float> ff = Llama3RopeFreqFactors(128, base, factor, low, high, orig);
  const std::vector<double> inv = RopeInverseFrequencies(128, base);
  const std::vector<double> scaled = RopeInverseFrequencies(128, base, 1.0, ff);
  ASSERT_EQ(ff.size(), 64u);
  size_t n_high = 0, n_low = 0, n_medium = 0;
  for (size_t i = 0; i < ff.size(); ++i) {
    const double wavelen = 2 * M_PI / inv[i];
    double hf = inv[i];  // transformers, in double
    if (wavelen < orig / high) {
      EXPECT_EQ(ff[i], 1.0f) << i;
      ++n_high;
    } else if (wavelen > orig / low) {
      EXPECT_EQ(ff[i], 8.0f) << i;
      hf = inv[i] / factor;
      ++n_low;
    } else {
      const double s = (orig / wavelen - low) / (high - low);
      hf = (1 - s) * inv[i] / factor + s * inv[i];
      EXPECT_GT(ff[i], 1.0f) << i;
      EXPECT_LT(ff[i], 8.0f) << i;
      if (i > 0) {
        EXPECT_GT(ff[i], ff[i - 1]) << i;  // longer wavelengths are scaled more
      }
      ++n_medium;
    }
    EXPECT_NEAR(scaled[i], hf, 1e-7 * hf) << i;  // the factors are stored as f32
  }
  EXPECT_EQ(ff[0], 1.0f);
  EXPECT_EQ(ff[63], 8.0f);
  EXPECT_GT(n_high, 0u);
  EXPECT_GT(n_medium, 0u);
  EXPECT_GT(n_low, 0u);
}

// The values llama.cpp's converter wrote to the committed fixtures' rope_freqs.weight
// (tests/data/llama_cpp/llama_rope_freqs.gguf, tests/data/hf/llama3_rope.gguf).
TEST(RopeTest, Llama3FactorsMatchTheConverter) {
  const std::vector<float> a = Llama3RopeFreqFactors(16, 10000.0, 8.0, 1.0, 4.0, 128.0);
  const std::vector<float> want_a = {1.0f, 1.0f, 2.3391166f, 8.0f, 8.0f, 8.0f, 8.0f, 8.0f};
  ASSERT_EQ(a.size(), want_a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], want_a[i], 1e-6 * want_a[i]) << i;
  const std::vector<float> b = Llama3RopeFreqFactors(8, 10000.0, 8.0, 1.0, 8.0, 256.0);
  const std::vector<float> want_b = {1.0f, 1.9634954f, 8.0f, 8.0f};
  ASSERT_EQ(b.size(), want_b.size());
  for (size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(b[i], want_b[i], 1e-6 * want_b[i]) << i;
}

}  // namespace
}  // namespace fak::kernels::testing
