// Regen test helpers: two small models and two tokenizers, a corpus, and transcripts of text.
#ifndef FAK_TESTS_REGEN_REGEN_TEST_UTIL_H_
#define FAK_TESTS_REGEN_REGEN_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "fak/blob_store.h"
#include "fak/radix_tree.h"
#include "fak/regen.h"
#include "fak/text_corpus.h"
#include "fak/tokenizer.h"
#include "tests/model/test_models.h"

namespace fak::testing {

// A byte tokenizer with another id layout (id = (byte + shift) mod 256; BOS 256, EOS 257): the same
// text gives other ids, and its TokenizerID differs — the "tokenizer change" of a rollout.
class ShiftedByteTokenizer final : public Tokenizer {
 public:
  explicit ShiftedByteTokenizer(int shift)
      : shift_(shift), id_(Digest::Of("fak.test.shifted_byte.v1 shift " + std::to_string(shift))) {}
  Result<std::vector<int32_t>> Encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = (static_cast<unsigned char>(text[i]) + shift_) % 256;
    return ids;
  }
  Result<std::string> Decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || id >= 258) return InvalidArgument("shifted byte tokenizer: id out of range");
      if (id < 256) out.push_back(static_cast<char>((id - shift_ + 256) % 256));
    }
    return out;
  }
  size_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return 256; }
  int32_t eos_id() const override { return 257; }
  const Digest& id() const override { return id_; }
  std::string_view kind() const override { return "shifted_byte"; }

 private:
  int shift_;
  Digest id_;
};

inline ModelConfig RegenConfig() {
  ModelConfig c = TinyConfig(4, 2, 16, RopePairing::kSplitHalf, 2);
  c.vocab_size = 258;
  return c;
}

// One serving target: a model, its tokenizer and its radix tree.
struct Served {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<RadixTree> tree;
  RegenTarget target() { return RegenTarget{model.get(), tokenizer.get(), tree.get()}; }
};

inline Served MakeServed(uint64_t seed, std::unique_ptr<Tokenizer> tokenizer) {
  Served s;
  s.model = *Model::Synthetic(RegenConfig(), seed);
  s.tokenizer = std::move(tokenizer);
  s.tree = std::make_unique<RadixTree>(*s.model, *s.tokenizer);
  return s;
}

// Puts each text in the corpus; the transcript lists them in order.
inline TranscriptRef PutTranscript(TextCorpus& corpus, std::string session, const std::vector<std::string>& texts) {
  TranscriptRef t{std::move(session), {}};
  for (const std::string& s : texts) t.segments.push_back(*corpus.PutSource(s));
  return t;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_REGEN_REGEN_TEST_UTIL_H_
