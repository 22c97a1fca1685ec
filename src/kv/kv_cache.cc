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

}  // namespace

KVCache::KVCache(const KVShape& shape, std::shared_ptr<const internal::RopeBinding> rope)
    : shape_(shape), rope_(std::move(rope)) {}

size_t KVCache::kraw_bytes() const {
  return shape_.n_layers * shape_.n_kv_heads * n_tokens_ * shape_.head_dim * shape_.elem_bytes();
}

size_t KVCache::size_bytes() const { return 3 * kraw_bytes() + n_tokens_ * 2 * sizeof(int32_t); }

void KVCache::Reallocate(size_t new_capacity) {
  const size_t heads = shape_.n_layers * shape_.n_kv_heads, hd = shape_.head_dim * shape_.elem_bytes();  // row bytes
  // Everything is allocated before anything moves, so a failed allocation leaves the cache as it was.
  // Uninitialised: slots are written before they are read, and shared slots never are.
  auto k = std::make_unique_for_overwrite<std::byte[]>(heads * new_capacity * hd);
  auto kraw = std::make_unique_for_overwrite<std::byte[]>(heads * new_capacity * hd);
  auto v = std::make_unique_for_overwrite<std::byte[]>(heads * new_capacity * hd);
  std::vector<int32_t> positions(new_capacity), tokens(new_capacity);
  auto move_tensor = [&](std::unique_ptr<std::byte[]>& from, std::unique_ptr<std::byte[]>& to) {
    for (size_t h = 0; h < heads; ++h) {
      std::copy_n(from.get() + (h * capacity_ + shared_tokens_) * hd, (n_tokens_ - shared_tokens_) * hd,
                  to.get() + (h * new_capacity + shared_tokens_) * hd);
    }
    from = std::move(to);
  };
  move_tensor(k_, k);
  move_tensor(kraw_, kraw);
  move_tensor(v_, v);
  std::copy_n(positions_.begin(), n_tokens_, positions.begin());
  std::copy_n(tokens_.begin(), n_tokens_, tokens.begin());
  positions_ = std::move(positions);
  tokens_ = std::move(tokens);
  capacity_ = new_capacity;
}

Status KVCache::Reserve(size_t n_tokens) {
  if (n_tokens > shape_.max_tokens) {
    return ResourceExhausted("KV cache needs " + std::to_string(n_tokens) + " tokens but the model's context length is " +
                             std::to_string(shape_.max_tokens));
  }
  if (n_tokens <= capacity_) return Status::Ok();
  return internal::ExceptionBoundary("KVCache::Reserve", [&] {
    Reallocate(std::min(shape_.max_tokens, std::max(n_tokens, capacity_ * 2)));
    return Status::Ok();
  });
}

void KVCache::CommitAppended(std::span<const int32_t> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    positions_[n_tokens_ + i] = static_cast<int32_t>(n_tokens_ + i);
    tokens_[n_tokens_ + i] = ids[i];
  }
  n_tokens_ += ids.size();
}

KVCache KVCache::Clone() const {
  KVCache copy(shape_, rope_);
  copy.Reallocate(capacity_);
  copy.shared_ = shared_;  // immutable: the clone reads the same slabs
  copy.shared_tokens_ = shared_tokens_;
  copy.CopyRowsFrom(*this, shared_tokens_, n_tokens_ - shared_tokens_, shared_tokens_);
  copy.positions_ = positions_;
  copy.tokens_ = tokens_;
  copy.n_tokens_ = n_tokens_;
  return copy;
}

KVCache::Rows KVCache::RowsAt(size_t layer, size_t head, size_t from) const {
  const size_t hd = shape_.head_dim * shape_.elem_bytes();  // row bytes
  if (from >= shared_tokens_) {
    const size_t at = HeadOffset(layer, head) + from * hd;
    return {k_.get() + at, kraw_.get() + at, v_.get() + at, capacity_ - from, head_stride()};
  }
  // Shared slabs are few (one per radix-tree edge on the path): a linear scan.
  const KVSlab* slab = shared_.front().get();
  for (const auto& s : shared_) {
    if (s->start_position > from) break;
    slab = s.get();
  }
  const size_t n = slab->size(), at = ((layer * shape_.n_kv_heads + head) * n + (from - slab->start_position)) * hd;
  return {slab->k.data() + at, slab->kraw.data() + at, slab->v.data() + at, slab->start_position + n - from,
          n * shape_.head_dim};
}

void KVCache::CopyRowsFrom(const KVCache& src, size_t src_from, size_t n, size_t at) {
  const size_t hd = shape_.head_dim * shape_.elem_bytes();  // row bytes
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      size_t to = at;
      src.ForEachRun(l, h, src_from, n, [&](const Rows& r) {
        std::memcpy(mutable_k(l, h) + to * hd, r.k, r.n * hd);
        std::memcpy(mutable_kraw(l, h) + to * hd, r.kraw, r.n * hd);
        std::memcpy(mutable_v(l, h) + to * hd, r.v, r.n * hd);
        to += r.n;
      });
    }
  }
}

