#include "operator/admission/admission_handlers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/deployment.h"
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
// `allowed`; a GET of a DaemonSet answered with `daemonset` (404 when null,
// `daemonset_status` when set); anything else (Events) accepted and counted.
// clang-tidy 14 reports the implicit special members of a class holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
class FakeApiServer final : public kube::Transport {
 public:
  bool allowed = true;
  int access_reviews = 0;
  json daemonset;
  int daemonset_status = 0;
  int daemonset_gets = 0;

  Result<net::HttpResponse> Send(const net::HttpRequest& request) override {
    net::HttpResponse r;
    r.status = 201;
    r.headers.emplace("Content-Type", "application/json");
    if (request.method == "GET" && request.path.find("/daemonsets/") != std::string::npos) {
      ++daemonset_gets;
      r.status = daemonset_status != 0 ? daemonset_status : daemonset.is_null() ? 404 : 200;
      r.body =
          r.status == 200 ? daemonset.dump() : json{{"kind", "Status"}, {"code", r.status}}.dump();
      return r;
    }
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
  kube::Store policies, canaries, deployments, daemonsets;
  std::unique_ptr<AdmissionHandlers> handlers;

  explicit Harness(const std::string& mode) {
    for (kube::Store* s : {&policies, &canaries, &deployments, &daemonsets}) {
      controllers::AddNamespaceIndex(*s);
    }
    policies.Upsert(Policy(mode));
    handlers = std::make_unique<AdmissionHandlers>(
        AdmissionHandlerOptions{"allocguard-system", "registry.example/allocguard:test", ""},
        AdmissionHandlerDeps{&client, &policies, &canaries, &deployments, &events, nullptr,
                             &daemonsets});
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
  json canary = controllers::BuildReplayCanary(changed, *policy);  // a Deployment's
  // ... under the name the StatefulSet's canary would have.
  canary["metadata"]["name"] = api::CanaryName(controllers::CanaryKey(
      controllers::MeasuredTemplateOf(controllers::WorkloadKind::kStatefulSet, changed), *policy));
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

// What the API server does with an UPDATE: the mutating webhook, then the
// validating one on the mutated object.
webhook::AdmissionResponse Admit(const Harness& h, const std::string& kind, const json& object,
                                 const json& stored) {
  const bool sts = kind == "StatefulSet";
  const webhook::AdmissionResponse mutated =
      sts ? h.handlers->MutateStatefulSet(Request("UPDATE", object, stored))
          : h.handlers->MutateDaemonSet(Request("UPDATE", object, stored));
  const webhook::AdmissionRequest validate = Request("UPDATE", Patched(object, mutated), stored);
  return sts ? h.handlers->ValidateStatefulSet(validate) : h.handlers->ValidateDaemonSet(validate);
}

// A StatefulSet or DaemonSet held under Enforce, as the mutating webhook left it.
json Held(const Harness& h, const std::string& kind) {
  const bool sts = kind == "StatefulSet";
  const json changed = sts ? StatefulSet("web:2") : DaemonSet("web:2");
  const json stored = sts ? StatefulSet("web:1") : DaemonSet("web:1");
  const webhook::AdmissionResponse r =
      sts ? h.handlers->MutateStatefulSet(Request("UPDATE", changed, stored))
          : h.handlers->MutateDaemonSet(Request("UPDATE", changed, stored));
  return Patched(changed, r);
}

// What a user who may edit the object writes to roll the held template out
// by hand: the override annotation, and the pinned field released.
json OverriddenByHand(json held, const std::string& kind) {
  held["metadata"]["annotations"][api::kOverrideHoldAnnotation] = "INC-9: ship it";
  if (kind == "StatefulSet") {
    held["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 0;
  } else {
    held["spec"]["updateStrategy"] = {{"type", "RollingUpdate"}};
  }
  return held;
}

class HoldOverrideTest : public ::testing::TestWithParam<std::string> {};

// Without the override permission, the override is refused, and so is
// every other way of lifting the hold; with it, the override is allowed
// and recorded.
TEST_P(HoldOverrideTest, LiftingAHoldNeedsTheOverridePermission) {
  const std::string kind = GetParam();
  Harness h("Enforce");
  const json held = Held(h, kind);
  ASSERT_TRUE(api::HoldsRollout(api::ParseDeployment(held).metadata));

  h.api->allowed = false;
  webhook::AdmissionResponse r = Admit(h, kind, OverriddenByHand(held, kind), held);
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("sets allocguard.io/override-hold=\"INC-9: ship it\""));
  EXPECT_THAT(r.status_message, HasSubstr("only to users with the override verb on "
                                          "allocatorpolicies.allocguard.io"));
  EXPECT_THAT(r.status_message, HasSubstr("user \"alice\" may not override"));

  json unmarked = held;
  unmarked["metadata"]["annotations"].erase(api::kHeldCandidateAnnotation);
  r = Admit(h, kind, unmarked, held);
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("removes allocguard.io/held-candidate"));

  json opted_out = held;
  opted_out["metadata"]["annotations"][api::kInjectAnnotation] = "false";
  r = Admit(h, kind, opted_out, held);
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("opts out with allocguard.io/inject=false"));

  // Releasing the pinned field alone is pinned again by the mutating webhook.
  json unpinned = OverriddenByHand(held, kind);
  unpinned["metadata"]["annotations"].erase(api::kOverrideHoldAnnotation);
  EXPECT_TRUE(Admit(h, kind, unpinned, held).allowed);
  const webhook::AdmissionResponse repinned =
      kind == "StatefulSet" ? h.handlers->MutateStatefulSet(Request("UPDATE", unpinned, held))
                            : h.handlers->MutateDaemonSet(Request("UPDATE", unpinned, held));
  EXPECT_EQ(Patched(unpinned, repinned)["spec"]["updateStrategy"], held["spec"]["updateStrategy"]);
  // ...and refused when the mutating webhook did not see the update.
  r = kind == "StatefulSet" ? h.handlers->ValidateStatefulSet(Request("UPDATE", unpinned, held))
                            : h.handlers->ValidateDaemonSet(Request("UPDATE", unpinned, held));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("spec.updateStrategy: this " + kind + " is held"));

