// fak_eviction_bench: the price and the payoff of addressability (issue 4, item 5).
//
// Part 1, eviction cost. A session of --tokens tokens (default 4096) on a random-weight model of the
// SmolLM2-135M shape with its context length raised to 4608; a 64-token span in the middle is
// removed, by two arms measured on clones of the same cache:
//   rerotate:  KVCache::Evict(from, 64) — move the survivors down and re-rotate every moved key from
//              Kraw once. This is the clean case's whole cost (the span was never attended to: a
//              one-layer model, or a tail evicted at write time) and what the ledger does for it.
//   recompute: Truncate(from) + Prefill(tail tokens) — what exact removal costs when the tail did
//              attend to the span (Repair::kRecomputeTail), and what a cache keeping only rotated K
//              has to do for any middle removal.
// Also timed once each: SegmentLedger::Evict with kApproximate and with kRecomputeTail (both include
// the ledger's two sha256 digests of the whole cache, for its report). Exactness checks: the ledger's
// repaired cache equals the recompute arm's (digest); on a one-layer model of the same shape the
// rerotate arm equals a never-saw prefill (digest).
//
// Part 2, decode cost of keeping Kraw. The library's layout always keeps Kraw and the engine has
// no switch to drop it, so its cost is measured directly, not by an A/B build: during real decode
// steps, right after each step, the bench replays that step's Kraw writes (one head_dim row per
// layer and KV head, into a buffer with the cache's own layout and head stride, with the caches
// as the step left them) and times them; the ratio to the step's time is the share of decode spent
// keeping Kraw. Decode does not read Kraw (attention reads rotated K), so that write is the only
// per-token cost. A second, end-to-end estimate interleaves steps with and without one extra replay
// (the cost of a second Kraw) — it is bounded by run-to-run noise. Memory: kraw_bytes() over
// size_bytes() of the session cache.
//
// Flags: --tokens N (session length; default 4096), --threads T (default 2), --quick (1024 tokens,
// fewer repetitions).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/probes.h"
#include "bench/radix_traces.h"
#include "fak/session/segment_ledger.h"
#include "fak/model/model.h"
#include "kernels/dispatch.h"

namespace fak::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  size_t tokens = 4096, span = 64, threads = 2;
  int rerotate_reps = 7, recompute_reps = 2, decode_steps = 48;
  bool quick = false;
};

