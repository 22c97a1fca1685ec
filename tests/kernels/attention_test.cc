// Attention in every tier: grouped-query heads (ratios 1–4), head_dim 64 and odd sizes, sliding
// windows (key_begin > 0), head ranges; against the double reference, plus the exactness
// properties the KV cache relies on (keys outside the window and scratch contents are ignored;
// head splits and KV-head strides do not change bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "tests/kernels/oracle/ref_kernels.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/test_util.h"

namespace fak::kernels::testing {
namespace {

using ::fak::testing::RandomVector;

// A query row and a KV cache of `capacity` slots per KV head, heads `stride` floats apart.
struct AttnCase {
  size_t n_heads, n_kv_heads, head_dim, capacity, stride, key_begin, key_end;
  std::vector<float> q, k, v;

  AttnCase(size_t group, size_t kv_heads, size_t hd, size_t begin, size_t end, uint32_t seed, size_t pad = 8)
      : n_heads(group * kv_heads), n_kv_heads(kv_heads), head_dim(hd), capacity(end + 3),
        stride(capacity * hd + pad), key_begin(begin), key_end(end) {
    q = RandomVector(n_heads * hd, seed);
    k = RandomVector(n_kv_heads * stride, seed + 1);
    v = RandomVector(n_kv_heads * stride, seed + 2);
  }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

