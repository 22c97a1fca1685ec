// Floating-point work of a forward pass, counted the way the benches report GFLOP/s: the layers'
// projections (2 flops per weight per token), attention (QK and PV: 4 · head_dim · heads flops per
// key a query sees, per layer) and the output head for the last row only.
#ifndef FAK_BENCH_FLOPS_H_
#define FAK_BENCH_FLOPS_H_

#include <cstddef>

#include "fak/model.h"

namespace fak::bench {

// Matmul weights of the layers (the projections every token passes through).
inline double LayerMatmulParams(const ModelConfig& c) {
  const double h = c.hidden_size, q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  return c.n_layers * (h * q + 2 * h * kv + q * h + 3 * h * c.ffn_size);
}

// Prefilling tokens [from, to) onto a cache that holds the first `from`, last-token logits. (Full
// attention: a sliding window would see fewer keys.)
inline double ForwardFlops(const ModelConfig& c, size_t from, size_t to) {
  const double keys = (double(to) * (to + 1) - double(from) * (from + 1)) / 2;  // positions from+1 .. to
  const double attention = 4.0 * c.head_dim * c.n_heads * keys * c.n_layers;
  return 2 * LayerMatmulParams(c) * double(to - from) + 2.0 * c.vocab_size * c.hidden_size + attention;
}

}  // namespace fak::bench

#endif  // FAK_BENCH_FLOPS_H_
