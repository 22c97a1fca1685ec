// A build without RFC 3161 support (FAK_WITH_TSA=OFF; built only then): every anchor call says
// Unsupported, and an anchor is never taken as checked.
#include <gtest/gtest.h>

#include "fak/audit/time_anchor.h"
#include "src/audit/audit_internal.h"
#include "tests/test_util.h"

namespace fak {
namespace {

TEST(TimeAnchorOff, EveryCallSaysTheBuildLacksIt) {
  auto tsa = MakeLocalTimestampAuthority("cert", "key", "1.2.3");
  ASSERT_FALSE(tsa.has_value());
  EXPECT_EQ(tsa.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(tsa.error().message().find("FAK_WITH_TSA"), std::string::npos);
  EXPECT_EQ(MakeTimestampRequest(Digest::Of("x")).error().code(), StatusCode::kUnsupported);
  EXPECT_EQ(VerifyTimeAnchor("token", Digest::Of("x"), "roots").error().code(), StatusCode::kUnsupported);
  // What certificate verification sees: an invalid anchor, so an anchored certificate fails closed.
  internal::AnchorResult r = internal::CheckTimeAnchor("token", Digest::Of("x"), "roots");
  EXPECT_EQ(r.failure, internal::AnchorFailure::kInvalid);
}

}  // namespace
}  // namespace fak
