// Test helpers: Status assertions and small data generators.
#ifndef FAK_TESTS_TEST_UTIL_H_
#define FAK_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fak/core/status.h"

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    ::fak::Status s_ = ::fak::testing::ToStatus(expr);   \
    ASSERT_TRUE(s_.ok()) << s_.ToString();               \
  } while (0)
#define EXPECT_OK(expr)                                  \
  do {                                                   \
    ::fak::Status s_ = ::fak::testing::ToStatus(expr);   \
    EXPECT_TRUE(s_.ok()) << s_.ToString();               \
  } while (0)
// `ASSERT_OK_AND_ASSIGN(auto x, MakeX());`
#define ASSERT_OK_AND_ASSIGN(lhs, expr) ASSERT_OK_AND_ASSIGN_IMPL_(FAK_CONCAT_(test_result_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  ASSERT_TRUE(tmp.has_value()) << tmp.error().ToString(); \
  lhs = std::move(*tmp)

namespace fak::testing {

// Whitespace-separated token ids (fixture .tokens files).
inline std::vector<int32_t> ReadTokenIds(const std::string& path) {
  std::ifstream in(path);
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// Raw little-endian f32 values (fixture logits files).
inline std::vector<float> ReadF32s(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

inline Status ToStatus(const Status& s) { return s; }
template <class T>
Status ToStatus(const Result<T>& r) { return r.error(); }

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace fak::testing

#endif  // FAK_TESTS_TEST_UTIL_H_
