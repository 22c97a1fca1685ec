// Floating-point work of a forward pass, counted the way the benches report GFLOP/s: the layers'
// projections (2 flops per weight per token), attention (QK and PV: 4 · head_dim · heads flops per
// key a query sees, per layer) and the output head for the last row only. The last layer computes
// q, k and v for every row but the rest (attention, output projection, FFN) for the last row only,
// as the forward pass does when only the last row's logits are wanted.
#ifndef FAK_BENCH_FLOPS_H_
#define FAK_BENCH_FLOPS_H_

#include <cstddef>

#include "fak/model/model.h"

namespace fak::bench {

// Per layer: the q/k/v projection weights every row passes through, and the rest (output
// projection and FFN).
inline double LayerKeysParams(const ModelConfig& c) {
  const double h = c.hidden_size, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  return h * q + 2 * h * kv;
}
inline double LayerRestParams(const ModelConfig& c) {
  const double h = c.hidden_size, q = c.n_heads * c.head_dim;
  return q * h + 3 * h * c.ffn_size;
}

// Prefilling tokens [from, to) onto a cache that holds the first `from`, last-token logits. (Full
// attention: a sliding window would see fewer keys.)
inline double ForwardFlops(const ModelConfig& c, size_t from, size_t to) {
  const double rows = double(to - from), layers = c.n_layers;
  const double keys = (double(to) * (to + 1) - double(from) * (from + 1)) / 2;  // positions from+1 .. to
  const double per_key = 4.0 * c.head_dim * c.n_heads;
  const double attention = per_key * (keys * (layers - 1) + double(to));
  const double matmul = 2 * (rows * (layers * LayerKeysParams(c) + (layers - 1) * LayerRestParams(c)) + LayerRestParams(c));
  return matmul + 2.0 * c.vocab_size * c.hidden_size + attention;
}

}  // namespace fak::bench

#endif  // FAK_BENCH_FLOPS_H_
