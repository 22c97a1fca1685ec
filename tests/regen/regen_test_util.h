// Regen test helpers: two small models and two tokenizers, a corpus, and transcripts of text.
#ifndef FAK_TESTS_REGEN_REGEN_TEST_UTIL_H_
#define FAK_TESTS_REGEN_REGEN_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "fak/store/blob_store.h"
#include "fak/session/radix_tree.h"
#include "fak/regen/regen_driver.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/tokenizer.h"
#include "tests/model/test_models.h"
#include "tests/tokenizer/shifted_byte_tokenizer.h"

namespace fak::testing {

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
