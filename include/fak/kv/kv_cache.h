// KVCache: the addressable key/value cache of one sequence — a build artifact of its token ids.
//
// Per layer and KV head it holds K (keys after RoPE, what attention reads), Kraw (the same keys
// before RoPE) and V, as elements of the shape's KVDtype (f32, f16 or bf16), token-contiguous so a span is cut out with one move per head; plus the
// absolute position and token id of every slot. Keeping Kraw costs one extra K-sized tensor
// (≈1.5x a plain K/V cache, see size_bytes()) and buys exact eviction: a survivor that moves is
// re-rotated once from Kraw by the same pinned RoPE routine that made it, so it is bit-identical to
// a key computed fresh at its new position (architecture §3). In a 16-bit regime Kraw is rounded
// when written and K is always rotated from the rounded Kraw (K = round(rope(round(kraw)))), so the
// same holds there.
//
// Shared prefix (zero-copy sessions): a cache may start with slabs it reads in place instead of
// owning copies (a radix-tree lookup builds sessions this way). Slabs are immutable, so sharing
// changes no bit; a mutation that would move or drop shared tokens (Evict, Truncate) copies just
// those into the cache first.
//
// Writing K/Kraw/V and splicing in keys computed elsewhere are not public: only the model's forward
// pass writes a cache, and only the session layer splices slabs, after the manifest gate passed them
// (through internal::KVCacheAccess, src/kv/kv_cache_access.h).
//
// Sliding-window memory (opt-in, Model::NewCache(KVMemory::kSlidingWindow)): a layer whose queries
// only read the last `window` positions (Gemma 3's sliding layers) keeps only those rows — at
// least the last window - 1 tokens, the keys the next query reads, plus slack up to one forward
// step — so its memory stops growing with the context. Held rows are bit-identical to a full
// cache's, and so is every logit. What a windowed layer dropped is gone: a cut back past it
// (Truncate, Prefix, Evict, CopySpan of an old span) answers FailedPrecondition and the caller
// rebuilds from text (SegmentLedger does). A windowed cache owns all its rows (no shared slabs).
//
// Thread-safety: none; one session owns a cache (shared slabs are only read). Copying is explicit
// (Clone) to show its cost. Every failed mutation leaves the cache as it was.
#ifndef FAK_KV_KV_CACHE_H_
#define FAK_KV_KV_CACHE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"
#include "fak/kernels/kv_dtype.h"
#include "fak/kv/kv_bytes.h"

namespace fak {

namespace internal {
struct RopeBinding;   // the model's RoPE tables and pairing, shared by its caches
class KVCacheAccess;  // the model's and the session layer's way into a cache's storage
}

struct KVShape {
  size_t n_layers = 0;
  size_t n_kv_heads = 0;
  size_t head_dim = 0;
  size_t max_tokens = 0;  // the model's context length
  KVDtype dtype = KVDtype::kF32;  // the element type of K, Kraw and V
  size_t elem_bytes() const { return KVDtypeBytes(dtype); }
  friend bool operator==(const KVShape&, const KVShape&) = default;
};

// The K, Kraw and V of a run of tokens at fixed positions, detached from any cache: what a radix
// tree node stores for its edge. Plain data; copying copies the bytes.
struct FAK_EXPORT KVSlab {
  KVShape shape;
  size_t start_position = 0;  // position of the first token
  std::vector<int32_t> tokens;
  // Each [n_layers][n_kv_heads][tokens.size()][head_dim] elements of shape.dtype, as bytes.
  KVBytes k, kraw, v;

  size_t size() const { return tokens.size(); }
  size_t size_bytes() const { return k.size() + kraw.size() + v.size() + tokens.size() * sizeof(int32_t); }
  // The sub-run [from, from + n) (caller keeps it in range), positions preserved.
  KVSlab Slice(size_t from, size_t n) const;
};

class FAK_EXPORT KVCache {
 public:
  // Made by Model::NewCache(); a cache is bound to its model's shape and RoPE convention.
  KVCache(KVCache&&) noexcept = default;
  KVCache& operator=(KVCache&&) noexcept = default;
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  const KVShape& shape() const { return shape_; }
  size_t size() const { return n_tokens_; }  // tokens in the context
  bool empty() const { return n_tokens_ == 0; }
  // Bytes of K, Kraw, V, positions and token ids for the rows held (Kraw is reported separately).
  size_t size_bytes() const;
  size_t kraw_bytes() const;
  // Bytes allocated for them (capacity: growth headroom, a windowed layer's slack).
  size_t allocated_bytes() const;
  // Sliding-window memory: true when some layer keeps only a window of rows.
  bool windowed() const { return !windows_.empty(); }
  // The positions a layer's queries read back (its rows kept in a windowed cache); 0 = all.
  size_t window(size_t layer) const { return windows_.empty() ? 0 : windows_[layer]; }
  // Layer `layer` holds the rows of tokens [held_from(layer), size()); held_from() is the first
  // token every layer holds. Both 0 unless the cache is windowed.
  size_t held_from(size_t layer) const { return window(layer) == 0 ? 0 : layers_[layer].base; }
  size_t held_from() const;
  // The shortest length Truncate can cut back to (0 unless a windowed layer dropped rows): below
  // it some layer's window would reach rows it no longer holds.
  size_t cut_floor() const;
  std::span<const int32_t> positions() const { return {positions_.data(), n_tokens_}; }
  std::span<const int32_t> tokens() const { return {tokens_.data(), n_tokens_}; }

