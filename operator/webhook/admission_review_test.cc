#include "operator/webhook/admission_review.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "operator/common/base64.h"

namespace allocguard::webhook {
namespace {

using nlohmann::json;

json ValidReview() {
  return json::parse(R"({
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
      "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
      "kind": {"group": "", "version": "v1", "kind": "Pod"},
      "resource": {"group": "", "version": "v1", "resource": "pods"},
      "subResource": "",
      "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
      "operation": "CREATE",
      "namespace": "shop",
      "name": "web-0",
      "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                   "groups": ["system:serviceaccounts", "system:authenticated"]},
      "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}},
      "oldObject": null,
      "dryRun": true,
      "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    }
  })");
}

TEST(ParseAdmissionReviewTest, ReadsEveryField) {
  auto r = ParseAdmissionReview(ValidReview().dump());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->uid, "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(r->kind.kind, "Pod");
  EXPECT_EQ(r->kind.version, "v1");
  EXPECT_EQ(r->resource.resource, "pods");
  EXPECT_EQ(r->operation, "CREATE");
  EXPECT_EQ(r->namespace_, "shop");
  EXPECT_EQ(r->name, "web-0");
  EXPECT_EQ(r->object["metadata"]["name"], "web-0");
  EXPECT_TRUE(r->old_object.is_null());
  EXPECT_TRUE(r->dry_run);
  EXPECT_EQ(r->user_info.username, "system:serviceaccount:kube-system:replicaset-controller");
  EXPECT_EQ(r->user_info.groups.size(), 2u);
}

TEST(ParseAdmissionReviewTest, RefusesMalformedInputWithAMessageAndNeverThrows) {
  auto with = [](const char* pointer, json value) {
    json j = ValidReview();
    j[json::json_pointer(pointer)] = std::move(value);
    return j.dump();
  };
  auto without = [](const char* key) {
    json j = ValidReview();
    j["request"].erase(key);
    return j.dump();
  };
  struct Case {
    std::string name;
    std::string body;
    std::string message_part;
  };
  std::vector<Case> cases = {
      {"empty", "", "empty"},
      {"not JSON", "hello", "not JSON"},
      {"truncated JSON", ValidReview().dump().substr(0, 100), "not JSON"},
      {"invalid UTF-8", "{\"apiVersion\":\"\xff\xfe\"}", "not JSON"},
      {"array", "[1,2,3]", "object"},
      {"number", "42", "object"},
      {"null", "null", "object"},
      {"wrong apiVersion", with("/apiVersion", "admission.k8s.io/v1beta1"), "apiVersion"},
      {"apiVersion a number", with("/apiVersion", 1), "apiVersion must be a string"},
      {"wrong kind", with("/kind", "Pod"), "kind"},
      {"no request",
       [] {
         json j = ValidReview();
         j.erase("request");
         return j.dump();
       }(),
       "no request"},
      {"request a string", with("/request", "x"), "no request"},
      {"missing uid", without("uid"), "uid is missing"},
      {"empty uid", with("/request/uid", ""), "uid is missing"},
      {"uid a number", with("/request/uid", 7), "request.uid must be a string"},
      {"kind a string", with("/request/kind", "Pod"), "request.kind must be an object"},
      {"kind.kind missing", with("/request/kind", json::object()), "request.kind.kind"},
      {"operation unknown", with("/request/operation", "PATCH"), "operation"},
      {"operation missing", without("operation"), "operation"},
      {"namespace a number", with("/request/namespace", 5), "request.namespace"},
      {"object an array", with("/request/object", json::array()), "request.object"},
      {"oldObject a string", with("/request/oldObject", "x"), "request.oldObject"},
      {"dryRun a string", with("/request/dryRun", "true"), "dryRun"},
      {"userInfo an array", with("/request/userInfo", json::array()), "userInfo"},
      {"groups of numbers", with("/request/userInfo/groups", {1, 2}), "groups"},
      {"deeply nested", std::string(100000, '[') + std::string(100000, ']'), "deeper"},
      {"deep inside object",
       with("/request/object/spec", json::parse(std::string(200, '[') + std::string(200, ']'))),
       "deeper"},
  };
  for (const auto& c : cases) {
    Result<AdmissionRequest> r(InvalidArgument("unset"));
    EXPECT_NO_THROW(r = ParseAdmissionReview(c.body)) << c.name;
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.name << ": " << r.status().message();
  }
}

TEST(ParseAdmissionReviewTest, AHugeValidReviewParses) {
  json j = ValidReview();
  j["request"]["object"]["metadata"]["annotations"]["big"] = std::string(900000, 'a');
  auto r = ParseAdmissionReview(j.dump());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->object["metadata"]["annotations"]["big"].get<std::string>().size(), 900000u);
}

