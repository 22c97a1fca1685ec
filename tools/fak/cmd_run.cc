// `fak run` (one prompt, one continuation) and `fak bench` (quick prefill/decode tokens/s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "fak/kernels/kernel_tier.h"
#include "fak/model/sampler.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kRunUsage =
    "usage: fak run MODEL --prompt TEXT [options]\n"
    "\n"
    "Prefills TEXT (BOS first when the tokenizer wants it) and streams the continuation to stdout;\n"
    "timings go to stderr. A long prompt shows a progress bar when stdout is a terminal.\n"
    "\n"
    "options:\n"
    "  --prompt TEXT          the prompt (required)\n"
    "  --max-tokens N         tokens to generate; stops early at EOS. Default: 64\n"
    "  --temperature T        0 = greedy. Default: 0\n"
    "  --top-k K              keep the K most likely tokens; 0 = all. Default: 0\n"
    "  --top-p P              nucleus mass in (0, 1]. Default: 1\n"
    "  --seed S               sampler seed (same seed, same tokens). Default: 0\n"
    "  --threads N            threads per forward pass; 0 = one per hardware thread. Default: 0\n";

constexpr std::string_view kBenchUsage =
    "usage: fak bench MODEL [--tokens N] [--decode N] [--sessions S] [--threads N]\n"
    "\n"
    "Prefills N pseudo-random token ids as one batch, then decodes greedily, and prints tokens/s for\n"
    "each in the active kernel tier (pin one with FAK_KERNEL_TIER). With S sessions, S prompts are\n"
    "prefilled and every decode step runs all S in one batch (Model::PrefillBatch). A quick look,\n"
    "not a benchmark suite: see bench/ for measured comparisons.\n"
    "\n"
    "options:\n"
    "  --tokens N             prompt tokens to prefill. Default: 128\n"
    "  --decode N             tokens to decode after the prompt. Default: 32\n"
    "  --sessions S           sessions decoded together, one batch per step. Default: 1\n"
    "  --threads N            threads per forward pass; 0 = one per hardware thread. Default: 0\n";

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
double PerSecond(size_t n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

Result<SamplingParams> ParseSampling(const Args& args) {
  SamplingParams sampling;
  FAK_ASSIGN_OR_RETURN(double temperature, args.GetDouble("temperature", 0.0));
  FAK_ASSIGN_OR_RETURN(double top_p, args.GetDouble("top-p", 1.0));
  FAK_ASSIGN_OR_RETURN(sampling.top_k, args.GetUint("top-k", 0));
  FAK_ASSIGN_OR_RETURN(sampling.seed, args.GetUint("seed", 0));
  sampling.temperature = static_cast<float>(temperature);
  sampling.top_p = static_cast<float>(top_p);
  FAK_RETURN_IF_ERROR(sampling.Validate());
  return sampling;
}

struct RunTimes {
  size_t n_prompt = 0, n_generated = 0;
  double prefill_ms = 0, decode_ms = 0;
};

// Prefills the prompt and streams up to `max_tokens` sampled tokens; EOS ends early (not printed).
Result<RunTimes> Generate(const LoadedModel& m, const std::string& prompt, size_t max_tokens, const SamplingParams& sampling) {
  RunTimes t;
  FAK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodePrompt(*m.tokenizer, prompt));
  t.n_prompt = ids.size();
  KVCache cache = m.model->NewCache();
  Clock::time_point start = Clock::now();
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, PrefillWithProgress(*m.model, &cache, ids));
  t.prefill_ms = MsSince(start);
  start = Clock::now();
  Sampler sampler(sampling);
  std::vector<int32_t> history = ids;
  for (size_t i = 0; i < max_tokens; ++i) {
    const int32_t token = sampler.Sample(logits, history);
    if (token == m.tokenizer->eos_id()) break;
    const int32_t one[] = {token};
    FAK_ASSIGN_OR_RETURN(std::string piece, m.tokenizer->Decode(one));
    WriteText(piece);
    history.push_back(token);
    ++t.n_generated;
    if (i + 1 < max_tokens) {
      FAK_ASSIGN_OR_RETURN(logits, m.model->Decode(&cache, token));
    }
  }
  t.decode_ms = MsSince(start);
  return t;
}

}  // namespace

int RunCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{"prompt", "max-tokens", "temperature", "top-k", "top-p", "seed", "threads"}, {}});
  if (!args) return UsageError("run", args.error().message(), kRunUsage);
  if (args->help()) return ShowHelp(std::string(kRunUsage) + "\n" + kModelHelp);
  if (args->positional().size() != 1) return UsageError("run", "expected one MODEL", std::string(kRunUsage) + kModelHelp);
  std::optional<std::string> prompt = args->Get("prompt");
  if (!prompt) return UsageError("run", "--prompt is required", kRunUsage);
  Result<SamplingParams> sampling = ParseSampling(*args);
  Result<uint64_t> max_tokens = args->GetUint("max-tokens", 64);
  Result<uint64_t> threads = args->GetUint("threads", 0);
  for (const Status& s : {sampling.error(), max_tokens.error(), threads.error()})
    if (!s.ok()) return UsageError("run", s.message(), kRunUsage);

  Result<LoadedModel> m = LoadModel(args->positional()[0], *threads);
  if (!m) return Fail("run", m.error());
  if (!m->tokenizer) return Fail("run", Unsupported(m->label + " has no tokenizer; it serves `fak bench` and `fak inspect`"));
  Result<RunTimes> t = Generate(*m, *prompt, *max_tokens, *sampling);
  if (!t) {
    std::fputc('\n', stdout);
    return Fail("run", t.error());
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "[%s, tier %s] prompt %zu tokens in %.1f ms (%.0f tok/s); generated %zu tokens in %.1f ms (%.1f tok/s)\n",
               m->label.c_str(), std::string(ActiveKernelTier()).c_str(), t->n_prompt, t->prefill_ms,
               PerSecond(t->n_prompt, t->prefill_ms), t->n_generated, t->decode_ms, PerSecond(t->n_generated, t->decode_ms));
  return kExitOk;
}

