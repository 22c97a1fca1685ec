// KVCache: storage growth, shared prefixes, span surgery (prefix, truncate, evict, append) and the
// digest.
#include "fak/kv/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kv_convert.h"
#include "src/core/exception_boundary.h"
#include "src/kv/rope_binding.h"

namespace fak {
namespace {

Status CheckSlab(const KVSlab& slab, const KVShape& shape, const std::string& op) {
  if (!(slab.shape == shape)) {
    return InvalidArgument(op + ": the slab has another model's KV shape or KV dtype (" +
                           std::string(KVDtypeName(slab.shape.dtype)) + ", the cache holds " +
                           std::string(KVDtypeName(shape.dtype)) + ")");
  }
  if (slab.k.size() != shape.n_layers * shape.n_kv_heads * slab.size() * shape.head_dim * shape.elem_bytes() ||
      slab.kraw.size() != slab.k.size() || slab.v.size() != slab.k.size()) {
    return InvalidArgument(op + ": slab tensors do not match its token count");
  }
  return Status::Ok();
}

Status Gone(const std::string& op, size_t layer, size_t held, size_t size, size_t need) {
  return FailedPrecondition(op + ": sliding-window layer " + std::to_string(layer) + " keeps only tokens [" +
                            std::to_string(held) + ", " + std::to_string(size) + ") and this needs token " +
                            std::to_string(need) + ": rebuild the cache from its text");
}

}  // namespace

KVCache::KVCache(const KVShape& shape, std::shared_ptr<const internal::RopeBinding> rope, std::vector<size_t> windows,
                 size_t step_rows)
    : shape_(shape), rope_(std::move(rope)), windows_(std::move(windows)), step_rows_(step_rows), layers_(shape.n_layers) {}

size_t KVCache::held_from() const {
  size_t from = 0;
  for (size_t l = 0; l < shape_.n_layers; ++l) from = std::max(from, held_from(l));
  return from;
}

size_t KVCache::cut_floor() const {
  size_t floor = 0;
  for (size_t l = 0; l < shape_.n_layers; ++l)
    if (held_from(l) > 0) floor = std::max(floor, held_from(l) + window(l) - 1);
  return std::min(floor, n_tokens_);
}

size_t KVCache::kraw_bytes() const {
  size_t rows = 0;  // summed over layers
  for (size_t l = 0; l < shape_.n_layers; ++l) rows += n_tokens_ - std::min(n_tokens_, held_from(l));
  return rows * shape_.n_kv_heads * RowBytes();
}

size_t KVCache::size_bytes() const { return 3 * kraw_bytes() + n_tokens_ * 2 * sizeof(int32_t); }

size_t KVCache::allocated_bytes() const {
  size_t rows = 0;
  for (const LayerRows& layer : layers_) rows += layer.capacity;
  return 3 * rows * shape_.n_kv_heads * RowBytes() + capacity_ * 2 * sizeof(int32_t);
}

size_t KVCache::WindowedCapacity(size_t layer, size_t n) const {
  // The next window plus one forward step's rows: the most a step ever needs after a slide.
  const size_t most = std::min(shape_.max_tokens, window(layer) - 1 + step_rows_);
  const LayerRows& rows = layers_[layer];
  const size_t need = std::min(n - std::min(n, rows.base), most);
  if (need <= rows.capacity) return rows.capacity;
  return std::max(need, std::min(most, 2 * rows.capacity));
}

Status KVCache::Reserve(size_t n_tokens) {
  if (n_tokens > shape_.max_tokens) {
    return ResourceExhausted("KV cache needs " + std::to_string(n_tokens) + " tokens but the model's context length is " +
                             std::to_string(shape_.max_tokens));
  }
  return internal::ExceptionBoundary("KVCache::Reserve", [&] {
    // Growing copies every row held, so it leaves room: twice the old capacity, and at least an
    // eighth more than asked. Without the eighth a prompt prefilled at once filled its cache
    // exactly (a prefill reserves its whole prompt), and the first decoded token copied all of it:
    // after 16k tokens of the Llama 3.2 1B shape, 0.8 GB into fresh pages, which cost half of a
    // 64-token decode at that depth.
    const size_t full =
        n_tokens <= capacity_ ? capacity_ : std::min(shape_.max_tokens, std::max(n_tokens + n_tokens / 8, capacity_ * 2));
    const size_t heads = shape_.n_kv_heads, row = RowBytes();
    // Everything is allocated before anything moves, so a failed allocation leaves the cache as it
    // was. Uninitialised: slots are written before they are read, and shared slots never are.
    std::vector<LayerRows> grown(shape_.n_layers);
    for (size_t l = 0; l < shape_.n_layers; ++l) {
      const size_t capacity = window(l) == 0 ? full : WindowedCapacity(l, n_tokens);
      if (capacity <= layers_[l].capacity) continue;
      for (auto* t : {&grown[l].k, &grown[l].kraw, &grown[l].v}) *t = std::make_unique_for_overwrite<std::byte[]>(heads * capacity * row);
      grown[l].capacity = capacity;
      grown[l].base = layers_[l].base;
    }
    std::vector<int32_t> positions, tokens;
    if (full > capacity_) {
      positions.resize(full);
      tokens.resize(full);
    }
    for (size_t l = 0; l < shape_.n_layers; ++l) {
      LayerRows& from = layers_[l];
      LayerRows& to = grown[l];
      if (to.capacity == 0) continue;
      const size_t first = std::max(shared_tokens_, from.base);  // own rows held: [first, n_tokens_)
      if (first < n_tokens_) {
        for (auto [src, dst] : {std::pair{&from.k, &to.k}, std::pair{&from.kraw, &to.kraw}, std::pair{&from.v, &to.v}}) {
          for (size_t h = 0; h < heads; ++h)
            std::copy_n(src->get() + (h * from.capacity + first - from.base) * row, (n_tokens_ - first) * row,
                        dst->get() + (h * to.capacity + first - to.base) * row);
        }
      }
      from = std::move(to);
    }
    if (full > capacity_) {
      std::copy_n(positions_.begin(), n_tokens_, positions.begin());
      std::copy_n(tokens_.begin(), n_tokens_, tokens.begin());
      positions_ = std::move(positions);
      tokens_ = std::move(tokens);
      capacity_ = full;
    }
    return Status::Ok();
  });
}

void KVCache::Slide(size_t layer, size_t base) {
  LayerRows& rows = layers_[layer];
  if (base <= rows.base) return;
  const size_t row = RowBytes(), kept = n_tokens_ > base ? n_tokens_ - base : 0;
  for (std::byte* t : {rows.k.get(), rows.kraw.get(), rows.v.get()}) {
    for (size_t h = 0; h < shape_.n_kv_heads && kept > 0; ++h) {
      std::byte* head = t + h * rows.capacity * row;
      std::memmove(head, head + (base - rows.base) * row, kept * row);
    }
  }
  rows.base = base;
}

void KVCache::MakeRoom(size_t rows) {
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    if (window(l) != 0 && n_tokens_ + rows - layers_[l].base > layers_[l].capacity) Slide(l, WindowStart(l, n_tokens_));
  }
}

