#pragma once

// Status and Result<T>: errors as values across module boundaries.
//
// A Status is either OK or carries a code and a message written for the person
// who will read it (a CLI user, an event, a condition). Code never throws across
// a module boundary; exceptions from third-party libraries are caught in the one
// adapter that calls them and turned into a Status there.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace allocguard {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the input is wrong; the message names the field or line
  kNotFound,         // a file, library, process or object does not exist
  kUnavailable,      // a transient condition; retrying may help
  kFailedPrecondition,
  kPermissionDenied,
  kDeadlineExceeded,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: load file line 3: weight must be positive".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status FailedPrecondition(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status PermissionDenied(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
inline Status DeadlineExceeded(std::string m) {
  return Status(StatusCode::kDeadlineExceeded, std::move(m));
}
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  // OK when a value is held.
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : status_;
  }

  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_ = Internal("Result holds no value");
};

}  // namespace allocguard

// Propagates a non-OK Status from the enclosing function.
#define AG_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::allocguard::Status ag_status_ = (expr); \
    if (!ag_status_.ok()) return ag_status_;  \
  } while (0)

#define AG_CONCAT_INNER(a, b) a##b
#define AG_CONCAT(a, b) AG_CONCAT_INNER(a, b)

// AG_ASSIGN_OR_RETURN(auto x, MakeX()); declares x or returns the error.
// lhs is a declaration and tmp a name: neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define AG_ASSIGN_OR_RETURN(lhs, expr) \
  AG_ASSIGN_OR_RETURN_IMPL(AG_CONCAT(ag_result_, __LINE__), lhs, expr)
#define AG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
