// Path helpers shared by every Env user: pure string work, no system calls (those go through Env).
#ifndef FAK_SRC_CORE_PATH_H_
#define FAK_SRC_CORE_PATH_H_

#include <string>
#include <string_view>

namespace fak::internal {

// `a` + "/" + `b`, without doubling a trailing slash of `a`.
std::string JoinPath(std::string_view a, std::string_view b);

// The directory part of `path`: "." for a bare name, "/" for a file in the root.
std::string ParentDir(std::string_view path);

// True when `name` is one path component that cannot escape its directory: non-empty, not "." or
// "..", no '/', no NUL, at most 200 bytes.
bool IsSafeName(std::string_view name);

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_PATH_H_
