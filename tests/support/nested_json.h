// Deeply nested JSON for the readers' depth-limit tests: deep enough that nlohmann's recursive
// dump, copy or compare would exhaust a thread's stack on it (issue 31's crash was ~60,000 levels).
#ifndef FAK_TESTS_SUPPORT_NESTED_JSON_H_
#define FAK_TESTS_SUPPORT_NESTED_JSON_H_

#include <string>

namespace fak::testing {

inline constexpr int kHostileDepth = 200'000;

// `depth` arrays, one inside the other: "[[[...]]]".
inline std::string NestedArrays(int depth = kHostileDepth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace fak::testing

#endif  // FAK_TESTS_SUPPORT_NESTED_JSON_H_
