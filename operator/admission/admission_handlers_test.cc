#include "operator/admission/admission_handlers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/kube/credentials.h"
#include "operator/kube/transport.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The API server as the handlers see it: SubjectAccessReviews answered with
// `allowed`; anything else (Events) accepted and counted.
class FakeApiServer final : public kube::Transport {
 public:
  bool allowed = true;
  int access_reviews = 0;

  Result<net::HttpResponse> Send(const net::HttpRequest& request) override {
    net::HttpResponse r;
    r.status = 201;
    r.headers.emplace("Content-Type", "application/json");
    json body = json::parse(request.body, nullptr, false);
    if (body.is_discarded()) body = json::object();
    if (request.path.find("subjectaccessreviews") != std::string::npos) {
      ++access_reviews;
      body["status"] = {{"allowed", allowed}, {"reason", allowed ? "" : "no binding"}};
    }
    r.body = body.dump();
    return r;
  }
  Status Stream(const net::HttpRequest&, const net::StreamHandlers&, kube::Canceller*) override {
    return Unavailable("no watches here");
  }
};

class NoToken final : public kube::TokenSource {
 public:
  Result<std::string> Token(bool) override { return std::string(); }
};

json Policy(const std::string& mode) {
  json p = json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "web-jemalloc", "namespace": "shop", "generation": 2},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "allocator": {"name": "jemalloc"},
             "canary": {"load": {"port": 8080, "requests": [{"name": "a", "path": "/"}]}}}})");
  p["spec"]["rollout"] = {{"mode", mode}};
  return p;
}

json Deployment(bool paused, const std::string& held) {
  json d = json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "app", "image": "web:1"}]}}}})");
  d["spec"]["paused"] = paused;
  if (!held.empty()) d["metadata"]["annotations"] = {{api::kHeldCandidateAnnotation, held}};
  return d;
}

struct Harness {
  std::shared_ptr<FakeApiServer> api = std::make_shared<FakeApiServer>();
  kube::Client client{api, std::make_shared<NoToken>()};
  kube::EventRecorder events{&client, {}};
  kube::Store policies, canaries, deployments;
  std::unique_ptr<AdmissionHandlers> handlers;

  explicit Harness(const std::string& mode) {
    for (kube::Store* s : {&policies, &canaries, &deployments}) {
      controllers::AddNamespaceIndex(*s);
    }
    policies.Upsert(Policy(mode));
    handlers = std::make_unique<AdmissionHandlers>(
        AdmissionHandlerOptions{"allocguard-system", "registry.example/allocguard:test", ""},
        AdmissionHandlerDeps{&client, &policies, &canaries, &deployments, &events});
  }
};

webhook::AdmissionRequest Request(const std::string& operation, json object, json old_object) {
  webhook::AdmissionRequest r;
  r.uid = "req-1";
  r.operation = operation;
  r.namespace_ = "shop";
  r.name = "web";
  r.object = std::move(object);
  r.old_object = std::move(old_object);
  r.user_info.username = "alice";
  return r;
}

TEST(AdmissionHandlersTest, MutatePodInjectsTheGoverningPolicy) {
  Harness h("Off");
  json pod = {
      {"metadata", {{"name", "web-1"}, {"namespace", "shop"}, {"labels", {{"app", "web"}}}}},
      {"spec", {{"containers", {{{"name", "app"}, {"image", "web:1"}}}}}}};
  webhook::AdmissionResponse r = h.handlers->MutatePod(Request("CREATE", pod, json()));
  EXPECT_TRUE(r.allowed);
  ASSERT_TRUE(r.patch.is_array());
  EXPECT_THAT(r.patch.dump(), HasSubstr(api::kInjectedAnnotation));

  pod["metadata"]["labels"] = {{"app", "other"}};
  EXPECT_TRUE(h.handlers->MutatePod(Request("CREATE", pod, json())).patch.is_null());
}

TEST(AdmissionHandlersTest, MutateDeploymentHoldsANewTemplateUnderEnforce) {
  Harness h("Enforce");
  webhook::AdmissionResponse r =
      h.handlers->MutateDeployment(Request("CREATE", Deployment(false, ""), json()));
  EXPECT_TRUE(r.allowed);
  EXPECT_THAT(r.patch.dump(), HasSubstr("/spec/paused"));
  EXPECT_THAT(r.warnings, Not(IsEmpty()));
}

TEST(AdmissionHandlersTest, ValidateDeploymentRefusesAManualUnpause) {
  Harness h("Enforce");
  webhook::AdmissionResponse r = h.handlers->ValidateDeployment(Request(
      "UPDATE", Deployment(false, "0123456789abcdef"), Deployment(true, "0123456789abcdef")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("spec.paused"));
}

TEST(AdmissionHandlersTest, DeletingAnEnforcePolicyThatHoldsNeedsTheOverride) {
  Harness h("Enforce");
  h.deployments.Upsert(Deployment(true, "0123456789abcdef"));
  h.api->allowed = false;
  webhook::AdmissionResponse r =
      h.handlers->ValidatePolicy(Request("DELETE", json(), Policy("Enforce")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("lifts the hold of web"));
  EXPECT_THAT(r.status_message, HasSubstr("alice"));
  EXPECT_EQ(h.api->access_reviews, 1);

  h.api->allowed = true;
  EXPECT_TRUE(h.handlers->ValidatePolicy(Request("DELETE", json(), Policy("Enforce"))).allowed);
}

TEST(AdmissionHandlersTest, DeletingAPolicyThatHoldsNothingAsksNobody) {
  Harness h("Enforce");
  h.deployments.Upsert(Deployment(true, ""));  // paused by hand, not held
  h.api->allowed = false;
  EXPECT_TRUE(h.handlers->ValidatePolicy(Request("DELETE", json(), Policy("Enforce"))).allowed);
  EXPECT_EQ(h.api->access_reviews, 0);
}

TEST(AdmissionHandlersTest, MalformedObjectsNeverThrow) {
  Harness h("Enforce");
  for (const json& garbage :
       {json(), json(5), json("x"), json::array(),
        json{{"metadata", 1}, {"spec", {{"template", 2}, {"paused", "y"}}}}}) {
    EXPECT_NO_THROW(h.handlers->MutatePod(Request("CREATE", garbage, json())));
    EXPECT_NO_THROW(h.handlers->MutateDeployment(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->ValidateDeployment(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->ValidatePolicy(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->ValidateCanary(Request("CREATE", garbage, json())));
  }
}

json StatefulSet(const std::string& image) {
  json set = json::parse(R"({
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-1"},
    "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate"},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "app"}]}}}})");
  set["spec"]["template"]["spec"]["containers"][0]["image"] = image;
  return set;
}

