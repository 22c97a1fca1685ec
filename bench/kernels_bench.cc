// fak_kernels_bench: fak's f32 matmul per kernel tier and thread count, next to Eigen's product
// built for the same tier, and two machine probes measured in the same run (read bandwidth over a
// 1 GiB array; peak FMA throughput with independent accumulator chains). Ends with a summary:
// each fak case as GFLOP/s, fraction of the tier's FMA probe, ratio to Eigen, and for M = 1 the
// weight bytes streamed per second as a fraction of the bandwidth probe.
//
// Y[M][N] = X[M][K] · W[N][K]ᵀ for (K, N) in {(576, 1536), (2048, 5632)} and M in {1, 128, 512}.
//
// Quantized weights (ParallelMatMulQuant: activation rows quantized to Q8, integer block dot
// products) for every quant type fak computes (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q2_K..Q6_K, IQ4_NL,
// IQ4_XS, MXFP4) at the same shapes, in the SIMD tiers (scalar at M = 1
// only): GFLOP/s-equivalent (2·M·K·N per call) and, for M = 1, weight bytes streamed per second
// against the read-bandwidth probe. Types with a packed layout (quant_pack.h) run packed, as the
// model runs them (the case name says "packed"). K = 576 is not a multiple of 256, so its K-quant rows run at
// K = 512 (as a Q4_K_M file would fall back to Q5_0/Q8_0 there; the row says which K ran).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/probes.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/quant_format.h"
#include "kernels/quant_pack.h"
#include "tests/kernels/oracle/ref_quant.h"
#include "src/core/thread_pool.h"

// Eigen's product per tier, each in its own shared library (bench/eigen_<tier>.cc).
void EigenMatMulScalar(const float* x, const float* w, float* y, int m, int k, int n, int threads);
const char* EigenSimdScalar();
#if defined(__aarch64__)
void EigenMatMulNeon(const float* x, const float* w, float* y, int m, int k, int n, int threads);
const char* EigenSimdNeon();
#else
void EigenMatMulAvx2(const float* x, const float* w, float* y, int m, int k, int n, int threads);
void EigenMatMulAvx512(const float* x, const float* w, float* y, int m, int k, int n, int threads);
const char* EigenSimdAvx2();
const char* EigenSimdAvx512();
#endif

namespace {

using fak::internal::ThreadPool;
using fak::kernels::Tier;
using EigenFn = void (*)(const float*, const float*, float*, int, int, int, int);

constexpr int kMaxM = 512;
struct Shape { int k, n; };
constexpr Shape kShapes[] = {{576, 1536}, {2048, 5632}};
constexpr int kMs[] = {1, 128, 512};
constexpr int kThreads[] = {1, 2};

ThreadPool* Pool(int threads) {
  static ThreadPool pool2(2);
  return threads == 1 ? nullptr : &pool2;
}

// Inputs for one shape, built once: X [kMaxM][K], W [N][K], Y [kMaxM][N].
struct Operands {
  std::vector<float> x, w, y;
};
const Operands& OperandsFor(const Shape& s) {
  static std::map<int, std::unique_ptr<Operands>> cache;
  auto& slot = cache[s.k * 100000 + s.n];
  if (!slot) {
    slot = std::make_unique<Operands>();
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1, 1);
    slot->x.resize(static_cast<size_t>(kMaxM) * s.k);
    slot->w.resize(static_cast<size_t>(s.n) * s.k);
    slot->y.resize(static_cast<size_t>(kMaxM) * s.n);
    for (float& v : slot->x) v = dist(rng);
    for (float& v : slot->w) v = dist(rng);
  }
  return *slot;
}

