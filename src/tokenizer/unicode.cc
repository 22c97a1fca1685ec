// UTF-8 decoding, ICU-backed character classes and the GPT-2 byte map.
#include "src/tokenizer/unicode.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <array>

namespace fak::internal {
namespace {

CharClass Classify(uint32_t cp) {
  if (u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE)) return kClassWhitespace;
  uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return kClassLetter;
  if (mask & U_GC_N_MASK) return kClassNumber;
  return kClassOther;
}

// Decodes one sequence at text[i]; returns false for an invalid or truncated one.
bool DecodeOne(std::string_view text, size_t i, uint32_t& cp, size_t& len) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  uint8_t lead = b(0);
  len = Utf8SeqLen(lead);
  if (len == 1) {
    cp = lead;
    return lead < 0x80;
  }
  if (i + len > text.size()) return false;
  cp = lead & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  return cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);  // no overlongs/surrogates
}

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int, 0x144> from_unicode;  // every mapped code point is below U+0144
  ByteMap() {
    from_unicode.fill(-1);
    uint32_t next = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
      uint32_t cp = printable ? static_cast<uint32_t>(byte) : next++;
      AppendUtf8(cp, to_unicode[byte]);
      from_unicode[cp] = byte;
    }
  }
};

const ByteMap& TheByteMap() {
  static const ByteMap map;
  return map;
}

}  // namespace

size_t Utf8SeqLen(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

std::vector<MergeSymbol> SplitIntoMergeSymbols(std::string_view s) {
  std::vector<MergeSymbol> sym;
  for (size_t p = 0; p < s.size();) {
    const size_t n = std::min(Utf8SeqLen(static_cast<uint8_t>(s[p])), s.size() - p);
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, p, n});
    p += n;
  }
  if (!sym.empty()) sym.back().next = -1;
  return sym;
}

std::vector<CodePoint> DecodeUtf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t len = 1;
    CodePoint c;
    if (DecodeOne(text, i, cp, len)) {
      c = {cp, static_cast<uint32_t>(i), static_cast<uint8_t>(len), Classify(cp),
           (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_P_MASK) != 0};
    } else {
      len = 1;
      c = {0xFFFD, static_cast<uint32_t>(i), 1, kClassOther, false};
    }
    out.push_back(c);
    i += len;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

const std::string& ByteToUnicode(uint8_t byte) { return TheByteMap().to_unicode[byte]; }

int UnicodeToByte(uint32_t cp) {
  const ByteMap& m = TheByteMap();
  return cp < m.from_unicode.size() ? m.from_unicode[cp] : -1;
}

}  // namespace fak::internal
