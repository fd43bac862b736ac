#pragma once

// admission.k8s.io/v1 AdmissionReview: the request the API server sends a
// webhook and the response it expects, as plain structs. Parsing never throws
// and refuses anything malformed with a message naming the field.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/common/status.h"

namespace allocguard::webhook {

struct GroupVersionKind {
  std::string group;  // "" for the core group
  std::string version;
  std::string kind;
};

struct GroupVersionResource {
  std::string group;
  std::string version;
  std::string resource;  // plural: "pods"
};

struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  // Authenticator-specific attributes (scopes, ...), passed on unchanged to a
  // SubjectAccessReview so it judges the same identity the API server did.
  std::map<std::string, std::vector<std::string>> extra;
};

// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct AdmissionRequest {
  std::string uid;  // never empty in a parsed request
  GroupVersionKind kind;
  GroupVersionResource resource;
  std::string sub_resource;
  std::string operation;  // CREATE, UPDATE, DELETE or CONNECT
  std::string namespace_;
  std::string name;           // may be empty on CREATE (generateName)
  nlohmann::json object;      // null when absent (DELETE)
  nlohmann::json old_object;  // null when absent (CREATE)
  bool dry_run = false;
  UserInfo user_info;
};

// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct AdmissionResponse {
  bool allowed = true;
  // A status for the user (shown by kubectl on a denial). code 0: none.
  int status_code = 0;
  std::string status_message;
  std::string status_reason;  // metav1.StatusReason, e.g. "Forbidden"
  // RFC 6902 operations; null or an empty array: no patch. Only mutating
  // webhooks may return one.
  nlohmann::json patch;
  std::vector<std::string> warnings;
  std::map<std::string, std::string> audit_annotations;

  static AdmissionResponse Allow() { return AdmissionResponse{}; }
  // allowed=false with a 403 Forbidden status carrying message.
  static AdmissionResponse Deny(std::string message);
};

// Nesting deeper than this is refused before parsing (a Pod is ~10 deep).
inline constexpr int kMaxJsonDepth = 128;

// Parses an admission.k8s.io/v1 AdmissionReview. Any malformed input (empty,
// not JSON, too deeply nested, wrong apiVersion or kind, missing request or
// uid, a field of the wrong type) is kInvalidArgument naming the problem.
// Never throws.
Result<AdmissionRequest> ParseAdmissionReview(const std::string& body);

// The admission.k8s.io/v1 AdmissionReview answering request uid. The patch,
// when present, is serialized and base64-encoded with patchType JSONPatch.
// Strings that are not valid UTF-8 are repaired, never thrown on.
std::string EncodeAdmissionReview(const std::string& uid, const AdmissionResponse& response);

}  // namespace allocguard::webhook
