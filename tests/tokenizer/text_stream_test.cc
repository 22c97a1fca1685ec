// TextStream: stop strings are never shown, not even in part, and UTF-8 is never cut mid-character.
#include "fak/tokenizer/text_stream.h"

#include <gtest/gtest.h>

#include "fak/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace fak {
namespace {

// Feeds `text` one byte-token at a time; returns every piece Push released, then Finish's.
std::vector<std::string> Stream(TextStream& stream, std::string_view text) {
  std::vector<std::string> pieces;
  for (unsigned char c : text) {
    Result<std::string> piece = stream.Push(c);
    EXPECT_TRUE(piece.has_value());
    pieces.push_back(*piece);
  }
  pieces.push_back(stream.Finish());
  return pieces;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += p;
  return out;
}

TEST(TextStream, WithoutStopsReleasesEveryByteAtOnce) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {});
  std::vector<std::string> pieces = Stream(stream, "abc");
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", "c", ""}));
  EXPECT_FALSE(stream.stopped());
  EXPECT_EQ(stream.text(), "abc");
}

TEST(TextStream, StopStringIsNeverShownNorAnythingAfterIt) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {"\nUser:", "###"});
  std::vector<std::string> pieces = Stream(stream, "Paris.\nUser: more");
  EXPECT_TRUE(stream.stopped());
  EXPECT_EQ(stream.stopped_by(), "\nUser:");
  EXPECT_EQ(Join(pieces), "Paris.");
  EXPECT_EQ(stream.text(), "Paris.");
  for (const std::string& p : pieces) EXPECT_EQ(p.find('\n'), std::string::npos) << "a partial stop string was shown";
}

TEST(TextStream, PartialMatchIsHeldThenReleasedWhenItCannotBeAStop) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {"END"});
  ASSERT_OK_AND_ASSIGN(std::string a, stream.Push('E'));
  EXPECT_EQ(a, "");  // could be the start of END
  ASSERT_OK_AND_ASSIGN(std::string b, stream.Push('N'));
  EXPECT_EQ(b, "");
  ASSERT_OK_AND_ASSIGN(std::string c, stream.Push('x'));
  EXPECT_EQ(c, "ENx");  // it was not
  EXPECT_FALSE(stream.stopped());
  ASSERT_OK_AND_ASSIGN(std::string d, stream.Push('E'));
  EXPECT_EQ(d, "");
  EXPECT_EQ(stream.Finish(), "E");  // the end: a held prefix is released, it never completed
  EXPECT_EQ(stream.text(), "ENxE");
}

TEST(TextStream, OverlappingStopsEndAtTheEarliest) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {"bcd", "ab"});
  EXPECT_EQ(Join(Stream(stream, "xabcd")), "x");
  EXPECT_EQ(stream.stopped_by(), "ab");
}

TEST(TextStream, Utf8IsNeverCutMidCharacter) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {});
  const std::string text = "é€😀";  // 2-, 3- and 4-byte sequences
  std::vector<std::string> pieces = Stream(stream, text);
  EXPECT_EQ(Join(pieces), text);
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "é", "", "", "€", "", "", "", "😀", ""}));
}

TEST(TextStream, InvalidUtf8IsNotHeldForever) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {});
  ASSERT_OK_AND_ASSIGN(std::string a, stream.Push(0xFF));  // never a lead byte
  EXPECT_EQ(a, "\xFF");
  ASSERT_OK_AND_ASSIGN(std::string b, stream.Push(0xC3));  // a lead byte, cut short by the end
  EXPECT_EQ(b, "");
  EXPECT_EQ(stream.Finish(), "\xC3");
}

TEST(TextStream, AfterAStopNothingMoreIsReleased) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {"!"});
  EXPECT_EQ(Join(Stream(stream, "hi!")), "hi");
  ASSERT_OK_AND_ASSIGN(std::string more, stream.Push('x'));
  EXPECT_EQ(more, "");
  EXPECT_EQ(stream.Finish(), "");
}

TEST(TextStream, BadTokenIsAnErrorAndChangesNothing) {
  auto tok = MakeByteTokenizer();
  TextStream stream(*tok, {"zz"});
  ASSERT_OK_AND_ASSIGN(std::string a, stream.Push('z'));
  EXPECT_EQ(a, "");
  EXPECT_FALSE(stream.Push(1 << 20).has_value());
  EXPECT_EQ(stream.Finish(), "z");
}

}  // namespace
}  // namespace fak

namespace fak {
namespace {

// A generated token continues its prompt: a SentencePiece word's space prefix is text, so streamed
// words do not run together. Control: each token decoded alone (as a text's start) loses it.
TEST(TextStream, SentencePieceWordsKeepTheirSpaces) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tokenizer> tok,
                       LoadTokenizerFromGguf(std::string(FAK_TEST_DATA_DIR) + "/vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_OK_AND_ASSIGN(std::vector<int32_t> ids, tok->Encode("hello big world"));
  ASSERT_GE(ids.size(), 3u);
  TextStream stream(*tok, {});
  std::string alone;
  for (int32_t id : ids) {
    ASSERT_OK(stream.Push(id).status());
    ASSERT_OK_AND_ASSIGN(std::string piece, tok->Decode(std::span<const int32_t>(&id, 1)));
    alone += piece;
  }
  (void)stream.Finish();
  EXPECT_EQ(stream.text(), " hello big world");
  EXPECT_EQ(alone, "hellobigworld");  // the control: what the stream printed before
  ASSERT_OK_AND_ASSIGN(std::string whole, tok->Decode(ids));
  EXPECT_EQ(whole, "hello big world");  // a whole text still drops its start's prefix
  ASSERT_OK_AND_ASSIGN(std::string continued, tok->DecodeContinuation(ids));
  EXPECT_EQ(continued, " hello big world");
}

}  // namespace
}  // namespace fak
