#include "operator/manager/event_routing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controllers/reconcilers.h"
#include "operator/api/workloads.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

json Object(const std::string& ns, const std::string& name, json labels = json::object()) {
  return {{"metadata",
           {{"namespace", ns}, {"name", name}, {"resourceVersion", "1"}, {"labels", labels}}}};
}

std::unique_ptr<kube::Store> StoreWith(std::vector<json> objects) {
  auto store = std::make_unique<kube::Store>();
  controllers::AddNamespaceIndex(*store);
  for (json& o : objects) store->Upsert(std::move(o));
  return store;
}

ReconcileRequest R(const char* controller, const std::string& key) { return {controller, key}; }

TEST(EventRoutingTest, ControllerNamesAreTheReconcilersNames) {
  controllers::ControllerContext ctx;
  EXPECT_STREQ(controllers::PolicyReconciler(ctx).name(), kPolicyController);
  EXPECT_STREQ(controllers::CanaryReconciler(ctx).name(), kCanaryController);
  EXPECT_STREQ(controllers::RolloutReconciler(ctx).name(), kRolloutController);
  EXPECT_STREQ(controllers::DriftReconciler(ctx).name(), kDriftController);
}

TEST(EventRoutingTest, APolicyConcernsItselfAndTheRolloutsOfItsNamespace) {
  auto deployments = StoreWith({Object("a", "web"), Object("a", "api"), Object("b", "x")});
  EXPECT_THAT(PolicyEventRequests(Object("a", "p"), *deployments),
              ElementsAre(R("policy", "a/p"), R("rollout", "a/api"), R("rollout", "a/web")));
}

TEST(EventRoutingTest, ACanaryConcernsItselfItsTargetAndItsPolicy) {
  json canary = Object("a", "c", {{"allocguard.io/policy", "p"}});
  canary["spec"] = {{"target", {{"name", "web"}}}};
  EXPECT_THAT(CanaryEventRequests(canary),
              ElementsAre(R("canary", "a/c"), R("rollout", "a/web"), R("policy", "a/p")));
  EXPECT_THAT(CanaryEventRequests(Object("a", "bare")), ElementsAre(R("canary", "a/bare")));
  // Hostile shapes are read as absent, never thrown on.
  json odd = Object("a", "odd");
  odd["spec"] = {{"target", "not an object"}};
  odd["metadata"]["labels"] = json::array({1, 2});
  EXPECT_THAT(CanaryEventRequests(odd), ElementsAre(R("canary", "a/odd")));
}

// A shared canary concerns every Deployment of its namespace whose template
// measures as its spec.templateHash (as the slim cache records it).
TEST(EventRoutingTest, ASharedCanaryConcernsEveryWorkloadOfItsMeasuredTemplate) {
  auto measured = [](const std::string& ns, const std::string& name, const std::string& hash) {
    json d = Object(ns, name);
    d[api::kCachedMeasuredHashField] = hash;
    return d;
  };
  auto deployments = StoreWith({});
  controllers::AddMeasuredTemplateIndex(*deployments);
  for (json d : {measured("a", "web", "m1"), measured("a", "web-b", "m1"),
                 measured("a", "api", "m2"), measured("b", "web", "m1")}) {
    deployments->Upsert(std::move(d));
  }
  json canary = Object("a", "c");
  canary["spec"] = {{"target", {{"name", "web"}}}, {"templateHash", "m1"}};
  EXPECT_THAT(CanaryEventRequests(canary, deployments.get()),
              ElementsAre(R("canary", "a/c"), R("rollout", "a/web"), R("rollout", "a/web-b")));
}

TEST(EventRoutingTest, ADeploymentConcernsItsRolloutAndThePoliciesOfItsNamespace) {
  auto policies = StoreWith({Object("a", "p"), Object("b", "q")});
  EXPECT_THAT(DeploymentEventRequests(Object("a", "web"), *policies),
              ElementsAre(R("rollout", "a/web"), R("policy", "a/p")));
}

TEST(EventRoutingTest, PodsGoToDriftAndPoliciesCanaryPodsToTheirCanary) {
  auto policies = StoreWith({Object("a", "p")});
  EXPECT_THAT(PodEventRequests(Object("a", "web-1"), *policies),
              ElementsAre(R("drift", "a/web-1"), R("policy", "a/p")));
  json canary_pod = Object("a", "replay-1", {{"allocguard.io/canary", "c"}});
  EXPECT_THAT(PodEventRequests(canary_pod, *policies), ElementsAre(R("canary", "a/c")));
  EXPECT_THAT(PodLeadingRequests(Object("a", "web-1")), ElementsAre(R("drift", "a/web-1")));
  EXPECT_THAT(PodLeadingRequests(canary_pod), IsEmpty());
}

TEST(EventRoutingTest, StatefulSetsAndDaemonSetsGoToTheRolloutOfTheirKind) {
  auto deployments = StoreWith({Object("a", "web")});
  auto statefulsets = StoreWith({Object("a", "db")});
  auto daemonsets = StoreWith({Object("a", "agent"), Object("b", "other")});
  EXPECT_THAT(
      PolicyEventRequests(Object("a", "p"), *deployments, statefulsets.get(), daemonsets.get()),
      ElementsAre(R("policy", "a/p"), R("rollout", "a/web"), R("statefulset-rollout", "a/db"),
                  R("daemonset-rollout", "a/agent")));
  json canary = Object("a", "c");
  canary["spec"] = {{"target", {{"kind", "StatefulSet"}, {"name", "db"}}}};
  EXPECT_THAT(CanaryEventRequests(canary),
              ElementsAre(R("canary", "a/c"), R("statefulset-rollout", "a/db")));
  canary["spec"]["target"]["kind"] = "CronJob";
  EXPECT_THAT(CanaryEventRequests(canary), ElementsAre(R("canary", "a/c")));
  auto policies = StoreWith({Object("a", "p")});
  EXPECT_THAT(WorkloadEventRequests("daemonset-rollout", Object("a", "agent"), *policies),
              ElementsAre(R("daemonset-rollout", "a/agent"), R("policy", "a/p")));
  controllers::ControllerContext ctx;
  EXPECT_STREQ(controllers::RolloutReconciler(ctx, controllers::WorkloadKind::kDaemonSet).name(),
               "daemonset-rollout");
}

TEST(EventRoutingTest, CanaryJobsGoToTheirCanary) {
  EXPECT_THAT(CanaryJobEventRequests(Object("a", "job", {{"allocguard.io/canary", "c"}})),
              ElementsAre(R("canary", "a/c")));
  EXPECT_THAT(CanaryJobEventRequests(Object("a", "job")), IsEmpty());
}

}  // namespace
}  // namespace allocguard::manager
