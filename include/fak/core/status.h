// Status and Result<T>: how every fallible fak call reports failure, without exceptions.
//
// Corrupt files, bad signatures and cache misses are expected input, not exceptional, and a host
// may build with -fno-exceptions. A Status is a code plus a message naming the field or value at
// fault; success costs one null pointer. Result<T> has the shape of std::expected (has_value,
// value, error, operator*) so moving to C++23 is mechanical.
#ifndef FAK_CORE_STATUS_H_
#define FAK_CORE_STATUS_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "fak/core/export.h"

namespace fak {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kCorruption,
  kIOError,
  kUnsupported,
  kResourceExhausted,
  kFailedPrecondition,
  kVerificationFailed,
  // A dependency (e.g. a Redis server) cannot be reached now; retry later. Says nothing about the
  // data: callers must not read it as "absent", "denied" or "corrupt".
  kUnavailable,
};

FAK_EXPORT std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] FAK_EXPORT Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  std::string_view message() const { return rep_ ? std::string_view(rep_->message) : std::string_view(); }
  // "InvalidArgument: <message>" or "OK".
  std::string ToString() const;
  // Prepends context ("loading foo.gguf: ") to the message; a no-op on OK.
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Corruption(std::string m) { return Status(StatusCode::kCorruption, std::move(m)); }
inline Status IOError(std::string m) { return Status(StatusCode::kIOError, std::move(m)); }
inline Status Unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
inline Status VerificationFailed(std::string m) { return Status(StatusCode::kVerificationFailed, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }

// A value or an error Status. Constructing from an OK Status is a programming error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(v_).ok()) v_.template emplace<1>(StatusCode::kFailedPrecondition, "Result built from OK Status");
  }

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  bool ok() const { return has_value(); }

  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }
  T&& operator*() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }

  // The error; OK when a value is held.
  Status error() const { return has_value() ? Status() : std::get<1>(v_); }
  Status status() const { return error(); }

 private:
  T& Checked() {
    if (v_.index() != 0) std::abort();  // reading the value of an error is a programming error
    return std::get<0>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace fak

// Returns early from the enclosing function when `expr` is an error Status.
#define FAK_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::fak::Status fak_status_ = (expr);        \
    if (!fak_status_.ok()) return fak_status_; \
  } while (0)

#define FAK_CONCAT_INNER_(a, b) a##b
#define FAK_CONCAT_(a, b) FAK_CONCAT_INNER_(a, b)
// `FAK_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define FAK_ASSIGN_OR_RETURN(lhs, expr) FAK_ASSIGN_OR_RETURN_IMPL_(FAK_CONCAT_(fak_result_, __LINE__), lhs, expr)
#define FAK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.has_value()) return tmp.error();        \
  lhs = std::move(*tmp)

#endif  // FAK_CORE_STATUS_H_
