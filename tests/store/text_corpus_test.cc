// TextCorpus: source bytes by SourceDigest; token ids cached per (SourceDigest, TokenizerID), so a
// tokenizer change re-tokenizes rather than reusing stale ids.
#include "fak/text_corpus.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace fak {
namespace {

// A byte tokenizer with every id shifted: same text, different ids and a different TokenizerID.
class ShiftedByteTokenizer final : public Tokenizer {
 public:
  Result<std::vector<int32_t>> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back((c + 1) % 256);
    return ids;
  }
  Result<std::string> Decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) out.push_back(static_cast<char>((id + 255) % 256));
    return out;
  }
  size_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return 256; }
  int32_t eos_id() const override { return 257; }
  const Digest& id() const override { return id_; }
  std::string_view kind() const override { return "shifted_byte"; }

 private:
  Digest id_ = Digest::Of("shifted byte tokenizer v1");
};

TEST(TextCorpus, SourceBytesBySourceDigest) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  const std::string text = "user: what is the capital of France?\n";
  ASSERT_OK_AND_ASSIGN(Digest source, corpus.PutSource(text));
  EXPECT_EQ(source, Digest::Of(text));
  EXPECT_EQ(*corpus.GetSource(source), text);
  EXPECT_EQ(corpus.GetSource(Digest::Of("never")).error().code(), StatusCode::kNotFound);
}

TEST(TextCorpus, TokensAreCachedPerTokenizer) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  auto bytes = MakeByteTokenizer();
  ShiftedByteTokenizer shifted;
  ASSERT_NE(bytes->id(), shifted.id());
  const std::string text = "hello corpus";
  ASSERT_OK_AND_ASSIGN(Digest source, corpus.PutSource(text));

  ASSERT_OK_AND_ASSIGN(auto a1, corpus.Tokens(source, *bytes));
  ASSERT_OK_AND_ASSIGN(auto a2, corpus.Tokens(source, *bytes));
  EXPECT_EQ(a1, *bytes->Encode(text));
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(corpus.stats().token_misses, 1u);
  EXPECT_EQ(corpus.stats().token_hits, 1u);

  // Same source, other tokenizer: a miss that re-tokenizes, never the cached byte ids.
  ASSERT_OK_AND_ASSIGN(auto b, corpus.Tokens(source, shifted));
  EXPECT_EQ(b, *shifted.Encode(text));
  EXPECT_NE(b, a1);
  EXPECT_EQ(corpus.stats().token_misses, 2u);
  EXPECT_NE(TextCorpus::TokenKey(source, bytes->id()), TextCorpus::TokenKey(source, shifted.id()));
}

TEST(TextCorpus, EvictedTokenBlobIsRebuilt) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  auto tok = MakeByteTokenizer();
  ASSERT_OK_AND_ASSIGN(Digest source, corpus.PutSource("some text worth keeping"));
  ASSERT_OK_AND_ASSIGN(auto first, corpus.Tokens(source, *tok));
  // Remove everything but the source: the token list is a cache and comes back from the text.
  ASSERT_OK_AND_ASSIGN(std::vector<Digest> held, store->List());
  for (const Digest& d : held) {
    if (d != source) ASSERT_OK(store->Remove(d));
  }
  ASSERT_OK_AND_ASSIGN(auto again, corpus.Tokens(source, *tok));
  EXPECT_EQ(again, first);
  EXPECT_EQ(corpus.stats().token_misses, 2u);
}

TEST(TextCorpus, MissingSourceCannotBeTokenized) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  auto tok = MakeByteTokenizer();
  Result<std::vector<int32_t>> ids = corpus.Tokens(Digest::Of("absent"), *tok);
  ASSERT_FALSE(ids.has_value());
  EXPECT_EQ(ids.error().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace fak
