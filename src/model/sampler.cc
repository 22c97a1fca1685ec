// Sampler: repetition penalty → temperature → top-k → top-p → draw, with xoshiro256**.
#include "fak/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace fak {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t SplitMix64(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int32_t Argmax(std::span<const float> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

}  // namespace

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) return InvalidArgument("SamplingParams.temperature must be >= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return InvalidArgument("SamplingParams.top_p " + std::to_string(top_p) + " not in (0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return InvalidArgument("SamplingParams.repetition_penalty must be > 0");
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  uint64_t s = params.seed;
  for (uint64_t& x : state_) x = SplitMix64(&s);
}

double Sampler::NextUniform() {
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return static_cast<double>(result >> 11) * 0x1.0p-53;
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  std::vector<float> l(logits.begin(), logits.end());
  if (params_.repetition_penalty != 1.0f) {
    std::vector<bool> seen(l.size(), false);
    for (int32_t id : history)
      if (id >= 0 && static_cast<size_t>(id) < l.size()) seen[id] = true;
    for (size_t i = 0; i < l.size(); ++i)
      if (seen[i]) l[i] = l[i] > 0 ? l[i] / params_.repetition_penalty : l[i] * params_.repetition_penalty;
  }
  if (params_.temperature == 0.0f) return Argmax(l);

  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable order (probability desc, id asc) keeps draws reproducible when logits tie.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  size_t keep = params_.top_k > 0 ? std::min(params_.top_k, order.size()) : order.size();
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += (p[i] = std::exp((static_cast<double>(l[order[i]]) - l[order[0]]) / params_.temperature));
  double mass = 0;
  size_t nucleus = keep;
  for (size_t i = 0; i < keep; ++i) {
    mass += p[i] / sum;
    if (mass >= params_.top_p) {
      nucleus = i + 1;
      break;
    }
  }
  double total = std::accumulate(p.begin(), p.begin() + nucleus, 0.0);
  double r = NextUniform() * total;
  for (size_t i = 0; i < nucleus; ++i) {
    if ((r -= p[i]) < 0) return order[i];
  }
  return order[nucleus - 1];
}

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

}  // namespace fak
