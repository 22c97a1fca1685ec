// The forward pass: embeddings → (RMSNorm, GQA attention with RoPE, gated FFN) × L → final norm →
// output head, for the Llama family and Gemma 2 / 3 text (model-formats.md §4.2, §4.3; docs/models.md).
// The architectures differ by data (ModelConfig, which tensors a layer has), not by separate passes:
// - Qwen2: q/k/v biases. Qwen3 and Gemma 3: QK-norm (each head's query and key RMS-normalised) before RoPE.
// - Phi-3: partial rotary and LongRoPE, SmolLM3: layers without RoPE — both only in the RoPE tables
//   (MakeRopeBinding): a table rotates its first 2·half_dim dims, an empty one none.
// - Gemma: embeddings × sqrtf(hidden) (an f32 constant, 25.298222 for h640, as llama.cpp does — HF
//   rounds it to the weight dtype first), post-attention and post-FFN norms, GELU-tanh gating,
//   attention scale query_pre_attn_scalar^-0.5, and sliding-window layers whose queries see keys at
//   positions [max(0, p + 1 - window), p] with their own RoPE table (rope_binding.h). Gemma 2 also
//   soft-caps attention scores (in the attention kernel, per score) and the output logits.
// - Qwen3-MoE: the FFN is a mixture of experts (MixtureOfExperts): each row's experts are a pure
//   function of that row, each expert runs once on all the rows routed to it, and a row's expert
//   outputs are summed in its own rank order — so batching never changes a row's experts or bits.
// - gpt-oss: the same mixture with biases, softmax over the chosen logits and a clamped SwiGLU;
//   q/k/v/o biases; a per-head sink logit in each attention softmax (in the kernel, per row);
//   every other layer sliding, rotated with the global table (YaRN included), as llama.cpp does.
//
// Exactness: every step is row-independent (RMSNorm, RoPE, projections whose outputs are reduced
// in a batch-independent order) except attention, where each query row calls the same kernel over
// keys [0, its position] whether it arrives in a prefill batch or alone in a decode. So prefill
// and token-by-token decode write identical K/V and logits. Long prompts run in chunks of
// kForwardStepRows rows, which bounds scratch memory and, by the same argument, changes nothing; and
// several sequences (Model::PrefillBatch) can share a chunk's rows — every row-independent step
// sees all of them at once, attention runs per sequence over its own cache — which changes nothing
// either. For the same reason the last layer runs attention onwards only for the rows whose logits
// are wanted (every row's keys and values are still computed and stored). Rows that want their
// hidden state (LogitsMode::kHidden, what embeddings pool) get the output norm and skip the head.
#include <algorithm>
#include <initializer_list>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/kv_convert.h"
#include "kernels/parallel.h"
#include "kernels/rope.h"
#include "src/core/aligned_buffer.h"
#include "src/model/model_impl.h"
#include "src/kv/kv_cache_access.h"

