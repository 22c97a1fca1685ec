// The 16-bit KV regimes' arithmetic: rounding to f16 / bf16 (nearest, ties to even, every half
// round-trips) and attention over f16 / bf16 keys and values, which must give, in every tier, the
// bits of f32 attention over the widened values — for one row and for prefill's row blocks, with
// keys cut into runs and with windows — while differing from attention over the unrounded values
// (the control: the regime is real).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/kv_convert.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

TEST(KVConvert, EveryHalfRoundTripsAndConversionsAreNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f)))) << h;
      continue;
    }
    ASSERT_EQ(F32ToF16(f), h) << "half " << h;
    ASSERT_EQ(F32ToBf16(Bf16ToF32(static_cast<uint16_t>(h))), h) << "bf16 " << h;
    // The midpoint to the next half (exact in float) rounds to whichever of the two is even.
    const uint32_t next = h + 1;
    if ((h & 0x7fffu) >= 0x7bffu) continue;  // at or past the largest finite half
    const float up = F16ToF32(static_cast<uint16_t>(next));
    const float mid = static_cast<float>((static_cast<double>(f) + up) / 2);
    ASSERT_EQ(F32ToF16(mid), (h & 1u) ? next : h) << "midpoint after half " << h;
    ASSERT_EQ(F32ToF16(std::nextafter(mid, f)), h) << h;
    ASSERT_EQ(F32ToF16(std::nextafter(mid, up)), next) << h;
  }
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00u);  // the tie past 65504 goes to infinity
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bffu);
  EXPECT_EQ(F32ToF16(-1e-9f), 0x8000u);
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-8f), 0x3f80u);  // tie to even (down)
  EXPECT_EQ(F32ToBf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82u);  // tie to even (up)
  // Against the hardware conversion where the compiler has a half type in C++ (GCC 12: _Float16 on
  // x86, __fp16 on aarch64).
#if defined(__aarch64__)
  using HardwareHalf = __fp16;
#elif defined(__FLT16_MAX__)
  using HardwareHalf = _Float16;
#endif
#if defined(__aarch64__) || defined(__FLT16_MAX__)
  for (float x : RandomVector(100000, 5, -70000.0f, 70000.0f)) {
    for (float y : {x, x * 1e-5f, x * 1e-9f}) {
      const HardwareHalf want = static_cast<HardwareHalf>(y);
      uint16_t bits;
      std::memcpy(&bits, &want, 2);
      ASSERT_EQ(F32ToF16(y), bits) << y;
    }
  }
#endif
}

// Keys and values of `kv_heads` heads, `capacity` slots each, as f32 and as one 16-bit dtype.
struct KVData {
  std::vector<float> k, v;             // unrounded
  std::vector<float> kw, vw;           // rounded to the dtype and widened back
  std::vector<uint16_t> k16, v16;      // stored
  KVData(size_t n, KVDtype dtype, uint32_t seed) : k(RandomVector(n, seed)), v(RandomVector(n, seed + 1)) {
    k16.resize(n);
    v16.resize(n);
    kw.resize(n);
    vw.resize(n);
    RoundToKV(k.data(), k16.data(), n, dtype);
    RoundToKV(v.data(), v16.data(), n, dtype);
    KVToF32(k16.data(), kw.data(), n, dtype);
    KVToF32(v16.data(), vw.data(), n, dtype);
  }
};

class KVDtypeAttentionTest : public TierTest {};
FAK_INSTANTIATE_OVER_TIERS(KVDtypeAttentionTest);

TEST_P(KVDtypeAttentionTest, SixteenBitKeysGiveTheBitsOfTheirWidenedFloats) {
  struct Shape {
    size_t begin, end, window;
  };
  const Shape shapes[] = {{0, 1, 0}, {0, 21, 0}, {3, 40, 0}, {0, 37, 9}};
  uint32_t seed = 40;
  size_t differs = 0, cases = 0;
  for (KVDtype dtype : {KVDtype::kF16, KVDtype::kBF16}) {
    for (size_t hd : {64, 256, 24, 7}) {
      for (size_t group : {1, 3, 4}) {
        for (size_t rows : {1, 5, 8}) {
          for (const Shape& sh : shapes) {
            const size_t kv_heads = 2, nh = group * kv_heads, row_floats = nh * hd, last_end = sh.end + rows - 1;
            const size_t cut = std::min<size_t>(6, last_end - 1), stride = last_end * hd + 5;
            const KVData d(kv_heads * stride, dtype, seed += 11);
            const std::vector<float> q = RandomVector(rows * row_floats, seed + 7, -2.0f, 2.0f);
            // The same keys as runs [0, cut) and [cut, last_end) over each array.
            auto runs_of = [&](const void* k, const void* v, size_t elem) {
              std::vector<KeyRun> r;
              if (cut > 0) r.push_back({k, v, stride, cut});
              const auto* kb = static_cast<const char*>(k) + cut * hd * elem;
              const auto* vb = static_cast<const char*>(v) + cut * hd * elem;
              r.push_back({kb, vb, stride, last_end - cut});
              return r;
            };
            auto attend = [&](const std::vector<KeyRun>& runs, KVDtype dt) {
              std::vector<float> out(rows * row_floats, NAN);
              std::vector<float> scratch(AttentionScratchFloats(rows, last_end, hd), NAN);
              AttentionArgs a{q.data(), runs.data(), runs.size(), out.data(), scratch.data(), nh, kv_heads, hd,
                              sh.begin, sh.end, 0.125f, 0, nh, rows, sh.window};
              a.kv_dtype = dt;
              T().attention(a);
              return out;
            };
            const std::vector<float> stored = attend(runs_of(d.k16.data(), d.v16.data(), 2), dtype);
            const std::vector<float> widened = attend(runs_of(d.kw.data(), d.vw.data(), 4), KVDtype::kF32);
            const std::vector<float> exact = attend(runs_of(d.k.data(), d.v.data(), 4), KVDtype::kF32);
            ASSERT_EQ(0, std::memcmp(stored.data(), widened.data(), stored.size() * sizeof(float)))
                << KVDtypeName(dtype) << " hd=" << hd << " group=" << group << " rows=" << rows << " keys=["
                << sh.begin << "," << sh.end << ") window=" << sh.window;
            ++cases;
            differs += std::memcmp(stored.data(), exact.data(), stored.size() * sizeof(float)) != 0;
          }
        }
      }
    }
  }
  EXPECT_EQ(differs, cases);  // control: rounding the cache changes every case's result
}

}  // namespace
}  // namespace fak::kernels::testing
