// StrCat: concatenate string pieces into one string, sized once.
//
// Also the way around a GCC 12 false positive: `"literal" + std::string(...)` inlines an insert at
// offset 0 that -Wrestrict misreads as an overlapping memcpy of ~2^63 bytes (GCC PR 105651). Text
// built with StrCat or `+=` never takes that path.
#ifndef FAK_SRC_CORE_STR_CAT_H_
#define FAK_SRC_CORE_STR_CAT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace fak::internal {

// Each piece must convert to std::string_view (strings, literals, views); format numbers first
// (std::to_string).
template <class... Pieces>
std::string StrCat(const Pieces&... pieces) {
  const std::string_view views[] = {std::string_view(pieces)...};
  size_t size = 0;
  for (std::string_view v : views) size += v.size();
  std::string out;
  out.reserve(size);
  for (std::string_view v : views) out.append(v);
  return out;
}

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_STR_CAT_H_