namespace fak::internal {
namespace {

struct Pass {
  const ModelImpl& m;
  const ModelConfig& c;
  const kernels::KernelTable& t;  // fetched once per forward pass
  ThreadPool* pool;
};

struct Output {
  const WeightTensor& w;
  float* y;  // [rows][w.rows]
};

// Y[rows][w.rows] = X[rows][w.cols] · Wᵀ for every output, all reading the same X (same cols), in
// one split across the pool. Quantized weights: the activation rows are quantized per row first, so
// each output row still depends on its own input row only.
void MatMulWeights(const Pass& p, const float* x, size_t rows, std::span<const Output> outputs) {
  std::vector<kernels::WeightProduct> products(outputs.size());
  size_t n = 0;
  for (const Output& o : outputs) {
    kernels::WeightProduct& product = products[n++];
    product.quantized = IsQuantized(o.w.dtype);
    if (product.quantized) product.wtype = QuantOf(o.w.dtype);
    if (IsFloat16(o.w.dtype))
      product.floats = o.w.dtype == DType::kF16 ? kernels::FloatWeights::kF16 : kernels::FloatWeights::kBF16;
    product.packed = o.w.packed != nullptr;
    product.w = product.packed ? o.w.packed : o.w.data;
    product.w_row_bytes = product.packed ? o.w.packed_row_bytes : o.w.row_bytes();
    product.y = o.y;
    product.ldy = product.n = o.w.rows;
  }
  const size_t k = outputs.begin()->w.cols;
  kernels::ParallelMatMuls(p.t, p.pool, x, k, rows, k, products);
}
void MatMulWeights(const Pass& p, const float* x, size_t rows, std::initializer_list<Output> outputs) {
  MatMulWeights(p, x, rows, std::span<const Output>(outputs.begin(), outputs.size()));
}

// RMSNorm of `rows` rows of width w.cols (the hidden size, or head_dim for QK-norm); y may alias x.
void RmsNormRows(const Pass& p, const float* x, const WeightTensor& w, float* y, size_t rows) {
  const size_t n = w.cols;
  for (size_t i = 0; i < rows; ++i) p.t.rmsnorm(x + i * n, w.f32(), y + i * n, n, p.c.rms_eps, p.m.weights.norm_one_plus);
}

// Row `token` of the embedding table as f32 (dequantized or widened when the table is stored so), scaled by
// sqrtf(hidden) for Gemma.
void EmbedRow(const Pass& p, int32_t token, float* y) {
  const WeightTensor& e = p.m.weights.token_embedding;
  const size_t h = p.c.hidden_size;
  const auto* row = static_cast<const uint8_t*>(e.data) + static_cast<size_t>(token) * e.row_bytes();
  if (IsQuantized(e.dtype)) {
    p.t.dequantize[static_cast<int>(QuantOf(e.dtype))](row, y, h);
  } else if (IsFloat16(e.dtype)) {
    (e.dtype == DType::kF16 ? p.t.f16_to_f32 : p.t.bf16_to_f32)(reinterpret_cast<const uint16_t*>(row), y, h);
  } else {
    std::memcpy(y, row, h * sizeof(float));
  }
  if (p.c.IsGemma()) p.t.scale(y, std::sqrt(static_cast<float>(h)), y, h);
}

// One sequence's share of a forward step: rows [row0, row0 + rows) of the step's buffers are its
// tokens, at slots [slot0, slot0 + rows) of its cache.
struct Part {
  KVCache* cache;
  size_t slot0, rows, row0;
};

// Writes each part's raw keys, rotated keys and values into its cache slots and rotates the
// queries in place.
void StoreKeysAndRotateQueries(const Pass& p, size_t layer, std::span<const Part> parts, float* q, const float* k,
                               const float* v) {
  const size_t hd = p.c.head_dim, nkv = p.c.n_kv_heads;
  const kernels::RopeTable& table = *p.m.rope->layer_tables[layer];
  const RopePairing pairing = p.m.rope->pairing;
  std::vector<float> key(hd);
  for (const Part& part : parts) {
    KVCache* cache = part.cache;
    const KVDtype dtype = cache->shape().dtype;
    for (size_t i = 0; i < part.rows; ++i) {
      const size_t slot = part.slot0 + i, row = part.row0 + i;  // positions are compact: slot = position
      for (size_t h = 0; h < nkv; ++h) {
        // K is rotated from the stored (rounded) Kraw, as an eviction's re-rotation will do it:
        // K = round(rope(round(kraw))), so a moved key equals one computed fresh (kv_cache.h).
        std::byte* raw = internal::KVCacheAccess::KrawRow(*cache, layer, h, slot);
        kernels::RoundToKV(k + (row * nkv + h) * hd, raw, hd, dtype);
        kernels::KVToF32(raw, key.data(), hd, dtype);
        kernels::ApplyRope(key.data(), 1, hd, table, slot, pairing);
        kernels::RoundToKV(key.data(), internal::KVCacheAccess::KRow(*cache, layer, h, slot), hd, dtype);
        kernels::RoundToKV(v + (row * nkv + h) * hd, internal::KVCacheAccess::VRow(*cache, layer, h, slot), hd, dtype);
      }
      kernels::ApplyRope(q + row * p.c.n_heads * hd, p.c.n_heads, hd, table, slot, pairing);
    }
  }
}

// out[r] = attention of query row r over its part's keys [0, its position], or over the last
// `sliding_window` of them on a sliding layer. Slots are positions (compact), so the window is over
// positions. A windowed cache's sliding layer has no rows before its window: a null run the kernel
// never reads (it only walks the keys each row attends).
void AttentionRows(const Pass& p, size_t layer, std::span<const Part> parts, const float* q, float* out) {
  const size_t nh = p.c.n_heads, hd = p.c.head_dim;
  const size_t window = p.c.IsSlidingLayer(layer) ? p.c.sliding_window : 0;  // 0: all earlier keys
  const float scalar = p.c.IsGemma() && p.c.query_pre_attn_scalar > 0.0f
                           ? p.c.query_pre_attn_scalar
                           : static_cast<float>(hd);
  const float scale = 1.0f / std::sqrt(scalar);
  const WeightTensor& sink_weights = p.m.weights.layers[layer].attn_sinks;
  const float* sinks = sink_weights.empty() ? nullptr : sink_weights.f32();
  // Work items are blocks of up to kAttentionRowsAtOnce rows of one part. Causal rows cost in
  // proportion to their position, so within a part item b is block b/2 from the top for even b and
  // from the bottom for odd b: contiguous thread shares then hold equal work.
  constexpr size_t kRows = kernels::kAttentionRowsAtOnce;
  struct Item {
    size_t part;
    size_t i, rows;  // rows [i, i + rows) of the part
  };
  std::vector<Item> items;
  std::vector<std::vector<kernels::KeyRun>> runs(parts.size());  // each part's keys, shared slabs first
  size_t max_keys = 0, max_rows = 1;
  for (size_t j = 0; j < parts.size(); ++j) {
    const Part& part = parts[j];
    const size_t blocks = (part.rows + kRows - 1) / kRows;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t i = (b % 2 == 0 ? b / 2 : blocks - 1 - b / 2) * kRows;
      items.push_back({j, i, std::min(kRows, part.rows - i)});
      max_rows = std::max(max_rows, items.back().rows);
    }
    const size_t n_keys = part.slot0 + part.rows;
    max_keys = std::max(max_keys, n_keys);
    for (size_t t = 0; t < n_keys;) {  // the step's rows are stored already, not yet committed
      const KVCache::Rows rows = part.cache->RowsAt(layer, 0, t);
      const size_t n = std::min(rows.n, n_keys - t);
      runs[j].push_back({rows.k, rows.v, rows.head_stride, n});
      t += n;
    }
  }
  p.pool->ParallelFor(items.size() * nh, 1, [&](size_t begin, size_t end) {
    AlignedBuffer scratch = AlignedBuffer::Uninitialized(kernels::AttentionScratchFloats(max_rows, max_keys, hd));
    for (size_t u = begin; u < end;) {
      const Item& item = items[u / nh];
      const Part& part = parts[item.part];
      const size_t row = part.row0 + item.i;
      const size_t head_begin = u % nh, head_end = std::min(nh, head_begin + (end - u));
      kernels::AttentionArgs a{};
      a.q = q + row * nh * hd;
      a.runs = runs[item.part].data();
      a.n_runs = runs[item.part].size();
      a.out = out + row * nh * hd;
      a.scratch = scratch.data();
      a.n_heads = nh;
      a.n_kv_heads = p.c.n_kv_heads;
      a.head_dim = hd;
      a.key_begin = 0;
      a.key_end = part.slot0 + item.i + 1;
      a.scale = scale;
      a.head_begin = head_begin;
      a.head_end = head_end;
      a.rows = item.rows;
      a.window = window;
      a.softcap = p.c.attn_logit_softcap;
      a.sinks = sinks;
      a.kv_dtype = part.cache->shape().dtype;
      p.t.attention(a);
      u += head_end - head_begin;
    }
  });
}

// A step's activations. Every element is written before it is read (embeddings, norms, products,
// attention), so none is zero-filled first.
struct Buffers {
  AlignedBuffer x, xn, q, k, v, attn, gate, up;
  Buffers(const ModelConfig& c, size_t rows)
      : x(Uninit(rows * c.hidden_size)), xn(Uninit(rows * c.hidden_size)), q(Uninit(rows * c.n_heads * c.head_dim)),
        k(Uninit(rows * c.n_kv_heads * c.head_dim)), v(Uninit(rows * c.n_kv_heads * c.head_dim)),
        attn(Uninit(rows * c.n_heads * c.head_dim)), gate(Uninit(rows * c.ffn_size)), up(Uninit(rows * c.ffn_size)) {}
  static AlignedBuffer Uninit(size_t n) { return AlignedBuffer::Uninitialized(n); }
};

// y[i] += bias for each of `rows` rows of bias.cols values (a no-op when empty).
void AddBiasRows(const Pass& p, float* y, const WeightTensor& bias, size_t rows) {
  if (bias.empty()) return;
  for (size_t i = 0; i < rows; ++i) p.t.add(y + i * bias.cols, bias.f32(), y + i * bias.cols, bias.cols);
}

// Row r's experts and their weights from its router logits `pr` (overwritten): the n_experts_used
// largest (ties: the lower index), most probable first. Qwen3-MoE: softmax over all experts, the
// chosen probabilities divided by their sum (clamped below at 2^-14, as llama.cpp). gpt-oss: the
// chosen logits' own softmax (llama.cpp's SOFTMAX_WEIGHT gating, HF's softmax after topk).
void RouteRow(const Pass& p, float* pr, std::span<uint32_t> order, uint32_t* chosen, float* weight) {
  const size_t n_exp = p.c.n_experts, k_used = p.c.n_experts_used;
  const bool softmax_after_topk = p.c.architecture == Architecture::kGptOss;
  if (!softmax_after_topk) p.t.softmax(pr, n_exp);
  for (uint32_t e = 0; e < n_exp; ++e) order[e] = e;
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_used), order.end(),
                    [&](uint32_t a, uint32_t b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); });
  for (size_t k = 0; k < k_used; ++k) {
    chosen[k] = order[k];
    weight[k] = pr[order[k]];
  }
  if (softmax_after_topk) {
    p.t.softmax(weight, k_used);
    return;
  }
  float sum = 0.0f;
  for (size_t k = 0; k < k_used; ++k) sum += weight[k];
  sum = std::max(sum, 6.103515625e-5f);
  for (size_t k = 0; k < k_used; ++k) weight[k] = weight[k] / sum;
}

