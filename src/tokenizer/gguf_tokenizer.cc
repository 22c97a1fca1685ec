// LoadTokenizerFromGguf: picks the tokenizer kind named by tokenizer.ggml.model and builds it.
#include "fak/io/gguf.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/tokenizer/gguf_tokenizers.h"

namespace fak {

Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& file) {
  using internal::VocabKind;
  FAK_ASSIGN_OR_RETURN(std::string_view model, file.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    FAK_ASSIGN_OR_RETURN(internal::Vocab vocab, internal::LoadVocab(file, VocabKind::kSpm, true));
    return internal::MakeSpmTokenizer(std::move(vocab));
  }
  if (model != "gpt2") {
    return Unsupported(file.name() + ": tokenizer.ggml.model = '" + std::string(model) +
                       "' (supported: llama, gpt2)");
  }
  std::string_view pre_name;
  if (file.Find("tokenizer.ggml.pre") != nullptr) {
    FAK_ASSIGN_OR_RETURN(pre_name, file.GetString("tokenizer.ggml.pre"));
  }
  auto pre = internal::PreTokenizerFromName(pre_name);
  if (!pre) return pre.error().WithContext(file.name());
  bool add_bos_default = *pre == internal::PreTokenizer::kLlama3;
  FAK_ASSIGN_OR_RETURN(internal::Vocab vocab, internal::LoadVocab(file, VocabKind::kBpe, add_bos_default));
  FAK_ASSIGN_OR_RETURN(std::vector<std::string_view> merges, file.GetStringArray("tokenizer.ggml.merges"));
  auto tok = internal::MakeBpeTokenizer(std::move(vocab), merges, *pre, pre_name);
  if (!tok) return tok.error().WithContext(file.name());
  return tok;
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const std::string& path) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return LoadTokenizerFromGguf(*file);
}

}  // namespace fak