  h.api->allowed = true;
  const int reviews = h.api->access_reviews;
  r = Admit(h, kind, OverriddenByHand(held, kind), held);
  EXPECT_TRUE(r.allowed) << r.status_message;
  EXPECT_EQ(h.api->access_reviews, reviews + 1);
}

INSTANTIATE_TEST_SUITE_P(Kinds, HoldOverrideTest, ::testing::Values("StatefulSet", "DaemonSet"));

TEST(AdmissionHandlersTest, ScalingAHeldStatefulSetAsksNobody) {
  Harness h("Enforce");
  const json held = Held(h, "StatefulSet");
  json scaled = held;
  scaled["spec"]["replicas"] = 5;
  h.api->allowed = false;
  EXPECT_TRUE(Admit(h, "StatefulSet", scaled, held).allowed);
  EXPECT_EQ(h.api->access_reviews, 0);
}

TEST(AdmissionHandlersTest, DeletingAnEnforcePolicyThatHoldsAStatefulSetNeedsTheOverride) {
  Harness h("Enforce");
  kube::Store statefulsets;
  kube::Store daemonsets;
  for (kube::Store* s : {&statefulsets, &daemonsets}) controllers::AddNamespaceIndex(*s);
  AdmissionHandlers handlers(
      AdmissionHandlerOptions{"allocguard-system", "registry.example/allocguard:test", ""},
      AdmissionHandlerDeps{&h.client, &h.policies, &h.canaries, &h.deployments, &h.events,
                           &statefulsets, &daemonsets});
  h.api->allowed = false;
  EXPECT_TRUE(handlers.ValidatePolicy(Request("DELETE", json(), Policy("Enforce"))).allowed);
  statefulsets.Upsert(Held(h, "StatefulSet"));
  daemonsets.Upsert(Held(h, "DaemonSet"));
  webhook::AdmissionResponse r =
      handlers.ValidatePolicy(Request("DELETE", json(), Policy("Enforce")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message,
              HasSubstr("lifts the hold of statefulset/web, daemonset/web: it deletes policy"));
}

// A pod as the controller of the DaemonSet "web" (uid) creates it.
json PodOfDaemonSet(const std::string& uid, const std::string& image) {
  return {{"metadata",
           {{"generateName", "web-"},
            {"namespace", "shop"},
            {"labels", {{"app", "web"}, {"controller-revision-hash", "5c7d8f"}}},
            {"ownerReferences",
             {{{"apiVersion", "apps/v1"},
               {"kind", "DaemonSet"},
               {"name", "web"},
               {"uid", uid},
               {"controller", true}}}}}},
          {"spec", {{"containers", {{{"name", "app"}, {"image", image}}}}}}};
}

// Rule D4 through the Pod webhook: a pod the controller of a held DaemonSet
// creates is refused, judged on the DaemonSet as a GET reads it, or as the
// cache has it when the GET fails; any other pod is injected as before.
TEST(AdmissionHandlersTest, APodOfAHeldDaemonSetIsRefused) {
  Harness h("Enforce");
  json held = Held(h, "DaemonSet");
  held["metadata"]["uid"] = "ds-uid-1";
  ASSERT_TRUE(held["metadata"]["annotations"].contains(api::kHeldCandidateAnnotation));
  const json pod = PodOfDaemonSet("ds-uid-1", "web:2");

  h.api->daemonset = held;
  webhook::AdmissionResponse r = h.handlers->MutatePod(Request("CREATE", pod, json()));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.status_message, HasSubstr("allocguard: DaemonSet shop/web is held by "
                                          "AllocatorPolicy web-jemalloc"));
  EXPECT_EQ(h.api->daemonset_gets, 1);

  // The GET fails: the cache decides.
  h.api->daemonset_status = 503;
  h.daemonsets.Upsert(held);
  EXPECT_FALSE(h.handlers->MutatePod(Request("CREATE", pod, json())).allowed);

  // Released: the pod is injected as any other.
  h.api->daemonset_status = 0;
  json released = held;
  released["metadata"]["annotations"].erase(api::kHeldCandidateAnnotation);
  h.api->daemonset = released;
  r = h.handlers->MutatePod(Request("CREATE", pod, json()));
  EXPECT_TRUE(r.allowed);
  EXPECT_THAT(r.patch.dump(), HasSubstr(api::kInjectedAnnotation));
}

