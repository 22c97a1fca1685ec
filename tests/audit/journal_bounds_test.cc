// A journal row or deletion certificate nested past the JSON depth limit (issue 31: replaying such
// a journal crashed `fak serve --state` and fak.Auditor on nlohmann's recursive dump) is refused
// with a clear error.
#include <gtest/gtest.h>

#include "fak/audit/audit.h"
#include "tests/store/store_test_util.h"
#include "tests/support/nested_json.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(JournalBounds, DeeplyNestedRowIsRefusedNotReplayed) {
  testing::ScopedTempDir tmp;
  const std::string path = tmp.Sub("audit.journal");
  const std::string zeros(64, '0');
  const std::string row = R"({"hash":")" + zeros + R"(","kind":"test","payload":{"a":)" + testing::NestedArrays() +
                          R"(},"prev_hash":")" + zeros + R"(","seq":1,"subject":"s","time":1})";
  testing::WriteAll(path, row + "\n");
  for (int pass = 0; pass < 2; ++pass) {  // Open, and a second Open of the same file: nothing changed it
    Result<std::unique_ptr<Journal>> j = Journal::Open(path);
    ASSERT_FALSE(j.has_value());
    EXPECT_EQ(j.error().code(), StatusCode::kCorruption) << j.error().ToString();
    EXPECT_NE(j.error().message().find("JSON nested deeper than the limit of 64 levels"), std::string::npos)
        << j.error().ToString();
  }
  EXPECT_EQ(testing::ReadAll(path), row + "\n");  // refused, not "recovered" by truncation
}

TEST(JournalBounds, AppendRefusesADeeplyNestedPayload) {
  testing::ScopedTempDir tmp;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Journal> j, Journal::Open(tmp.Sub("audit.journal")));
  Result<JournalRow> r = j->Append("test", "s", R"({"a":)" + testing::NestedArrays() + "}");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("nested deeper than the limit"), std::string::npos) << r.error().ToString();
  ASSERT_OK(j->Append("test", "s", R"({"a":[[1]]})"));  // the journal still takes rows
}

TEST(JournalBounds, ADeeplyNestedCertificateIsRefused) {
  Result<DeletionCertificate> c = DeletionCertificate::FromJson(R"({"format":)" + testing::NestedArrays() + "}");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("deletion certificate: JSON nested deeper than the limit of 64 levels"), std::string::npos)
      << c.error().ToString();
}

}  // namespace
}  // namespace fak
