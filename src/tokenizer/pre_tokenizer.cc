// Pre-tokenizer matchers. Each Match* returns how many code points the regex matches at position
// i (0 when none), trying the alternatives in the regex's order as a backtracking engine would.
#include "src/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <string>

#include "src/tokenizer/unicode.h"

namespace fak::internal {
namespace {

using Cps = std::vector<CodePoint>;

bool IsCrLf(const CodePoint& c) { return c.cp == '\r' || c.cp == '\n'; }
uint32_t AsciiLower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

// End of the run of code points of class `cls` starting at i.
size_t RunEnd(const Cps& c, size_t i, CharClass cls) {
  while (i < c.size() && c[i].cls == cls) ++i;
  return i;
}

// 's|'t|'re|'ve|'m|'ll|'d (ASCII apostrophe), optionally case-insensitive.
size_t MatchContraction(const Cps& c, size_t i, bool ignore_case) {
  if (c[i].cp != '\'' || i + 1 >= c.size()) return 0;
  auto fold = [&](size_t k) { return ignore_case ? AsciiLower(c[k].cp) : c[k].cp; };
  uint32_t a = fold(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= c.size()) return 0;
  uint32_t b = fold(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace code point: a run followed by non-space gives up its last char.
size_t MatchTrailingSpace(const Cps& c, size_t i) {
  size_t end = RunEnd(c, i, kClassWhitespace);
  if (end == c.size()) return end - i;
  return end - i >= 2 ? end - i - 1 : 1;
}

size_t MatchGpt2(const Cps& c, size_t i) {
  if (size_t m = MatchContraction(c, i, false)) return m;
  size_t j = i + (c[i].cp == ' ' ? 1 : 0);  // " ?" before a letter, number or symbol run
  if (j < c.size() && c[j].cls != kClassWhitespace) return RunEnd(c, j, c[j].cls) - i;
  return MatchTrailingSpace(c, i);
}

size_t MatchLlama3(const Cps& c, size_t i, size_t max_digits) {
  if (size_t m = MatchContraction(c, i, true)) return m;
  const CodePoint& x = c[i];
  if (x.cls == kClassLetter) return RunEnd(c, i, kClassLetter) - i;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (x.cls != kClassNumber && !IsCrLf(x) && i + 1 < c.size() && c[i + 1].cls == kClassLetter) {
    return RunEnd(c, i + 1, kClassLetter) - i;
  }
  if (x.cls == kClassNumber) return std::min(RunEnd(c, i, kClassNumber) - i, max_digits);
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  size_t j = i + (x.cp == ' ' ? 1 : 0);
  if (j < c.size() && c[j].cls == kClassOther) {
    size_t end = RunEnd(c, j, kClassOther);
    while (end < c.size() && IsCrLf(c[end])) ++end;
    return end - i;
  }
  // \s*[\r\n]+ : up to the last CR/LF of the whitespace run.
  size_t end = RunEnd(c, i, kClassWhitespace);
  for (size_t k = end; k > i; --k) {
    if (IsCrLf(c[k - 1])) return k - i;
  }
  return MatchTrailingSpace(c, i);
}

// [\p{P}\$\+<=>\^~\|]+
size_t MatchPunctRun(const Cps& c, size_t i) {
  auto is = [&](size_t k) {
    uint32_t cp = c[k].cp;
    return c[k].punct || cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' || cp == '^' || cp == '~' ||
           cp == '|';
  };
  size_t k = i;
  while (k < c.size() && is(k)) ++k;
  return k - i;
}

size_t MatchNumberRun(const Cps& c, size_t i) { return RunEnd(c, i, kClassNumber) - i; }
size_t MatchOneNumber(const Cps& c, size_t i) { return c[i].cls == kClassNumber ? 1 : 0; }
size_t MatchThreeAsciiDigits(const Cps& c, size_t i) {
  auto d = [&](size_t k) { return k < c.size() && c[k].cp >= '0' && c[k].cp <= '9'; };
  return d(i) && d(i + 1) && d(i + 2) ? 3 : 0;
}

// Re-splits every piece into the matches of `match` and the gaps between them (both kept).
template <class F>
std::vector<std::string_view> Pass(const std::vector<std::string_view>& pieces, F match) {
  std::vector<std::string_view> out;
  for (std::string_view piece : pieces) {
    Cps c = DecodeUtf8(piece);
    size_t gap_start = 0, i = 0;  // byte offset of the pending gap; code point index
    while (i < c.size()) {
      size_t m = match(c, i);
      if (m == 0) {
        ++i;
        continue;
      }
      size_t begin = c[i].offset, end = (i + m < c.size()) ? c[i + m].offset : piece.size();
      if (begin > gap_start) out.push_back(piece.substr(gap_start, begin - gap_start));
      out.push_back(piece.substr(begin, end - begin));
      gap_start = end;
      i += m;
    }
    if (gap_start < piece.size()) out.push_back(piece.substr(gap_start));
  }
  return out;
}

}  // namespace

Result<PreTokenizer> PreTokenizerFromName(std::string_view name) {
  static constexpr std::pair<std::string_view, PreTokenizer> kNames[] = {
      {"gpt-2", PreTokenizer::kGpt2},        {"mpt", PreTokenizer::kGpt2},          {"olmo", PreTokenizer::kGpt2},
      {"phi-2", PreTokenizer::kGpt2},        {"llama3", PreTokenizer::kLlama3},     {"llama-v3", PreTokenizer::kLlama3},
      {"llama-bpe", PreTokenizer::kLlama3},  {"falcon3", PreTokenizer::kLlama3},    {"dbrx", PreTokenizer::kLlama3},
      {"smaug-bpe", PreTokenizer::kLlama3},  {"qwen2", PreTokenizer::kQwen2},       {"smollm", PreTokenizer::kSmolLm},
      {"starcoder", PreTokenizer::kSmolLm},  {"refact", PreTokenizer::kSmolLm},     {"command-r", PreTokenizer::kSmolLm},
      {"default", PreTokenizer::kDefault},   {"", PreTokenizer::kDefault},
  };
  for (const auto& [n, kind] : kNames) {
    if (n == name) return kind;
  }
  return Unsupported("tokenizer.ggml.pre = '" + std::string(name) + "' is not a supported BPE pre-tokenizer");
}

std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text) {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  switch (kind) {
    case PreTokenizer::kGpt2:
      return Pass(pieces, MatchGpt2);
    case PreTokenizer::kLlama3:
      return Pass(pieces, [](const Cps& c, size_t i) { return MatchLlama3(c, i, 3); });
    case PreTokenizer::kQwen2:
      return Pass(pieces, [](const Cps& c, size_t i) { return MatchLlama3(c, i, 1); });
    case PreTokenizer::kSmolLm:
      return Pass(Pass(pieces, MatchOneNumber), MatchGpt2);
    case PreTokenizer::kDefault:
      return Pass(Pass(Pass(Pass(pieces, MatchPunctRun), MatchGpt2), MatchNumberRun), MatchThreeAsciiDigits);
  }
  return pieces;
}

}  // namespace fak::internal