namespace {

struct BenchNumbers {
  double prefill_ms = 0, decode_ms = 0;
};

Result<BenchNumbers> Bench(const Model& model, size_t n_prompt, size_t n_decode, size_t sessions) {
  const ModelConfig& c = model.config();
  if (n_prompt == 0) return InvalidArgument("--tokens must be at least 1");
  if (n_prompt + n_decode > c.context_length)
    return InvalidArgument("--tokens + --decode = " + std::to_string(n_prompt + n_decode) + " exceeds the context length " +
                           std::to_string(c.context_length));
  std::vector<int32_t> ids(n_prompt);
  uint64_t x = 0x9E3779B97F4A7C15ull;  // fixed pseudo-random ids: the same run every time
  for (int32_t& id : ids) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = static_cast<int32_t>(x % std::min<size_t>(c.vocab_size, 256));
  }
  BenchNumbers b;
  std::vector<KVCache> caches;
  std::vector<int32_t> next(sessions);
  for (size_t s = 0; s < sessions; ++s) {  // session s's prompt: the ids shifted by s (only the first is timed)
    for (int32_t& id : ids) id = static_cast<int32_t>((static_cast<size_t>(id) + (s > 0)) % c.vocab_size);
    caches.push_back(model.NewCache());
    Clock::time_point start = Clock::now();
    FAK_ASSIGN_OR_RETURN(std::vector<float> logits, model.Prefill(&caches.back(), ids));
    if (s == 0) b.prefill_ms = MsSince(start);
    next[s] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < n_decode; ++i) {
    std::vector<BatchItem> items;
    for (size_t s = 0; s < sessions; ++s) items.push_back({&caches[s], std::span(&next[s], 1)});
    FAK_ASSIGN_OR_RETURN(auto logits, model.PrefillBatch(items));
    for (size_t s = 0; s < sessions; ++s)
      next[s] = static_cast<int32_t>(std::max_element(logits[s].begin(), logits[s].end()) - logits[s].begin());
  }
  b.decode_ms = MsSince(start);
  return b;
}

}  // namespace

int BenchCommand(std::span<char* const> argv) {
  Result<Args> args = Args::Parse(argv, {{"tokens", "decode", "sessions", "threads"}, {}});
  if (!args) return UsageError("bench", args.error().message(), kBenchUsage);
  if (args->help()) return ShowHelp(std::string(kBenchUsage) + "\n" + kModelHelp);
  if (args->positional().size() != 1) return UsageError("bench", "expected one MODEL", std::string(kBenchUsage) + kModelHelp);
  Result<uint64_t> n_prompt = args->GetUint("tokens", 128);
  Result<uint64_t> n_decode = args->GetUint("decode", 32);
  Result<uint64_t> sessions = args->GetUint("sessions", 1);
  Result<uint64_t> threads = args->GetUint("threads", 0);
  for (const Status& s : {n_prompt.error(), n_decode.error(), sessions.error(), threads.error()})
    if (!s.ok()) return UsageError("bench", s.message(), kBenchUsage);
  if (*sessions == 0) return UsageError("bench", "--sessions must be at least 1", kBenchUsage);

  Result<LoadedModel> m = LoadModel(args->positional()[0], *threads);
  if (!m) return Fail("bench", m.error());
  std::printf("model     %s\n          %s, %.1f MB of weights\n", m->label.c_str(), m->model->config().Describe().c_str(),
              m->model->weights_bytes() / 1e6);
  std::printf("kernels   tier %s, threads %s\n", std::string(ActiveKernelTier()).c_str(),
              *threads == 0 ? "one per hardware thread" : std::to_string(*threads).c_str());
  Result<BenchNumbers> b = Bench(*m->model, *n_prompt, *n_decode, *sessions);
  if (!b) return Fail("bench", b.error());
  std::printf("prefill   %6zu tokens  %9.1f ms  %9.1f tok/s\n", size_t(*n_prompt), b->prefill_ms, PerSecond(*n_prompt, b->prefill_ms));
  const size_t decoded = *n_decode * *sessions;
  std::printf("decode    %6zu tokens  %9.1f ms  %9.1f tok/s%s\n", decoded, b->decode_ms, PerSecond(decoded, b->decode_ms),
              *sessions > 1 ? (" (" + std::to_string(*sessions) + " sessions, one batch per step)").c_str() : "");
  return kExitOk;
}

}  // namespace fak::cli
