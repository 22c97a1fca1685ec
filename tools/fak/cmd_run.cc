// `fak run` (one prompt, one continuation) and `fak bench` (quick prefill/decode tokens/s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fak/kernels/kernel_tier.h"
#include "fak/model/generation.h"
#include "tools/fak/cli.h"

namespace fak::cli {
namespace {

constexpr std::string_view kRunUsage =
    "usage: fak run MODEL (-p TEXT | --prompt-file FILE) [options]\n"
    "\n"
    "Prefills TEXT as given (BOS first when the tokenizer wants it; no chat template: see `fak chat`)\n"
    "and streams the continuation to stdout until EOS, a --stop text or the length limit; timings go\n"
    "to stderr. A long prompt shows a progress bar when stdout is a terminal.\n"
    "\n"
    "options:\n"
    "  -m, --model MODEL      the model (or give it as the positional argument)\n"
    "  -p, --prompt TEXT      the prompt\n"
    "  --prompt-file FILE     the prompt from FILE ('-': stdin)\n"
    "\n"
    "With --grammar or --json-schema the continuation is held to the grammar or schema (docs/grammar.md)\n"
    "and ends where it is complete.\n";
constexpr size_t kRunDefaultMaxTokens = 64;

constexpr std::string_view kBenchUsage =
    "usage: fak bench MODEL [--tokens N] [--decode N] [--sessions S] [--threads N] [--kv-dtype T] [--json]\n"
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
    "  --threads N            threads per forward pass; 0 = one per hardware thread. Default: 0\n"
    "  --kv-dtype T           KV cache element type: f16, f32 or bf16 (docs/kv-regimes.md). Default:\n"
    "                         FAK_KV_DTYPE when set, else f16\n"
    "  --json                 print one JSON object (model, tier, threads, prefill and decode tokens, ms, tok/s)\n";

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
double PerSecond(size_t n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

struct RunResult {
  std::vector<int32_t> prompt, generated;  // generated: a stop token included
  std::string text;
  FinishReason finish = FinishReason::kLength;
  double prefill_ms = 0, decode_ms = 0;
  SpeculationStats speculation;
};

// Prefills the prompt and generates up to `max_tokens` (a count past the context is refused first,
// as the engine refuses it); text is streamed (unless `quiet`) as the generation releases it, so a
// --stop text is never printed.
Result<RunResult> Generate(const LoadedModel& m, const std::string& prompt, const GenerationFlags& g,
                           const SpeculationOptions& speculation, bool quiet) {
  RunResult r;
  FAK_ASSIGN_OR_RETURN(r.prompt, EncodePrompt(*m.tokenizer, prompt));
  FAK_RETURN_IF_ERROR(CheckGenerationRoom(m.model->config().context_length, r.prompt.size(), g.max_tokens));
  GenerateParams params;
  params.max_new_tokens = g.max_tokens;
  params.stop_tokens = EndOfGenerationTokens(*m.tokenizer, nullptr);
  params.sampling = g.sampling;
  FAK_ASSIGN_OR_RETURN(params.constraint, GenerationConstraint(g, *m.tokenizer));
  FAK_ASSIGN_OR_RETURN(Generation generation, Generation::Create(std::move(params), g.stop, m.tokenizer.get()));
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter, NewDrafter(speculation, *m.model));
  KVCache cache = m.model->NewCache();
  const Generation::Speculator speculator{
      .drafter = drafter.get(),
      .max_draft_tokens = speculation.max_draft_tokens,
      .verify = [&](std::span<const int32_t> tokens) { return m.model->Prefill(&cache, tokens, LogitsMode::kAll); },
      .rollback = [&](size_t n) { return cache.Truncate(cache.size() - n); },
      .stats = &r.speculation,
  };
  Clock::time_point start = Clock::now();
  FAK_ASSIGN_OR_RETURN(std::vector<float> logits, PrefillWithProgress(*m.model, &cache, r.prompt));
  r.prefill_ms = MsSince(start);
  start = Clock::now();
  FAK_RETURN_IF_ERROR(generation.Run(
      std::move(logits), r.prompt, [&](int32_t token) { return m.model->Decode(&cache, token); },
      [&](const GenerationStep& step) {
        if (!quiet) WriteText(step.text);
        return true;
      },
      &speculator));
  r.generated = generation.tokens();
  r.text = generation.text();
  r.finish = generation.finish().value_or(FinishReason::kLength);
  r.decode_ms = MsSince(start);
  return r;
}

std::string RunJson(const LoadedModel& m, const RunResult& r) {
  nlohmann::json j = {
      {"text", r.text},
      {"tokens", r.generated},
      {"finish_reason", std::string(FinishReasonName(r.finish))},
      {"usage", {{"prompt_tokens", r.prompt.size()}, {"completion_tokens", r.generated.size()}}},
      {"timings", {{"prefill_ms", r.prefill_ms}, {"decode_ms", r.decode_ms}}},
      {"speculation",
       {{"drafts", r.speculation.drafts},
        {"draft_tokens", r.speculation.draft_tokens},
        {"accepted_tokens", r.speculation.accepted_tokens}}},
      {"model", m.label},
      {"kernel_tier", std::string(ActiveKernelTier())},
  };
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int RunCommand(std::span<char* const> argv) {
  Args::Spec spec{{"model", "prompt", "prompt-file"}, {}, {{"-m", "model"}, {"-p", "prompt"}}};
  AddGenerationOptions(&spec);
  const std::string usage = std::string(kRunUsage) + GenerationHelp(kRunDefaultMaxTokens);
  Result<Args> args = Args::Parse(argv, spec);
  if (!args) return UsageError("run", args.error().message(), usage);
  if (args->help()) return ShowHelp(usage + "\n" + kModelHelp);
  Result<std::string> model_spec = ModelArgument(*args);
  if (!model_spec) return UsageError("run", model_spec.error().message(), usage + kModelHelp);
  std::optional<std::string> prompt = args->Get("prompt");
  std::optional<std::string> prompt_file = args->Get("prompt-file");
  if (prompt.has_value() == prompt_file.has_value()) return UsageError("run", "give the prompt by -p TEXT or --prompt-file FILE", usage);
  Result<GenerationFlags> g = ParseGenerationFlags(*args, kRunDefaultMaxTokens);
  Result<LoadOptions> load = ServingLoadOptions(*args);
  for (const Status& s : {g.error(), load.error()})
    if (!s.ok()) return UsageError("run", s.message(), usage);
  if (prompt_file == "-" && (g->grammar_file == "-" || g->json_schema_file == "-"))
    return UsageError("run", "stdin can hold the prompt or the grammar/schema, not both", usage);
  if (prompt_file) {
    Result<std::string> text = ReadFileOrStdin(*prompt_file);
    if (!text) return Fail("run", text.error());
    prompt = *text;
  }

  Result<LoadedModel> m = LoadModel(*model_spec, *load);
  if (!m) return Fail("run", m.error());
  if (!m->tokenizer) return Fail("run", Unsupported(m->label + " has no tokenizer; it serves `fak bench` and `fak inspect`"));
  Result<SpeculationOptions> speculation = SpeculationFor(*g, *load, *m->model);
  if (!speculation) return Fail("run", speculation.error());
  Result<RunResult> r = Generate(*m, *prompt, *g, *speculation, /*quiet=*/g->json);
  if (!r) {
    if (!g->json) std::fputc('\n', stdout);
    return Fail("run", r.error());
  }
  if (g->json) {
    WriteJsonLine(RunJson(*m, *r));
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::fprintf(stderr, "[%s, tier %s] prompt %zu tokens in %.1f ms (%.0f tok/s); generated %zu tokens in %.1f ms (%.1f tok/s), %s\n",
               m->label.c_str(), std::string(ActiveKernelTier()).c_str(), r->prompt.size(), r->prefill_ms,
               PerSecond(r->prompt.size(), r->prefill_ms), r->generated.size(), r->decode_ms,
               PerSecond(r->generated.size(), r->decode_ms), std::string(FinishReasonName(r->finish)).c_str());
  if (r->speculation.drafts > 0)
    std::fprintf(stderr, "[speculation] %zu drafts, %zu of %zu draft tokens accepted\n", r->speculation.drafts,
                 r->speculation.accepted_tokens, r->speculation.draft_tokens);
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
  Result<Args> args = Args::Parse(argv, {{"tokens", "decode", "sessions", "threads", "kv-dtype"}, {"json"}});
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

  Result<LoadOptions> load = ServingLoadOptions(*args);
  if (!load) return UsageError("bench", load.error().message(), kBenchUsage);
  Result<LoadedModel> m = LoadModel(args->positional()[0], *load);
  if (!m) return Fail("bench", m.error());
  if (args->Has("json")) {
    Result<BenchNumbers> b = Bench(*m->model, *n_prompt, *n_decode, *sessions);
    if (!b) return Fail("bench", b.error());
    const size_t decoded = *n_decode * *sessions;
    const nlohmann::json j = {
        {"model", m->label},
        {"config", m->model->config().Describe()},
        {"weights_bytes", m->model->weights_bytes()},
        {"kernel_tier", std::string(ActiveKernelTier())},
        {"threads", *threads},
        {"kv_dtype", std::string(KVDtypeName(m->model->kv_dtype()))},
        {"sessions", *sessions},
        {"prefill", {{"tokens", *n_prompt}, {"ms", b->prefill_ms}, {"tokens_per_s", PerSecond(*n_prompt, b->prefill_ms)}}},
        {"decode", {{"tokens", decoded}, {"ms", b->decode_ms}, {"tokens_per_s", PerSecond(decoded, b->decode_ms)}}}};
    WriteJsonLine(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return kExitOk;
  }
  std::printf("model     %s\n          %s, %.1f MB of weights\n", m->label.c_str(), m->model->config().Describe().c_str(),
              m->model->weights_bytes() / 1e6);
  std::printf("kernels   tier %s, threads %s, KV %s\n", std::string(ActiveKernelTier()).c_str(),
              *threads == 0 ? "one per hardware thread" : std::to_string(*threads).c_str(),
              std::string(KVDtypeName(m->model->kv_dtype())).c_str());
  Result<BenchNumbers> b = Bench(*m->model, *n_prompt, *n_decode, *sessions);
  if (!b) return Fail("bench", b.error());
  std::printf("prefill   %6zu tokens  %9.1f ms  %9.1f tok/s\n", size_t(*n_prompt), b->prefill_ms, PerSecond(*n_prompt, b->prefill_ms));
  const size_t decoded = *n_decode * *sessions;
  std::printf("decode    %6zu tokens  %9.1f ms  %9.1f tok/s%s\n", decoded, b->decode_ms, PerSecond(decoded, b->decode_ms),
              *sessions > 1 ? (" (" + std::to_string(*sessions) + " sessions, one batch per step)").c_str() : "");
  return kExitOk;
}

}  // namespace fak::cli
