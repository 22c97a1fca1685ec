// Tree publication: prefix digests a router can compute from message digests alone, every prefix
// of every held path once per tenant (the deepest kept), and the changes between two looks.
#include <gtest/gtest.h>

#include "src/server/tree_publication.h"

namespace fak {
namespace {

TEST(TreePublication, PrefixDigestsChainTheTextsDigests) {
  const Digest a = Digest::Of("first"), b = Digest::Of("second");
  std::string bytes = "fak.prefix.v1\n";
  bytes.append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  bytes.append(reinterpret_cast<const char*>(b.bytes.data()), b.bytes.size());
  const Digest ab[] = {a, b};
  EXPECT_EQ(PrefixDigest(ab), Digest::Of(bytes));
  const Digest ba[] = {b, a};
  EXPECT_NE(PrefixDigest(ab), PrefixDigest(ba));  // order matters
}

TEST(TreePublication, EveryPrefixOfEveryPathOncePerTenant) {
  const Digest s = Digest::Of("system"), u1 = Digest::Of("u1"), u2 = Digest::Of("u2");
  const HeldPath paths[] = {{"alice", {s, u1}, {10, 20}}, {"alice", {s, u2}, {10, 25}}, {"bob", {s}, {10}}};
  const std::vector<PublishedPrefix> got = PublishedPrefixes(paths);
  // alice: [s], [s,u1], [s,u2]; bob: [s] — alice's shared [s] listed once.
  ASSERT_EQ(got.size(), 4u);
  const Digest one[] = {s}, two[] = {s, u2};
  const auto find = [&](const std::string& tenant, const Digest& d) {
    return std::find(got.begin(), got.end(), PublishedPrefix{tenant, d, 0, 0});
  };
  ASSERT_NE(find("alice", PrefixDigest(one)), got.end());
  EXPECT_EQ(find("alice", PrefixDigest(one))->tokens, 10u);
  EXPECT_EQ(find("alice", PrefixDigest(two))->messages, 2u);
  EXPECT_EQ(find("alice", PrefixDigest(two))->tokens, 25u);
  EXPECT_NE(find("bob", PrefixDigest(one)), got.end());
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
}

TEST(TreePublication, ChangesAreWhatWasInsertedAndWhatWasEvicted) {
  const Digest x = Digest::Of("x"), y = Digest::Of("y");
  const HeldPath before_paths[] = {{"alice", {x}, {5}}};
  const HeldPath after_paths[] = {{"alice", {y}, {5}}, {"bob", {x}, {5}}};
  const std::vector<PublishedPrefix> before = PublishedPrefixes(before_paths), after = PublishedPrefixes(after_paths);
  const TreeChanges c = DiffPrefixes(before, after);
  ASSERT_EQ(c.evicted.size(), 1u);
  EXPECT_EQ(c.evicted[0].tenant, "alice");
  ASSERT_EQ(c.inserted.size(), 2u);  // alice's [y] and bob's [x]: the same text, another tenant
  EXPECT_TRUE(DiffPrefixes(after, after).inserted.empty());
  EXPECT_TRUE(DiffPrefixes(after, after).evicted.empty());
}

}  // namespace
}  // namespace fak
