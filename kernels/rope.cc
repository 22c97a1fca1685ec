// RoPE: table construction in double, rotation in float without contraction.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

namespace fak::kernels {

std::vector<double> RopeInverseFrequencies(size_t head_dim, double base) {
  std::vector<double> inv(head_dim / 2);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(base, -2.0 * static_cast<double>(i) / head_dim);
  return inv;
}

std::vector<double> RopeInverseFrequencies(size_t head_dim, double base, double scale_factor,
                                           std::span<const float> freq_factors) {
  std::vector<double> inv = RopeInverseFrequencies(head_dim, base);
  // Division by 1 is exact, so an unscaled config gets the plain table's bits.
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] /= scale_factor;
    if (i < freq_factors.size()) inv[i] /= static_cast<double>(freq_factors[i]);
  }
  return inv;
}

std::vector<float> Llama3RopeFreqFactors(size_t head_dim, double base, double factor, double low_freq_factor,
                                         double high_freq_factor, double original_context) {
  const double low_freq_wavelen = original_context / low_freq_factor;    // longer: divided by factor
  const double high_freq_wavelen = original_context / high_freq_factor;  // shorter: unchanged
  const std::vector<double> inv = RopeInverseFrequencies(head_dim, base);
  std::vector<float> out(inv.size());
  for (size_t i = 0; i < inv.size(); ++i) {
    const double wavelen = 2.0 * M_PI / inv[i];
    double ff = 1.0;
    if (wavelen > low_freq_wavelen) {
      ff = factor;
    } else if (!(wavelen < high_freq_wavelen)) {
      const double s = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      ff = 1.0 / ((1.0 - s) / factor + s);
    }
    out[i] = static_cast<float>(ff);
  }
  return out;
}

std::vector<double> RopeYarnInverseFrequencies(size_t head_dim, double base, double factor, double original_context,
                                               double beta_fast, double beta_slow) {
  const double d = static_cast<double>(head_dim);
  auto correction_dim = [&](double rotations) {
    return d * std::log(original_context / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(correction_dim(beta_fast)));
  const double high = std::min(d - 1.0, std::ceil(correction_dim(beta_slow)));
  std::vector<double> inv = RopeInverseFrequencies(head_dim, base);
  for (size_t i = 0; i < inv.size(); ++i) {
    const double ramp = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double extrapolate = 1.0 - std::min(1.0, std::max(0.0, ramp));  // 1: this dimension keeps its frequency
    inv[i] = inv[i] / factor * (1.0 - extrapolate) + inv[i] * extrapolate;
  }
  return inv;
}

RopeTable::RopeTable(std::vector<double> inv_freq, size_t n_positions, double magnitude)
    : inv_freq_(std::move(inv_freq)),
      n_positions_(n_positions),
      magnitude_(magnitude),
      chunks_(new std::atomic<float*>[(n_positions + kChunkRows - 1) / kChunkRows]) {
  for (size_t c = 0; c < (n_positions + kChunkRows - 1) / kChunkRows; ++c) chunks_[c].store(nullptr, std::memory_order_relaxed);
}

RopeTable::~RopeTable() {
  for (size_t c = 0; c < (n_positions_ + kChunkRows - 1) / kChunkRows; ++c) delete[] chunks_[c].load(std::memory_order_relaxed);
}

const float* RopeTable::BuildChunk(size_t index) const {
  std::lock_guard<std::mutex> lock(build_mu_);
  if (float* built = chunks_[index].load(std::memory_order_acquire)) return built;  // another thread won
  const size_t half = half_dim();
  float* chunk = new float[2 * kChunkRows * half]();
  float* sin_rows = chunk + kChunkRows * half;
  const size_t first = index * kChunkRows, end = std::min(n_positions_, first + kChunkRows);
  for (size_t p = first; p < end; ++p) {
    for (size_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(p) * inv_freq_[i];
      chunk[(p - first) * half + i] = static_cast<float>(std::cos(angle) * magnitude_);
      sin_rows[(p - first) * half + i] = static_cast<float>(std::sin(angle) * magnitude_);
    }
  }
  chunks_[index].store(chunk, std::memory_order_release);
  return chunk;
}

size_t RopeTable::built_positions() const {
  size_t n = 0;
  for (size_t c = 0; c < (n_positions_ + kChunkRows - 1) / kChunkRows; ++c) {
    if (chunks_[c].load(std::memory_order_acquire) != nullptr) n += kChunkRows;
  }
  return n;
}

void ApplyRope(float* x, size_t n_heads, size_t head_dim, const RopeTable& table, size_t position,
               RopePairing pairing) {
  const float* c = table.cos_row(position);
  const float* s = table.sin_row(position);
  // The table's frequencies rotate the first 2·half dims of each head (all of them, or Phi-3's
  // partial rotary; none for a table without frequencies); the rest pass unchanged.
  const size_t half = table.half_dim();
  // (i, partner) index pairs: adjacent (2i, 2i+1) or split-half (i, i + half).
  const size_t stride = pairing == RopePairing::kAdjacent ? 2 : 1;
  const size_t offset = pairing == RopePairing::kAdjacent ? 1 : half;
  for (size_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      float* a = head + i * stride;
      float* b = a + offset;
      float x0 = *a, x1 = *b;
      float r0 = x0 * c[i] - x1 * s[i];
      float r1 = x0 * s[i] + x1 * c[i];
      *a = r0;
      *b = r1;
    }
  }
}

}  // namespace fak::kernels