json DaemonSet(const std::string& image) {
  json set = StatefulSet(image);
  set["kind"] = "DaemonSet";
  set["spec"].erase("replicas");
  set["spec"]["updateStrategy"] = {{"type", "RollingUpdate"},
                                   {"rollingUpdate", {{"maxUnavailable", 1}}}};
  return set;
}

json Patched(const json& object, const webhook::AdmissionResponse& r) {
  return r.patch.is_array() ? object.patch(r.patch) : object;
}

TEST(AdmissionHandlersTest, MutateStatefulSetPinsThePartitionOfANewTemplateUnderEnforce) {
  Harness h("Enforce");
  const json changed = StatefulSet("web:2");
  webhook::AdmissionResponse r =
      h.handlers->MutateStatefulSet(Request("UPDATE", changed, StatefulSet("web:1")));
  EXPECT_TRUE(r.allowed);
  const json held = Patched(changed, r);
  EXPECT_GE(held["spec"]["updateStrategy"]["rollingUpdate"]["partition"].get<int64_t>(), 2)
      << "no pod is replaced";
  EXPECT_EQ(held["metadata"]["annotations"][api::kHeldCandidateAnnotation],
            TemplateHash(changed["spec"]["template"]));
  EXPECT_EQ(held["metadata"]["annotations"][api::kUserPartitionAnnotation], "");
  EXPECT_THAT(r.warnings, Not(IsEmpty()));
}

TEST(AdmissionHandlersTest, MutateDaemonSetSwitchesToOnDeleteUnderEnforce) {
  Harness h("Enforce");
  const json changed = DaemonSet("web:2");
  webhook::AdmissionResponse r =
      h.handlers->MutateDaemonSet(Request("UPDATE", changed, DaemonSet("web:1")));
  EXPECT_TRUE(r.allowed);
  const json held = Patched(changed, r);
  EXPECT_EQ(held["spec"]["updateStrategy"], json({{"type", "OnDelete"}}));
  EXPECT_EQ(
      json::parse(
          held["metadata"]["annotations"][api::kUserUpdateStrategyAnnotation].get<std::string>()),
      changed["spec"]["updateStrategy"]);
  EXPECT_THAT(r.warnings, Not(IsEmpty()));
}

TEST(AdmissionHandlersTest, AuditLetsStatefulSetsAndDaemonSetsRollOut) {
  Harness h("Audit");
  webhook::AdmissionResponse sts =
      h.handlers->MutateStatefulSet(Request("UPDATE", StatefulSet("web:2"), StatefulSet("web:1")));
  EXPECT_EQ(Patched(StatefulSet("web:2"), sts), StatefulSet("web:2"));
  EXPECT_THAT(sts.warnings, IsEmpty());
  webhook::AdmissionResponse ds =
      h.handlers->MutateDaemonSet(Request("UPDATE", DaemonSet("web:2"), DaemonSet("web:1")));
  EXPECT_EQ(Patched(DaemonSet("web:2"), ds), DaemonSet("web:2"));
  EXPECT_THAT(ds.warnings, IsEmpty());
}

// A Flat canary of the same name and template that targets a Deployment
// proves nothing about the StatefulSet: its new template is held.
TEST(AdmissionHandlersTest, AFlatCanaryOfAnotherKindDoesNotLetAStatefulSetThrough) {
  Harness h("Enforce");
  auto policy = api::ParseAllocatorPolicy(Policy("Enforce"));
  ASSERT_TRUE(policy.ok());
  const json changed = StatefulSet("web:2");
  const std::string hash = TemplateHash(changed["spec"]["template"]);
  json canary = controllers::BuildReplayCanary(changed, *policy, hash);  // a Deployment's
  canary["status"] = {{"phase", "Completed"}, {"verdict", "Flat"}};
  h.canaries.Upsert(canary);
  webhook::AdmissionResponse r =
      h.handlers->MutateStatefulSet(Request("UPDATE", changed, StatefulSet("web:1")));
  EXPECT_EQ(Patched(changed, r)["metadata"]["annotations"][api::kHeldCandidateAnnotation], hash);
}

TEST(AdmissionHandlersTest, MalformedStatefulSetsAndDaemonSetsNeverThrow) {
  Harness h("Enforce");
  for (const json& garbage :
       {json(), json(5), json("x"), json::array(),
        json{{"metadata", 1},
             {"spec", {{"template", 2}, {"replicas", "y"}, {"updateStrategy", 3}}}}}) {
    EXPECT_NO_THROW(h.handlers->MutateStatefulSet(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->MutateDaemonSet(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->MutateStatefulSet(Request("CREATE", garbage, json())));
    EXPECT_NO_THROW(h.handlers->MutateDaemonSet(Request("CREATE", garbage, json())));
  }
}

}  // namespace
}  // namespace allocguard::admission
