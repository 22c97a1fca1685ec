// RoPE: the one pinned rotation routine shared by every tier (architecture §2.3).
//
// The cos/sin table is built once per (head_dim, inverse frequencies) in double and stored as
// float; the rotation is float32 multiply and add with no fused multiply-add (rope.cc is compiled
// with -ffp-contract=off and without SIMD flags). Prefill, decode and re-rotation after eviction
// all call ApplyRope, so a key rotated fresh at position p and a stored raw key re-rotated to p are
// bit-identical, in every tier.
#ifndef FAK_KERNELS_ROPE_H_
#define FAK_KERNELS_ROPE_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "kernels/kernel_table.h"

namespace fak::kernels {

// inv_freq[i] = base^(-2i/head_dim), i < head_dim/2.
std::vector<double> RopeInverseFrequencies(size_t head_dim, double base);
// With frequency scaling, as llama.cpp's rope applies it (theta = p · freq_scale · base^(-2i/d) / ff_i):
// inv_freq[i] = base^(-2i/head_dim) / scale_factor / freq_factors[i] (an empty freq_factors is all
// ones; otherwise it has head_dim/2 entries). scale_factor 1 and no factors give the plain table.
std::vector<double> RopeInverseFrequencies(size_t head_dim, double base, double scale_factor,
                                           std::span<const float> freq_factors);

// The "llama3" RoPE scaling of Llama 3.1-3.3 (HF rope_scaling rope_type "llama3") as per-frequency
// divisors, the values llama.cpp's converter writes to rope_freqs.weight: with
// wavelen_i = 2π / base^(-2i/d), factor 1 when wavelen_i < original_context / high_freq_factor,
// `factor` when wavelen_i > original_context / low_freq_factor, else 1 / ((1 - s) / factor + s) with
// s = (original_context / wavelen_i - low_freq_factor) / (high_freq_factor - low_freq_factor). Dividing
// by them is HF's _compute_llama3_parameters (which multiplies by their inverses). Computed in double,
// rounded to f32 as the GGUF stores them. Callers check factor > 0, 0 < low < high, context > 0.
std::vector<float> Llama3RopeFreqFactors(size_t head_dim, double base, double factor, double low_freq_factor,
                                         double high_freq_factor, double original_context);

// YaRN (llama.cpp's rope_yarn, transformers' _compute_yarn_parameters with truncate): inv_freq[i] =
// base^(-2i/d) * ((1 - m_i) / factor + m_i), where m_i = 1 - clamp((i - low) / max(0.001, high -
// low), 0, 1), low = max(0, floor(c(beta_fast))), high = min(d - 1, ceil(c(beta_slow))) and
// c(r) = d * ln(original_context / (2 pi r)) / (2 ln base). (The magnitude goes to the table.)
std::vector<double> RopeYarnInverseFrequencies(size_t head_dim, double base, double factor, double original_context,
                                               double beta_fast, double beta_slow);

// magnitude * cos/sin of position * inv_freq for positions [0, n_positions) (magnitude: YaRN's
// attention factor; 1 otherwise). Rows are built on first use, kChunkRows positions at a time, so a
// model whose file claims a long context pays only for the positions its caches reach (a crafted
// context length cannot exhaust memory at load). A row's values do not depend on when or in which
// chunk it is built. Thread-safe; share freely.
class RopeTable {
 public:
  static constexpr size_t kChunkRows = 256;

  RopeTable(std::vector<double> inv_freq, size_t n_positions, double magnitude = 1.0);
  ~RopeTable();
  RopeTable(const RopeTable&) = delete;
  RopeTable& operator=(const RopeTable&) = delete;

  size_t half_dim() const { return inv_freq_.size(); }
  size_t n_positions() const { return n_positions_; }
  // Rows [half_dim] (position < n_positions()); the first read of a chunk builds it.
  const float* cos_row(size_t position) const { return Chunk(position) + (position % kChunkRows) * half_dim(); }
  const float* sin_row(size_t position) const { return cos_row(position) + kChunkRows * half_dim(); }
  // Positions whose rows exist so far (a multiple of kChunkRows, at most n_positions rounded up).
  size_t built_positions() const;

 private:
  // The chunk holding `position`: cos rows [kChunkRows][half_dim], then sin rows likewise.
  const float* Chunk(size_t position) const {
    const float* chunk = chunks_[position / kChunkRows].load(std::memory_order_acquire);
    return chunk != nullptr ? chunk : BuildChunk(position / kChunkRows);
  }
  const float* BuildChunk(size_t index) const;

  std::vector<double> inv_freq_;
  size_t n_positions_;
  double magnitude_;
  mutable std::mutex build_mu_;
  mutable std::unique_ptr<std::atomic<float*>[]> chunks_;  // [ceil(n_positions / kChunkRows)]
};

// Rotates x = [n_heads][head_dim] in place to `position` (position < table.n_positions()): the first
// 2 · table.half_dim() <= head_dim dims of each head (pairs within them), the others left as they are.
void ApplyRope(float* x, size_t n_heads, size_t head_dim, const RopeTable& table, size_t position,
               RopePairing pairing);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_ROPE_H_