TEST(ParseAdmissionReviewTest, BracketsInsideStringsDoNotCountAsNesting) {
  json j = ValidReview();
  j["request"]["object"]["metadata"]["annotations"]["x"] = std::string(1000, '[');
  EXPECT_TRUE(ParseAdmissionReview(j.dump()).ok());
}

TEST(EncodeAdmissionReviewTest, AllowWithPatchWarningsAndAnnotations) {
  AdmissionResponse response;
  response.patch =
      json::array({{{"op", "add"}, {"path", "/metadata/annotations/a~1b"}, {"value", "x"}}});
  response.warnings = {"w1"};
  response.audit_annotations = {{"allocguard.io/injected", "jemalloc"}};
  json out = json::parse(EncodeAdmissionReview("uid-1", response));
  EXPECT_EQ(out["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(out["kind"], "AdmissionReview");
  EXPECT_EQ(out["response"]["uid"], "uid-1");
  EXPECT_EQ(out["response"]["allowed"], true);
  EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
  EXPECT_EQ(out["response"]["patch"], EncodeBase64(response.patch.dump()));
  EXPECT_EQ(out["response"]["warnings"], json::array({"w1"}));
  EXPECT_EQ(out["response"]["auditAnnotations"]["allocguard.io/injected"], "jemalloc");
  EXPECT_FALSE(out["response"].contains("status"));
}

TEST(EncodeAdmissionReviewTest, DenyCarriesStatusAndNoPatch) {
  AdmissionResponse response = AdmissionResponse::Deny("held: canary is running");
  response.patch = json::array();  // empty: no patch
  json out = json::parse(EncodeAdmissionReview("uid-2", response));
  EXPECT_EQ(out["response"]["allowed"], false);
  EXPECT_EQ(out["response"]["status"]["code"], 403);
  EXPECT_EQ(out["response"]["status"]["reason"], "Forbidden");
  EXPECT_EQ(out["response"]["status"]["message"], "held: canary is running");
  EXPECT_FALSE(out["response"].contains("patch"));
  EXPECT_FALSE(out["response"].contains("patchType"));
}

// The review as a tree, dumped: what EncodeAdmissionReview wrote before it
// wrote the members itself. The API server sees the same bytes.
std::string EncodedAsATree(const std::string& uid, const AdmissionResponse& response) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  json r = {{"uid", uid}, {"allowed", response.allowed}};
  if (response.status_code != 0 || !response.status_message.empty() ||
      !response.status_reason.empty()) {
    json status = json::object();
    if (response.status_code != 0) status["code"] = response.status_code;
    if (!response.status_message.empty()) status["message"] = response.status_message;
    if (!response.status_reason.empty()) status["reason"] = response.status_reason;
    r["status"] = std::move(status);
  }
  if (response.patch.is_array() && !response.patch.empty()) {
    r["patchType"] = "JSONPatch";
    r["patch"] = EncodeBase64(response.patch.dump(-1, ' ', false, kReplace));
  }
  if (!response.warnings.empty()) r["warnings"] = response.warnings;
  if (!response.audit_annotations.empty()) r["auditAnnotations"] = response.audit_annotations;
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"response", std::move(r)}};
  return review.dump(-1, ' ', false, kReplace);
}

TEST(EncodeAdmissionReviewTest, WritesTheBytesOfTheReviewAsATree) {
  std::vector<std::pair<std::string, AdmissionResponse>> cases;
  cases.emplace_back("uid-1", AdmissionResponse::Allow());
  AdmissionResponse full;
  full.patch = json::array({{{"op", "add"}, {"path", "/a~1b"}, {"value", "\"quoted\"\n\xff"}}});
  full.warnings = {"w1", "w \"2\"", std::string("bad \xff")};
  full.audit_annotations = {{"b", "2"}, {"a", "\t1"}};
  full.status_code = 200;
  full.status_message = "ok";
  cases.emplace_back("uid \"2\" \xfe", full);
  cases.emplace_back("uid-3", AdmissionResponse::Deny("held: \"canary\" running"));
  AdmissionResponse reason_only;
  reason_only.status_reason = "InternalError";
  reason_only.patch = json::array();
  cases.emplace_back("", reason_only);
  for (const auto& [uid, response] : cases) {
    EXPECT_EQ(EncodeAdmissionReview(uid, response), EncodedAsATree(uid, response));
  }
}

TEST(EncodeAdmissionReviewTest, InvalidUtf8IsRepairedNotThrown) {
  AdmissionResponse response = AdmissionResponse::Deny(std::string("bad \xff byte"));
  std::string encoded;
  EXPECT_NO_THROW(encoded = EncodeAdmissionReview("u", response));
  EXPECT_FALSE(json::parse(encoded, nullptr, false).is_discarded());
}

}  // namespace
}  // namespace allocguard::webhook