void KVCache::Unshare(size_t from) {
  if (from >= shared_tokens_) return;
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
  if (n_tokens_ != shared_tokens_ || slab->start_position != n_tokens_ || slab->size() == 0) return AppendSlab(*slab);
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
  KVCache out(shape_, rope_);
  FAK_RETURN_IF_ERROR(out.AppendFrom(*this, 0, n));
  return out;
}

Status KVCache::Truncate(size_t n) {
  if (n > n_tokens_) {
    return InvalidArgument("Truncate(" + std::to_string(n) + ") of a cache holding " + std::to_string(n_tokens_) + " tokens");
  }
  n_tokens_ = n;
  Unshare(n);  // a shared slab now past the end is dropped, one cut by `n` becomes own rows
  return Status::Ok();
}

void KVCache::RerotateFrom(size_t from) {
  const size_t hd = shape_.head_dim, row_bytes = hd * shape_.elem_bytes();
  std::vector<float> key(hd);
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    const kernels::RopeTable& table = *rope_->layer_tables[l];
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      std::byte* k = mutable_k(l, h);
      const std::byte* raw = kraw(l, h);
      for (size_t t = from; t < n_tokens_; ++t) {
        kernels::KVToF32(raw + t * row_bytes, key.data(), hd, shape_.dtype);
        kernels::ApplyRope(key.data(), 1, hd, table, static_cast<size_t>(positions_[t]), rope_->pairing);
        kernels::RoundToKV(key.data(), k + t * row_bytes, hd, shape_.dtype);
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
  Unshare(from);  // survivors move and re-rotate: own rows only
  const size_t hd = shape_.head_dim * shape_.elem_bytes(), tail = n_tokens_ - from - n;  // row bytes
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      // K of every moved survivor is rewritten from Kraw below, so only Kraw and V move.
      for (std::byte* t : {mutable_kraw(l, h), mutable_v(l, h)})
        std::memmove(t + from * hd, t + (from + n) * hd, tail * hd);
    }
  }
  std::memmove(tokens_.data() + from, tokens_.data() + from + n, tail * sizeof(int32_t));
  n_tokens_ -= n;
  for (size_t t = from; t < n_tokens_; ++t) positions_[t] = static_cast<int32_t>(t);
  RerotateFrom(from);
  return Status::Ok();
}

Status KVCache::AppendFrom(const KVCache& src, size_t src_from, size_t n) {
  if (&src == this) return InvalidArgument("AppendFrom: a cache cannot append from itself");
  if (!SameBinding(src)) return InvalidArgument("AppendFrom: source cache belongs to a different model shape or RoPE binding");
  if (src_from > src.n_tokens_ || n > src.n_tokens_ - src_from) {
    return InvalidArgument("AppendFrom: span [" + std::to_string(src_from) + ", +" + std::to_string(n) +
                           ") is outside a source cache of " + std::to_string(src.n_tokens_) + " tokens");
  }
  if (n == 0) return Status::Ok();
  FAK_RETURN_IF_ERROR(Reserve(n_tokens_ + n));
  const size_t at = n_tokens_;
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
  KVSlab slab;
  slab.shape = shape_;
  slab.start_position = n == 0 ? from : static_cast<size_t>(positions_[from]);
  slab.tokens.assign(tokens_.begin() + from, tokens_.begin() + from + n);
  const size_t hd = shape_.head_dim * shape_.elem_bytes(), bytes = shape_.n_layers * shape_.n_kv_heads * n * hd;
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
  const size_t n = slab.size(), hd = shape_.head_dim * shape_.elem_bytes(), at = n_tokens_;  // row bytes
  if (n == 0) return Status::Ok();
  FAK_RETURN_IF_ERROR(Reserve(n_tokens_ + n));
  const std::byte* k_in = slab.k.data();
  const std::byte* kraw_in = slab.kraw.data();
  const std::byte* v_in = slab.v.data();
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    for (size_t h = 0; h < shape_.n_kv_heads; ++h, k_in += n * hd, kraw_in += n * hd, v_in += n * hd) {
      std::copy_n(k_in, n * hd, mutable_k(l, h) + at * hd);
      std::copy_n(kraw_in, n * hd, mutable_kraw(l, h) + at * hd);
      std::copy_n(v_in, n * hd, mutable_v(l, h) + at * hd);
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
  // (f32 digests stay as they were)
  if (shape_.dtype != KVDtype::kF32) d.Update(KVDtypeName(shape_.dtype));
  d.Update(positions_.data(), n_tokens_ * sizeof(int32_t));
  const size_t row_bytes = shape_.head_dim * shape_.elem_bytes();
  for (size_t l = 0; l < shape_.n_layers; ++l) {
    for (size_t h = 0; h < shape_.n_kv_heads; ++h) {
      for (const std::byte* Rows::*tensor : {&Rows::k, &Rows::kraw, &Rows::v})  // the byte stream of one array
        ForEachRun(l, h, 0, n_tokens_, [&](const Rows& r) { d.Update(r.*tensor, r.n * row_bytes); });
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
  return SessionStart{*source.Prefix(n), n};  // n <= size(): Prefix cannot fail
}

}  // namespace fak
