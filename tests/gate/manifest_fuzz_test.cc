// Fuzz-style corruption of manifest and transfer JSON: thousands of fixed-seed mutations (byte flips,
// truncations, insertions, deletions, type swaps, deleted fields). Parsing never crashes or throws;
// every failure carries a clear message; anything that parses re-serializes canonically.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include <nlohmann/json.hpp>

#include "fak/gate/kv_manifest.h"
#include "fak/gate/kv_transfer.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

using nlohmann::json;

// Every member of every object, as a path of keys.
void CollectPaths(const json& j, std::vector<std::string>& prefix, std::vector<std::vector<std::string>>* out) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    prefix.push_back(it.key());
    out->push_back(prefix);
    CollectPaths(it.value(), prefix, out);
    prefix.pop_back();
  }
}

json* At(json& root, const std::vector<std::string>& path, size_t depth) {
  json* j = &root;
  for (size_t i = 0; i < depth; ++i) j = &(*j)[path[i]];
  return j;
}

json RandomValue(std::mt19937& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return -1;
    case 3: return 1.5;
    case 4: return "";
    case 5: return json::array({1, 2});
    case 6: return json::object();
    case 7: return 18446744073709551615ull;
    default: return std::string(64, 'f');
  }
}

std::string ByteMutation(std::string s, std::mt19937& rng) {
  if (s.empty()) return s;
  const size_t pos = rng() % s.size();
  switch (rng() % 5) {
    case 0: s[pos] = static_cast<char>(s[pos] ^ (1u << (rng() % 8))); break;      // bit flip
    case 1: s[pos] = static_cast<char>(rng() % 256); break;                        // byte replace
    case 2: s.resize(pos); break;                                                  // truncation
    case 3: s.insert(pos, 1, "{}[],:\"0\\ \xff"[rng() % 11]); break;              // insertion
    default: s.erase(pos, 1 + rng() % 16); break;                                  // deletion
  }
  return s;
}

std::string StructuralMutation(const std::string& text, std::mt19937& rng, bool reseal) {
  json j = json::parse(text);
  std::vector<std::vector<std::string>> paths;
  std::vector<std::string> prefix;
  CollectPaths(j, prefix, &paths);
  const std::vector<std::string>& path = paths[rng() % paths.size()];
  json* parent = At(j, path, path.size() - 1);
  switch (rng() % 3) {
    case 0: parent->erase(path.back()); break;                      // deleted field
    case 1: (*parent)[path.back()] = RandomValue(rng); break;       // type swap
    default: (*parent)["x" + std::to_string(rng() % 3)] = 1; break;  // unknown field
  }
  if (reseal && j.is_object()) {
    j.erase("binding_digest");
    j["binding_digest"] = Digest::Of(j.dump()).Hex();
  }
  return j.dump();
}

// The property every input must satisfy.
// Returns the canonical re-serialization of what parsed, or "" when parsing failed.
template <class T>
std::string ExpectCleanOutcome(const std::string& input, int* n_parsed) {
  Result<T> r = T::FromJson(input);
  if (!r.has_value()) {
    const StatusCode code = r.error().code();
    EXPECT_TRUE(code == StatusCode::kInvalidArgument || code == StatusCode::kUnsupported ||
                code == StatusCode::kCorruption)
        << r.error().ToString();
    EXPECT_GT(r.error().message().size(), 10u);
    return "";
  }
  ++*n_parsed;
  Result<std::string> canonical = r->ToJson();
  EXPECT_TRUE(canonical.has_value()) << canonical.error().ToString() << "\ninput: " << input;
  if (!canonical.has_value()) return "";
  Result<T> again = T::FromJson(*canonical);
  EXPECT_TRUE(again.has_value()) << again.error().ToString();
  if (!again.has_value()) return "";
  EXPECT_EQ(*again, *r);
  EXPECT_EQ(*again->ToJson(), *canonical);
  return *canonical;
}

TEST(ManifestFuzz, RandomCorruptionsNeverCrashAndErrorClearly) {
  testing::GateWorld w = testing::GateWorld::Make();
  const std::string original = *w.Manifest(2, 9, "acme", Sharing::kPublicPrefix).ToJson();
  std::mt19937 rng(20240607);
  int n_parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string input = ByteMutation(original, rng);
    if (rng() % 4 == 0) input = ByteMutation(input, rng);  // sometimes two mutations
    const std::string canonical = ExpectCleanOutcome<KVManifest>(input, &n_parsed);
    // Byte-level corruption is caught by the syntax, the types or the binding digest: a document
    // that still parses can only have gained insignificant whitespace.
    if (!canonical.empty()) {
      EXPECT_EQ(canonical, original) << "input: " << input;
    }
  }
  EXPECT_LT(n_parsed, 100) << n_parsed << " of 3000 byte-corrupted documents parsed";
  int n_unsealed = 0, n_resealed = 0;
  for (int i = 0; i < 750; ++i) ExpectCleanOutcome<KVManifest>(StructuralMutation(original, rng, false), &n_unsealed);
  for (int i = 0; i < 750; ++i) ExpectCleanOutcome<KVManifest>(StructuralMutation(original, rng, true), &n_resealed);
  // Without a new binding digest no field edit survives; resealed, a swap to a valid value (e.g. 64
  // 'f's for a digest) parses, and the property above holds for it.
  EXPECT_EQ(n_unsealed, 0);
  EXPECT_LT(n_resealed, 150);
}

TEST(ManifestFuzz, DeletedFieldsAreReportedAsMissing) {
  const std::string original = *testing::FixedManifest().ToJson();
  json j = json::parse(original);
  std::vector<std::vector<std::string>> paths;
  std::vector<std::string> prefix;
  CollectPaths(j, prefix, &paths);
  for (const auto& path : paths) {
    json edited = j;
    At(edited, path, path.size() - 1)->erase(path.back());
    Result<KVManifest> r = KVManifest::FromJson(edited.dump());
    ASSERT_FALSE(r.has_value()) << path.back();
    EXPECT_NE(r.error().message().find(path.back() + ": missing"), std::string_view::npos) << r.error().ToString();
  }
  EXPECT_EQ(paths.size(), 31u);  // 10 top-level + 9 binding + 3 + 4 + 3 + 2 nested
}

TEST(ManifestFuzz, TransferCorruptionsNeverCrash) {
  KVTransfer t;
  t.direction = TransferDirection::kOffload;
  t.source = KVTier::kResidentMemory;
  t.target = KVTier::kRemoteStore;
  t.manifest = testing::FixedManifest();
  const std::string original = *t.ToJson();
  std::mt19937 rng(77);
  int n_parsed = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string canonical = ExpectCleanOutcome<KVTransfer>(ByteMutation(original, rng), &n_parsed);
    if (!canonical.empty()) {
      EXPECT_EQ(canonical, original);
    }
  }
  for (int i = 0; i < 500; ++i) ExpectCleanOutcome<KVTransfer>(StructuralMutation(original, rng, false), &n_parsed);
  EXPECT_LT(n_parsed, 40);
}

}  // namespace
}  // namespace fak