// gpt-oss's SwiGLU constants: llama.cpp (LLM_FFN_SWIGLU_OAI_MOE) and HF (GptOssExperts) hard-code
// alpha; the limit is HF's swiglu_limit, which llama.cpp also hard-codes (GGUF has no key for either).
constexpr float kGptOssSwigluAlpha = 1.702f;
constexpr float kGptOssSwigluLimit = 7.0f;

// out[r] = Σ_k weight[r][k] · expert_{e[r][k]}(xn[r]), the experts and weights from RouteRow,
// summed most probable first. Each expert runs one gated FFN on the rows routed to it, gathered:
// its matmuls reduce every row independently of how many rows it has, so a row's result does not
// depend on its batch. `out` may alias `xn`.
void MixtureOfExperts(const Pass& p, const LayerWeights& w, const float* xn, size_t rows, float* out) {
  const size_t n_exp = p.c.n_experts, k_used = p.c.n_experts_used, h = p.c.hidden_size, f = p.c.expert_ffn_size;
  AlignedBuffer probs(rows * n_exp);
  MatMulWeights(p, xn, rows, {{w.router, probs.data()}});
  AddBiasRows(p, probs.data(), w.router_bias, rows);
  std::vector<float> weight(rows * k_used);
  // Per expert: the slots r * k_used + k routed to it. Only the batched branch reads them (also on
  // zero rows: a last layer whose rows want no logits); decode runs the one row's experts directly.
  const bool one_row = rows == 1;
  std::vector<std::vector<size_t>> routed(one_row ? 0 : n_exp);
  std::vector<uint32_t> order(n_exp), chosen(k_used);
  for (size_t r = 0; r < rows; ++r) {
    RouteRow(p, probs.data() + r * n_exp, order, chosen.data(), weight.data() + r * k_used);
    if (!one_row)
      for (size_t k = 0; k < k_used; ++k) routed[chosen[k]].push_back(r * k_used + k);
  }
  AlignedBuffer y(rows * k_used * h);  // slot r * k_used + k: expert k's output for row r
  // The rest of expert `ex` on n rows after its gate and up products: bias, gated activation
  // (into gate), down projection into `down`.
  auto finish = [&](const Pass& q, const ExpertWeights& ex, float* gate, float* up, size_t n, float* down) {
    AddBiasRows(q, gate, ex.gate_bias, n);
    AddBiasRows(q, up, ex.up_bias, n);
    if (q.c.architecture == Architecture::kGptOss) {
      q.t.clamped_swiglu_mul(gate, up, gate, n * f, kGptOssSwigluAlpha, kGptOssSwigluLimit);
    } else {
      q.t.silu_mul(gate, up, gate, n * f);
    }
    MatMulWeights(q, gate, n, {{ex.down, down}});
    AddBiasRows(q, down, ex.down_bias, n);
  };
  if (one_row) {
    // Decode: every chosen expert reads the one row, so their gate and up products go to the pool
    // in one hand-off, and then each expert's rest runs on one thread, the experts side by side:
    // two hand-offs per layer instead of two per expert. A product's bits do not depend on its
    // group or thread count (ParallelMatMuls), so the row's result is the batched path's.
    AlignedBuffer gates(k_used * f), ups(k_used * f);
    std::vector<Output> outputs;
    for (size_t k = 0; k < k_used; ++k) {
      outputs.push_back({w.experts[chosen[k]].gate, gates.data() + k * f});
      outputs.push_back({w.experts[chosen[k]].up, ups.data() + k * f});
    }
    MatMulWeights(p, xn, 1, outputs);
    const Pass one_thread{p.m, p.c, p.t, nullptr};
    auto run = [&](size_t begin, size_t end) {
      for (size_t k = begin; k < end; ++k)
        finish(one_thread, w.experts[chosen[k]], gates.data() + k * f, ups.data() + k * f, 1, y.data() + k * h);
    };
    if (p.pool != nullptr) p.pool->ParallelFor(k_used, 1, run); else run(0, k_used);
  } else {
    for (size_t e = 0; e < n_exp; ++e) {
      const std::vector<size_t>& slots = routed[e];
      if (slots.empty()) continue;  // experts no row chose do not run
      const size_t n = slots.size();
      AlignedBuffer x(n * h), gate(n * f), up(n * f), down(n * h);
      for (size_t i = 0; i < n; ++i) std::memcpy(x.data() + i * h, xn + slots[i] / k_used * h, h * sizeof(float));
      MatMulWeights(p, x.data(), n, {{w.experts[e].gate, gate.data()}, {w.experts[e].up, up.data()}});
      finish(p, w.experts[e], gate.data(), up.data(), n, down.data());
      for (size_t i = 0; i < n; ++i) std::memcpy(y.data() + slots[i] * h, down.data() + i * h, h * sizeof(float));
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    float* o = out + r * h;
    const float* yr = y.data() + r * k_used * h;
    const float* wr = weight.data() + r * k_used;
    for (size_t i = 0; i < h; ++i) o[i] = wr[0] * yr[i];
    for (size_t k = 1; k < k_used; ++k)
      for (size_t i = 0; i < h; ++i) o[i] += wr[k] * yr[k * h + i];
  }
}

// Below this many rows the gated activation stays on the calling thread (a hand-off costs a few
// microseconds, a row of a 2048-wide FFN about one).
constexpr size_t kMinParallelActivationRows = 8;

// gate = act(gate) · up over `rows` rows of the FFN width (GELU-tanh for Gemma, SiLU otherwise),
// split by rows across the pool: the activation is element-wise, and a row's width is whole
// registers or padded the same way wherever it starts, so the split changes no bit. On the calling
// thread alone it was 3% of Gemma's prefill CPU with the other thread waiting.
void GatedActivationRows(const Pass& p, float* gate, const float* up, size_t rows) {
  const size_t f = p.c.ffn_size;
  auto run = [&](size_t begin, size_t end) {
    float* g = gate + begin * f;
    const float* u = up + begin * f;
    if (p.c.IsGemma()) {
      p.t.gelu_tanh_mul(g, u, g, (end - begin) * f);
    } else {
      p.t.silu_mul(g, u, g, (end - begin) * f);
    }
  };
  if (p.pool == nullptr || rows < kMinParallelActivationRows) return run(0, rows);
  p.pool->ParallelFor(rows, 1, run);
}

// A layer in two halves. The first computes every row's query, key and value and stores the keys
// and values; the second (attention onwards) may run on fewer rows: on the last layer only the rows
// whose logits are wanted need it, since no later layer reads the others. Optional steps run when
// the layer has their tensors (biases: Qwen2; QK-norm: Qwen3, Gemma 3; post-norms: Gemma).
void LayerKeys(const Pass& p, size_t l, std::span<const Part> parts, size_t rows, Buffers& b) {
  const LayerWeights& w = p.m.weights.layers[l];
  RmsNormRows(p, b.x.data(), w.attn_norm, b.xn.data(), rows);
  MatMulWeights(p, b.xn.data(), rows, {{w.wq, b.q.data()}, {w.wk, b.k.data()}, {w.wv, b.v.data()}});
  AddBiasRows(p, b.q.data(), w.bq, rows);
  AddBiasRows(p, b.k.data(), w.bk, rows);  // before RoPE: the stored raw keys include it
  AddBiasRows(p, b.v.data(), w.bv, rows);
  if (!w.q_norm.empty()) {  // per head, in place, before RoPE (so Kraw holds the normalised key)
    RmsNormRows(p, b.q.data(), w.q_norm, b.q.data(), rows * p.c.n_heads);
    RmsNormRows(p, b.k.data(), w.k_norm, b.k.data(), rows * p.c.n_kv_heads);
  }
  StoreKeysAndRotateQueries(p, l, parts, b.q.data(), b.k.data(), b.v.data());
}

void LayerRest(const Pass& p, size_t l, std::span<const Part> parts, size_t rows, Buffers& b) {
  const LayerWeights& w = p.m.weights.layers[l];
  const size_t h = p.c.hidden_size;
  AttentionRows(p, l, parts, b.q.data(), b.attn.data());
  MatMulWeights(p, b.attn.data(), rows, {{w.wo, b.xn.data()}});
  AddBiasRows(p, b.xn.data(), w.bo, rows);
  if (!w.post_attn_norm.empty()) RmsNormRows(p, b.xn.data(), w.post_attn_norm, b.xn.data(), rows);
  p.t.add(b.x.data(), b.xn.data(), b.x.data(), rows * h);

  RmsNormRows(p, b.x.data(), w.ffn_norm, b.xn.data(), rows);
  if (p.c.n_experts > 0) {
    MixtureOfExperts(p, w, b.xn.data(), rows, b.xn.data());
  } else {
    MatMulWeights(p, b.xn.data(), rows, {{w.w_gate, b.gate.data()}, {w.w_up, b.up.data()}});
    GatedActivationRows(p, b.gate.data(), b.up.data(), rows);
    MatMulWeights(p, b.gate.data(), rows, {{w.w_down, b.xn.data()}});
  }
  if (!w.post_ffn_norm.empty()) RmsNormRows(p, b.xn.data(), w.post_ffn_norm, b.xn.data(), rows);
  p.t.add(b.x.data(), b.xn.data(), b.x.data(), rows * h);
}

// The last layer for the rows in `keep` only (after LayerKeys ran on all of the step's rows): those
// rows' residual stream and rotated queries move into `kept`, each as a one-row part at its own
// slot, and the rest of the layer runs there. Every step is row-independent and attention gets the
// same keys per row, so the kept rows end with the bits the whole step would give them.
void LastLayerRestOf(const Pass& p, std::span<const Part> parts, const Buffers& b, std::span<const size_t> keep,
                     std::span<const size_t> keep_part, Buffers& kept) {
  const size_t h = p.c.hidden_size, qw = p.c.n_heads * p.c.head_dim;
  std::vector<Part> one_row(keep.size());
  for (size_t r = 0; r < keep.size(); ++r) {
    const Part& part = parts[keep_part[r]];
    one_row[r] = {part.cache, part.slot0 + (keep[r] - part.row0), 1, r};
    std::memcpy(kept.x.data() + r * h, b.x.data() + keep[r] * h, h * sizeof(float));
    std::memcpy(kept.q.data() + r * qw, b.q.data() + keep[r] * qw, qw * sizeof(float));
  }
  LayerRest(p, p.c.n_layers - 1, one_row, keep.size(), kept);
}

// Rows [begin, end) of w as a tensor of their own; begin is a multiple of 8, so a packed tensor's
// groups of eight rows stay whole.
WeightTensor RowsOf(const WeightTensor& w, size_t begin, size_t end) {
  WeightTensor part = w;
  part.rows = end - begin;
  part.data = static_cast<const uint8_t*>(w.data) + begin * w.row_bytes();
  if (w.packed != nullptr) part.packed = static_cast<const uint8_t*>(w.packed) + begin * w.packed_row_bytes;
  return part;
}

// Columns of the head computed at once when its rows go to separate vectors: 16 rows of them are
// 512 KiB, which stay in L2 on the way to their vectors.
constexpr size_t kHeadChunkColumns = 8192;

// Logits of the given rows of x, row r's vocab values written at dst[r]; Gemma 2 soft-caps each one
// (cap · tanh(z / cap), as llama.cpp: z scaled by 1/cap, tanh, scaled by cap), per element. Rows
// bound for one contiguous block get one product straight into it. Rows bound for separate vectors
// (a batched step's sessions) go through a small buffer a column chunk at a time, not a
// [rows][vocab] block of their own: at Gemma's 262144 columns and 16 rows that block was 16 MB
// allocated, page-faulted, copied and freed every step. A matmul output does not depend on the
// column range it was computed in, so the chunks change no bit.
void OutputHead(const Pass& p, const float* x, size_t n_rows, std::span<float* const> dst) {
  const size_t h = p.c.hidden_size, vocab = p.c.vocab_size;
  AlignedBuffer xn = AlignedBuffer::Uninitialized(n_rows * h);
  RmsNormRows(p, x, p.m.weights.output_norm, xn.data(), n_rows);
  const WeightTensor& head = p.m.weights.output;
  bool contiguous = true;
  for (size_t r = 1; r < n_rows; ++r) contiguous = contiguous && dst[r] == dst[0] + r * vocab;
  if (contiguous) {
    MatMulWeights(p, xn.data(), n_rows, {{head, dst[0]}});
  } else {
    const size_t chunk = std::min(vocab, kHeadChunkColumns);
    AlignedBuffer y = AlignedBuffer::Uninitialized(n_rows * chunk);
    for (size_t n0 = 0; n0 < vocab; n0 += chunk) {
      const size_t n1 = std::min(vocab, n0 + chunk);
      const WeightTensor columns = RowsOf(head, n0, n1);
      MatMulWeights(p, xn.data(), n_rows, {{columns, y.data()}});
      for (size_t r = 0; r < n_rows; ++r) std::memcpy(dst[r] + n0, y.data() + r * (n1 - n0), (n1 - n0) * sizeof(float));
    }
  }
  if (const float cap = p.c.final_logit_softcap; cap > 0.0f) {
    const float inv_cap = 1.0f / cap;
    for (float* row : dst)
      for (float* z = row; z != row + vocab; ++z) *z = cap * std::tanh(*z * inv_cap);
  }
}

}  // namespace