  // Runs heads [head_begin, head_end) into `out` (other heads untouched); scratch starts as NaN.
  void Run(const KernelTable& t, std::vector<float>& out, size_t head_begin, size_t head_end) const {
    std::vector<float> scratch(kAttentionHeadsAtOnce * key_end, std::numeric_limits<float>::quiet_NaN());
    const KeyRun run{k.data(), v.data(), stride, capacity};
    AttentionArgs a{q.data(), &run, 1, out.data(), scratch.data(), n_heads, n_kv_heads, head_dim,
                    key_begin, key_end, scale(), head_begin, head_end};
    t.attention(a);
  }
  std::vector<float> Run(const KernelTable& t) const {
    std::vector<float> out(n_heads * head_dim, std::numeric_limits<float>::quiet_NaN());
    Run(t, out, 0, n_heads);
    return out;
  }
  std::string Name() const {
    return "heads=" + std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " hd=" + std::to_string(head_dim) +
           " keys=[" + std::to_string(key_begin) + "," + std::to_string(key_end) + ")";
  }
};

// Error bound for one output element, from first-order error propagation:
//  * each score s_t = scale·q·k_t is off by δ_t ≤ γ_hd·scale·Σ|q_i k_ti| + u|s_t|;
//  * softmax turns score errors into relative errors of p_t of at most 2·max δ, and adds its own
//    (n + |s_t − max| + 10)·u (see the softmax test);
//  * the weighted sum Σ p_t v_t over n keys adds γ_n·Σ p_t |v_t|.
// So |err_d| ≤ Σ_t p_t |v_td| · (2·max δ + (2n + max|s_t − max| + 12)·u). We allow 2× that.
std::vector<double> AttentionTolerance(const AttnCase& c) {
  std::vector<double> tol(c.n_heads * c.head_dim);
  const size_t group = c.n_heads / c.n_kv_heads, n = c.key_end - c.key_begin;
  for (size_t h = 0; h < c.n_heads; ++h) {
    const float* q = c.q.data() + h * c.head_dim;
    const float* kh = c.k.data() + (h / group) * c.stride;
    const float* vh = c.v.data() + (h / group) * c.stride;
    std::vector<double> s(n);
    double max_delta = 0;
    for (size_t t = 0; t < n; ++t) {
      const float* kt = kh + (c.key_begin + t) * c.head_dim;
      double abs_dot = 0;
      for (size_t i = 0; i < c.head_dim; ++i) abs_dot += std::abs(static_cast<double>(q[i]) * kt[i]);
      s[t] = c.scale() * ref::Dot(q, kt, c.head_dim);
      max_delta = std::max(max_delta, Gamma(c.head_dim) * c.scale() * abs_dot + kU * std::abs(s[t]));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double spread = 0;
    for (double st : s) spread = std::max(spread, mx - st);
    std::vector<double> p = ref::Softmax(s);
    const double rel = 2 * max_delta + (2.0 * n + spread + 12) * kU;
    for (size_t d = 0; d < c.head_dim; ++d) {
      double pv = 0;
      for (size_t t = 0; t < n; ++t) pv += p[t] * std::abs(vh[(c.key_begin + t) * c.head_dim + d]);
      tol[h * c.head_dim + d] = 2 * pv * rel + 1e-30;
    }
  }
  return tol;
}

class AttentionTest : public TierTest {};
FAK_INSTANTIATE_OVER_TIERS(AttentionTest);

TEST_P(AttentionTest, MatchesReferenceAcrossGqaRatiosHeadDimsAndWindows) {
  struct Window {
    size_t begin, end;
  };
  const Window windows[] = {{0, 1}, {0, 37}, {11, 37}, {36, 37}, {5, 70}};
  uint32_t seed = 100;
  for (size_t hd : {64, 24, 20, 7}) {
    for (size_t group : {1, 2, 3, 4}) {
      for (const Window& win : windows) {
        AttnCase c(group, 2, hd, win.begin, win.end, seed += 3);
        std::vector<float> out = c.Run(T());
        std::vector<double> ref = ref::Attention(c.q.data(), c.k.data(), c.v.data(), c.n_heads, c.n_kv_heads,
                                                 c.head_dim, c.stride, c.key_begin, c.key_end, c.scale());
        ExpectWithin(out.data(), ref, AttentionTolerance(c), c.Name());
      }
    }
  }
}

TEST_P(AttentionTest, SingleKeyReturnsItsValue) {
  // softmax over one key is exactly 1, so out = 1·v exactly (a sliding window of width 1).
  AttnCase c(2, 2, 24, 9, 10, 7);
  std::vector<float> out = c.Run(T());
  for (size_t h = 0; h < c.n_heads; ++h)
    for (size_t d = 0; d < c.head_dim; ++d)
      ASSERT_EQ(out[h * c.head_dim + d], c.v[(h / 2) * c.stride + 9 * c.head_dim + d]) << h << "," << d;
}

TEST_P(AttentionTest, HeadRangesComputeOnlyTheirHeadsWithIdenticalBits) {
  for (size_t hd : {64, 24}) {
    AttnCase c(3, 2, hd, 4, 29, 200 + hd);  // 6 query heads over 2 KV heads
    std::vector<float> whole = c.Run(T());
    const size_t cuts[] = {0, 1, 4, 6};  // splits inside a KV group
    std::vector<float> split(whole.size(), std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) {
      std::vector<float> part(whole.size(), std::numeric_limits<float>::quiet_NaN());
      c.Run(T(), part, cuts[i], cuts[i + 1]);
      for (size_t h = 0; h < c.n_heads; ++h) {
        const bool inside = h >= cuts[i] && h < cuts[i + 1];
        for (size_t d = 0; d < hd; ++d) {
          const float v = part[h * hd + d];
          if (inside) {
            split[h * hd + d] = v;
          } else {
            ASSERT_TRUE(std::isnan(v)) << "head " << h << " written by range [" << cuts[i] << "," << cuts[i + 1] << ")";
          }
        }
      }
    }
    EXPECT_EQ(0, std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float))) << "hd=" << hd;
  }
}

TEST_P(AttentionTest, KeysOutsideTheWindowAreIgnoredAndInsideMatter) {
  AttnCase c(2, 2, 64, 10, 30, 300);
  const std::vector<float> base = c.Run(T());
  auto perturbed_run = [&](size_t kv_head, size_t slot, bool key) {
    AttnCase p = c;
    float* row = (key ? p.k : p.v).data() + kv_head * p.stride + slot * p.head_dim;
    for (size_t d = 0; d < p.head_dim; ++d) row[d] += 0.5f;
    return p.Run(T());
  };
  // Before the window (evicted by a sliding window) and after key_end (not yet written): no effect.
  for (size_t slot : {size_t{0}, size_t{9}, size_t{30}, c.capacity - 1}) {
    for (bool key : {true, false}) {
      std::vector<float> out = perturbed_run(1, slot, key);
      EXPECT_EQ(0, std::memcmp(out.data(), base.data(), base.size() * sizeof(float)))
          << (key ? "key" : "value") << " slot " << slot << " outside the window changed the output";
    }
  }
  // Non-vacuity: the first and last keys/values in the window do change the output, and only for
  // the query heads of that KV head (heads 2, 3 use KV head 1).
  for (size_t slot : {size_t{10}, size_t{29}}) {
    for (bool key : {true, false}) {
      std::vector<float> out = perturbed_run(1, slot, key);
      for (size_t h = 0; h < c.n_heads; ++h) {
        const bool same = 0 == std::memcmp(out.data() + h * c.head_dim, base.data() + h * c.head_dim,
                                           c.head_dim * sizeof(float));
        EXPECT_EQ(same, h < 2) << (key ? "key" : "value") << " slot " << slot << " head " << h;
      }
    }
  }
}

TEST_P(AttentionTest, ScratchContentsAndKvStrideDoNotChangeBits) {
  AttnCase c(4, 2, 24, 3, 40, 400);
  std::vector<float> base = c.Run(T());  // scratch was NaN-filled
  // Same scratch pre-filled with garbage, and larger than needed.
  std::vector<float> out(base.size()), scratch(kAttentionHeadsAtOnce * c.key_end + 50, 1e30f);
  KeyRun run{c.k.data(), c.v.data(), c.stride, c.capacity};
  AttentionArgs a{c.q.data(), &run, 1, out.data(), scratch.data(), c.n_heads, c.n_kv_heads,
                  c.head_dim, c.key_begin, c.key_end, c.scale(), 0, c.n_heads};
  T().attention(a);
  EXPECT_EQ(0, std::memcmp(out.data(), base.data(), base.size() * sizeof(float)));

  // Same keys and values re-laid with a different stride between KV heads.
  const size_t stride2 = c.stride + 100;
  std::vector<float> k2(c.n_kv_heads * stride2, 7.0f), v2(c.n_kv_heads * stride2, 7.0f);
  for (size_t h = 0; h < c.n_kv_heads; ++h) {
    std::memcpy(&k2[h * stride2], &c.k[h * c.stride], c.capacity * c.head_dim * sizeof(float));
    std::memcpy(&v2[h * stride2], &c.v[h * c.stride], c.capacity * c.head_dim * sizeof(float));
  }
  std::vector<float> out2(base.size());
  run = {k2.data(), v2.data(), stride2, c.capacity};
  a.out = out2.data();
  T().attention(a);
  EXPECT_EQ(0, std::memcmp(out2.data(), base.data(), base.size() * sizeof(float)));
}

// The keys cut into runs anywhere (as a session reading a shared prefix in place sees them), each
// run in its own buffer with its own KV-head stride: the same bits as one run. Cuts land inside
// and outside the window, on and off the SIMD width, and make one-key runs.
TEST_P(AttentionTest, KeysSplitIntoRunsGiveTheBitsOfOneRun) {
  for (size_t hd : {64, 24, 7}) {
    AttnCase c(3, 2, hd, 5, 53, 600 + hd);
    const std::vector<float> base = c.Run(T());
    for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>>{
             {0, 3, 53}, {0, 5, 6, 21, 37, 53}, {0, 16, 32, 48, 53}, {0, 1, 2, 52, 53}, {0, 40, 53, 56}}) {
      std::vector<std::vector<float>> ks(cuts.size() - 1), vs(cuts.size() - 1);
      std::vector<KeyRun> runs;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        const size_t n = cuts[i + 1] - cuts[i], stride = n * hd + 5 * i;  // padded differently per run
        ks[i].assign(c.n_kv_heads * stride, 9.0f);
        vs[i].assign(c.n_kv_heads * stride, 9.0f);
        for (size_t h = 0; h < c.n_kv_heads; ++h) {
          std::memcpy(&ks[i][h * stride], &c.k[h * c.stride + cuts[i] * hd], n * hd * sizeof(float));
          std::memcpy(&vs[i][h * stride], &c.v[h * c.stride + cuts[i] * hd], n * hd * sizeof(float));
        }
        runs.push_back({ks[i].data(), vs[i].data(), stride, n});
      }
      std::vector<float> out(base.size()), scratch(kAttentionHeadsAtOnce * c.key_end);
      AttentionArgs a{c.q.data(), runs.data(), runs.size(), out.data(), scratch.data(), c.n_heads, c.n_kv_heads,
                      hd, c.key_begin, c.key_end, c.scale(), 0, c.n_heads};
      T().attention(a);
      EXPECT_EQ(0, std::memcmp(out.data(), base.data(), base.size() * sizeof(float)))
          << "hd=" << hd << " runs=" << runs.size();
      // Non-vacuity: the last key in the window, read from whichever run holds it, reaches the output.
      size_t r = 0;
      while (cuts[r + 1] < c.key_end) ++r;
      ks[r][(c.key_end - 1 - cuts[r]) * hd] += 0.5f;
      T().attention(a);
      EXPECT_NE(0, std::memcmp(out.data(), base.data(), base.size() * sizeof(float)))
          << "hd=" << hd << " runs=" << runs.size();
    }
  }
}

