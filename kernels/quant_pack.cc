// Packing quantized weights: see quant_pack.h.
#include "kernels/quant_pack.h"

#include <cstring>

namespace fak::kernels {
namespace {

// Row c's block into packed block o: the scale, the group-interleaved quants, and (Q5_0) the fifth
// bits regrouped by 4-element group.
void PackBlock(const BlockQ8_0& src, size_t c, BlockQ8_0x8* o) {
  o->d[c] = src.d;
  for (size_t j = 0; j < 8; ++j) std::memcpy(o->qs + 32 * j + 4 * c, src.qs + 4 * j, 4);
}
void PackBlock(const BlockQ4_0& src, size_t c, BlockQ4_0x8* o) {
  o->d[c] = src.d;
  for (size_t j = 0; j < 4; ++j) std::memcpy(o->qs + 32 * j + 4 * c, src.qs + 4 * j, 4);
}
void PackBlock(const BlockQ5_0& src, size_t c, BlockQ5_0x8* o) {
  o->d[c] = src.d;
  for (size_t j = 0; j < 4; ++j) std::memcpy(o->qs + 32 * j + 4 * c, src.qs + 4 * j, 4);
  uint32_t qh;
  std::memcpy(&qh, src.qh, 4);
  if (c == 0) std::memset(o->qh, 0, sizeof(o->qh));
  for (size_t j = 0; j < 8; ++j) o->qh[j] |= ((qh >> (4 * j)) & 0xFu) << (4 * c);
}

void PackNibbles(const uint8_t* qs, size_t c, uint8_t* out) {
  for (size_t j = 0; j < 4; ++j) std::memcpy(out + 32 * j + 4 * c, qs + 4 * j, 4);
}
void PackBlock(const BlockQ4_1& src, size_t c, BlockQ4_1x8* o) {
  o->d[c] = src.d;
  o->m[c] = src.m;
  PackNibbles(src.qs, c, o->qs);
}
void PackBlock(const BlockQ5_1& src, size_t c, BlockQ5_1x8* o) {
  o->d[c] = src.d;
  o->m[c] = src.m;
  PackNibbles(src.qs, c, o->qs);
  uint32_t qh;
  std::memcpy(&qh, src.qh, 4);
  if (c == 0) std::memset(o->qh, 0, sizeof(o->qh));
  for (size_t j = 0; j < 8; ++j) o->qh[j] |= ((qh >> (4 * j)) & 0xFu) << (4 * c);
}
void PackBlock(const BlockIQ4_NL& src, size_t c, BlockIQ4_NLx8* o) {
  o->d[c] = src.d;
  PackNibbles(src.qs, c, o->qs);
}
void PackBlock(const BlockMXFP4& src, size_t c, BlockMXFP4x8* o) {
  o->e[c] = src.e;
  PackNibbles(src.qs, c, o->qs);
}

// Q4_K and Q5_K: the scales, mins and nibbles alike; Q5_K's fifth bits by 4-byte group.
template <class Plain, class Packed>
void PackKBlock(const Plain& src, size_t c, Packed* o) {
  o->d[c] = src.d;
  o->dmin[c] = src.dmin;
  // The 6-bit scales and mins, as ggml unpacks them (model-formats.md §3.3).
  for (size_t s = 0; s < 8; ++s) {
    const uint8_t* q = src.scales;
    o->sc[s][c] = s < 4 ? q[s] & 63 : (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    o->m[s][c] = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
  for (size_t ch = 0; ch < 4; ++ch)
    for (size_t j = 0; j < 8; ++j) std::memcpy(o->qs[ch][j] + 4 * c, src.qs + 32 * ch + 4 * j, 4);
  if constexpr (requires { src.qh; })
    for (size_t j = 0; j < 8; ++j) std::memcpy(o->qh[j] + 4 * c, src.qh + 4 * j, 4);
}
void PackBlock(const BlockQ4_K& src, size_t c, BlockQ4_Kx8* o) { PackKBlock(src, c, o); }
void PackBlock(const BlockQ5_K& src, size_t c, BlockQ5_Kx8* o) { PackKBlock(src, c, o); }

void PackBlock(const BlockQ6_K& src, size_t c, BlockQ6_Kx8* o) {
  o->d[c] = src.d;
  for (size_t g = 0; g < 16; ++g) o->sc[g][c] = src.scales[g];
  for (size_t h = 0; h < 2; ++h)
    for (size_t b = 0; b < 8; ++b) {
      for (size_t p = 0; p < 2; ++p) std::memcpy(o->ql[h][p][b] + 4 * c, src.ql + 64 * h + 32 * p + 4 * b, 4);
      std::memcpy(o->qh[h][b] + 4 * c, src.qh + 32 * h + 4 * b, 4);
    }
}

void PackBlock(const BlockIQ4_XS& src, size_t c, BlockIQ4_XSx8* o) {
  o->d[c] = src.d;
  for (size_t s = 0; s < 8; ++s) {  // the 6-bit scale as ggml reads it, less its bias of 32
    const int ls = ((src.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((src.scales_h >> (2 * s)) & 3) << 4);
    o->sc[s][c] = static_cast<int8_t>(ls - 32);
    for (size_t g = 0; g < 4; ++g) std::memcpy(o->qs[s][g] + 4 * c, src.qs + 16 * s + 4 * g, 4);
  }
}

void PackBlock(const BlockQ2_K& src, size_t c, BlockQ2_Kx8* o) {
  o->d[c] = src.d;
  o->dmin[c] = src.dmin;
  for (size_t g = 0; g < 16; ++g) o->scales[g][c] = src.scales[g];
  for (size_t h = 0; h < 2; ++h)
    for (size_t b = 0; b < 8; ++b) std::memcpy(o->qs[h][b] + 4 * c, src.qs + 32 * h + 4 * b, 4);
}

void PackBlock(const BlockQ3_K& src, size_t c, BlockQ3_Kx8* o) {
  o->d[c] = src.d;
  for (size_t g = 0; g < 16; ++g) {  // the 6-bit scale as ggml reads it (Q3KScale), less its bias of 32
    const int sc = ((src.scales[g % 8] >> (4 * (g / 8))) & 0xF) | (((src.scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
    o->sc[g][c] = static_cast<int8_t>(sc - 32);
  }
  for (size_t h = 0; h < 2; ++h)
    for (size_t b = 0; b < 8; ++b) std::memcpy(o->qs[h][b] + 4 * c, src.qs + 32 * h + 4 * b, 4);
  for (size_t b = 0; b < 8; ++b) std::memcpy(o->hmask[b] + 4 * c, src.hmask + 4 * b, 4);
}

template <class Plain, class Packed, size_t kElems = kQK0>
void Pack(const void* w, size_t rows, size_t k, void* out) {
  const size_t n_blocks = k / kElems;
  const auto* in = static_cast<const Plain*>(w);
  auto* packed = static_cast<Packed*>(out);
  for (size_t r = 0; r < rows / 8; ++r)
    for (size_t b = 0; b < n_blocks; ++b)
      for (size_t c = 0; c < 8; ++c) PackBlock(in[(8 * r + c) * n_blocks + b], c, &packed[r * n_blocks + b]);
}

}  // namespace

size_t PackedRowBytes(QuantType t, size_t k) {
  if (t == QuantType::kQ4_K) return k / kQKK * (sizeof(BlockQ4_Kx8) / 8);
  if (t == QuantType::kQ5_K) return k / kQKK * (sizeof(BlockQ5_Kx8) / 8);
  if (t == QuantType::kIQ4_XS) return k / kQKK * (sizeof(BlockIQ4_XSx8) / 8);
  if (t == QuantType::kQ3_K) return k / kQKK * (sizeof(BlockQ3_Kx8) / 8);
  return QuantRowBytes(t, k);
}

void PackRows(QuantType t, const void* w, size_t rows, size_t k, void* out) {
  switch (t) {
    case QuantType::kQ8_0: return Pack<BlockQ8_0, BlockQ8_0x8>(w, rows, k, out);
    case QuantType::kQ4_0: return Pack<BlockQ4_0, BlockQ4_0x8>(w, rows, k, out);
    case QuantType::kQ5_0: return Pack<BlockQ5_0, BlockQ5_0x8>(w, rows, k, out);
    case QuantType::kQ4_K: return Pack<BlockQ4_K, BlockQ4_Kx8, kQKK>(w, rows, k, out);
    case QuantType::kQ4_1: return Pack<BlockQ4_1, BlockQ4_1x8>(w, rows, k, out);
    case QuantType::kQ5_1: return Pack<BlockQ5_1, BlockQ5_1x8>(w, rows, k, out);
    case QuantType::kIQ4_NL: return Pack<BlockIQ4_NL, BlockIQ4_NLx8>(w, rows, k, out);
    case QuantType::kMXFP4: return Pack<BlockMXFP4, BlockMXFP4x8>(w, rows, k, out);
    case QuantType::kIQ4_XS: return Pack<BlockIQ4_XS, BlockIQ4_XSx8, kQKK>(w, rows, k, out);
    case QuantType::kQ2_K: return Pack<BlockQ2_K, BlockQ2_Kx8, kQKK>(w, rows, k, out);
    case QuantType::kQ3_K: return Pack<BlockQ3_K, BlockQ3_Kx8, kQKK>(w, rows, k, out);
    case QuantType::kQ5_K: return Pack<BlockQ5_K, BlockQ5_Kx8, kQKK>(w, rows, k, out);
    case QuantType::kQ6_K: return Pack<BlockQ6_K, BlockQ6_Kx8, kQKK>(w, rows, k, out);
  }
}

}  // namespace fak::kernels
