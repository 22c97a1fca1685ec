// FAK_DCHECK in a debug build (NDEBUG unset here whatever this build's type): a true condition is
// evaluated once and passes; a false one aborts, naming the file, the line and the condition.
#include <gtest/gtest.h>

#undef NDEBUG
#include "src/core/dcheck.h"

namespace fak::internal {
namespace {

TEST(DCheckTest, DebugEvaluatesTheConditionOnce) {
  int evaluated = 0;
  FAK_DCHECK(++evaluated == 1);
  EXPECT_EQ(evaluated, 1);
}

TEST(DCheckDeathTest, DebugAbortsNamingFileLineAndCondition) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int two = 2;
  EXPECT_DEATH(FAK_DCHECK(two + 1 == 4), "dcheck_test\\.cc:[0-9]+: FAK_DCHECK\\(two \\+ 1 == 4\\) failed");
}

}  // namespace
}  // namespace fak::internal