// Several query rows at once (prefill): row r attends keys up to key_end + r, from key_begin or the
// window's start. Each row must carry the bits of a one-row call, whatever the row count, the GQA
// ratio, head_dim, window and however the keys are cut into runs.
TEST_P(AttentionTest, RowBlocksGiveEachRowTheBitsOfOneRow) {
  struct Shape {
    size_t begin, end, window;
  };
  const Shape shapes[] = {{0, 1, 0}, {0, 20, 0}, {3, 20, 0}, {0, 20, 4}, {0, 3, 5}, {2, 40, 30}};
  uint32_t seed = 900;
  for (size_t hd : {64, 24, 7}) {
    for (size_t group : {1, 3, 4}) {
      for (size_t rows : {2, 5, 8}) {
        for (const Shape& sh : shapes) {
          for (bool cut : {false, true}) {
            const size_t last_end = sh.end + rows - 1, nh = group * 2, row_floats = nh * hd;
            AttnCase c(group, 2, hd, sh.begin, last_end, seed += 7);
            std::vector<float> q = RandomVector(rows * row_floats, seed + 3);
            std::vector<std::vector<float>> ks, vs;
            std::vector<KeyRun> runs;
            const size_t at = cut ? std::min<size_t>(7, last_end - 1) : 0;
            for (auto [from, to] : {std::pair<size_t, size_t>{0, at}, {at, c.capacity}}) {
              if (from == to) continue;
              const size_t n = to - from, stride = n * hd + 3;
              ks.emplace_back(2 * stride, 5.0f);
              vs.emplace_back(2 * stride, 5.0f);
              for (size_t h = 0; h < 2; ++h) {
                std::memcpy(&ks.back()[h * stride], &c.k[h * c.stride + from * hd], n * hd * sizeof(float));
                std::memcpy(&vs.back()[h * stride], &c.v[h * c.stride + from * hd], n * hd * sizeof(float));
              }
              runs.push_back({ks.back().data(), vs.back().data(), stride, n});
            }
            auto run = [&](const float* qr, float* out, size_t key_end, size_t n_rows) {
              std::vector<float> scratch(AttentionScratchFloats(n_rows, key_end + n_rows - 1, hd), NAN);
              AttentionArgs a{qr, runs.data(), runs.size(), out, scratch.data(), nh, 2, hd, sh.begin, key_end,
                              c.scale(), 0, nh, n_rows, sh.window};
              T().attention(a);
            };
            std::vector<float> block(rows * row_floats, NAN);
            run(q.data(), block.data(), sh.end, rows);
            for (size_t r = 0; r < rows; ++r) {
              std::vector<float> one(row_floats, NAN);
              run(q.data() + r * row_floats, one.data(), sh.end + r, 1);
              ASSERT_EQ(0, std::memcmp(one.data(), block.data() + r * row_floats, row_floats * sizeof(float)))
                  << "hd=" << hd << " group=" << group << " rows=" << rows << " keys=[" << sh.begin << "," << sh.end
                  << ") window=" << sh.window << " cut=" << cut << " row " << r;
            }
          }
        }
      }
    }
  }
}

