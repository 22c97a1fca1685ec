// fak_speculation_bench: exact speculative decoding (prompt lookup) against plain decoding, on the
// agents trace and on chats (issue 36).
//
// usage: fak_speculation_bench [MODEL] [--rounds R] [--tokens N] [--k K,K...] [--threads T]
//
// Workloads, each prompt generated greedily for N tokens:
//   agents-trace  the radix traces' Agents() (bench/radix_traces.h): each agent's last turn, token
//                 ids folded into the model's vocabulary (LCG tokens: no text to repeat);
//   agents        agent turns in words: a tool's output (a file, a JSON reply, a log) in the context
//                 and a request whose answer restates it, rendered with the model's chat template;
//   chat          ordinary chat questions, nothing to copy.
// Each workload runs one prompt at a time (fak::Generate), then all its prompts at once through the
// engine (tokens/s over the batch; "tok/fwd" there is tokens per request-row of a step).
// Modes: plain decoding, and prompt lookup with each K. Rounds interleave the modes; reported are
// medians over rounds of tokens/s and of the speculative/plain ratio measured in the same round,
// the acceptance rate (draft tokens kept / verified) and tokens per forward pass. Every
// speculative run's tokens are checked against the plain run's (exactness; a mismatch aborts).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/radix_traces.h"
#include "fak/engine/engine.h"
#include "fak/kernels/kernel_tier.h"
#include "fak/model/generation.h"
#include "fak/model/loaded_model.h"
#include "fak/model/speculation.h"
#include "fak/tokenizer/chat_template.h"

namespace fak::bench {
namespace {

struct Flags {
  std::string model = "embedded";
  size_t rounds = 3, tokens = 64, threads = 0;
  std::vector<size_t> ks = {4, 8};
};

struct Workload {
  std::string name;
  std::vector<std::vector<int32_t>> prompts;
};

const char* const kAgentTurns[][2] = {
    {"You are a coding agent. Apply edits exactly and print the whole result.",
     "The tool read_file returned config.py:\n```python\nimport os\n\nDEFAULT_HOST = \"127.0.0.1\"\nDEFAULT_PORT = 8080\n"
     "MAX_WORKERS = 4\n\n\ndef load_config(path):\n    \"\"\"Reads the settings file at path.\"\"\"\n    settings = {}\n"
     "    with open(path) as f:\n        for line in f:\n            key, value = line.strip().split(\"=\", 1)\n"
     "            settings[key] = value\n    return settings\n\n\ndef server_address(settings):\n"
     "    host = settings.get(\"host\", DEFAULT_HOST)\n    port = int(settings.get(\"port\", DEFAULT_PORT))\n"
     "    return host, port\n```\nChange MAX_WORKERS to 8 and print the whole file again."},
    {"You are an agent that reports tool results faithfully.",
     "The tool get_weather returned:\n{\"city\": \"Lisbon\", \"temperature_c\": 21.5, \"humidity\": 0.63, "
     "\"wind_kmh\": 14, \"conditions\": \"partly cloudy\", \"forecast\": [{\"day\": \"Mon\", \"high\": 23, \"low\": 15}, "
     "{\"day\": \"Tue\", \"high\": 24, \"low\": 16}, {\"day\": \"Wed\", \"high\": 20, \"low\": 14}]}\n"
     "Repeat the JSON with the temperature converted to Fahrenheit, keeping every other field."},
    {"You are a DevOps agent.",
     "The tool tail_log returned:\n2026-03-01 10:00:01 INFO server started on port 8080\n"
     "2026-03-01 10:00:05 INFO connected to database primary\n2026-03-01 10:01:17 WARN slow query took 2300 ms\n"
     "2026-03-01 10:02:44 ERROR connection reset by peer (database primary)\n"
     "2026-03-01 10:02:45 INFO reconnecting to database primary\n2026-03-01 10:02:47 INFO connected to database primary\n"
     "List the lines that mention the database, exactly as they appear."},
};

const char* const kChats[] = {
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how photosynthesis works to a ten-year-old.",
    "What are three good habits for learning a new language?",
};

Result<std::vector<int32_t>> ChatPrompt(const LoadedModel& m, const std::string& system, const std::string& user) {
  if (m.chat_template == nullptr) return m.tokenizer->Encode(system + "\n" + user + "\n");
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({ChatRole::kSystem, system});
  messages.push_back({ChatRole::kUser, user});
  FAK_ASSIGN_OR_RETURN(RenderedChat rendered, m.chat_template->Render(messages));
  return EncodeRendered(*m.tokenizer, rendered);
}

Result<std::vector<Workload>> Workloads(const LoadedModel& m) {
  std::vector<Workload> out;
  Workload trace{"agents-trace", {}};
  const Trace agents = Agents();
  const size_t vocab = m.model->config().vocab_size;
  // Each agent's last turn: the last five requests of the trace.
  for (size_t i = agents.requests.size() - 5; i < agents.requests.size(); ++i) {
    std::vector<int32_t> prompt = agents.requests[i];
    for (int32_t& id : prompt) id = static_cast<int32_t>(static_cast<size_t>(id) % vocab);
    trace.prompts.push_back(std::move(prompt));
  }
  out.push_back(std::move(trace));
  Workload words{"agents", {}};
  for (const auto& turn : kAgentTurns) {
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ChatPrompt(m, turn[0], turn[1]));
    words.prompts.push_back(std::move(prompt));
  }
  out.push_back(std::move(words));
  Workload chats{"chat", {}};
  for (const char* question : kChats) {
    FAK_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ChatPrompt(m, "", question));
    chats.prompts.push_back(std::move(prompt));
  }
  out.push_back(std::move(chats));
  return out;
}

