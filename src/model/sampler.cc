// Sampler: logit bias → repetition penalty → presence/frequency penalties → temperature → top-k →
// top-p → min-p → draw, with xoshiro256**; and the log-probabilities OpenAI reports.
#include "fak/model/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "kernels/dispatch.h"

namespace fak {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t SplitMix64(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint32_t kMinusInfBits = 0xff800000u, kPlusInfBits = 0x7f800000u;

// The first index of the largest value (-0 ties +0, as `>` sees them): the largest in eight running
// maxima the compiler keeps in vector registers, then the first index holding it (a scan comparing
// each value with v[best] waits on the compare before it).
int32_t Argmax(std::span<const float> v) {
  constexpr size_t kLanes = 8;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, v[0]);
  size_t i = 0;
  for (; i + kLanes <= v.size(); i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = v[i + j] > lanes[j] ? v[i + j] : lanes[j];
  float best = lanes[0];
  for (float l : lanes) best = l > best ? l : best;
  for (; i < v.size(); ++i) best = v[i] > best ? v[i] : best;
  for (i = 0; i < v.size(); ++i)
    if (v[i] == best) return static_cast<int32_t>(i);
  return 0;  // v[0] is NaN (no value is greater): the old scan's answer
}

// Σ w in double, in eight interleaved lanes (a fixed order the compiler can vectorise).
double SumOf(std::span<const float> w) {
  constexpr size_t kLanes = 8;
  double lanes[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= w.size(); i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(w[i + j]);
  double sum = 0;
  for (double l : lanes) sum += l;
  for (; i < w.size(); ++i) sum += static_cast<double>(w[i]);
  return sum;
}

size_t CountUnmasked(std::span<const float> l) {
  size_t n = 0;
  for (float x : l) n += std::bit_cast<uint32_t>(x) != kMinusInfBits ? 1 : 0;
  return n;
}

// The value as written, e.g. 5e-324 (std::to_string would print 0.000000).
std::string Shown(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

Status CheckLogits(std::span<const float> logits) {
  if (logits.empty()) return InvalidArgument("Sampler: no logits");
  // One branch-free pass over the bits (NaN or +inf: |x| at or above +inf's bits, x not -inf); the
  // slow search for the first bad index runs only when there is one.
  uint32_t bad = 0, live = 0;
  for (float x : logits) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    bad |= static_cast<uint32_t>((u & 0x7fffffffu) >= kPlusInfBits) & static_cast<uint32_t>(u != kMinusInfBits);
    live |= static_cast<uint32_t>(u != kMinusInfBits);
  }
  for (size_t i = 0; bad != 0 && i < logits.size(); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("Sampler: logit " + std::to_string(i) + " is " + Shown(x) +
                             " (only finite logits, or -inf to mask a token, can be sampled)");
    }
  }
  if (live == 0) return InvalidArgument("Sampler: every one of the " + std::to_string(logits.size()) + " logits is -inf");
  return Status::Ok();
}

}  // namespace

Result<float> SamplingFloat(double value, std::string_view field) {
  const float f = static_cast<float>(value);
  const bool changed_kind = (f == 0.0f && value != 0.0) || (std::isinf(f) && !std::isinf(value)) ||
                            std::fpclassify(f) == FP_SUBNORMAL;
  if (changed_kind) {
    return InvalidArgument(std::string(field) + " " + Shown(value) + " is not representable as a normal float (it would be " +
                           Shown(f) + ")");
  }
  return f;
}

Status SamplingParams::Validate() const {
  auto subnormal = [](float x) { return std::fpclassify(x) == FP_SUBNORMAL; };
  if (!(temperature >= 0.0f) || !std::isfinite(temperature) || subnormal(temperature))
    return InvalidArgument("SamplingParams.temperature " + Shown(temperature) + " must be 0 or a normal float > 0");
  if (!(top_p > 0.0f && top_p <= 1.0f) || subnormal(top_p))
    return InvalidArgument("SamplingParams.top_p " + Shown(top_p) + " not in (0, 1] (a normal float)");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty) || subnormal(repetition_penalty))
    return InvalidArgument("SamplingParams.repetition_penalty " + Shown(repetition_penalty) +
                           " must be a finite normal float > 0");
  if (!(min_p >= 0.0f && min_p <= 1.0f) || subnormal(min_p))
    return InvalidArgument("SamplingParams.min_p " + Shown(min_p) + " not in [0, 1] (0 or a normal float)");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return InvalidArgument("SamplingParams.presence_penalty " + Shown(presence_penalty) + " not in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return InvalidArgument("SamplingParams.frequency_penalty " + Shown(frequency_penalty) + " not in [-2, 2]");
  std::vector<int32_t> ids;
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return InvalidArgument("SamplingParams.logit_bias: token id " + std::to_string(id) + " is negative");
    if (!(bias >= -100.0f && bias <= 100.0f))
      return InvalidArgument("SamplingParams.logit_bias[" + std::to_string(id) + "] " + Shown(bias) + " not in [-100, 100]");
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end())
    return InvalidArgument("SamplingParams.logit_bias: token id " + std::to_string(*dup) + " is given twice");
  return Status::Ok();
}