void KVCache::CommitAppended(std::span<const int32_t> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    positions_[n_tokens_ + i] = static_cast<int32_t>(n_tokens_ + i);
    tokens_[n_tokens_ + i] = ids[i];
  }
  n_tokens_ += ids.size();
}

KVCache KVCache::Clone() const {
  KVCache copy(shape_, rope_, windows_, step_rows_);
  copy.capacity_ = capacity_;
  const size_t heads = shape_.n_kv_heads, row = RowBytes();
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    LayerRows& to = copy.layers_[l];
    to.base = layers_[l].base;
    to.capacity = layers_[l].capacity;
    for (auto* t : {&to.k, &to.kraw, &to.v}) *t = std::make_unique_for_overwrite<std::byte[]>(heads * to.capacity * row);
  }
  copy.positions_ = positions_;
  copy.tokens_ = tokens_;
  copy.shared_ = shared_;  // immutable: the clone reads the same slabs
  copy.shared_tokens_ = shared_tokens_;
  copy.CopyRowsFrom(*this, shared_tokens_, n_tokens_ - shared_tokens_, shared_tokens_);
  copy.n_tokens_ = n_tokens_;
  return copy;
}

KVCache::Rows KVCache::RowsAt(size_t layer, size_t head, size_t from) const {
  const LayerRows& own = layers_[layer];
  if (from >= shared_tokens_) {
    if (from < own.base) return {nullptr, nullptr, nullptr, own.base - from, head_stride(layer)};  // dropped
    const size_t at = HeadOffset(layer, head) + RowOffset(layer, from);
    return {own.k.get() + at, own.kraw.get() + at, own.v.get() + at, own.capacity - (from - own.base), head_stride(layer)};
  }
  // Shared slabs are few (one per radix-tree edge on the path): a linear scan.
  const KVSlab* slab = shared_.front().get();
  for (const auto& s : shared_) {
    if (s->start_position > from) break;
    slab = s.get();
  }
  const size_t n = slab->size(), at = ((layer * shape_.n_kv_heads + head) * n + (from - slab->start_position)) * RowBytes();
  return {slab->k.data() + at, slab->kraw.data() + at, slab->v.data() + at, slab->start_position + n - from,
          n * shape_.head_dim};
}

