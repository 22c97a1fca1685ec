// KV element conversion: rounding f32 keys and values to the cache's dtype when they are written,
// and widening them back. One portable routine for every tier (like RoPE), so a value written by a
// prefill, a decode or a re-rotation after eviction has the same bits whatever the tier; widening is
// exact, so attention may widen with F16C (or a shift, for bf16) instead and get the same floats.
#ifndef FAK_KERNELS_KV_CONVERT_H_
#define FAK_KERNELS_KV_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fak/kernels/kv_dtype.h"

namespace fak::kernels {

// IEEE binary16 / bfloat16 from float, round to nearest even (overflow to infinity, NaN stays NaN).
uint16_t F32ToF16(float x);
uint16_t F32ToBf16(float x);
// Exact widenings (inline: the tier TUs' attention widens with them too and links nothing).
inline float F16ToF32(uint16_t x) {
  uint32_t h = x, sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: renormalise
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ffu) << 13);
  }
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}
inline float Bf16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

// Writes n floats as elements of `dtype` at dst (n * KVDtypeBytes(dtype) bytes).
void RoundToKV(const float* x, void* dst, size_t n, KVDtype dtype);
// Reads n elements of `dtype` at src into floats.
void KVToF32(const void* src, float* y, size_t n, KVDtype dtype);

}  // namespace fak::kernels

#endif  // FAK_KERNELS_KV_CONVERT_H_
