// AlignedBuffer: an owning, 64-byte aligned float array (one cache line, one AVX-512 register).
//
// Tensors (weights, KV, activations) live in these so SIMD loads never straddle a line at a row
// start. Zero-initialised, except through Uninitialized(): scratch written before it is read, where
// zeroing a large buffer on every call cost a measurable share of prefill. Move-only; copying is
// explicit through Clone() to make the cost visible.
#ifndef FAK_SRC_CORE_ALIGNED_BUFFER_H_
#define FAK_SRC_CORE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace fak::internal {

template <class T>
class AlignedArray {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedArray() = default;
  explicit AlignedArray(size_t n) : AlignedArray(n, NoFill{}) {
    if (n > 0) std::memset(static_cast<void*>(data_), 0, Bytes(n));
  }
  // n elements whose values are indeterminate until written (T must be trivially copyable).
  static AlignedArray Uninitialized(size_t n) { return AlignedArray(n, NoFill{}); }
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
    AlignedArray copy = Uninitialized(size_);
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
  struct NoFill {};
  static size_t Bytes(size_t n) { return (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment; }
  AlignedArray(size_t n, NoFill) : size_(n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n == 0) return;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, Bytes(n)));
    if (data_ == nullptr) throw std::bad_alloc();
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

using AlignedBuffer = AlignedArray<float>;

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_ALIGNED_BUFFER_H_
