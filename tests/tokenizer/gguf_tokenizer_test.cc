// GGUF tokenizers beyond the vector files: special tokens, ids and flags, digests, decode errors,
// pre-tokenizer splits and unsupported configurations.
#include <gtest/gtest.h>

#include <filesystem>

#include "fak/io/gguf.h"
#include "fak/tokenizer/tokenizer.h"
#include "src/tokenizer/pre_tokenizer.h"
#include "tests/io/gguf_writer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using internal::PreTokenize;
using internal::PreTokenizer;
using Pieces = std::vector<std::string_view>;

std::string Path(const char* name) { return std::string(FAK_TEST_DATA_DIR) + "/vocab/" + name; }

TEST(SpmTokenizerTest, IdsFlagsAndSpecialTokens) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromGguf(Path("ggml-vocab-llama-spm.gguf")));
  EXPECT_EQ(tok->kind(), "spm");
  EXPECT_EQ(tok->vocab_size(), 32000u);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->FindToken("</s>"), 2);
  EXPECT_EQ(tok->FindToken("no such piece"), -1);
  // Control tokens in the text are matched whole; the space prefix follows each special token.
  ASSERT_OK_AND_ASSIGN(auto ids, tok->Encode("<s>Hello</s>"));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 15043, 2}));
  ASSERT_OK_AND_ASSIGN(auto plain, tok->Encode("Hello"));
  EXPECT_EQ(plain, (std::vector<int32_t>{15043}));
  // Specials decode to nothing; the prefix space after them is dropped again.
  EXPECT_EQ(*tok->Decode(ids), "Hello");
  EXPECT_EQ(*tok->Decode(std::vector<int32_t>{15043, 3186}), "Hello world");
  // Byte fallback: U+10FFFF has no piece, so its four bytes come out as <0xHH> tokens.
  ASSERT_OK_AND_ASSIGN(auto bytes, tok->Encode("\xF4\x8F\xBF\xBF"));
  EXPECT_EQ(bytes, (std::vector<int32_t>{29871, 0xF4 + 3, 0x8F + 3, 0xBF + 3, 0xBF + 3}));
  EXPECT_EQ(*tok->Decode(bytes), "\xF4\x8F\xBF\xBF");
}

TEST(SpmTokenizerTest, DecodeRejectsOutOfRangeIds) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromGguf(Path("ggml-vocab-llama-spm.gguf")));
  auto r = tok->Decode(std::vector<int32_t>{15043, 32000});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("index 1"), std::string_view::npos) << r.error().ToString();
  EXPECT_FALSE(tok->Decode(std::vector<int32_t>{-1}).has_value());
}

TEST(TokenizerIdTest, DigestIsStablePerVocabularyAndDiffersAcrossThem) {
  ASSERT_OK_AND_ASSIGN(auto a, LoadTokenizerFromGguf(Path("ggml-vocab-llama-spm.gguf")));
  ASSERT_OK_AND_ASSIGN(auto b, LoadTokenizerFromGguf(Path("ggml-vocab-llama-spm.gguf")));
  ASSERT_OK_AND_ASSIGN(auto c, LoadTokenizerFromGguf(Path("ggml-vocab-gpt-2.gguf")));
  EXPECT_EQ(a->id(), b->id());
  EXPECT_NE(a->id(), c->id());
  EXPECT_NE(a->id(), MakeByteTokenizer()->id());
  EXPECT_FALSE(a->id().IsZero());
}

TEST(BpeTokenizerTest, IdsAndSpecialTokens) {
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromGguf(Path("ggml-vocab-gpt-2.gguf")));
  EXPECT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->vocab_size(), 50257u);
  EXPECT_EQ(tok->bos_id(), 50256);
  EXPECT_EQ(tok->eos_id(), 50256);
  EXPECT_FALSE(tok->add_bos());  // gpt-2 pre-tokenizer, no add_bos_token key
  ASSERT_OK_AND_ASSIGN(auto ids, tok->Encode("Hello world<|endoftext|> Hello"));
  EXPECT_EQ(ids, (std::vector<int32_t>{15496, 995, 50256, 18435}));
  EXPECT_EQ(*tok->Decode(ids), "Hello world Hello");
  // Invalid UTF-8 still round-trips: BPE works on bytes.
  std::string junk = "a\xFF\xC3 b\x80";
  ASSERT_OK_AND_ASSIGN(auto jids, tok->Encode(junk));
  EXPECT_EQ(*tok->Decode(jids), junk);
}

