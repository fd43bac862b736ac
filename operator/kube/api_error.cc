#include "operator/kube/api_error.h"

#include <algorithm>
#include <cctype>

namespace allocguard::kube {

namespace {

std::string ReasonForCode(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return code >= 500 ? "InternalError" : "Unknown";
  }
}

std::string StringField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string ApiError::ToString() const {
  std::string out;
  if (code == 0) {
    out = message;
  } else {
    out = (reason.empty() ? ReasonForCode(code) : reason) + " (" + std::to_string(code) + ")";
    if (!message.empty()) out += ": " + message;
  }
  if (!causes.empty()) {
    out += "; causes:";
    for (const auto& c : causes) {
      out += " ";
      if (!c.field.empty()) out += c.field + ": ";
      out += c.message.empty() ? c.type : c.message;
      out += ";";
    }
    out.pop_back();
  }
  return out;
}

Status ApiError::ToStatus() const {
  StatusCode sc;
  if (code == 0 || code == 429 || code >= 500) {
    sc = StatusCode::kUnavailable;
  } else if (code == 404) {
    sc = StatusCode::kNotFound;
  } else if (code == 409 || code == 410 || code == 412) {
    sc = StatusCode::kFailedPrecondition;
  } else if (code == 401 || code == 403) {
    sc = StatusCode::kPermissionDenied;
  } else if (code == 400 || code == 422 || code == 413 || code == 415) {
    sc = StatusCode::kInvalidArgument;
  } else {
    sc = StatusCode::kInternal;
  }
  return Status(sc, ToString());
}

ApiError ApiErrorFromStatusObject(const nlohmann::json& status, int http_status) {
  ApiError e;
  e.code = http_status;
  if (!status.is_object()) {
    e.reason = ReasonForCode(e.code);
    return e;
  }
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    int c = it->get<int>();
    if (c > 0) e.code = c;
  }
  e.reason = StringField(status, "reason");
  if (e.reason.empty()) e.reason = ReasonForCode(e.code);
  e.message = StringField(status, "message");
  if (auto d = status.find("details"); d != status.end() && d->is_object()) {
    if (auto ra = d->find("retryAfterSeconds"); ra != d->end() && ra->is_number_integer()) {
      e.retry_after = std::chrono::seconds(std::max(0, ra->get<int>()));
    }
    if (auto cs = d->find("causes"); cs != d->end() && cs->is_array()) {
      for (const auto& c : *cs) {
        if (!c.is_object()) continue;
        e.causes.push_back(
            {StringField(c, "reason"), StringField(c, "message"), StringField(c, "field")});
      }
    }
  }
  return e;
}

ApiError ParseApiError(int http_status, const std::string& body,
                       const std::string& retry_after_header) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  ApiError e;
  if (parsed.is_object() && parsed.find("kind") != parsed.end() && parsed["kind"] == "Status") {
    e = ApiErrorFromStatusObject(parsed, http_status);
    e.code = http_status;  // the HTTP status is authoritative for the call
  } else {
    e.code = http_status;
    e.reason = ReasonForCode(http_status);
    std::string snippet = body.substr(0, 200);
    std::replace_if(
        snippet.begin(), snippet.end(),
        [](char c) { return !std::isprint(static_cast<unsigned char>(c)); }, ' ');
    e.message = snippet.empty()
                    ? "empty response body"
                    : "unexpected response body: " + snippet + (body.size() > 200 ? "..." : "");
  }
  if (!retry_after_header.empty() &&
      std::all_of(retry_after_header.begin(), retry_after_header.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
      retry_after_header.size() < 7) {
    e.retry_after = std::chrono::seconds(std::stoi(retry_after_header));
  }
  return e;
}

ApiError TransportError(const Status& status) {
  ApiError e;
  e.code = 0;
  e.message = status.message();
  return e;
}

}  // namespace allocguard::kube