void KVCache::CopyRowsFrom(const KVCache& src, size_t src_from, size_t n, size_t at) {
  const size_t row = RowBytes();
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const size_t skip = std::min(n, std::max(at, layers_[l].base) - at);  // rows this layer does not keep
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      size_t to = RowOffset(l, at + skip);
      src.ForEachRun(l, h, src_from + skip, n - skip, [&](const Rows& r) {
        std::memcpy(mutable_k(l, h) + to, r.k, r.n * row);
        std::memcpy(mutable_kraw(l, h) + to, r.kraw, r.n * row);
        std::memcpy(mutable_v(l, h) + to, r.v, r.n * row);
        to += r.n * row;
      });
    }
  }
}

void KVCache::Unshare(size_t from) {
  if (from >= shared_tokens_) return;  // always so in a windowed cache: it shares nothing
  size_t first = from;  // back to the start of the slab holding `from`
  for (const auto& s : shared_)
    if (s->start_position <= from) first = s->start_position;
  const size_t last = std::min(shared_tokens_, n_tokens_);
  if (first < last) CopyRowsFrom(*this, first, last - first, first);  // reads shared, writes own slots
  while (!shared_.empty() && shared_.back()->start_position >= first) shared_.pop_back();
  shared_tokens_ = first;
}

Status KVCache::AppendShared(std::shared_ptr<const KVSlab> slab) {
  if (slab == nullptr) return InvalidArgument("AppendShared: null slab");
  if (windowed() || n_tokens_ != shared_tokens_ || slab->start_position != n_tokens_ || slab->size() == 0) {
    return AppendSlab(*slab);
  }
  FAK_RETURN_IF_ERROR(CheckSlab(*slab, shape_, "AppendShared"));
  FAK_RETURN_IF_ERROR(Reserve(n_tokens_ + slab->size()));
  CommitAppended(slab->tokens);
  shared_tokens_ = n_tokens_;
  shared_.push_back(std::move(slab));
  return Status::Ok();
}

Result<KVCache> KVCache::Prefix(size_t n) const {
  if (n > n_tokens_) {
    return InvalidArgument("Prefix(" + std::to_string(n) + ") of a cache holding " + std::to_string(n_tokens_) + " tokens");
  }
  KVCache out(shape_, rope_, windows_, step_rows_);
  FAK_RETURN_IF_ERROR(out.AppendFrom(*this, 0, n));
  return out;
}

Status KVCache::Truncate(size_t n) {
  if (n > n_tokens_) {
    return InvalidArgument("Truncate(" + std::to_string(n) + ") of a cache holding " + std::to_string(n_tokens_) + " tokens");
  }
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    if (n < n_tokens_ && held_from(l) > WindowStart(l, n)) {
      return Gone("Truncate(" + std::to_string(n) + ")", l, held_from(l), n_tokens_, WindowStart(l, n));
    }
  }
  n_tokens_ = n;
  Unshare(n);  // a shared slab now past the end is dropped, one cut by `n` becomes own rows
  return Status::Ok();
}

void KVCache::RerotateFrom(size_t from) {
  const size_t hd = shape_.head_dim;
  std::vector<float> key(hd);
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const kernels::RopeTable& table = *rope_->layer_tables[l];
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      std::byte* k = mutable_k(l, h);
      const std::byte* raw = kraw(l, h);
      for (size_t t = std::max(from, held_from(l)); t < n_tokens_; ++t) {
        kernels::KVToF32(raw + RowOffset(l, t), key.data(), hd, shape_.dtype);
        kernels::ApplyRope(key.data(), 1, hd, table, static_cast<size_t>(positions_[t]), rope_->pairing);
        kernels::RoundToKV(key.data(), k + RowOffset(l, t), hd, shape_.dtype);
      }
    }
  }
}

