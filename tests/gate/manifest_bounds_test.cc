// KV manifests and transfers nested past the JSON depth limit are refused with the limit named,
// before any recursive copy or dump of the document.
#include <gtest/gtest.h>

#include "fak/gate/kv_manifest.h"
#include "fak/gate/kv_transfer.h"
#include "tests/support/nested_json.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(ManifestBounds, DeeplyNestedManifestAndTransferAreRefused) {
  // Under the manifest's own 64 KiB size limit, so the depth is what refuses it.
  const std::string deep = R"({"binding":)" + testing::NestedArrays(30'000) + "}";
  Result<KVManifest> m = KVManifest::FromJson(deep);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.error().message().find("manifest: JSON nested deeper than the limit of 64 levels"), std::string::npos)
      << m.error().ToString();
  Result<KVTransfer> t = KVTransfer::FromJson(deep);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message().find("transfer: JSON nested deeper than the limit of 64 levels"), std::string::npos)
      << t.error().ToString();
}

}  // namespace
}  // namespace fak
