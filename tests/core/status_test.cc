// Status and Result<T>: codes, messages, context, copy/move and the propagation macros.
#include "fak/core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace fak {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, OkCodeWithMessageIsStillOk) {
  // A message on success is dropped: success is exactly one null pointer.
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, EveryFactoryCarriesItsCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  std::vector<Case> cases;
  cases.push_back({InvalidArgument("m"), StatusCode::kInvalidArgument, "InvalidArgument"});
  cases.push_back({NotFound("m"), StatusCode::kNotFound, "NotFound"});
  cases.push_back({Corruption("m"), StatusCode::kCorruption, "Corruption"});
  cases.push_back({IOError("m"), StatusCode::kIOError, "IOError"});
  cases.push_back({Unsupported("m"), StatusCode::kUnsupported, "Unsupported"});
  cases.push_back({ResourceExhausted("m"), StatusCode::kResourceExhausted, "ResourceExhausted"});
  cases.push_back({FailedPrecondition("m"), StatusCode::kFailedPrecondition, "FailedPrecondition"});
  cases.push_back({VerificationFailed("m"), StatusCode::kVerificationFailed, "VerificationFailed"});
  cases.push_back({Unavailable("m"), StatusCode::kUnavailable, "Unavailable"});
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok()) << c.name;
    EXPECT_EQ(c.status.code(), c.code) << c.name;
    EXPECT_EQ(c.status.message(), "m") << c.name;
    EXPECT_EQ(StatusCodeName(c.code), c.name);
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
  }
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(999)), "Unknown");
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status s = NotFound("tensor 'blk.0.attn_q.weight'").WithContext("loading model.gguf");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading model.gguf: tensor 'blk.0.attn_q.weight'");
  // Nested context reads outermost first.
  EXPECT_EQ(s.WithContext("open").message(), "open: loading model.gguf: tensor 'blk.0.attn_q.weight'");
  // The original is unchanged (WithContext is const and returns a copy).
  EXPECT_EQ(NotFound("x").WithContext("a").WithContext("b").ToString(), "NotFound: b: a: x");
}

TEST(StatusTest, WithContextOnOkIsOk) {
  Status s = Status::Ok().WithContext("anything");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, CopyIsDeepAndIndependent) {
  Status a = Corruption("bad block");
  Status b = a;
  EXPECT_EQ(b.code(), StatusCode::kCorruption);
  EXPECT_EQ(b.message(), "bad block");
  a = IOError("disk");  // reassigning the source does not touch the copy
  EXPECT_EQ(b.ToString(), "Corruption: bad block");
  EXPECT_EQ(a.ToString(), "IOError: disk");
  Status c;
  c = b;
  EXPECT_EQ(c.ToString(), "Corruption: bad block");
  c = Status::Ok();
  EXPECT_TRUE(c.ok());
  EXPECT_FALSE(b.ok());
  Status& self = c;
  c = InvalidArgument("x");
  c = self;  // self-assignment keeps the value
  EXPECT_EQ(c.ToString(), "InvalidArgument: x");
}

TEST(StatusTest, MoveTransfersCodeAndMessage) {
  Status a = Unsupported("q4_k");
  Status b = std::move(a);
  EXPECT_EQ(b.code(), StatusCode::kUnsupported);
  EXPECT_EQ(b.message(), "q4_k");
  Status c;
  c = std::move(b);
  EXPECT_EQ(c.ToString(), "Unsupported: q4_k");
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  EXPECT_TRUE(r.error().ok());
  EXPECT_TRUE(r.status().ok());
  *r = 7;
  EXPECT_EQ(r.value(), 7);
}

TEST(ResultTest, HoldsError) {
  Result<std::string> r = NotFound("no such key");
  EXPECT_FALSE(r.has_value());
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(static_cast<bool>(r));
  EXPECT_EQ(r.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.error().message(), "no such key");
  EXPECT_EQ(r.status().ToString(), "NotFound: no such key");
}

TEST(ResultTest, FromOkStatusIsAnError) {
  // Building a Result from OK is a programming error, reported rather than yielding a bogus value.
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(**r, 5);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

TEST(ResultTest, ArrowAndConstAccess) {
  const Result<std::string> r = std::string("abc");
  EXPECT_EQ(r->size(), 3u);
  EXPECT_EQ(*r, "abc");
  EXPECT_EQ(r.value(), "abc");
}

TEST(ResultTest, CopyKeepsError) {
  Result<int> a = Corruption("x");
  Result<int> b = a;
  EXPECT_EQ(b.error().ToString(), "Corruption: x");
  EXPECT_EQ(a.error().ToString(), "Corruption: x");
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> r = NotFound("x");
  EXPECT_DEATH({ (void)r.value(); }, "");
}

// --- the propagation macros ---

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("value " + std::to_string(v) + " is not positive");
  return v;
}

Status CheckPositive(int v) { return ParsePositive(v).status(); }

int g_after_return_if_error = 0;

Status TwoChecks(int a, int b) {
  FAK_RETURN_IF_ERROR(CheckPositive(a));
  ++g_after_return_if_error;
  FAK_RETURN_IF_ERROR(CheckPositive(b));
  ++g_after_return_if_error;
  return Status::Ok();
}

Result<int> SumOfParsed(int a, int b) {
  FAK_ASSIGN_OR_RETURN(int x, ParsePositive(a));
  FAK_ASSIGN_OR_RETURN(int y, ParsePositive(b));  // two uses in one scope need distinct temporaries
  return x + y;
}

Status AssignIntoExisting(int a, int* out) {
  int x = -1;
  FAK_ASSIGN_OR_RETURN(x, ParsePositive(a));
  *out = x;
  return Status::Ok();
}

Result<std::unique_ptr<int>> MakeBox(int v) {
  if (v < 0) return InvalidArgument("negative");
  return std::make_unique<int>(v);
}

Result<int> Unbox(int v) {
  FAK_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(v));  // moves a move-only value out
  return *box;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtFirstError) {
  g_after_return_if_error = 0;
  EXPECT_OK(TwoChecks(1, 2));
  EXPECT_EQ(g_after_return_if_error, 2);

  g_after_return_if_error = 0;
  Status s = TwoChecks(1, -3);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "value -3 is not positive");
  EXPECT_EQ(g_after_return_if_error, 1);

  g_after_return_if_error = 0;
  s = TwoChecks(0, -3);
  EXPECT_EQ(s.message(), "value 0 is not positive");
  EXPECT_EQ(g_after_return_if_error, 0);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  Result<int> ok = SumOfParsed(2, 3);
  ASSERT_OK(ok);
  EXPECT_EQ(*ok, 5);

  Result<int> bad = SumOfParsed(2, -1);
  EXPECT_EQ(bad.error().ToString(), "InvalidArgument: value -1 is not positive");

  int out = 0;
  EXPECT_OK(AssignIntoExisting(9, &out));
  EXPECT_EQ(out, 9);
  out = 0;
  EXPECT_EQ(AssignIntoExisting(-9, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 0);

  ASSERT_OK_AND_ASSIGN(int v, Unbox(11));
  EXPECT_EQ(v, 11);
  EXPECT_EQ(Unbox(-1).error().message(), "negative");
}

}  // namespace
}  // namespace fak