void SetMatMulCounters(benchmark::State& st, int m, const Shape& s) {
  double flops = 2.0 * m * s.k * s.n;
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (m == 1) {
    double bytes = 4.0 * s.k * s.n;
    st.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
}

void BM_FakMatMul(benchmark::State& st, Tier tier, Shape s, int m, int threads) {
  const fak::kernels::KernelTable& t = **fak::kernels::TableFor(tier);
  const Operands& op = OperandsFor(s);
  float* y = const_cast<float*>(op.y.data());
  for (auto _ : st) {
    fak::kernels::ParallelMatMul(t, Pool(threads), op.x.data(), s.k, op.w.data(), s.k, y, s.n, m, s.k, s.n);
    benchmark::ClobberMemory();
  }
  SetMatMulCounters(st, m, s);
}

void BM_EigenMatMul(benchmark::State& st, EigenFn fn, Shape s, int m, int threads) {
  const Operands& op = OperandsFor(s);
  float* y = const_cast<float*>(op.y.data());
  for (auto _ : st) {
    fn(op.x.data(), op.w.data(), y, m, s.k, s.n, threads);
    benchmark::ClobberMemory();
  }
  SetMatMulCounters(st, m, s);
}

// ---- Quantized weights ----

using fak::kernels::QuantType;
constexpr QuantType kQuantTypes[] = {QuantType::kQ8_0, QuantType::kQ4_0,  QuantType::kQ5_0,   QuantType::kQ4_1,
                                     QuantType::kQ5_1, QuantType::kQ2_K,  QuantType::kQ3_K,   QuantType::kQ4_K,
                                     QuantType::kQ5_K, QuantType::kQ6_K,  QuantType::kIQ4_NL, QuantType::kIQ4_XS,
                                     QuantType::kMXFP4};

// K rounded down to the type's block (576 → 512 for the K-quants).
int QuantK(QuantType t, const Shape& s) {
  const int block = static_cast<int>(fak::kernels::FormatOf(t).block_elems);
  return s.k / block * block;
}

// W [N][K] of the shape's random floats quantized by the reference quantizer (once per type and
// shape), packed when the type has a packed layout, and activation scratch for kMaxM rows.
struct QuantOperands {
  std::vector<uint8_t> w, xq;
  size_t row_bytes = 0;
  bool packed = false;
};
QuantOperands& QuantOperandsFor(QuantType t, const Shape& s) {
  static std::map<std::pair<int, int>, std::unique_ptr<QuantOperands>> cache;
  auto& slot = cache[{static_cast<int>(t), s.k * 100000 + s.n}];
  if (!slot) {
    const Operands& op = OperandsFor(s);
    const size_t k = QuantK(t, s);
    slot = std::make_unique<QuantOperands>();
    slot->row_bytes = fak::kernels::QuantRowBytes(t, k);
    slot->w.resize(slot->row_bytes * s.n);
    for (int j = 0; j < s.n; ++j) {
      std::vector<uint8_t> row = fak::kernels::ref::QuantizeRow(t, op.w.data() + static_cast<size_t>(j) * s.k, k);
      std::copy(row.begin(), row.end(), slot->w.begin() + static_cast<size_t>(j) * slot->row_bytes);
    }
    slot->xq.resize(fak::kernels::QuantActRowBytes(t, k) * kMaxM);
    if (s.n % 8 == 0) {  // as the model packs its weights
      std::vector<uint8_t> packed(fak::kernels::PackedRowBytes(t, k) * s.n);
      fak::kernels::PackRows(t, slot->w.data(), s.n, k, packed.data());
      slot->w = std::move(packed);
      slot->row_bytes = fak::kernels::PackedRowBytes(t, k);
      slot->packed = true;
    }
  }
  return *slot;
}

void BM_FakMatMulQuant(benchmark::State& st, Tier tier, QuantType qt, Shape s, int m, int threads) {
  const fak::kernels::KernelTable& t = **fak::kernels::TableFor(tier);
  const Operands& op = OperandsFor(s);
  QuantOperands& q = QuantOperandsFor(qt, s);
  const int k = QuantK(qt, s);
  float* y = const_cast<float*>(op.y.data());
  const fak::kernels::WeightProduct p{true, qt, q.w.data(), q.row_bytes, y, static_cast<size_t>(s.n),
                                      static_cast<size_t>(s.n), q.packed};
  for (auto _ : st) {
    if (q.packed) {
      fak::kernels::ParallelMatMuls(t, Pool(threads), op.x.data(), s.k, m, k, {&p, 1});
    } else {
      fak::kernels::ParallelMatMulQuant(t, Pool(threads), qt, op.x.data(), s.k, q.w.data(), q.row_bytes, y, s.n, m, k,
                                        s.n, q.xq.data());
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * k * s.n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (m == 1) {
    st.counters["GB/s"] = benchmark::Counter(static_cast<double>(q.w.size()) * 1e-9,
                                             benchmark::Counter::kIsIterationInvariantRate);
  }
}

// ---- Probes (bench/probes.h) ----

void BM_ReadBandwidth(benchmark::State& st, int threads) {
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::unique_ptr<float[]> a(new float[n]);
  Pool(2)->ParallelFor(n, 1 << 16, [&](size_t b, size_t e) { std::fill(a.get() + b, a.get() + e, 1.0f); });
  std::vector<float> sums(2);
  for (auto _ : st) {
    fak::bench::ReadPass(a.get(), n, threads == 1 ? nullptr : Pool(2), sums.data());
    benchmark::DoNotOptimize(sums.data());
  }
  st.counters["GB/s"] = benchmark::Counter(n * 4.0 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_FmaPeak(benchmark::State& st, Tier tier, int threads) {
  bool wide = fak::bench::TierUsesZmm(tier);
  double flops_per_thread = fak::bench::FmaFlopsPerCall(wide);
  std::vector<float> out(2);
  for (auto _ : st) {
    auto body = [&](size_t b, size_t e) {
      out[b] = fak::bench::FmaChains(wide, float(b));
    };
    if (threads == 1) body(0, 1); else Pool(2)->ParallelFor(2, 1, body);
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_thread * threads * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- Registration and summary ----

std::string CaseName(const char* impl, Tier tier, const Shape& s, int m, int threads) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "matmul/%s/%s/K%d_N%d/M%d/T%d", impl, std::string(fak::kernels::TierName(tier)).c_str(),
                s.k, s.n, m, threads);
  return buf;
}

std::string QuantCaseName(QuantType qt, Tier tier, const Shape& s, int m, int threads) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "matmul_q/%s%s/%s/K%d_N%d/M%d/T%d", fak::kernels::FormatOf(qt).name,
                s.n % 8 == 0 ? ".packed" : "",
                std::string(fak::kernels::TierName(tier)).c_str(), QuantK(qt, s), s.n, m, threads);
  return buf;
}

void RegisterQuant() {
  for (Tier tier : fak::kernels::SupportedTiers()) {
    for (QuantType qt : kQuantTypes) {
      for (const Shape& s : kShapes) {
        for (int m : kMs) {
          if (tier == Tier::kScalar && m > 1) continue;  // minutes per call
          for (int th : kThreads) {
            benchmark::RegisterBenchmark(QuantCaseName(qt, tier, s, m, th).c_str(), BM_FakMatMulQuant, tier, qt, s,
                                         m, th)
                ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.3);
          }
        }
      }
    }
  }
}

// Eigen built with the widest vectors the tier uses (Eigen's own build needs no VNNI).
EigenFn EigenFor(Tier tier) {
#if defined(__aarch64__)
  return tier == Tier::kScalar ? EigenMatMulScalar : EigenMatMulNeon;
#else
  if (fak::bench::TierUsesZmm(tier)) return EigenMatMulAvx512;
  return tier == Tier::kScalar ? EigenMatMulScalar : EigenMatMulAvx2;
#endif
}

void Register() {
  using benchmark::RegisterBenchmark;
  for (int th : kThreads) {
    RegisterBenchmark(("probe/read_bw/T" + std::to_string(th)).c_str(), BM_ReadBandwidth, th)
        ->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
    for (const char* tier_name : {"avx2", "avx512", "neon"}) {
      fak::Result<Tier> parsed = fak::kernels::ParseTier(tier_name);
      if (!parsed.has_value() || !fak::kernels::TierSupported(*parsed)) continue;
      const Tier tier = *parsed;
      std::string name = "probe/fma/" + std::string(fak::kernels::TierName(tier)) + "/T" + std::to_string(th);
      RegisterBenchmark(name.c_str(), BM_FmaPeak, tier, th)->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
    }
  }
  for (Tier tier : fak::kernels::SupportedTiers()) {
    for (const Shape& s : kShapes) {
      for (int m : kMs) {
        for (int th : kThreads) {
          // Scalar is slow: give its large cases a single timed pass.
          double min_time = (tier == Tier::kScalar && m > 1) ? 0.01 : 0.3;
          RegisterBenchmark(CaseName("fak", tier, s, m, th).c_str(), BM_FakMatMul, tier, s, m, th)
              ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(min_time);
          RegisterBenchmark(CaseName("eigen", tier, s, m, th).c_str(), BM_EigenMatMul, EigenFor(tier), s, m, th)
              ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(min_time);
        }
      }
    }
  }
  RegisterQuant();
}

// Console output as usual, and every run's counters kept for the summary (medians over repetitions).
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      for (const auto& [key, c] : r.counters) values_[r.run_name.function_name][key].push_back(c.value);
    }
  }
  // Median of counter `key` of benchmark `name`, or 0 when absent.
  double Get(const std::string& name, const char* key) const {
    auto it = values_.find(name);
    if (it == values_.end()) return 0;
    auto jt = it->second.find(key);
    if (jt == it->second.end() || jt->second.empty()) return 0;
    std::vector<double> v = jt->second;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }

 private:
  std::map<std::string, std::map<std::string, std::vector<double>>> values_;
};