// Non-vacuity for the row-block test: row r sees key key_end + r - 1 but not key key_end + r (which
// row r + 1 sees), and with a window it no longer sees the key its window has passed.
TEST_P(AttentionTest, RowBlocksAreCausalAndWindowed) {
  const size_t hd = 24, rows = 4, end = 10, window = 6, nh = 4, row_floats = nh * hd;
  AttnCase c(2, 2, hd, 0, end + rows - 1, 77);
  const std::vector<float> q = RandomVector(rows * row_floats, 78);
  auto run = [&](const AttnCase& kc) {
    std::vector<float> out(rows * row_floats), scratch(AttentionScratchFloats(rows, end + rows - 1, hd));
    const KeyRun kr{kc.k.data(), kc.v.data(), kc.stride, kc.capacity};
    AttentionArgs a{q.data(), &kr, 1, out.data(), scratch.data(), nh, 2, hd, 0, end, kc.scale(), 0, nh, rows, window};
    T().attention(a);
    return out;
  };
  const std::vector<float> base = run(c);
  auto changed_rows = [&](size_t slot) {
    AttnCase p = c;
    for (size_t d = 0; d < hd; ++d) p.k[slot * hd + d] += 0.5f;  // KV head 0: query heads 0 and 1
    const std::vector<float> out = run(p);
    std::vector<size_t> rows_changed;
    for (size_t r = 0; r < rows; ++r)
      if (std::memcmp(out.data() + r * row_floats, base.data() + r * row_floats, row_floats * sizeof(float)))
        rows_changed.push_back(r);
    return rows_changed;
  };
  EXPECT_EQ(changed_rows(end + 1), (std::vector<size_t>{2, 3}));  // rows 2, 3 end at keys 12, 13
  EXPECT_EQ(changed_rows(end - 1), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(changed_rows(end - window), (std::vector<size_t>{0}));  // row 1's window starts one later
  EXPECT_EQ(changed_rows(end - window - 1), (std::vector<size_t>{}));
}

// gpt-oss's attention sinks: head h's sink logit joins its softmax's denominator only, so its output
// is the sinkless one times Z / (Z + e^sink), Z = Σ_t e^(s_t) (in double, from the reference
// scores). Sinks above and below the scores; a block of rows gives each row the bits of a one-row
// call; control: the sinks move every head's output.
TEST_P(AttentionTest, SinksTakeTheirShareOfEachHeadsSoftmax) {
  for (size_t hd : {64, 24}) {
    for (size_t group : {1, 3}) {
      AttnCase c(group, 2, hd, 0, 23, 700 + static_cast<uint32_t>(hd + group));
      std::vector<float> sinks(c.n_heads);
      for (size_t h = 0; h < c.n_heads; ++h) sinks[h] = (h % 2 == 0 ? 3.0f : -2.0f) + 0.25f * static_cast<float>(h);
      std::vector<float> out(c.n_heads * hd, NAN), scratch(kAttentionHeadsAtOnce * c.key_end, NAN);
      const KeyRun run{c.k.data(), c.v.data(), c.stride, c.capacity};
      AttentionArgs a{c.q.data(), &run, 1, out.data(), scratch.data(), c.n_heads, c.n_kv_heads, hd,
                      c.key_begin, c.key_end, c.scale(), 0, c.n_heads};
      a.sinks = sinks.data();
      T().attention(a);
      std::vector<double> ref = ref::Attention(c.q.data(), c.k.data(), c.v.data(), c.n_heads, c.n_kv_heads, hd,
                                               c.stride, c.key_begin, c.key_end, c.scale());
      std::vector<double> tol = AttentionTolerance(c);
      for (size_t h = 0; h < c.n_heads; ++h) {
        const float* kh = c.k.data() + (h / group) * c.stride;
        double z = 0;
        for (size_t t = c.key_begin; t < c.key_end; ++t) z += std::exp(c.scale() * ref::Dot(c.q.data() + h * hd, kh + t * hd, hd));
        const double share = z / (z + std::exp(static_cast<double>(sinks[h])));
        EXPECT_LT(share, 0.999) << "the sink must take a visible share, head " << h;
        for (size_t d = 0; d < hd; ++d) {
          ref[h * hd + d] *= share;
          tol[h * hd + d] += 8 * kU * std::abs(ref[h * hd + d]);
        }
      }
      ExpectWithin(out.data(), ref, tol, c.Name() + " with sinks");
      const std::vector<float> plain = c.Run(T());
      for (size_t h = 0; h < c.n_heads; ++h) {
        EXPECT_NE(0, std::memcmp(plain.data() + h * hd, out.data() + h * hd, hd * sizeof(float))) << "head " << h;
      }

      const size_t rows = 5, row_floats = c.n_heads * hd;
      AttnCase big(group, 2, hd, 0, c.key_end + rows - 1, 800 + static_cast<uint32_t>(hd));
      const KeyRun big_run{big.k.data(), big.v.data(), big.stride, big.capacity};
      std::vector<float> q = RandomVector(rows * row_floats, 801);
      auto run_rows = [&](const float* qr, float* o, size_t key_end, size_t n_rows) {
        std::vector<float> s(AttentionScratchFloats(n_rows, key_end + n_rows - 1, hd), NAN);
        AttentionArgs b{qr, &big_run, 1, o, s.data(), c.n_heads, 2, hd, 0, key_end, c.scale(), 0, c.n_heads, n_rows, 7};
        b.sinks = sinks.data();
        T().attention(b);
      };
      std::vector<float> block(rows * row_floats, NAN);
      run_rows(q.data(), block.data(), c.key_end, rows);
      for (size_t r = 0; r < rows; ++r) {
        std::vector<float> one(row_floats, NAN);
        run_rows(q.data() + r * row_floats, one.data(), c.key_end + r, 1);
        ASSERT_EQ(0, std::memcmp(one.data(), block.data() + r * row_floats, row_floats * sizeof(float))) << "row " << r;
      }
    }
  }
}

TEST_P(AttentionTest, QueryAndScaleMatter) {
  // Non-vacuity for the reference comparison: a different query or scale gives a different output.
  AttnCase c(1, 2, 20, 0, 17, 500);
  std::vector<float> base = c.Run(T());
  AttnCase p = c;
  p.q[3] += 0.5f;  // head 0 only
  std::vector<float> out = p.Run(T());
  EXPECT_NE(0, std::memcmp(out.data(), base.data(), c.head_dim * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(out.data() + c.head_dim, base.data() + c.head_dim, c.head_dim * sizeof(float)));
}

}  // namespace
}  // namespace fak::kernels::testing
