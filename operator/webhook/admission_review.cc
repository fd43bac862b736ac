#include "operator/webhook/admission_review.h"

#include "operator/common/base64.h"

namespace allocguard::webhook {
namespace {

using nlohmann::json;

// The deepest nesting of [ and { outside strings; stops counting past limit.
int JsonDepth(const std::string& text, int limit) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Reads an optional string field; a present field of another type is an error.
Status ReadString(const json& parent, const char* key, const std::string& where, std::string* out) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(where + "." + key + " must be a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

// Moves the object out of `parent` (a review parsed for this request alone):
// an admitted Pod is not copied on its way to the handler.
Status TakeObjectOrNull(json& parent, const char* key, const std::string& where, json* out) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return InvalidArgument(where + "." + key + " must be an object");
  *out = std::move(*it);
  return Status::Ok();
}

Status ParseRequest(json& request, AdmissionRequest* out) {
  const std::string r = "request";
  AG_RETURN_IF_ERROR(ReadString(request, "uid", r, &out->uid));
  if (out->uid.empty()) return InvalidArgument("request.uid is missing");

  json kind = json::object();
  AG_RETURN_IF_ERROR(TakeObjectOrNull(request, "kind", r, &kind));
  AG_RETURN_IF_ERROR(ReadString(kind, "group", r + ".kind", &out->kind.group));
  AG_RETURN_IF_ERROR(ReadString(kind, "version", r + ".kind", &out->kind.version));
  AG_RETURN_IF_ERROR(ReadString(kind, "kind", r + ".kind", &out->kind.kind));
  if (out->kind.kind.empty()) return InvalidArgument("request.kind.kind is missing");

  json resource = json::object();
  AG_RETURN_IF_ERROR(TakeObjectOrNull(request, "resource", r, &resource));
  AG_RETURN_IF_ERROR(ReadString(resource, "group", r + ".resource", &out->resource.group));
  AG_RETURN_IF_ERROR(ReadString(resource, "version", r + ".resource", &out->resource.version));
  AG_RETURN_IF_ERROR(ReadString(resource, "resource", r + ".resource", &out->resource.resource));

  AG_RETURN_IF_ERROR(ReadString(request, "subResource", r, &out->sub_resource));
  AG_RETURN_IF_ERROR(ReadString(request, "operation", r, &out->operation));
  if (out->operation != "CREATE" && out->operation != "UPDATE" && out->operation != "DELETE" &&
      out->operation != "CONNECT") {
    return InvalidArgument("request.operation \"" + out->operation +
                           "\" is not CREATE, UPDATE, DELETE or CONNECT");
  }
  AG_RETURN_IF_ERROR(ReadString(request, "namespace", r, &out->namespace_));
  AG_RETURN_IF_ERROR(ReadString(request, "name", r, &out->name));
  AG_RETURN_IF_ERROR(TakeObjectOrNull(request, "object", r, &out->object));
  AG_RETURN_IF_ERROR(TakeObjectOrNull(request, "oldObject", r, &out->old_object));
  if (auto it = request.find("dryRun"); it != request.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidArgument("request.dryRun must be a boolean");
    out->dry_run = it->get<bool>();
  }
  json user = json::object();
  AG_RETURN_IF_ERROR(TakeObjectOrNull(request, "userInfo", r, &user));
  AG_RETURN_IF_ERROR(ReadString(user, "username", r + ".userInfo", &out->user_info.username));
  if (auto it = user.find("groups"); it != user.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("request.userInfo.groups must be an array");
    for (const auto& g : *it) {
      if (!g.is_string()) {
        return InvalidArgument("request.userInfo.groups must hold strings");
      }
      out->user_info.groups.push_back(g.get<std::string>());
    }
  }
  AG_RETURN_IF_ERROR(ReadString(user, "uid", r + ".userInfo", &out->user_info.uid));
  if (auto it = user.find("extra"); it != user.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("request.userInfo.extra must be an object");
    for (auto e = it->begin(); e != it->end(); ++e) {
      if (!e.value().is_array()) {
        return InvalidArgument("request.userInfo.extra." + e.key() + " must be an array");
      }
      std::vector<std::string>& values = out->user_info.extra[e.key()];
      for (const auto& v : e.value()) {
        if (!v.is_string()) {
          return InvalidArgument("request.userInfo.extra." + e.key() + " must hold strings");
        }
        values.push_back(v.get<std::string>());
      }
    }
  }
  return Status::Ok();
}

}  // namespace

AdmissionResponse AdmissionResponse::Deny(std::string message) {
  AdmissionResponse r;
  r.allowed = false;
  r.status_code = 403;
  r.status_reason = "Forbidden";
  r.status_message = std::move(message);
  return r;
}

Result<AdmissionRequest> ParseAdmissionReview(const std::string& body) {
  if (body.empty()) return InvalidArgument("empty body: expected an AdmissionReview");
  if (JsonDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return InvalidArgument("the AdmissionReview nests deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  }
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) return InvalidArgument("the body is not JSON");
  if (!review.is_object()) return InvalidArgument("the AdmissionReview must be a JSON object");
  std::string api_version;
  std::string kind;
  AG_RETURN_IF_ERROR(ReadString(review, "apiVersion", "AdmissionReview", &api_version));
  AG_RETURN_IF_ERROR(ReadString(review, "kind", "AdmissionReview", &kind));
  if (api_version != "admission.k8s.io/v1") {
    return InvalidArgument("apiVersion \"" + api_version +
                           "\" is not admission.k8s.io/v1 (set admissionReviewVersions: [v1])");
  }
  if (kind != "AdmissionReview") {
    return InvalidArgument("kind \"" + kind + "\" is not AdmissionReview");
  }
  auto request = review.find("request");
  if (request == review.end() || !request->is_object()) {
    return InvalidArgument("the AdmissionReview has no request object");
  }
  AdmissionRequest out;
  AG_RETURN_IF_ERROR(ParseRequest(*request, &out));
  return out;
}

std::string EncodeAdmissionReview(const std::string& uid, const AdmissionResponse& response) {
  // Written member by member rather than built as a tree and dumped: a tree
  // would copy the base64 patch into a node and escape it character by
  // character. The bytes are those of the tree's dump (members in key
  // order), which admission_review_test checks.
  auto dump = [](const json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string out =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":)";
  out += response.allowed ? "true" : "false";
  if (!response.audit_annotations.empty()) {
    out += R"(,"auditAnnotations":)";
    out += dump(response.audit_annotations);
  }
  if (response.patch.is_array() && !response.patch.empty()) {
    // Base64 needs no escaping in a JSON string.
    out += R"(,"patch":")";
    out += EncodeBase64(dump(response.patch));
    out += R"(","patchType":"JSONPatch")";
  }
  if (response.status_code != 0 || !response.status_message.empty() ||
      !response.status_reason.empty()) {
    json status = json::object();
    if (response.status_code != 0) status["code"] = response.status_code;
    if (!response.status_message.empty()) status["message"] = response.status_message;
    if (!response.status_reason.empty()) status["reason"] = response.status_reason;
    out += R"(,"status":)";
    out += dump(status);
  }
  out += R"(,"uid":)";
  out += dump(uid);
  if (!response.warnings.empty()) {
    out += R"(,"warnings":)";
    out += dump(response.warnings);
  }
  out += "}}";
  return out;
}

}  // namespace allocguard::webhook
