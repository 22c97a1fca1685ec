// ParallelMatMul / ParallelMatMulQuant: one product, column shares in multiples of 48 (a multiple of
// every tier's f32 register tile and of the quantized column strip). ParallelMatMuls: the products'
// columns laid end to end, each starting on a multiple of 48, and split as one range; for one row
// (decode, which streams W once) in pieces of about kDecodePieceBytes of W, balanced across the
// threads as they run.
#include "kernels/parallel.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "src/core/aligned_buffer.h"

namespace fak::kernels {
namespace {

// Below this many multiply-adds a product is over before a worker could help (a hand-off costs a
// few microseconds), so it stays on the calling thread. Which thread computes an output never
// changes its value.
constexpr size_t kMinParallelMacs = size_t{1} << 17;

constexpr size_t kColumnGrain = 48;

// A decode piece: enough W that claiming it (one uncontended compare-and-swap) costs nothing, small
// enough that the threads finish a product within a few microseconds of each other.
constexpr size_t kDecodePieceBytes = size_t{64} << 10;

// Activation formats (ActQ8_0, ActQ8_1, ActQ8_K). Weight types that share a format quantize their
// activations to the same bytes.
size_t ActFormatIndex(QuantType t) { return static_cast<size_t>(FormatOf(t).act); }

void QuantizeRows(const KernelTable& t, internal::ThreadPool* pool, QuantType wtype, const float* x, size_t ldx,
                  size_t m, size_t k, uint8_t* xq) {
  const size_t row_bytes = QuantActRowBytes(wtype, k);
  if (pool == nullptr || m == 1) {
    t.quantize_act(wtype, x, ldx, m, k, xq);
    return;
  }
  pool->ParallelFor(m, 1, [&](size_t begin, size_t end) {
    t.quantize_act(wtype, x + begin * ldx, ldx, end - begin, k, xq + begin * row_bytes);
  });
}

// Columns [begin, end) of product p, given X (f32) and its quantized rows xq (quantized weights).
void RunProduct(const KernelTable& t, const WeightProduct& p, const float* x, size_t ldx, const uint8_t* xq,
                size_t m, size_t k, size_t begin, size_t end) {
  if (p.packed) {
    t.matmul_q_packed(p.wtype, xq, p.w, p.w_row_bytes, p.y, p.ldy, m, k, begin, end);  // begin: a multiple of 48
  } else if (p.quantized) {
    t.matmul_q(p.wtype, xq, p.w, p.w_row_bytes, p.y, p.ldy, m, k, begin, end);
  } else if (p.floats == FloatWeights::kF32) {
    t.matmul(x, ldx, static_cast<const float*>(p.w), p.w_row_bytes / sizeof(float), p.y, p.ldy, m, k, begin, end);
  } else {
    (p.floats == FloatWeights::kF16 ? t.matmul_f16 : t.matmul_bf16)(x, ldx, static_cast<const uint16_t*>(p.w),
                                                                      p.w_row_bytes / sizeof(uint16_t), p.y, p.ldy, m,
                                                                      k, begin, end);
  }
}

}  // namespace

void ParallelMatMul(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, const float* w,
                    size_t ldw, float* y, size_t ldy, size_t m, size_t k, size_t n) {
  const WeightProduct p{false, QuantType::kQ8_0, w, ldw * sizeof(float), y, ldy, n};
  ParallelMatMuls(t, pool, x, ldx, m, k, {&p, 1});
}

void ParallelMatMulQuant(const KernelTable& t, internal::ThreadPool* pool, QuantType wtype, const float* x, size_t ldx,
                         const void* w, size_t w_row_bytes, float* y, size_t ldy, size_t m, size_t k, size_t n,
                         void* xq_scratch) {
  auto* xq = static_cast<uint8_t*>(xq_scratch);
  QuantizeRows(t, pool, wtype, x, ldx, m, k, xq);
  if (pool == nullptr || m * n * k < kMinParallelMacs) {
    t.matmul_q(wtype, xq, w, w_row_bytes, y, ldy, m, k, 0, n);
    return;
  }
  pool->ParallelFor(n, kColumnGrain, [&](size_t begin, size_t end) {
    t.matmul_q(wtype, xq, w, w_row_bytes, y, ldy, m, k, begin, end);
  });
}

void ParallelMatMuls(const KernelTable& t, internal::ThreadPool* pool, const float* x, size_t ldx, size_t m, size_t k,
                     std::span<const WeightProduct> products) {
  std::array<internal::AlignedArray<uint8_t>, kNumActFormats> xq;  // activations, quantized once per format used
  std::vector<size_t> offset(products.size() + 1, 0);
  size_t macs = 0;
  for (size_t i = 0; i < products.size(); ++i) {
    const WeightProduct& p = products[i];
    internal::AlignedArray<uint8_t>& act = xq[ActFormatIndex(p.wtype)];
    if (p.quantized && act.size() == 0) {
      act = internal::AlignedArray<uint8_t>::Uninitialized(QuantActRowBytes(p.wtype, k) * m);
      QuantizeRows(t, pool, p.wtype, x, ldx, m, k, act.data());
    }
    offset[i + 1] = offset[i] + (p.n + kColumnGrain - 1) / kColumnGrain * kColumnGrain;
    macs += m * k * p.n;
  }
  if (m == 1 && pool != nullptr && macs >= kMinParallelMacs) {
    // Pieces of about equal bytes, each within one product, so a thread's share is counted in the
    // bytes it streams (q and k of Q4_K next to a Q6_K v weigh what they read).
    struct Piece {
      size_t product, begin, end;
    };
    std::vector<Piece> pieces;
    for (size_t i = 0; i < products.size(); ++i) {
      const size_t rows = kDecodePieceBytes / std::max<size_t>(1, products[i].w_row_bytes);
      const size_t step = std::max<size_t>(1, (rows + kColumnGrain - 1) / kColumnGrain) * kColumnGrain;
      for (size_t c = 0; c < products[i].n; c += step) pieces.push_back({i, c, std::min(products[i].n, c + step)});
    }
    pool->ParallelForBalanced(pieces.size(), 1, [&](size_t begin, size_t end) {
      for (size_t j = begin; j < end; ++j) {
        const Piece& piece = pieces[j];
        const WeightProduct& p = products[piece.product];
        RunProduct(t, p, x, ldx, xq[ActFormatIndex(p.wtype)].data(), m, k, piece.begin, piece.end);
      }
    });
    return;
  }
  auto run = [&](size_t begin, size_t end) {
    for (size_t i = 0; i < products.size(); ++i) {
      const size_t lo = std::max(begin, offset[i]), hi = std::min(end, offset[i] + products[i].n);
      if (lo < hi) {
        RunProduct(t, products[i], x, ldx, xq[ActFormatIndex(products[i].wtype)].data(), m, k, lo - offset[i],
                   hi - offset[i]);
      }
    }
  };
  if (pool == nullptr || macs < kMinParallelMacs) {
    run(0, offset.back());
    return;
  }
  pool->ParallelFor(offset.back(), kColumnGrain, run);
}

}  // namespace fak::kernels
