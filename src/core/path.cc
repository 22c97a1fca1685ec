// Path helpers: string work only.
#include "src/core/path.h"

namespace fak::internal {

std::string JoinPath(std::string_view a, std::string_view b) {
  std::string out(a);
  if (!out.empty() && out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string ParentDir(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

bool IsSafeName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 200) return false;
  for (char c : name) {
    if (c == '/' || c == '\0') return false;
  }
  return true;
}

}  // namespace fak::internal