void PrintSummary(const CollectingReporter& r) {
  std::printf("\nSummary (medians over repetitions)\n");
  for (int th : kThreads) {
    std::printf("  probe T%d: read %.1f GB/s", th, r.Get("probe/read_bw/T" + std::to_string(th), "GB/s"));
    for (const char* tn : {"avx2", "avx512", "neon"})
      std::printf(", fma %s %.1f GFLOP/s", tn, r.Get("probe/fma/" + std::string(tn) + "/T" + std::to_string(th), "GFLOP/s"));
    std::printf("\n");
  }
  std::printf("  %-34s %9s %7s %9s %7s %8s %6s\n", "case (fak)", "GFLOP/s", "%FMA", "Eigen", "xEigen", "GB/s", "%BW");
  for (Tier tier : fak::kernels::SupportedTiers()) {
    std::string tn(fak::kernels::TierName(tier));
    for (const Shape& s : kShapes) {
      for (int m : kMs) {
        for (int th : kThreads) {
          std::string name = CaseName("fak", tier, s, m, th);
          double g = r.Get(name, "GFLOP/s"), e = r.Get(CaseName("eigen", tier, s, m, th), "GFLOP/s");
          double peak = r.Get("probe/fma/" + tn + "/T" + std::to_string(th), "GFLOP/s");
          std::printf("  %-34s %9.2f", name.c_str() + 11, g);
          if (peak > 0) std::printf(" %6.1f%%", 100 * g / peak); else std::printf(" %7s", "-");
          std::printf(" %9.2f %7.2f", e, e > 0 ? g / e : 0.0);
          if (m == 1) {
            double gb = r.Get(name, "GB/s"), bw = r.Get("probe/read_bw/T" + std::to_string(th), "GB/s");
            std::printf(" %8.1f %5.0f%%", gb, bw > 0 ? 100 * gb / bw : 0.0);
          }
          std::printf("\n");
        }
      }
    }
  }
  std::printf("  %-34s %9s %7s %8s %6s\n", "case (fak, quantized weights)", "GFLOP/s", "xF32", "GB/s", "%BW");
  for (Tier tier : fak::kernels::SupportedTiers()) {
    for (QuantType qt : kQuantTypes) {
      for (const Shape& s : kShapes) {
        for (int m : kMs) {
          for (int th : kThreads) {
            std::string name = QuantCaseName(qt, tier, s, m, th);
            double g = r.Get(name, "GFLOP/s"), f = r.Get(CaseName("fak", tier, s, m, th), "GFLOP/s");
            if (g == 0) continue;
            std::printf("  %-34s %9.2f %7.2f", name.c_str() + 9, g, f > 0 ? g / f : 0.0);
            if (m == 1) {
              double gb = r.Get(name, "GB/s"), bw = r.Get("probe/read_bw/T" + std::to_string(th), "GB/s");
              std::printf(" %8.1f %5.0f%%", gb, bw > 0 ? 100 * gb / bw : 0.0);
            }
            std::printf("\n");
          }
        }
      }
    }
  }
  std::printf("  (K576_N1536 weights are 3.5 MB and stay in L3 between iterations; K2048_N5632 weights are\n"
              "   46 MB and stream from DRAM, so only those M=1 rows compare with the DRAM read probe. Quantized\n"
              "   K2048_N5632 weights are 6.5 MB (Q4_K) to 12.3 MB (Q8_0): they may partly stay in L3.)\n");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("fak_kernels_bench: tiers supported:");
  for (Tier t : fak::kernels::SupportedTiers()) std::printf(" %s", std::string(fak::kernels::TierName(t)).c_str());
#if defined(__aarch64__)
  std::printf("\n  Eigen SIMD: scalar build [%s], neon build [%s]\n", EigenSimdScalar(), EigenSimdNeon());
#else
  std::printf("\n  Eigen SIMD: scalar build [%s], avx2 build [%s], avx512 build [%s]\n", EigenSimdScalar(),
              EigenSimdAvx2(), EigenSimdAvx512());
#endif
  Register();
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  PrintSummary(reporter);
  benchmark::Shutdown();
  return 0;
}
