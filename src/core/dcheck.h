// FAK_DCHECK(cond): an internal invariant, checked in debug builds. What callers can get wrong is a
// Status; what only a bug inside fak can break (an index another function already range-checked, a
// value a factory validated) is a FAK_DCHECK, so the debug, ASan and TSan builds stop at the first
// broken invariant, naming it, instead of running on into undefined behaviour.
//
// With NDEBUG unset: a false `cond` prints "file:line: FAK_DCHECK(cond) failed" to stderr and
// aborts. With NDEBUG (release): `cond` is not evaluated — its side effects do not happen, it costs
// nothing — but it is still compiled, so it cannot rot. Internal: not part of the public headers.
#ifndef FAK_SRC_CORE_DCHECK_H_
#define FAK_SRC_CORE_DCHECK_H_

#include <cstdio>
#include <cstdlib>

namespace fak::internal {

[[noreturn]] inline void DCheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: FAK_DCHECK(%s) failed\n", file, line, condition);
  std::fflush(stderr);
  std::abort();  // debug builds only: a broken invariant is a bug in fak, never bad input
}

}  // namespace fak::internal

#ifndef NDEBUG
#define FAK_DCHECK(cond) \
  (static_cast<bool>(cond) ? static_cast<void>(0) : ::fak::internal::DCheckFailed(#cond, __FILE__, __LINE__))
#else
// sizeof's operand is never evaluated: the condition type-checks and its names count as used.
#define FAK_DCHECK(cond) static_cast<void>(sizeof(static_cast<bool>(cond)))
#endif

#endif  // FAK_SRC_CORE_DCHECK_H_
