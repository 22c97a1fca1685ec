// FAK_DCHECK in a release build (NDEBUG set here whatever this build's type): the condition is
// compiled but never evaluated, so neither its side effects nor a false value do anything.
#include <gtest/gtest.h>

#ifndef NDEBUG
#define NDEBUG
#endif
#include "src/core/dcheck.h"

namespace fak::internal {
namespace {

TEST(DCheckTest, ReleaseDoesNotEvaluateTheCondition) {
  int evaluated = 0;
  FAK_DCHECK(++evaluated == 1);
  FAK_DCHECK(++evaluated == 100);  // false, and harmless
  EXPECT_EQ(evaluated, 0);
}

}  // namespace
}  // namespace fak::internal
