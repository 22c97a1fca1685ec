// Tamper sweep over a KV manifest (issue 20): every single-bit flip of its canonical JSON is a typed
// error from KVManifest::FromJson (a changed field fails binding_digest: Corruption), never a
// manifest with different values.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "fak/gate/kv_manifest.h"
#include "tests/gate/gate_test_util.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(TamperSweep, EveryBitFlipOfAKVManifestIsDetected) {
  const KVManifest want = testing::FixedManifest();
  ASSERT_OK_AND_ASSIGN(const std::string good, want.ToJson());
  int n_corruption = 0, n_malformed = 0, n_same = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      Result<KVManifest> m = KVManifest::FromJson(bad);
      if (!m.has_value()) {
        const StatusCode code = m.error().code();
        EXPECT_TRUE(code == StatusCode::kCorruption || code == StatusCode::kInvalidArgument ||
                    code == StatusCode::kUnsupported)
            << "byte " << i << ": " << m.error().ToString();
        ++(code == StatusCode::kCorruption ? n_corruption : n_malformed);
      } else if (*m == want) {
        ++n_same;  // e.g. a flip inside JSON syntax that still spells the same values
      } else {
        ADD_FAILURE() << "flip of byte " << i << " bit " << bit << " parsed as a different manifest";
      }
    }
  }
  std::cout << "[ tamper   ] manifest " << good.size() << " bytes, " << good.size() * 8 << " flips: " << n_corruption
            << " binding_digest mismatches, " << n_malformed << " malformed or unsupported, " << n_same
            << " the same values, 0 different\n";
}

}  // namespace
}  // namespace fak
