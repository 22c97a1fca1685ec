// Digest / Digester: sha256 known-answer vectors, incremental hashing, hex round trip, hashing.
#include "fak/core/digest.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "tests/test_util.h"

namespace fak {
namespace {

// FIPS 180-2 / NIST CAVS sha256 vectors.
constexpr char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kAbcSha[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr char kTwoBlockMsg[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
constexpr char kTwoBlockSha[] = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr char kMillionASha[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

TEST(DigestTest, KnownVectors) {
  EXPECT_EQ(Digest::Of("").Hex(), kEmptySha);
  EXPECT_EQ(Digest::Of("abc").Hex(), kAbcSha);
  EXPECT_EQ(Digest::Of(kTwoBlockMsg).Hex(), kTwoBlockSha);
  EXPECT_EQ(Digest::Of(std::string(1000000, 'a')).Hex(), kMillionASha);
  EXPECT_EQ(Digester().Finish().Hex(), kEmptySha);
  EXPECT_EQ(Digest::Of(nullptr, 0).Hex(), kEmptySha);
}

TEST(DigestTest, IncrementalEqualsOneShotAtEverySplit) {
  std::string msg;
  for (int i = 0; i < 200; ++i) msg += static_cast<char>(i * 37 + 11);  // crosses 64-byte blocks
  const Digest whole = Digest::Of(msg);
  for (size_t split = 0; split <= msg.size(); ++split) {
    Digester d;
    d.Update(msg.data(), split).Update(std::string_view(msg).substr(split));
    ASSERT_EQ(d.Finish(), whole) << "split at " << split;
  }
  // Byte at a time, and in three uneven pieces.
  Digester bytewise;
  for (char c : msg) bytewise.Update(&c, 1);
  EXPECT_EQ(bytewise.Finish(), whole);
  Digester pieces;
  pieces.Update(msg.substr(0, 63)).Update(msg.substr(63, 2)).Update(msg.substr(65));
  EXPECT_EQ(pieces.Finish(), whole);
  // Empty updates are no-ops.
  Digester with_empty;
  with_empty.Update("").Update(msg).Update(nullptr, 0);
  EXPECT_EQ(with_empty.Finish(), whole);
}

TEST(DigestTest, UpdatePodHashesRawBytes) {
  const uint32_t v = 0x04030201u;
  const unsigned char le[4] = {1, 2, 3, 4};
  Digester a;
  a.UpdatePod(v);
  EXPECT_EQ(a.Finish(), Digest::Of(le, sizeof(le)));
}

TEST(DigestTest, NonVacuity) {
  EXPECT_NE(Digest::Of("abc"), Digest::Of("abd"));
  EXPECT_NE(Digest::Of("abc"), Digest::Of("abc", 2));
  EXPECT_FALSE(Digest::Of("").IsZero());
}

TEST(DigestTest, HexRoundTrip) {
  for (const char* text : {"", "abc", kTwoBlockMsg}) {
    Digest d = Digest::Of(text);
    std::string hex = d.Hex();
    EXPECT_EQ(hex.size(), 64u);
    ASSERT_OK_AND_ASSIGN(Digest back, Digest::FromHex(hex));
    EXPECT_EQ(back, d);
  }
}

TEST(DigestTest, FromHexRejectsUppercase) {
  // One value, one spelling: an uppercase digest would be the same value as different bytes in a
  // signed certificate or a hash-chained journal row (issue 20).
  std::string upper = kAbcSha;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Result<Digest> r = Digest::FromHex(upper);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("offset"), std::string_view::npos) << r.error().ToString();
  ASSERT_OK_AND_ASSIGN(Digest d, Digest::FromHex(kAbcSha));  // control: the lowercase spelling parses
  EXPECT_EQ(d, Digest::Of("abc"));
}

TEST(DigestTest, FromHexRejectsWrongLength) {
  for (std::string bad : {std::string(), std::string(63, 'a'), std::string(65, 'a'), std::string(32, 'a')}) {
    Result<Digest> r = Digest::FromHex(bad);
    ASSERT_FALSE(r.has_value()) << bad.size();
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find(std::to_string(bad.size())), std::string_view::npos) << r.error().ToString();
  }
}

TEST(DigestTest, FromHexRejectsNonHex) {
  for (size_t pos : {size_t{0}, size_t{1}, size_t{31}, size_t{63}}) {
    for (char c : {'g', 'G', 'x', ' ', '-', '\0', '/', ':', '@', '`'}) {
      std::string bad = kAbcSha;
      bad[pos] = c;
      Result<Digest> r = Digest::FromHex(bad);
      ASSERT_FALSE(r.has_value()) << "pos " << pos << " char " << int(c);
      EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
      // The message names the offending offset.
      EXPECT_NE(r.error().message().find("offset " + std::to_string(pos)), std::string_view::npos)
          << r.error().ToString();
    }
  }
}

TEST(DigestTest, ZeroAndOrdering) {
  Digest zero;
  EXPECT_TRUE(zero.IsZero());
  ASSERT_OK_AND_ASSIGN(Digest from_hex, Digest::FromHex(std::string(64, '0')));
  EXPECT_EQ(from_hex, zero);
  Digest one;
  one.bytes[31] = 1;
  EXPECT_FALSE(one.IsZero());
  EXPECT_LT(zero, one);
  Digest high;
  high.bytes[0] = 1;
  EXPECT_LT(one, high);  // lexicographic over bytes, most significant first
}

TEST(DigestTest, UsableInUnorderedSet) {
  std::unordered_set<Digest> set;
  for (int i = 0; i < 1000; ++i) set.insert(Digest::Of(std::to_string(i)));
  EXPECT_EQ(set.size(), 1000u);
  for (int i = 0; i < 1000; ++i) set.insert(Digest::Of(std::to_string(i)));  // duplicates collapse
  EXPECT_EQ(set.size(), 1000u);
  EXPECT_TRUE(set.contains(Digest::Of("999")));
  EXPECT_FALSE(set.contains(Digest::Of("1000")));
  EXPECT_EQ(std::hash<Digest>{}(Digest::Of("abc")), std::hash<Digest>{}(Digest::Of("abc")));
}

}  // namespace
}  // namespace fak
