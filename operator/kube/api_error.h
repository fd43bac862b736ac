#pragma once

// Errors from the Kubernetes API as values that keep what the server said.
//
// A failed call yields an ApiError: the HTTP code and the server's Status
// reason, message and causes (or, when the request never got an answer, code
// 0 and a transport message). ApiResult<T> carries a T or an ApiError and
// works with AG_RETURN_IF_ERROR / AG_ASSIGN_OR_RETURN through status().

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"

namespace allocguard::kube {

struct StatusCause {
  std::string type;  // e.g. "FieldValueInvalid", "FieldManagerConflict"
  std::string message;
  std::string field;
};

struct ApiError {
  int code = 0;        // HTTP status; 0 when the server was never reached
  std::string reason;  // metav1.StatusReason: "NotFound", "Conflict", "Expired", ...
  std::string message;
  std::vector<StatusCause> causes;
  // From a Retry-After header or details.retryAfterSeconds; zero when absent.
  std::chrono::seconds retry_after{0};

  bool IsNotFound() const { return code == 404; }
  bool IsAlreadyExists() const { return code == 409 && reason == "AlreadyExists"; }
  bool IsConflict() const { return code == 409 && reason != "AlreadyExists"; }
  bool IsGone() const { return code == 410; }  // "Expired" or "Gone": relist
  bool IsUnauthorized() const { return code == 401; }
  bool IsTransport() const { return code == 0; }

  // "Conflict (409): Operation cannot be fulfilled ...; causes: field: message".
  std::string ToString() const;
  // kNotFound, kFailedPrecondition (conflicts, gone), kPermissionDenied,
  // kInvalidArgument, kUnavailable (transport, 429, 5xx), kInternal.
  Status ToStatus() const;
};

// Builds an ApiError from an HTTP error response. The body is normally a
// metav1.Status; anything else (HTML from a proxy, truncated JSON) still gives
// a usable error whose message quotes the start of the body.
ApiError ParseApiError(int http_status, const std::string& body,
                       const std::string& retry_after_header = "");

// Builds an ApiError from a metav1.Status already parsed (the object of a
// watch ERROR event). http_status is used when the object carries no code.
ApiError ApiErrorFromStatusObject(const nlohmann::json& status, int http_status);

// An error for a request that got no HTTP answer (refused, reset, timed out).
ApiError TransportError(const Status& status);

template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  ApiResult(ApiError error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  // REQUIRES: !ok().
  const ApiError& error() const { return error_; }
  Status status() const { return ok() ? Status::Ok() : error_.ToStatus(); }

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
  ApiError error_;
};

}  // namespace allocguard::kube
