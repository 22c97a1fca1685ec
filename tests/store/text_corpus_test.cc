// TextCorpus: source bytes by SourceDigest; token ids cached per (SourceDigest, TokenizerID), so a
// tokenizer change re-tokenizes rather than reusing stale ids.
#include "fak/store/text_corpus.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "tests/tokenizer/shifted_byte_tokenizer.h"

namespace fak {
namespace {

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
  testing::ShiftedByteTokenizer shifted(1);
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

TEST(TextCorpus, RemoveSourceErasesTheTextAndItsTokenLists) {
  auto store = MakeMemoryBlobStore();
  TextCorpus corpus(*store);
  auto bytes = MakeByteTokenizer();
  testing::ShiftedByteTokenizer shifted(1);
  ASSERT_OK_AND_ASSIGN(Digest gone, corpus.PutSource("erase me"));
  ASSERT_OK_AND_ASSIGN(Digest kept, corpus.PutSource("keep me"));
  ASSERT_OK(corpus.Tokens(gone, *bytes).status());
  ASSERT_OK(corpus.Tokens(gone, shifted).status());
  ASSERT_OK(corpus.Tokens(kept, *bytes).status());
  ASSERT_EQ(store->Stats().n_blobs, 5u);  // two texts, three token lists
  ASSERT_OK(corpus.RemoveSource(gone));
  EXPECT_EQ(store->Stats().n_blobs, 2u);  // the kept text and its token list
  EXPECT_EQ(corpus.GetSource(gone).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(corpus.Tokens(gone, *bytes).status().code(), StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, corpus.Tokens(kept, *bytes));
  EXPECT_EQ(ids.size(), 7u);
  EXPECT_EQ(corpus.RemoveSource(gone).code(), StatusCode::kNotFound);
  ASSERT_OK(corpus.PinSource(kept));
  EXPECT_EQ(corpus.RemoveSource(kept).code(), StatusCode::kFailedPrecondition);
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