Status KVCache::Evict(size_t from, size_t n) {
  if (from > n_tokens_ || n > n_tokens_ - from) {
    return InvalidArgument("Evict(from=" + std::to_string(from) + ", n=" + std::to_string(n) +
                           ") is outside a cache holding " + std::to_string(n_tokens_) + " tokens");
  }
  if (n == 0) return Status::Ok();
  // A windowed layer's held rows [base, size()) lose the span; what is left must still cover the
  // window of the shorter cache.
  std::vector<size_t> bases(shape_.n_layers);
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const size_t base = held_from(l);
    bases[l] = base <= from ? base : (base >= from + n ? base - n : from);
    if (bases[l] > WindowStart(l, n_tokens_ - n)) {
      return Gone("Evict(from=" + std::to_string(from) + ", n=" + std::to_string(n) + ")", l, base, n_tokens_,
                  WindowStart(l, n_tokens_ - n) + (WindowStart(l, n_tokens_ - n) >= from ? n : 0));
    }
  }
  Unshare(from);  // survivors move and re-rotate: own rows only
  const size_t row = RowBytes(), end = n_tokens_;
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const size_t base = held_from(l), tail_first = std::max(from + n, base), tail = end - tail_first;
    const size_t src = tail_first - base, dst = tail_first - n - bases[l];  // slots
    for (size_t h = 0; h < shape_.n_kv_heads && src != dst; ++h) {
      // K of every moved survivor is rewritten from Kraw below, so only Kraw and V move.
      for (std::byte* t : {mutable_kraw(l, h), mutable_v(l, h)}) std::memmove(t + dst * row, t + src * row, tail * row);
    }
    layers_[l].base = window(l) == 0 ? 0 : bases[l];
  }
  const size_t tail = end - from - n;
  std::memmove(tokens_.data() + from, tokens_.data() + from + n, tail * sizeof(int32_t));
  n_tokens_ -= n;
  for (size_t t = from; t < n_tokens_; ++t) positions_[t] = static_cast<int32_t>(t);
  RerotateFrom(from);
  return Status::Ok();
}

Status KVCache::CheckSourceHolds(const KVCache& src, size_t src_from, size_t n, const char* op) const {
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    // The span's rows this layer keeps once appended: from max(at, its next window) on.
    const size_t at = n_tokens_, keep = std::max(at, WindowStart(l, at + n)) - at;
    if (keep < n && src.held_from(l) > src_from + keep) return Gone(op, l, src.held_from(l), src.size(), src_from + keep);
  }
  return Status::Ok();
}

void KVCache::SlideForAppend(size_t n) {
  for (size_t l = 0; l < shape_.n_layers; ++l)
    if (window(l) != 0) Slide(l, WindowStart(l, n_tokens_ + n));
}

Status KVCache::AppendFrom(const KVCache& src, size_t src_from, size_t n) {
  if (&src == this) return InvalidArgument("AppendFrom: a cache cannot append from itself");
  if (!SameBinding(src)) return InvalidArgument("AppendFrom: source cache belongs to a different model shape or RoPE binding");
  if (src_from > src.n_tokens_ || n > src.n_tokens_ - src_from) {
    return InvalidArgument("AppendFrom: span [" + std::to_string(src_from) + ", +" + std::to_string(n) +
                           ") is outside a source cache of " + std::to_string(src.n_tokens_) + " tokens");
  }
  if (n == 0) return Status::Ok();
  FAK_RETURN_IF_ERROR(CheckSourceHolds(src, src_from, n, "AppendFrom"));
  FAK_RETURN_IF_ERROR(Reserve(n_tokens_ + n));
  const size_t at = n_tokens_;
  SlideForAppend(n);
  CopyRowsFrom(src, src_from, n, at);
  CommitAppended(src.tokens().subspan(src_from, n));
  // Keys already at their new position (the common case: a prefix) need no work.
  if (src_from != at) RerotateFrom(at);
  return Status::Ok();
}

KVSlab KVSlab::Slice(size_t from, size_t n) const {
  KVSlab out;
  out.shape = shape;
  out.start_position = start_position + from;
  out.tokens.assign(tokens.begin() + from, tokens.begin() + from + n);
  const size_t hd = shape.head_dim * shape.elem_bytes(), heads = shape.n_layers * shape.n_kv_heads, len = tokens.size();
  for (auto [src, dst] : {std::pair{&k, &out.k}, std::pair{&kraw, &out.kraw}, std::pair{&v, &out.v}}) {
    dst->resize(heads * n * hd);
    for (size_t h = 0; h < heads; ++h)
      std::copy_n(src->data() + (h * len + from) * hd, n * hd, dst->data() + h * n * hd);
  }
  return out;
}

