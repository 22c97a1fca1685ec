// BPE pre-tokenizers: split raw text into the words BPE merges within, as the regex lists named
// by `tokenizer.ggml.pre` do (model-formats.md §5.3). Hand-written matchers over code points
// reproduce the leftmost-alternative semantics of each regex; nothing is dropped, so the pieces
// concatenate back to the input.
#ifndef FAK_SRC_TOKENIZER_PRE_TOKENIZER_H_
#define FAK_SRC_TOKENIZER_PRE_TOKENIZER_H_

#include <string_view>
#include <vector>

#include "fak/core/status.h"

namespace fak::internal {

enum class PreTokenizer {
  kGpt2,     // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,   // (?i:'s|…)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,    // as kLlama3 with \p{N} (one digit per piece)
  kSmolLm,   // \p{N} first (each digit alone), then kGpt2
  kDefault,  // [\p{P}\$\+<=>\^~\|]+, then kGpt2, then \p{N}+, then [0-9][0-9][0-9]
};

// Maps a `tokenizer.ggml.pre` value (empty when absent) to a splitter; Unsupported otherwise.
Result<PreTokenizer> PreTokenizerFromName(std::string_view name);
// Words of `text`, as views into it, in order; their concatenation is `text`.
std::vector<std::string_view> PreTokenize(PreTokenizer kind, std::string_view text);

}  // namespace fak::internal

#endif  // FAK_SRC_TOKENIZER_PRE_TOKENIZER_H_