void Forward(const ModelImpl& m, std::span<const BatchItem> items, std::span<std::vector<float>> out) {
  const Pass p{m, m.config, kernels::Active(), m.pool.get()};
  const size_t h = p.c.hidden_size;
  std::vector<size_t> done(items.size(), 0);
  for (std::vector<float>& o : out) o.clear();
  for (size_t next = 0; next < items.size();) {
    // A step: up to kForwardStepRows rows, taken from the items in order (a long one spans steps).
    std::vector<Part> parts;
    std::vector<size_t> part_item;
    size_t rows = 0;
    for (size_t i = next; i < items.size() && rows < kForwardStepRows; ++i) {
      const size_t take = std::min(items[i].tokens.size() - done[i], kForwardStepRows - rows);
      KVCacheAccess::MakeRoom(*items[i].cache, take);  // a windowed cache drops rows no query reads any more
      parts.push_back({items[i].cache, items[i].cache->size(), take, rows});
      part_item.push_back(i);
      rows += take;
    }
    Buffers b(p.c, rows);
    for (size_t j = 0; j < parts.size(); ++j) {
      const std::span<const int32_t> tokens = items[part_item[j]].tokens.subspan(done[part_item[j]], parts[j].rows);
      for (size_t r = 0; r < tokens.size(); ++r) EmbedRow(p, tokens[r], b.x.data() + (parts[j].row0 + r) * h);
    }
    // The rows that finish the last layer: those that want logits, gathered so the output head
    // reads its weights once for all of them, then those that want their hidden state (kHidden).
    std::vector<size_t> out_rows, out_part;
    for (const bool hidden : {false, true}) {
      for (size_t j = 0; j < parts.size(); ++j) {
        const size_t i = part_item[j];
        if ((items[i].mode == LogitsMode::kHidden) != hidden) continue;
        const bool finished = done[i] + parts[j].rows == items[i].tokens.size();
        for (size_t r = 0; r < parts[j].rows; ++r) {
          const bool last = finished && r + 1 == parts[j].rows;
          if (hidden || items[i].mode == LogitsMode::kAll || (items[i].mode == LogitsMode::kLast && last)) {
            out_rows.push_back(parts[j].row0 + r);
            out_part.push_back(j);
          }
        }
      }
    }
    const size_t n_head = static_cast<size_t>(
        std::find_if(out_part.begin(), out_part.end(), [&](size_t j) { return items[part_item[j]].mode == LogitsMode::kHidden; }) -
        out_part.begin());
    for (size_t l = 0; l + 1 < p.c.n_layers; ++l) {
      LayerKeys(p, l, parts, rows, b);
      LayerRest(p, l, parts, rows, b);
    }
    LayerKeys(p, p.c.n_layers - 1, parts, rows, b);
    // Unless every row finishes in step order, the finishing rows run the rest of the last layer
    // apart (exact: LastLayerRestOf), logits rows first.
    const bool in_order = out_rows.size() == rows && (n_head == 0 || n_head == rows);
    Buffers kept(p.c, in_order ? 0 : out_rows.size());
    if (in_order) {
      LayerRest(p, p.c.n_layers - 1, parts, rows, b);
    } else {
      LastLayerRestOf(p, parts, b, out_rows, out_part, kept);
    }
    for (size_t j = 0; j < parts.size(); ++j) {
      const size_t i = part_item[j];
      internal::KVCacheAccess::CommitAppended(*parts[j].cache, items[i].tokens.subspan(done[i], parts[j].rows));
      done[i] += parts[j].rows;
      if (done[i] == items[i].tokens.size()) next = i + 1;
    }
    if (out_rows.empty()) continue;
    const float* out_x = in_order ? b.x.data() : kept.x.data();  // finishing row r's residual at out_x + r * h
    // Each finishing row's place: its item's output, grown once by that item's rows in this step
    // (an item's rows are consecutive; a lone Prefill's are all of them, one contiguous block).
    std::vector<float*> dst(out_rows.size());
    for (size_t r = 0; r < out_rows.size();) {
      size_t n = 1;
      while (r + n < out_rows.size() && out_part[r + n] == out_part[r]) ++n;
      const size_t width = r < n_head ? p.c.vocab_size : h;
      std::vector<float>& item_out = out[part_item[out_part[r]]];
      const size_t old = item_out.size();
      item_out.resize(old + n * width);
      for (size_t i = 0; i < n; ++i) dst[r + i] = item_out.data() + old + i * width;
      r += n;
    }
    if (n_head > 0) OutputHead(p, out_x, n_head, std::span(dst).first(n_head));
    for (size_t r = n_head; r < out_rows.size(); ++r)
      p.t.rmsnorm(out_x + r * h, p.m.weights.output_norm.f32(), dst[r], h, p.c.rms_eps, p.m.weights.norm_one_plus);
  }
}