Result<KVSlab> KVCache::CopySpan(size_t from, size_t n) const {
  if (from > n_tokens_ || n > n_tokens_ - from) {
    return InvalidArgument("CopySpan: span [" + std::to_string(from) + ", +" + std::to_string(n) +
                           ") is outside a cache of " + std::to_string(n_tokens_) + " tokens");
  }
  for (size_t l = 0; l < shape_.n_layers && n > 0; ++l)
    if (held_from(l) > from) return Gone("CopySpan", l, held_from(l), n_tokens_, from);
  KVSlab slab;
  slab.shape = shape_;
  slab.start_position = n == 0 ? from : static_cast<size_t>(positions_[from]);
  slab.tokens.assign(tokens_.begin() + from, tokens_.begin() + from + n);
  const size_t hd = RowBytes(), bytes = shape_.n_layers * shape_.n_kv_heads * n * hd;
  slab.k.reserve(bytes);  // filled by appending: each byte is written once
  slab.kraw.reserve(bytes);
  slab.v.reserve(bytes);
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      ForEachRun(l, h, from, n, [&](const Rows& r) {
        slab.k.insert(slab.k.end(), r.k, r.k + r.n * hd);
        slab.kraw.insert(slab.kraw.end(), r.kraw, r.kraw + r.n * hd);
        slab.v.insert(slab.v.end(), r.v, r.v + r.n * hd);
      });
    }
  }
  return slab;
}

Status KVCache::AppendSlab(const KVSlab& slab) {
  FAK_RETURN_IF_ERROR(CheckSlab(slab, shape_, "AppendSlab"));
  const size_t n = slab.size(), hd = RowBytes(), at = n_tokens_;  // row bytes
  if (n == 0) return Status::Ok();
  FAK_RETURN_IF_ERROR(Reserve(n_tokens_ + n));
  SlideForAppend(n);
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const size_t skip = std::min(n, std::max(at, layers_[l].base) - at);  // rows this layer does not keep
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      const size_t in = ((l * shape_.n_kv_heads + h) * n + skip) * hd, count = (n - skip) * hd;
      std::copy_n(slab.k.data() + in, count, mutable_k(l, h) + RowOffset(l, at + skip));
      std::copy_n(slab.kraw.data() + in, count, mutable_kraw(l, h) + RowOffset(l, at + skip));
      std::copy_n(slab.v.data() + in, count, mutable_v(l, h) + RowOffset(l, at + skip));
    }
  }
  CommitAppended(slab.tokens);
  if (slab.start_position != at) RerotateFrom(at);
  return Status::Ok();
}

Digest KVCache::ComputeDigest() const {
  Digester d;
  d.Update("fak.kv_cache.v1");
  d.UpdatePod(static_cast<uint64_t>(shape_.n_layers)).UpdatePod(static_cast<uint64_t>(shape_.n_kv_heads));
  d.UpdatePod(static_cast<uint64_t>(shape_.head_dim)).UpdatePod(static_cast<uint64_t>(n_tokens_));
  // (f32 digests stay as they were, and so do those of caches that keep every row)
  if (shape_.dtype != KVDtype::kF32) d.Update(KVDtypeName(shape_.dtype));
  if (windowed()) {
    d.Update("windowed");
    for (size_t w : windows_) d.UpdatePod(static_cast<uint64_t>(w));
  }
  d.Update(positions_.data(), n_tokens_ * sizeof(int32_t));
  const size_t row_bytes = RowBytes();
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const size_t first = WindowStart(l, n_tokens_);  // 0 unless windowed: every token
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      for (const std::byte* Rows::*tensor : {&Rows::k, &Rows::kraw, &Rows::v})  // the byte stream of one array
        ForEachRun(l, h, first, n_tokens_ - first, [&](const Rows& r) { d.Update(r.*tensor, r.n * row_bytes); });
    }
  }
  return d.Finish();
}

SessionStart SessionFromPrefix(const KVCache& source, std::span<const int32_t> tokens) {
  const std::span<const int32_t> held = source.tokens();
  size_t n = 0;
  // Keep at least the last token to prefill, so the caller always gets next-token logits.
  const size_t limit = tokens.empty() ? 0 : tokens.size() - 1;
  while (n < held.size() && n < limit && held[n] == tokens[n]) ++n;
  if (n < source.cut_floor()) n = 0;  // a windowed source no longer holds what that prefix needs
  return SessionStart{*source.Prefix(n), n};  // n <= size(), n >= cut_floor() or 0: Prefix cannot fail
}

}  // namespace fak