// A pod's owner reference is the pod creator's to write: a name no
// DaemonSet can have is never put into a request the operator makes.
TEST(AdmissionHandlersTest, AnOwnerNameNoDaemonSetCanHaveIsNeverRead) {
  Harness h("Enforce");
  h.api->daemonset = Held(h, "DaemonSet");
  for (const std::string& name :
       std::vector<std::string>{"..", "a/../../secrets", "Web", "-web", std::string(254, 'a')}) {
    json pod = PodOfDaemonSet("u", "web:1");
    pod["metadata"]["ownerReferences"][0]["name"] = name;
    EXPECT_TRUE(h.handlers->MutatePod(Request("CREATE", pod, json())).allowed) << name;
  }
  EXPECT_EQ(h.api->daemonset_gets, 0);
}

TEST(AdmissionHandlersTest, PodsUnderAnAuditPolicyReadNoDaemonSet) {
  Harness h("Audit");
  h.api->daemonset = Held(h, "DaemonSet");
  const json pod = PodOfDaemonSet("u", "web:1");
  EXPECT_TRUE(h.handlers->MutatePod(Request("CREATE", pod, json())).allowed);
  EXPECT_EQ(h.api->daemonset_gets, 0);
}

TEST(AdmissionHandlersTest, MalformedHeldWorkloadUpdatesNeverThrow) {
  Harness h("Enforce");
  for (const json& garbage :
       {json(), json(5), json("x"), json::array(),
        json{{"metadata", {{"annotations", {{api::kHeldCandidateAnnotation, 3}}}}},
             {"spec", {{"template", 2}, {"updateStrategy", {{"rollingUpdate", "y"}}}}}}}) {
    EXPECT_NO_THROW(h.handlers->ValidateStatefulSet(Request("UPDATE", garbage, garbage)));
    EXPECT_NO_THROW(h.handlers->ValidateDaemonSet(Request("UPDATE", garbage, garbage)));
  }
}

}  // namespace
}  // namespace allocguard::admission
