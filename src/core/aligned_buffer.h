// AlignedBuffer: an owning, 64-byte aligned float array (one cache line, one AVX-512 register).
//
// Tensors (weights, KV, activations) live in these so SIMD loads never straddle a line at a row
// start. Zero-initialised. Move-only; copying is explicit through Clone() to make the cost visible.
#ifndef FAK_SRC_CORE_ALIGNED_BUFFER_H_
#define FAK_SRC_CORE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace fak::internal {

template <class T>
class AlignedArray {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedArray() = default;
  explicit AlignedArray(size_t n) : size_(n) {
    if (n == 0) return;
    size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  ~AlignedArray() { std::free(data_); }
  AlignedArray(AlignedArray&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedArray& operator=(AlignedArray&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedArray(const AlignedArray&) = delete;
  AlignedArray& operator=(const AlignedArray&) = delete;

  AlignedArray Clone() const {
    AlignedArray copy(size_);
    if (size_ > 0) std::memcpy(static_cast<void*>(copy.data_), data_, size_ * sizeof(T));
    return copy;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t size_bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

using AlignedBuffer = AlignedArray<float>;

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_ALIGNED_BUFFER_H_
