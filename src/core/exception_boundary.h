// ExceptionBoundary: where a public call that allocates sizes chosen by its input (a model file's
// shapes, a JSON document) meets fak's no-exceptions API. An allocation failure inside becomes
// ResourceExhausted naming the call, any other escaped exception a FailedPrecondition naming it —
// never an abort of the host process (issue 20, D1/D2).
#ifndef FAK_SRC_CORE_EXCEPTION_BOUNDARY_H_
#define FAK_SRC_CORE_EXCEPTION_BOUNDARY_H_

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "fak/core/status.h"

namespace fak::internal {

// Runs f() (which returns a Status or a Result<T>) and turns an exception into an error of that type.
template <class F>
auto ExceptionBoundary(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(std::string(what) + ": out of memory");
  } catch (const std::length_error& e) {
    return ResourceExhausted(std::string(what) + ": a size is too large (" + e.what() + ")");
  } catch (const std::exception& e) {
    return FailedPrecondition(std::string(what) + ": unexpected error: " + e.what());
  }
}

}  // namespace fak::internal

#endif  // FAK_SRC_CORE_EXCEPTION_BOUNDARY_H_
