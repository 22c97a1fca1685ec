// KV element conversion (kv_convert.h): integer bit manipulation only, so no compiler flag or tier
// can change a result.
#include "kernels/kv_convert.h"

namespace fak::kernels {

uint16_t F32ToF16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  const uint32_t sign = (f >> 16) & 0x8000u, abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs >= 0x38800000u) {  // normal half: drop 13 mantissa bits, to nearest even
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal: zero
  // Subnormal half: the value in units of 2^-24, to nearest even.
  const uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24: mant * 2^(exp-150) / 2^-24 = mant >> (126 - exp)
  const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  const uint32_t h = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return static_cast<uint16_t>(sign | h);
}

uint16_t F32ToBf16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1u)) >> 16);
}

void RoundToKV(const float* x, void* dst, size_t n, KVDtype dtype) {
  auto* out = static_cast<uint16_t*>(dst);
  switch (dtype) {
    case KVDtype::kF32: std::memcpy(dst, x, n * sizeof(float)); return;
    case KVDtype::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = F32ToF16(x[i]);
      return;
    case KVDtype::kBF16:
      for (size_t i = 0; i < n; ++i) out[i] = F32ToBf16(x[i]);
      return;
  }
}

void KVToF32(const void* src, float* y, size_t n, KVDtype dtype) {
  const auto* in = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case KVDtype::kF32: std::memcpy(y, src, n * sizeof(float)); return;
    case KVDtype::kF16:
      for (size_t i = 0; i < n; ++i) y[i] = F16ToF32(in[i]);
      return;
    case KVDtype::kBF16:
      for (size_t i = 0; i < n; ++i) y[i] = Bf16ToF32(in[i]);
      return;
  }
}

}  // namespace fak::kernels