struct Measured {
  double seconds = 0;
  size_t tokens = 0;
  SpeculationStats stats;
  std::vector<std::vector<int32_t>> outputs;
};

// Generates from every prompt of `w` (fresh cache, prompt prefilled outside the clock) and sums.
Result<Measured> RunWorkload(const Model& model, const Workload& w, size_t n_tokens, const SpeculationOptions& spec) {
  Measured m;
  GenerateParams params;
  params.max_new_tokens = n_tokens;  // no stop token: every run generates exactly n_tokens
  for (const std::vector<int32_t>& prompt : w.prompts) {
    KVCache cache = model.NewCache();
    FAK_RETURN_IF_ERROR(model.Prefill(&cache, std::span<const int32_t>(prompt).first(prompt.size() - 1), LogitsMode::kNone).status());
    const auto start = std::chrono::steady_clock::now();
    // The last prompt token is fed inside the clock: one decode-sized step for every mode.
    FAK_ASSIGN_OR_RETURN(GenerateResult r, Generate(model, &cache, std::span<const int32_t>(prompt).last(1), params, nullptr, spec));
    m.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.tokens += r.tokens.size();
    m.stats.drafts += r.speculation.drafts;
    m.stats.draft_tokens += r.speculation.draft_tokens;
    m.stats.accepted_tokens += r.speculation.accepted_tokens;
    m.outputs.push_back(std::move(r.tokens));
  }
  return m;
}