TEST(BpePreTokenizerTest, Gpt2Splits) {
  EXPECT_EQ(PreTokenize(PreTokenizer::kGpt2, "  Hello world's 123!!  "),
            (Pieces{" ", " Hello", " world", "'s", " 123", "!!", "  "}));
  EXPECT_EQ(PreTokenize(PreTokenizer::kGpt2, "a\n\n b"), (Pieces{"a", "\n\n", " b"}));
  EXPECT_EQ(PreTokenize(PreTokenizer::kGpt2, "I'M"), (Pieces{"I", "'", "M"}));  // case-sensitive
  EXPECT_TRUE(PreTokenize(PreTokenizer::kGpt2, "").empty());
}

TEST(BpePreTokenizerTest, Llama3AndQwen2Splits) {
  EXPECT_EQ(PreTokenize(PreTokenizer::kLlama3, "Hello world 1234567 (x) I'M\n\n  ok"),
            (Pieces{"Hello", " world", " ", "123", "456", "7", " (", "x", ")", " I", "'M", "\n\n", " ", " ok"}));
  EXPECT_EQ(PreTokenize(PreTokenizer::kLlama3, "a;\r\nb"), (Pieces{"a", ";\r\n", "b"}));
  EXPECT_EQ(PreTokenize(PreTokenizer::kQwen2, "x 123"), (Pieces{"x", " ", "1", "2", "3"}));
}

TEST(BpePreTokenizerTest, SmolLmAndDefaultSplits) {
  EXPECT_EQ(PreTokenize(PreTokenizer::kSmolLm, "ab 12"), (Pieces{"ab", " ", "1", "2"}));
  EXPECT_EQ(PreTokenize(PreTokenizer::kDefault, "x=12345"), (Pieces{"x", "=", "123", "45"}));
  EXPECT_EQ(*internal::PreTokenizerFromName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(internal::PreTokenizerFromName("bogus").error().code(), StatusCode::kUnsupported);
}

// A tiny byte-level BPE vocabulary written to a temporary GGUF file.
std::string WriteTinyBpe(const std::string& pre, const std::string& model = "gpt2") {
  testing::GgufWriter w;
  w.KvString("tokenizer.ggml.model", model);
  w.KvString("tokenizer.ggml.pre", pre);
  w.KvStrings("tokenizer.ggml.tokens", {"a", "b", "c", "ab", "abc", "\xC4\xA0", "\xC4\xA0" "a", "<eot>"});
  w.KvArray<int32_t>("tokenizer.ggml.token_type", GgufType::kInt32, {1, 1, 1, 1, 1, 1, 1, 3});
  w.KvStrings("tokenizer.ggml.merges", {"a b", "\xC4\xA0 a"});
  w.Kv<uint32_t>("tokenizer.ggml.eos_token_id", GgufType::kUint32, 7);
  std::string path = (std::filesystem::temp_directory_path() / ("fak_tiny_bpe_" + pre + model + ".gguf")).string();
  testing::GgufWriter::WriteFile(path, w.Build());
  return path;
}

TEST(BpeTokenizerTest, Llama3IgnoresMergesForWholeWordTokens) {
  std::string path = WriteTinyBpe("llama-bpe");
  ASSERT_OK_AND_ASSIGN(auto tok, LoadTokenizerFromGguf(path));
  // "abc" is a token, though no merge builds it: llama3 takes the whole word.
  EXPECT_EQ(*tok->Encode("abc ab<eot>"), (std::vector<int32_t>{4, 5, 3, 7}));  // " ab": Ġ + ab (rank 0 first)
  EXPECT_EQ(tok->eos_id(), 7);
  EXPECT_EQ(tok->bos_id(), -1);  // BPE has no default BOS
  std::remove(path.c_str());
  std::string gpt2 = WriteTinyBpe("gpt-2");
  ASSERT_OK_AND_ASSIGN(auto g, LoadTokenizerFromGguf(gpt2));
  EXPECT_EQ(*g->Encode("abc"), (std::vector<int32_t>{3, 2}));  // merges only: "ab" + "c"
  EXPECT_NE(g->id(), tok->id());  // the pre-tokenizer is part of the TokenizerID
  std::remove(gpt2.c_str());
}

TEST(BpeTokenizerTest, UnsupportedConfigurationsAreClearErrors) {
  std::string bad_pre = WriteTinyBpe("mystery");
  auto r = LoadTokenizerFromGguf(bad_pre);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.error().message().find("mystery"), std::string_view::npos);
  std::remove(bad_pre.c_str());
  std::string bert = WriteTinyBpe("default", "bert");
  auto b = LoadTokenizerFromGguf(bert);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(b.error().message().find("bert"), std::string_view::npos);
  std::remove(bert.c_str());
}

}  // namespace
}  // namespace fak