  // Deep copy (cost: the whole cache).
  KVCache Clone() const;
  // Copy of the first n tokens; InvalidArgument when n > size().
  Result<KVCache> Prefix(size_t n) const;
  // Drops tokens [n, size()); InvalidArgument when n > size().
  Status Truncate(size_t n);
  // Removes tokens [from, from + n) from every layer, renumbers positions of the survivors and
  // re-rotates each moved key from Kraw at its new position. Exact iff no survivor attended to the
  // span (it was the tail, or the model has one layer); see SegmentLedger for repair.
  Status Evict(size_t from, size_t n);
  // Copies tokens [from, from + n) out as a slab; InvalidArgument when out of range,
  // FailedPrecondition when a windowed layer no longer holds them.
  Result<KVSlab> CopySpan(size_t from, size_t n) const;
  // Grows storage to hold `n_tokens` without reallocating (growing leaves room for more: at
  // least an eighth, up to max_tokens); ResourceExhausted past max_tokens.
  Status Reserve(size_t n_tokens);
  // True when both caches were made by the same model (shape and RoPE binding).
  bool SameBinding(const KVCache& other) const { return shape_ == other.shape_ && rope_ == other.rope_; }
  // Tokens [0, shared_tokens()) are read in place from shared_slabs(), in order.
  size_t shared_tokens() const { return shared_tokens_; }
  std::span<const std::shared_ptr<const KVSlab>> shared_slabs() const { return shared_; }
  // sha256 over the shape (dtype included), positions and the K, Kraw and V of every token; in a
  // windowed cache, of each windowed layer's window (the rows its next query reads) — so the digest
  // does not depend on slack, and prefill and decode give the same one.
  Digest ComputeDigest() const;

  // The K, Kraw and V rows of one layer and KV head from token `from` on, and how many tokens after
  // it are stored contiguously (a shared slab's end, or the cache's capacity): rows [n][head_dim]
  // of elements of shape().dtype. Before held_from(layer) the rows are null (n: up to it).
  struct Rows {
    const std::byte *k, *kraw, *v;
    size_t n;
    size_t head_stride;  // elements from these rows to the same token's rows of the next KV head
  };
  Rows RowsAt(size_t layer, size_t head, size_t from) const;
  // Calls f(const Rows&) for the contiguous runs covering tokens [from, from + n), in order; each
  // run's n is clipped to the range. The caller keeps the range within size().
  template <class F>
  void ForEachRun(size_t layer, size_t head, size_t from, size_t n, F&& f) const {
    for (const size_t end = from + n; from < end;) {
      Rows r = RowsAt(layer, head, from);
      r.n = std::min(r.n, end - from);
      f(r);
      from += r.n;
    }
  }

  // The cache's own rows of one layer and KV head: [capacity][head_dim] elements of shape().dtype,
  // token-contiguous from token held_from(layer); only tokens from max(shared_tokens(),
  // held_from(layer)) on are there (read the rest through RowsAt / ForEachRun).
  const std::byte* k(size_t layer, size_t head) const { return layers_[layer].k.get() + HeadOffset(layer, head); }
  const std::byte* kraw(size_t layer, size_t head) const { return layers_[layer].kraw.get() + HeadOffset(layer, head); }
  const std::byte* v(size_t layer, size_t head) const { return layers_[layer].v.get() + HeadOffset(layer, head); }
  // Elements between consecutive KV heads of one layer in the own rows (its capacity times head_dim).
  size_t head_stride(size_t layer) const { return layers_[layer].capacity * shape_.head_dim; }

 private:
  friend class internal::KVCacheAccess;
  KVCache(const KVShape& shape, std::shared_ptr<const internal::RopeBinding> rope, std::vector<size_t> windows = {},
          size_t step_rows = 0);

  // One layer's own rows: token t (held) is slot t - base of each head's [capacity][head_dim].
  struct LayerRows {
    std::unique_ptr<std::byte[]> k, kraw, v;
    size_t capacity = 0;
    size_t base = 0;  // 0 unless the layer is windowed
  };

