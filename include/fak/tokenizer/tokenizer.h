// Tokenizer: text bytes ↔ token ids, identified by a digest of its vocabulary and rules.
//
// The TokenizerID is an axis of every cache binding and of the corpus' token cache, so a change of
// tokenizer can never silently reuse ids (architecture §7). Implementations are immutable and
// thread-safe.
#ifndef FAK_TOKENIZER_TOKENIZER_H_
#define FAK_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fak/core/digest.h"
#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// A byte range of a text.
struct TextSpan {
  size_t offset = 0;
  size_t size = 0;
};

class FAK_EXPORT Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, without BOS/EOS. Special-token texts (e.g. "<start_of_turn>") anywhere in
  // it become their single ids.
  virtual Result<std::vector<int32_t>> Encode(std::string_view text) const = 0;
  // The same, except that inside `plain` (sorted, disjoint ranges of `text`) special-token texts
  // are ordinary text: a chat message's content can never forge a turn marker. Ids equal
  // Encode's wherever `plain` holds no special-token text. InvalidArgument for ranges that are
  // unsorted, overlapping or outside `text`. The default suits tokenizers without special texts.
  virtual Result<std::vector<int32_t>> EncodeWithPlain(std::string_view text, std::span<const TextSpan> plain) const;
  // The bytes the ids stand for (special tokens decode to nothing). InvalidArgument for an id
  // outside the vocabulary.
  virtual Result<std::string> Decode(std::span<const int32_t> ids) const = 0;
  // The same for ids that continue a text (a reply after its prompt, a stream's next token): a
  // SentencePiece space prefix is dropped only at the start of a text, so here it is kept. The
  // default suits tokenizers that drop nothing.
  virtual Result<std::string> DecodeContinuation(std::span<const int32_t> ids) const { return Decode(ids); }
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  // sha256 over the kind, vocabulary and rules: the TokenizerID.
  virtual const Digest& id() const = 0;
  virtual std::string_view kind() const = 0;
  // Whether a prompt should start with bos_id() (tokenizer.ggml.add_bos_token, else the kind's
  // default). Encode never adds it; callers do.
  virtual bool add_bos() const { return bos_id() >= 0; }
  // The id whose vocabulary text is exactly `text` (e.g. "<start_of_turn>"), -1 when none.
  virtual int32_t FindToken(std::string_view /*text*/) const { return -1; }
  // The vocabulary text of `id` (e.g. "<bos>" for Gemma's BOS), "" when the id is out of range or
  // has none (the byte tokenizer's BOS/EOS). Chat templates print BOS/EOS by this text.
  virtual std::string TokenText(int32_t /*id*/) const { return {}; }

 protected:
  // EncodeWithPlain's check of its ranges.
  static Status CheckPlainSpans(std::string_view text, std::span<const TextSpan> plain);
};

// The embedded default: one token per byte (ids 0..255), BOS = 256, EOS = 257.
FAK_EXPORT std::unique_ptr<Tokenizer> MakeByteTokenizer();

class GgufFile;
// The tokenizer a GGUF file describes: tokenizer.ggml.model "llama" (SentencePiece-style, kind
// "spm") or "gpt2" (byte-level BPE, kind "bpe"); Unsupported for other models or pre-tokenizers,
// Corruption for inconsistent vocabulary metadata. Special tokens (CONTROL, USER_DEFINED and
// UNKNOWN types) found in the text are encoded as their single ids. Rules: docs/tokenizers.md.
FAK_EXPORT Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const std::string& path);
FAK_EXPORT Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(const GgufFile& file);

// The tokenizer a Hugging Face tokenizer.json describes, with BOS/EOS and add_bos_token from
// tokenizer_config.json beside it when present (else the post-processor's template). `path` is the
// tokenizer.json itself, or a checkpoint directory or .safetensors file it lies beside. Accepted:
// `model.type` "BPE", either byte-level (ByteLevel pre-tokenizer with the GPT-2, Llama 3 or Qwen2
// regex, or SmolLM's digit split; kind "bpe") or SentencePiece-style (byte_fallback, spaces as ▁;
// kind "spm", merges by rank). Added tokens are matched whole, as HF does. Unsupported names the
// field fak does not implement; Corruption a malformed file. Rules: docs/tokenizers.md.
FAK_EXPORT Result<std::unique_ptr<Tokenizer>> LoadTokenizerFromHfJson(const std::string& path);
// The same from text: tokenizer.json and tokenizer_config.json (empty when there is none); `name`
// labels errors.
FAK_EXPORT Result<std::unique_ptr<Tokenizer>> ParseHfTokenizer(std::string_view tokenizer_json, std::string_view config_json = {},
                                                    std::string_view name = "tokenizer.json");
// The tokenizer of whatever Model::Load accepts: LoadTokenizerFromGguf for a GGUF file, else
// LoadTokenizerFromHfJson.
FAK_EXPORT Result<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const std::string& path);

}  // namespace fak

#endif  // FAK_TOKENIZER_TOKENIZER_H_