int Fail(const Status& s, const char* what) {
  std::fprintf(stderr, "fak_eviction_bench: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

ModelConfig SessionConfig(size_t tokens) {
  ModelConfig c = ModelConfig::SmolLM2_135M_Shape();
  c.context_length = std::max<size_t>(c.context_length, tokens + 512);
  return c;
}

Result<std::unique_ptr<Model>> MakeModel(const ModelConfig& c, size_t threads) {
  ModelOptions opt;
  opt.n_threads = threads;
  return Model::Synthetic(c, 42, opt);
}

std::vector<int32_t> Without(const std::vector<int32_t>& t, size_t from, size_t n) {
  std::vector<int32_t> out(t.begin(), t.begin() + from);
  out.insert(out.end(), t.begin() + from + n, t.end());
  return out;
}

SegmentSpec Spec(std::string id, std::span<const int32_t> tokens) {
  SegmentSpec s;
  s.id = std::move(id);
  s.tokens.assign(tokens.begin(), tokens.end());
  return s;
}

// ---- Part 1 ----

int EvictionCost(const Flags& f) {
  const ModelConfig c = SessionConfig(f.tokens);
  auto model_or = MakeModel(c, f.threads);
  if (!model_or.has_value()) return Fail(model_or.error(), "Synthetic");
  const Model& model = **model_or;
  const std::vector<int32_t> tokens = LcgTokens(f.tokens, 77);
  const size_t from = f.tokens / 2 - f.span / 2, tail = f.tokens - from - f.span;
  std::printf("Part 1: eviction of a %zu-token span at [%zu, %zu) from a %zu-token session\n", f.span, from,
              from + f.span, f.tokens);
  std::printf("  model: %s, threads %zu\n", c.Describe().c_str(), f.threads);

  KVCache base = model.NewCache();
  auto t0 = Clock::now();
  if (auto r = model.Prefill(&base, tokens, LogitsMode::kNone); !r.has_value()) return Fail(r.error(), "Prefill");
  const double session_s = SecondsSince(t0);
  std::printf("  session prefill: %.1f s (%.1f tok/s); cache %.1f MB, of which Kraw %.1f MB\n", session_s,
              f.tokens / session_s, base.size_bytes() / 1e6, base.kraw_bytes() / 1e6);
  std::fflush(stdout);

  std::vector<double> rerotate, clone_s;
  for (int r = 0; r < f.rerotate_reps; ++r) {
    auto tc = Clock::now();
    KVCache c2 = base.Clone();
    clone_s.push_back(SecondsSince(tc));
    auto te = Clock::now();
    if (Status s = c2.Evict(from, f.span); !s.ok()) return Fail(s, "Evict");
    rerotate.push_back(SecondsSince(te));
  }
  std::vector<double> recompute;
  Digest recompute_digest;
  const std::vector<int32_t> tail_tokens(tokens.begin() + from + f.span, tokens.end());
  for (int r = 0; r < f.recompute_reps; ++r) {
    KVCache c2 = base.Clone();
    auto te = Clock::now();
    if (Status s = c2.Truncate(from); !s.ok()) return Fail(s, "Truncate");
    if (auto p = model.Prefill(&c2, tail_tokens, LogitsMode::kNone); !p.has_value()) return Fail(p.error(), "Prefill tail");
    recompute.push_back(SecondsSince(te));
    recompute_digest = c2.ComputeDigest();
    std::printf("  recompute rep %d: %.2f s (load %s)\n", r + 1, recompute.back(), LoadAverage().c_str());
    std::fflush(stdout);
  }

  // The ledger, once per repair mode (each includes two whole-cache digests).
  std::vector<SegmentSpec> specs = {Spec("head", std::span(tokens).first(from)),
                                    Spec("span", std::span(tokens).subspan(from, f.span)),
                                    Spec("tail", std::span(tokens).subspan(from + f.span))};
  auto ledger_evict = [&](Repair repair, double* seconds) -> Result<EvictionReport> {
    FAK_ASSIGN_OR_RETURN(SegmentLedger ledger, SegmentLedger::Adopt(model, base.Clone(), specs));
    auto te = Clock::now();
    auto report = ledger.Evict("span", repair);
    *seconds = SecondsSince(te);
    return report;
  };
  double ledger_approx_s = 0, ledger_repair_s = 0;
  auto approx = ledger_evict(Repair::kApproximate, &ledger_approx_s);
  if (!approx.has_value()) return Fail(approx.error(), "ledger kApproximate");
  auto repaired = ledger_evict(Repair::kRecomputeTail, &ledger_repair_s);
  if (!repaired.has_value()) return Fail(repaired.error(), "ledger kRecomputeTail");
  const bool repair_matches = repaired->cache_digest_after == recompute_digest;

  // The clean case's exactness, shown on a one-layer model of the same shape: re-rotation alone
  // equals a prefill that never saw the span.
  ModelConfig c1 = c;
  c1.n_layers = 1;
  auto one_or = MakeModel(c1, f.threads);
  if (!one_or.has_value()) return Fail(one_or.error(), "Synthetic (1 layer)");
  KVCache one = (*one_or)->NewCache(), never = (*one_or)->NewCache();
  if (auto r = (*one_or)->Prefill(&one, tokens, LogitsMode::kNone); !r.has_value()) return Fail(r.error(), "Prefill 1L");
  if (auto r = (*one_or)->Prefill(&never, Without(tokens, from, f.span), LogitsMode::kNone); !r.has_value())
    return Fail(r.error(), "Prefill 1L never-saw");
  if (Status s = one.Evict(from, f.span); !s.ok()) return Fail(s, "Evict 1L");
  const bool one_layer_exact = one.ComputeDigest() == never.ComputeDigest();

  const double rr = Median(rerotate), rc = Median(recompute);
  std::printf("\n  %-44s %12s %10s\n", "arm", "median", "reps");
  std::printf("  %-44s %9.2f ms %10zu\n", "rerotate: KVCache::Evict (clean case)", rr * 1e3, rerotate.size());
  std::printf("  %-44s %9.2f ms %10zu\n", "recompute: Truncate + Prefill(tail)", rc * 1e3, recompute.size());
  std::printf("  %-44s %9.2f ms %10s\n", "(for scale: KVCache::Clone of the session)", Median(clone_s) * 1e3, "");
  std::printf("  %-44s %9.2f ms %10s   re-rotated %zu, recomputed %zu\n", "ledger Evict kApproximate (+2 digests)",
              ledger_approx_s * 1e3, "1", approx->n_rerotated, approx->n_recomputed);
  std::printf("  %-44s %9.2f ms %10s   re-rotated %zu, recomputed %zu, exact %s\n",
              "ledger Evict kRecomputeTail (+2 digests)", ledger_repair_s * 1e3, "1", repaired->n_rerotated,
              repaired->n_recomputed, repaired->exact ? "yes" : "no");
  std::printf("\n  recompute / rerotate = %.0fx (target >= 50x) [%s]; tail %zu tokens re-rotated in %.2f us/token\n",
              rc / rr, rc / rr >= 50 ? "met" : "NOT met", tail, rr * 1e6 / tail);
  std::printf("  checks: ledger-repaired cache == recompute arm (digest): %s; one-layer model, rerotate == never-saw"
              " (digest): %s\n",
              repair_matches ? "yes" : "NO", one_layer_exact ? "yes" : "NO");
  return repair_matches && one_layer_exact ? 0 : 1;
}

// ---- Part 2 ----

// The per-token Kraw writes of one decode step, as StoreKeysAndRotateQueries does them: one
// head_dim row per (layer, KV head) into slot `slot` of a buffer with the cache's layout.
void ReplayKrawWrite(float* shadow, const float* k_row, size_t layers, size_t kv_heads, size_t hd, size_t head_stride,
                     size_t slot) {
  for (size_t l = 0; l < layers; ++l)
    for (size_t h = 0; h < kv_heads; ++h)
      std::memcpy(shadow + (l * kv_heads + h) * head_stride + slot * hd, k_row + h * hd, hd * sizeof(float));
}

int KrawDecodeCost(const Flags& f, size_t threads) {
  const ModelConfig c = SessionConfig(f.tokens);
  auto model_or = MakeModel(c, threads);
  if (!model_or.has_value()) return Fail(model_or.error(), "Synthetic");
  const Model& model = **model_or;
  const size_t prompt = 512, hd = c.head_dim;
  KVCache cache = model.NewCache();
  if (auto r = model.Prefill(&cache, LcgTokens(prompt, 5), LogitsMode::kNone); !r.has_value())
    return Fail(r.error(), "Prefill");
  if (Status s = cache.Reserve(prompt + 2 * f.decode_steps + 2); !s.ok()) return Fail(s, "Reserve");
  const size_t stride = cache.head_stride(0);  // every layer keeps all rows here: one stride
  std::vector<float> shadow(c.n_layers * c.n_kv_heads * stride, 0.0f);  // touched: no page faults timed
  std::vector<float> k_row(c.n_kv_heads * hd, 0.5f);

  std::vector<double> step_s, kraw_s, plain_s, extra_s;
  for (int i = 0; i < 2 * f.decode_steps + 1; ++i) {
    const size_t slot = cache.size();
    auto t0 = Clock::now();
    auto r = model.Decode(&cache, static_cast<int32_t>((31 * i + 7) % c.vocab_size));
    const double step = SecondsSince(t0);
    if (!r.has_value()) return Fail(r.error(), "Decode");
    auto t1 = Clock::now();
    ReplayKrawWrite(shadow.data(), k_row.data(), c.n_layers, c.n_kv_heads, hd, stride, slot);
    const double kraw = SecondsSince(t1);
    if (i == 0) continue;  // warm-up
    step_s.push_back(step);
    kraw_s.push_back(kraw);
    // End-to-end: odd steps are plain, even steps carry one extra Kraw replay (timed with the step).
    (i % 2 ? plain_s : extra_s).push_back(step + (i % 2 ? 0 : kraw));
  }
  __asm__ volatile("" : : "r"(shadow.data()) : "memory");
  const double step = Median(step_s), kraw = Median(kraw_s), plain = Median(plain_s), extra = Median(extra_s);
  const double krawbytes = double(c.n_layers) * c.n_kv_heads * hd * sizeof(float);
  std::printf("  T%zu  decode %.2f ms/token (%.2f tok/s) at context %zu..%zu; Kraw write per token %.0f bytes in %.2f us"
              " = %.4f%% of the step (median); end-to-end, plain %.2f ms vs +1 Kraw %.2f ms (%+.2f%%, noise-bound)\n",
              threads, step * 1e3, 1 / step, prompt, prompt + step_s.size(), krawbytes, kraw * 1e6, 100 * kraw / step,
              plain * 1e3, extra * 1e3, 100 * (extra - plain) / plain);
  std::printf("      => decode tok/s with Kraw %.3f vs without (step minus the Kraw write) %.3f: cost %.4f%% (target < 3%%) [%s]\n",
              1 / step, 1 / (step - kraw), 100 * kraw / step, kraw / step < 0.03 ? "met" : "NOT met");
  std::printf("      memory: Kraw %.1f MB of a %.1f MB cache at %zu tokens (%.1f%%; the cache is %.2fx a K/V-only cache)\n",
              cache.kraw_bytes() / 1e6, cache.size_bytes() / 1e6, cache.size(), 100.0 * cache.kraw_bytes() / cache.size_bytes(),
              double(cache.size_bytes()) / (cache.size_bytes() - cache.kraw_bytes()));
  std::fflush(stdout);
  return 0;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      f.quick = true;
      f.tokens = 1024;
      f.rerotate_reps = 3;
      f.recompute_reps = 1;
      f.decode_steps = 8;
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      f.tokens = std::max<size_t>(256, std::strtoull(argv[++i], nullptr, 10));
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      f.threads = std::max<size_t>(1, std::strtoull(argv[++i], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: fak_eviction_bench [--quick] [--tokens N] [--threads T]\n");
      return 2;
    }
  }
  std::printf("fak_eviction_bench: kernel tier %s, load average %s\n",
              std::string(kernels::TierName(kernels::ActiveTier())).c_str(), LoadAverage().c_str());
  if (int rc = EvictionCost(f)) return rc;
  std::printf("\nPart 2: decode cost of keeping Kraw (measured directly; see the header comment)\n");
  for (size_t threads : {size_t{1}, f.threads}) {
    if (int rc = KrawDecodeCost(f, threads)) return rc;
    if (threads == f.threads) break;
  }
  std::printf("\nload average at end: %s\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace fak::bench

int main(int argc, char** argv) { return fak::bench::Main(argc, argv); }
