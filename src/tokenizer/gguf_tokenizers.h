// Factories for the GGUF tokenizers (SentencePiece-style and byte-level BPE) over a loaded Vocab.
#ifndef FAK_SRC_TOKENIZER_GGUF_TOKENIZERS_H_
#define FAK_SRC_TOKENIZER_GGUF_TOKENIZERS_H_

#include <memory>
#include <string>
#include <vector>

#include "src/tokenizer/pre_tokenizer.h"
#include "src/tokenizer/vocab.h"

namespace fak::internal {

// kind "spm": tokenizer.ggml.model = "llama".
std::unique_ptr<Tokenizer> MakeSpmTokenizer(Vocab vocab);
// kind "spm" with ranked merges ("A B", index = rank) instead of scores: tokenizer.json's
// SentencePiece-style BPE (byte_fallback). Parts must not contain a space (they hold ▁ instead).
std::unique_ptr<Tokenizer> MakeSpmTokenizer(Vocab vocab, const std::vector<std::string>& merges);

// kind "bpe": tokenizer.ggml.model = "gpt2". `merges` are "A B" strings; index = rank.
// Corruption naming the index of a merge without a separating space.
Result<std::unique_ptr<Tokenizer>> MakeBpeTokenizer(Vocab vocab, const std::vector<std::string_view>& merges,
                                                    PreTokenizer pre, std::string_view pre_name);

}  // namespace fak::internal

#endif  // FAK_SRC_TOKENIZER_GGUF_TOKENIZERS_H_
