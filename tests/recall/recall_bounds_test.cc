// A recall image nested past the JSON depth limit (issue 31: loading one crashed the process on
// nlohmann's recursive checksum dump) is refused as Corruption naming the limit.
#include <gtest/gtest.h>

#include "fak/recall/recall.h"
#include "tests/store/store_test_util.h"
#include "tests/support/nested_json.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(RecallBounds, DeeplyNestedImageIsRefused) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.Sub("recall");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RecallStore> store, RecallStore::Open(dir));
  ScreenChain chain = ScreenChain::Default();
  const std::vector<RecallSegment> segments{{"u1", SegmentKind::kUser, "user: hello"}};
  ASSERT_OK(store->Save("good", segments, chain));
  // Valid format and version, so the reader goes on to its checksum: a dump of the whole document.
  testing::WriteAll(dir + "/images/crafted.json",
                    R"({"format":"fak.recall_image","version":1,"checksum":"00","x":)" + testing::NestedArrays() + "}");
  Result<RecalledTranscript> t = store->Load("crafted", chain);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kCorruption);
  EXPECT_NE(t.error().message().find("JSON nested deeper than the limit of 64 levels"), std::string::npos)
      << t.error().ToString();
  ASSERT_OK(store->Load("good", chain));  // the store still serves the others
}

}  // namespace
}  // namespace fak