  // ---- storage and splices, reached through internal::KVCacheAccess ----
  std::byte* mutable_k(size_t layer, size_t head) { return layers_[layer].k.get() + HeadOffset(layer, head); }
  std::byte* mutable_kraw(size_t layer, size_t head) { return layers_[layer].kraw.get() + HeadOffset(layer, head); }
  std::byte* mutable_v(size_t layer, size_t head) { return layers_[layer].v.get() + HeadOffset(layer, head); }
  // Bytes from a head's own rows to token t's row (t held by the layer).
  size_t RowOffset(size_t layer, size_t t) const { return (t - layers_[layer].base) * RowBytes(); }
  size_t RowBytes() const { return shape_.head_dim * shape_.elem_bytes(); }
  // Before a forward step writes `rows` tokens: a windowed layer short of slots drops the rows no
  // later query reads (Reserve made room for the rest).
  void MakeRoom(size_t rows);
  // Marks slots [size(), size() + ids.size()) as filled with these tokens at consecutive positions.
  void CommitAppended(std::span<const int32_t> ids);
  // Appends the tokens [src_from, src_from + n) of `src` (same shape and RoPE binding), re-rotating
  // them to their new positions.
  Status AppendFrom(const KVCache& src, size_t src_from, size_t n);
  // Appends a slab of the same shape at the end, re-rotating its keys from Kraw if the slab was
  // made at other positions. The rotation is exact; whether the slab's keys belong in this context
  // is the gate's question, not this function's.
  Status AppendSlab(const KVSlab& slab);
  // Appends a slab by reference: the cache reads its tokens in place from then on, keeping the slab
  // alive. Only while everything held so far is shared and the slab sits at the next position
  // (a radix-tree path); otherwise the slab is copied, as AppendSlab. Same contents either way.
  Status AppendShared(std::shared_ptr<const KVSlab> slab);

  // Bytes from the start of a layer's tensor to the own rows of one KV head.
  size_t HeadOffset(size_t layer, size_t head) const { return head * head_stride(layer) * shape_.elem_bytes(); }
  // The first token of a windowed layer's window once the cache holds n tokens: the oldest key the
  // next query reads. 0 for a layer that keeps everything.
  size_t WindowStart(size_t layer, size_t n) const {
    const size_t w = window(layer);
    return w == 0 || n < w ? 0 : n + 1 - w;
  }
  // A windowed layer's own capacity for a cache growing to n tokens (Reserve).
  size_t WindowedCapacity(size_t layer, size_t n) const;
  // A windowed layer moves its rows from token `base` on to slot 0, dropping those before it.
  void Slide(size_t layer, size_t base);
  // Re-rotates K of tokens [from, size()) from Kraw at their positions (own rows): widen the stored
  // Kraw, rotate, round — the forward pass's steps, so a moved key equals one computed fresh.
  void RerotateFrom(size_t from);
  // Copies tokens [src_from, src_from + n) of `src` (shared or own rows) into own slots from `at`,
  // each layer from max(at, held_from(layer)) on.
  void CopyRowsFrom(const KVCache& src, size_t src_from, size_t n, size_t at);
  // Makes tokens [from, size()) own rows, copying the shared slabs that hold any of them.
  void Unshare(size_t from);
  // Appending n tokens at the end: a windowed layer slides to the window the cache will have, and
  // the source must hold what each layer keeps from its span (FailedPrecondition otherwise).
  Status CheckSourceHolds(const KVCache& src, size_t src_from, size_t n, const char* op) const;
  void SlideForAppend(size_t n);

  KVShape shape_;
  std::shared_ptr<const internal::RopeBinding> rope_;
  std::vector<size_t> windows_;  // per layer when windowed (0: keeps every row); empty: a full cache
  size_t step_rows_ = 0;         // most rows one forward step writes (a windowed layer's slack)
  size_t n_tokens_ = 0;
  size_t capacity_ = 0;          // of positions_/tokens_ and of every layer that keeps all rows
  std::vector<std::shared_ptr<const KVSlab>> shared_;  // tokens [0, shared_tokens_), in order
  size_t shared_tokens_ = 0;
  // Own rows per layer, [n_kv_heads][capacity][head_dim] elements of shape_.dtype; slots below
  // shared_tokens_ stay unwritten (left uninitialised, so their pages are never touched).
  std::vector<LayerRows> layers_;
  std::vector<int32_t> positions_;  // [capacity]
  std::vector<int32_t> tokens_;     // [capacity]
};

// A session cache starting from the longest common prefix of `source`'s tokens and `tokens`: only
// tokens[reused_tokens:] remain to be prefilled (at least one token always remains, so the caller
// gets next-token logits). Cost: a copy of the reused prefix. From a windowed source a prefix
// shorter than its cut_floor() is not reused (reused_tokens = 0).
struct SessionStart {
  KVCache cache;
  size_t reused_tokens = 0;
};
FAK_EXPORT SessionStart SessionFromPrefix(const KVCache& source, std::span<const int32_t> tokens);

}  // namespace fak

#endif  // FAK_KV_KV_CACHE_H_
