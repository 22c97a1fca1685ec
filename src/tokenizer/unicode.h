// Unicode helpers for the tokenizers: UTF-8 decoding that never fails (invalid bytes become
// one-byte "other" code points, so splits stay lossless), the Unicode categories the BPE
// pre-tokenizer regexes use (\p{L}, \p{N}, \p{P}, \s, via ICU), and GPT-2's byte↔unicode map.
#ifndef FAK_SRC_TOKENIZER_UNICODE_H_
#define FAK_SRC_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fak::internal {

enum CharClass : uint8_t {
  kClassOther = 0,
  kClassLetter = 1,      // \p{L}
  kClassNumber = 2,      // \p{N}
  kClassWhitespace = 3,  // \s (the Unicode White_Space property)
};

struct CodePoint {
  uint32_t cp;        // the code point; 0xFFFD for an invalid byte
  uint32_t offset;    // byte offset in the source text
  uint8_t len;        // bytes in the source text (1..4)
  CharClass cls;
  bool punct;         // \p{P}
};

// Decodes `text` into code points covering every byte exactly once. Invalid or truncated
// sequences become one-byte U+FFFD entries of class kClassOther.
std::vector<CodePoint> DecodeUtf8(std::string_view text);

// Length in bytes of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes).
size_t Utf8SeqLen(uint8_t lead);

void AppendUtf8(uint32_t cp, std::string& out);

// One UTF-8 character of a word being merged, bytes [start, start + n), linked to its neighbours
// (-1 past the ends). SentencePiece and BPE merging both start from this list.
struct MergeSymbol {
  int prev, next;
  size_t start, n;
};
std::vector<MergeSymbol> SplitIntoMergeSymbols(std::string_view s);

// GPT-2's reversible byte → printable code point mapping (model-formats.md §5.3): the UTF-8
// encoding of the code point standing for each byte, and the inverse (-1 for code points that
// stand for no byte).
const std::string& ByteToUnicode(uint8_t byte);
int UnicodeToByte(uint32_t cp);

}  // namespace fak::internal

#endif  // FAK_SRC_TOKENIZER_UNICODE_H_