std::shared_ptr<const RopeBinding> MakeRopeBinding(const ModelConfig& c) {
  auto binding = std::make_shared<RopeBinding>();
  binding->pairing = c.rope_pairing;
  // A table of RotaryDims()/2 frequencies rotates the first RotaryDims() dims of each head (Phi-3's
  // partial rotary, with its exponents over the rotary dims as llama.cpp's n_rot); the rest pass.
  // Frequency scaling (linear, llama3 and LongRoPE factors, the attention factor) applies to every
  // Llama-family layer and to Gemma 3's global layers; Gemma 3's sliding layers rotate unscaled with
  // their own base (llama.cpp's rope_freq_scale_train_swa = 1, HF's rotary_emb_local).
  const ModelConfig::RopeYarn& yarn = c.rope_yarn;
  const size_t dims = c.RotaryDims();
  auto global = std::make_shared<const kernels::RopeTable>(
      yarn.factor != 0.0
          ? kernels::RopeYarnInverseFrequencies(dims, c.rope_base, yarn.factor, static_cast<double>(yarn.original_context),
                                                yarn.beta_fast, yarn.beta_slow)
          : kernels::RopeInverseFrequencies(dims, c.rope_base, c.rope_scale_factor, c.rope_freq_factors),
      c.context_length, yarn.factor != 0.0 ? yarn.magnitude : c.rope_attn_factor);
  binding->layer_tables.assign(c.n_layers, global);
  std::shared_ptr<const kernels::RopeTable> local, none;  // Gemma sliding layers; SmolLM3's NoPE layers
  for (size_t l = 0; l < c.n_layers; ++l) {
    if (!c.IsRopeLayer(l)) {
      if (!none) none = std::make_shared<const kernels::RopeTable>(std::vector<double>{}, c.context_length);
      binding->layer_tables[l] = none;  // no frequencies: ApplyRope leaves the head as it is
      continue;
    }
    // (gpt-oss's sliding layers rotate with the global table, scaling and all, as llama.cpp's do.)
    if (!c.IsGemma() || !c.IsSlidingLayer(l) || (c.rope_local_base == c.rope_base && !c.HasRopeScaling())) continue;
    if (!local) {
      local = std::make_shared<const kernels::RopeTable>(kernels::RopeInverseFrequencies(dims, c.rope_local_base),
                                                         c.context_length);
    }
    binding->layer_tables[l] = local;
  }
  return binding;
}

}  // namespace fak::internal
