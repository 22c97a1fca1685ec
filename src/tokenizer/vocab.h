// Vocab: the token table a GGUF file carries (texts, scores, types, special ids), the special-token
// partition both tokenizer kinds run first, and VocabTokenizer, the shared base that decodes,
// digests and reports ids. See docs/tokenizers.md for the rules.
#ifndef FAK_SRC_TOKENIZER_VOCAB_H_
#define FAK_SRC_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fak/io/gguf.h"
#include "fak/tokenizer/tokenizer.h"

namespace fak::internal {

// tokenizer.ggml.token_type values.
enum TokenType : int32_t {
  kTokenUndefined = 0, kTokenNormal = 1, kTokenUnknown = 2, kTokenControl = 3,
  kTokenUserDefined = 4, kTokenUnused = 5, kTokenByte = 6,
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using TextToId = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  std::vector<std::string> texts;   // [n_vocab]
  std::vector<float> scores;        // [n_vocab]; 0 when the file has none
  std::vector<int32_t> types;       // [n_vocab] TokenType
  TextToId text_to_id;              // on duplicate texts the later id wins (as llama.cpp)
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = false;
  bool add_space_prefix = false;
  // Tokens matched whole in input text: CONTROL, USER_DEFINED and UNKNOWN with non-empty text,
  // longest text first, then by id.
  std::vector<int32_t> specials;
  std::vector<size_t> special_lengths;  // distinct lengths of special texts, ascending
  std::vector<bool> special_first_byte = std::vector<bool>(256, false);

  size_t size() const { return texts.size(); }
  int32_t Find(std::string_view text) const {
    auto it = text_to_id.find(text);
    return it == text_to_id.end() ? -1 : it->second;
  }
  bool IsSpecial(int32_t id) const {
    int32_t t = types[id];
    return t == kTokenControl || t == kTokenUserDefined || t == kTokenUnknown;
  }
};

enum class VocabKind { kSpm, kBpe };

// Reads tokens, scores, token types, special ids and flags from `file`; `add_bos_default` applies
// when tokenizer.ggml.add_bos_token is absent. Corruption naming the key/index for bad arrays.
Result<Vocab> LoadVocab(const GgufFile& file, VocabKind kind, bool add_bos_default);

// Fills `specials`, `special_lengths` and `special_first_byte` from texts and types (LoadVocab
// calls it; other vocabulary sources, e.g. tokenizer.json, call it once texts and types are set).
void IndexSpecials(Vocab& v);

// A piece of input text: raw text to tokenize (token < 0) or a special token matched whole.
struct Fragment {
  std::string_view text;
  int32_t token = -1;
};
// Splits `text` around occurrences of special tokens: longest special first, each occurrence
// scanned left to right in the still-raw fragments (model-formats.md §5.1 step 2).
std::vector<Fragment> PartitionSpecials(const Vocab& vocab, std::string_view text);

// The shared half of the GGUF tokenizers: special partition, decoding through precomputed
// pieces, digest and ids. Subclasses tokenize raw fragments. Immutable and thread-safe.
class VocabTokenizer : public Tokenizer {
 public:
  Result<std::vector<int32_t>> Encode(std::string_view text) const override;
  Result<std::vector<int32_t>> EncodeWithPlain(std::string_view text, std::span<const TextSpan> plain) const override;
  Result<std::string> Decode(std::span<const int32_t> ids) const override;
  Result<std::string> DecodeContinuation(std::span<const int32_t> ids) const override;
  size_t vocab_size() const override { return vocab_.size(); }
  int32_t bos_id() const override { return vocab_.bos; }
  int32_t eos_id() const override { return vocab_.eos; }
  bool add_bos() const override { return vocab_.add_bos && vocab_.bos >= 0; }
  int32_t FindToken(std::string_view text) const override { return vocab_.Find(text); }
  std::string TokenText(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < vocab_.size() ? vocab_.texts[id] : std::string();
  }
  const Digest& id() const override { return digest_; }
  std::string_view kind() const override { return kind_; }

 protected:
  // `pieces` are the bytes each id decodes to; `rules` extra digest input (merges, pre-tokenizer).
  VocabTokenizer(Vocab vocab, std::string kind, std::vector<std::string> pieces, std::string_view rules);
  // Appends the ids of one raw fragment; `after_special` is true for the first fragment and for
  // one that directly follows a special token.
  virtual void EncodeRaw(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;

  const Vocab vocab_;

 private:
  // Decode's body; `at_start`: the ids begin a text (a leading space prefix is dropped).
  Result<std::string> DecodeFrom(std::span<const int32_t> ids, bool at_start) const;
  std::vector<int32_t> EncodeFragments(const std::vector<Fragment>& fragments) const;
  std::string kind_;
  std::vector<std::string> pieces_;  // [n_vocab] decoded bytes
  Digest digest_;
};

}  // namespace fak::internal

#endif  // FAK_SRC_TOKENIZER_VOCAB_H_