// The same through the engine: every prompt of `w` submitted at once (one batch per step, drafts
// verified as multi-token chunks of it).
Result<Measured> RunEngine(const LoadedModel& lm, const Workload& w, size_t n_tokens, const SpeculationOptions& spec) {
  EngineOptions options;
  options.start_thread = false;
  options.speculation = spec;
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*lm.model, *lm.tokenizer, options));
  // Prompts prefilled first (max_tokens 0 warms the tree), outside the clock.
  for (const std::vector<int32_t>& prompt : w.prompts) {
    EngineRequest warm;
    warm.prompt = prompt;
    warm.max_tokens = 0;
    FAK_ASSIGN_OR_RETURN(RequestId id, engine->Submit(std::move(warm)));
    FAK_RETURN_IF_ERROR(engine->Wait(id).status());
  }
  Measured m;
  const auto start = std::chrono::steady_clock::now();
  std::vector<RequestId> ids;
  for (const std::vector<int32_t>& prompt : w.prompts) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = n_tokens;
    FAK_ASSIGN_OR_RETURN(RequestId id, engine->Submit(std::move(r)));
    ids.push_back(id);
  }
  for (RequestId id : ids) {
    FAK_ASSIGN_OR_RETURN(EngineResult r, engine->Wait(id));
    m.tokens += r.tokens.size();
    m.stats.draft_tokens += r.usage.draft_tokens;
    m.stats.accepted_tokens += r.usage.accepted_draft_tokens;
    m.outputs.push_back(std::move(r.tokens));
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.stats.drafts = engine->Stats().drafts;
  return m;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--rounds") f.rounds = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--tokens") f.tokens = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--threads") f.threads = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--k") {
      f.ks.clear();
      const std::string list = next();
      for (size_t p = 0; p < list.size();) {
        f.ks.push_back(std::strtoull(list.c_str() + p, nullptr, 10));
        p = list.find(',', p);
        p = p == std::string::npos ? list.size() : p + 1;
      }
    } else f.model = a;
  }
  LoadOptions load;
  load.model.n_threads = f.threads;
  Result<LoadedModel> m = LoadModel(f.model, load);
  if (!m) {
    std::fprintf(stderr, "fak_speculation_bench: %s\n", m.error().ToString().c_str());
    return 1;
  }
  Result<std::vector<Workload>> workloads = Workloads(*m);
  if (!workloads) {
    std::fprintf(stderr, "fak_speculation_bench: %s\n", workloads.error().ToString().c_str());
    return 1;
  }
  std::printf("model %s, tier %s, %zu tokens per prompt, %zu rounds (medians)\n", m->label.c_str(),
              std::string(ActiveKernelTier()).c_str(), f.tokens, f.rounds);
  std::printf("%-21s %-9s %9s %9s %8s %9s %8s\n", "workload", "mode", "tok/s", "plain", "ratio", "accepted", "tok/fwd");
  for (const bool engine : {false, true}) {
  for (const Workload& w : *workloads) {
    std::vector<SpeculationOptions> modes(1);
    for (size_t k : f.ks) {
      modes.emplace_back();
      modes.back().source = DraftSource::kNgram;
      modes.back().max_draft_tokens = k;
    }
    std::vector<std::vector<double>> rate(modes.size()), ratio(modes.size());
    std::vector<Measured> last(modes.size());
    for (size_t round = 0; round < f.rounds; ++round) {
      for (size_t i = 0; i < modes.size(); ++i) {
        Result<Measured> got = engine ? RunEngine(*m, w, f.tokens, modes[i]) : RunWorkload(*m->model, w, f.tokens, modes[i]);
        if (!got) {
          std::fprintf(stderr, "fak_speculation_bench: %s\n", got.error().ToString().c_str());
          return 1;
        }
        if (i > 0 && got->outputs != last[0].outputs) {
          std::fprintf(stderr, "fak_speculation_bench: %s k=%zu: tokens differ from plain decoding\n", w.name.c_str(),
                       modes[i].max_draft_tokens);
          return 1;
        }
        rate[i].push_back(got->tokens / got->seconds);
        last[i] = std::move(*got);
      }
      for (size_t i = 0; i < modes.size(); ++i) ratio[i].push_back(rate[i].back() / rate[0].back());
    }
    for (size_t i = 0; i < modes.size(); ++i) {
      const SpeculationStats& s = last[i].stats;
      // Forward passes: one per token not produced by a kept draft token.
      const size_t forwards = last[i].tokens - s.accepted_tokens;
      const std::string mode = i == 0 ? "plain" : "ngram:" + std::to_string(modes[i].max_draft_tokens);
      const std::string name = engine ? w.name + " (engine)" : w.name;
      std::printf("%-21s %-9s %9.1f %9.1f %7.2fx %8.1f%% %8.2f\n", name.c_str(), mode.c_str(), Median(rate[i]),
                  Median(rate[0]), Median(ratio[i]), s.draft_tokens ? 100.0 * s.accepted_tokens / s.draft_tokens : 0.0,
                  forwards ? static_cast<double>(last[i].tokens) / forwards : 0.0);
    }
  }
  }
  return 0;
}

}  // namespace
}  // namespace fak::bench

int main(int argc, char** argv) { return fak::bench::Main(argc, argv); }