Result<SamplingParams> SamplingParams::FromDoubles(double temperature, size_t top_k, double top_p,
                                                   double repetition_penalty, uint64_t seed) {
  SamplingParams p;
  FAK_ASSIGN_OR_RETURN(p.temperature, SamplingFloat(temperature, "SamplingParams.temperature"));
  FAK_ASSIGN_OR_RETURN(p.top_p, SamplingFloat(top_p, "SamplingParams.top_p"));
  FAK_ASSIGN_OR_RETURN(p.repetition_penalty, SamplingFloat(repetition_penalty, "SamplingParams.repetition_penalty"));
  p.top_k = top_k;
  p.seed = seed;
  FAK_RETURN_IF_ERROR(p.Validate());
  return p;
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

// Whether Adjusted changes any logit.
bool Sampler::AdjustsLogits() const {
  return !params_.logit_bias.empty() || params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
         params_.frequency_penalty != 0.0f;
}

// The logits as the draw sees them: bias, then repetition penalty, then presence/frequency.
std::vector<float> Sampler::Adjusted(std::span<const float> logits, std::span<const int32_t> history,
                                     size_t generated) const {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  std::vector<float> l(logits.begin(), logits.end());
  for (const auto& [id, bias] : params_.logit_bias) {
    if (static_cast<size_t>(id) >= l.size()) continue;
    l[id] = bias <= -100.0f ? kMinusInf : l[id] + bias;  // OpenAI: -100 is a ban, not a large nudge
  }
  if (params_.repetition_penalty != 1.0f) {
    const size_t window = params_.repetition_window == 0 ? history.size() : std::min(params_.repetition_window, history.size());
    std::vector<bool> seen(l.size(), false);
    for (int32_t id : history.last(window))
      if (id >= 0 && static_cast<size_t>(id) < l.size()) seen[id] = true;
    for (size_t i = 0; i < l.size(); ++i)
      if (seen[i]) l[i] = l[i] > 0 ? l[i] / params_.repetition_penalty : l[i] * params_.repetition_penalty;
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    std::vector<int32_t> own(history.end() - static_cast<ptrdiff_t>(std::min(generated, history.size())), history.end());
    std::sort(own.begin(), own.end());
    for (size_t i = 0; i < own.size();) {
      size_t j = i;
      while (j < own.size() && own[j] == own[i]) ++j;
      const int32_t id = own[i];
      if (id >= 0 && static_cast<size_t>(id) < l.size())
        l[id] -= params_.frequency_penalty * static_cast<float>(j - i) + params_.presence_penalty;
      i = j;
    }
  }
  return l;
}

Result<int32_t> Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history, size_t generated) {
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  FAK_RETURN_IF_ERROR(CheckLogits(logits));
  // Without bias or penalties the draw reads the logits as given (CheckLogits saw an unmasked one).
  const bool adjusts = AdjustsLogits();
  std::vector<float> adjusted;
  if (adjusts) adjusted = Adjusted(logits, history, generated);
  const std::span<const float> l = adjusts ? std::span<const float>(adjusted) : logits;
  const bool greedy = params_.temperature == 0.0f;
  const size_t unmasked = adjusts || !greedy ? CountUnmasked(l) : l.size();
  if (unmasked == 0) return InvalidArgument("Sampler: logit_bias bans every token that is not already masked");
  const int32_t argmax = Argmax(l);
  if (greedy) return argmax;

  // The draw walks the tokens most likely first (probability desc, id asc: reproducible when logits
  // tie), and rarely far. The tokens within `reach` of the best logit are a prefix of that order, so
  // only they are gathered (the reach growing when the walk needs more), and of those only as many
  // are put in order as the walk reaches, in blocks that double: sorting a 262k vocabulary whole
  // cost about as much as the decode step it follows.
  //
  // A token's weight is exp((l - best) · (1/T)) from the kernel tier's vector exp (-inf weighs 0).
  // When the mass sums every token, all weights come from one pass (262k calls of std::exp in double
  // cost a fifth of a Gemma decode step); when top_k cuts, only the tokens the walk reaches are
  // weighed, one at a time, with the same bits (exp_scaled's lanes are independent).
  const double best = l[argmax];
  const size_t keep = params_.top_k > 0 ? std::min(params_.top_k, unmasked) : unmasked;  // masked: never kept
  const kernels::KernelTable& table = kernels::Active();
  const float inv_temperature = 1.0f / params_.temperature;
  const bool weigh_all = keep == unmasked;
  if (weigh_all) {
    weights_.resize(l.size());
    table.exp_scaled(l.data(), l[argmax], inv_temperature, weights_.data(), l.size());
  }
  const auto weight = [&](int32_t id) {
    if (weigh_all) return static_cast<double>(weights_[id]);
    float w;
    table.exp_scaled(&l[id], l[argmax], inv_temperature, &w, 1);
    return static_cast<double>(w);
  };
  const auto before = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  std::vector<int32_t> head;  // the tokens within reach; the first p.size() in the order
  std::vector<double> p;      // weights of head[0..p.size())
  double reach = 0;
  const auto extend = [&](size_t wanted) {
    wanted = std::min(wanted, unmasked);
    while (head.size() < wanted) {
      reach = reach == 0 ? 8 * static_cast<double>(params_.temperature) : reach * 4;  // past exp's range: every token
      head.clear();
      p.clear();
      for (size_t id = 0; id < l.size(); ++id)
        if (l[id] != kMinusInf && static_cast<double>(l[id]) >= best - reach) head.push_back(static_cast<int32_t>(id));
    }
    if (p.size() >= wanted) return;
    const auto first = head.begin() + static_cast<ptrdiff_t>(p.size());
    const auto last = head.begin() + static_cast<ptrdiff_t>(std::min(head.size(), std::max(wanted, 2 * p.size())));
    std::nth_element(first, last - 1, head.end(), before);
    std::sort(first, last, before);
    while (p.size() < static_cast<size_t>(last - head.begin())) p.push_back(weight(head[p.size()]));
  };
  // Masked (-inf) tokens weigh 0 and are never kept, not even as the last resort.
  double sum = 0;
  if (weigh_all) {
    sum = SumOf(weights_);
  } else {
    extend(keep);
    for (size_t i = 0; i < keep; ++i) sum += p[i];
  }
  // The kept tokens: the top-p nucleus of the first `keep`, then those at least min_p times as
  // likely as the best (whose weight is exp(0) = 1).
  size_t nucleus = keep;
  if (params_.top_p < 1.0f || params_.min_p > 0.0f) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      if (i == p.size()) extend(2 * i + 1);
      if (params_.min_p > 0.0f && i > 0 && p[i] < params_.min_p) {
        nucleus = i;
        break;
      }
      mass += p[i] / sum;
      if (mass >= params_.top_p) {
        nucleus = i + 1;
        break;
      }
    }
    sum = std::accumulate(p.begin(), p.begin() + static_cast<ptrdiff_t>(nucleus), 0.0);
  }
  double r = NextUniform() * sum;
  for (size_t i = 0; i < nucleus; ++i) {
    if (i == p.size()) extend(2 * i + 1);
    if ((r -= p[i]) < 0) return head[i];
  }
  // Rounding left a sliver of r: the least likely kept token takes it.
  extend(nucleus);
  return head[nucleus - 1];
}

TokenLogprobs LogprobsOf(std::span<const float> logits, int32_t token, size_t top_n) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_z = max + std::log(sum);
  const auto logprob = [&](int32_t id) { return static_cast<double>(logits[id]) - log_z; };
  TokenLogprobs out;
  out.chosen = {token, logprob(token)};
  top_n = std::min(top_n, logits.size());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(top_n), order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (size_t i = 0; i < top_n; ++i) out.top.push_back({order[i], logprob(order[i])});
  return out;
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
