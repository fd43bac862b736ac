// The release of a hold against a real etcd + kube-apiserver, raced: the
// rollout reconciler decides from a cache that still shows held template A
// with a Flat canary, while the user has already pushed template B (held by
// the webhook). The release must fail and B stay held. Reads
// ALLOCGUARD_TEST_KUBECONFIG (e2e/cluster/up.sh); skipped without it.

#include <gtest/gtest.h>

#include <cstdio>

#include "controllers/canary_decision.h"
#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/testing/controlplane_support.h"

namespace allocguard::controllers {
namespace {

using kube::testing::RandomSuffix;
using nlohmann::json;

constexpr int kRounds = 50;

json PolicyObject(const std::string& ns) {
  json policy = json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "web-policy", "resourceVersion": "1"},
    "spec": {
      "selector": {"matchLabels": {"app": "web"}},
      "allocator": {"name": "jemalloc"},
      "canary": {"duration": "15m",
                 "load": {"port": 8080, "requests": [{"name": "a", "path": "/"}]}},
      "rollout": {"mode": "Enforce"}
    }})");
  policy["metadata"]["namespace"] = ns;
  return policy;
}

json DeploymentObject(const std::string& ns, const std::string& name, const std::string& image) {
  json tmpl = {{"metadata", {{"labels", {{"app", "web"}}}}},
               {"spec", {{"containers", {{{"name", "server"}, {"image", image}}}}}}};
  json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec",
             {{"replicas", 1},
              {"paused", true},
              {"selector", {{"matchLabels", {{"app", "web"}}}}},
              {"template", tmpl}}}};
  d["metadata"]["annotations"][api::kHeldCandidateAnnotation] = admission::TemplateHash(tmpl);
  return d;
}

// The Flat canary the operator would have finished for `deployment`'s
// template: trusted by CanaryDistrust.
json FlatCanary(const json& deployment, const api::AllocatorPolicy& policy) {
  json canary = BuildReplayCanary(deployment, policy);
  auto parsed = api::ParseReplayCanary(canary);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  canary["status"] = {{"phase", "Completed"},
                      {"verdict", "Flat"},
                      {"variants",
                       {{{"name", "candidate"},
                         {"phase", "Completed"},
                         {"verdict", "Flat"},
                         {"measurementKey", MeasurementKey(*parsed, "candidate", {})}}}}};
  return canary;
}

class RolloutRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    client_ = kube::testing::TestClient(&error);
    ASSERT_TRUE(error.empty()) << error;
    if (client_ == nullptr) GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECONFIG unset";
    ns_ = "race-" + RandomSuffix();
    auto created = client_->Create(kube::Namespaces(), "", {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    for (kube::Store* s : {&policies_, &canaries_, &deployments_, &pods_, &jobs_}) {
      AddNamespaceIndex(*s);
    }
    AddCanaryIndexes(canaries_);
    const json policy_object = PolicyObject(ns_);
    auto policy = api::ParseAllocatorPolicy(policy_object);
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    policy_ = *policy;
    policies_.Upsert(policy_object);
    ctx_.client = client_.get();
    ctx_.policies = &policies_;
    ctx_.canaries = &canaries_;
    ctx_.deployments = &deployments_;
    ctx_.pods = &pods_;
    ctx_.jobs = &jobs_;
    ctx_.clock = RealClock::Get();
  }
  void TearDown() override {
    if (client_) (void)client_->Delete(kube::Namespaces(), "", ns_);
  }

  // Creates the held Deployment with template A, and fills the cache with
  // what the operator's informers would show: it, and A's Flat canary.
  json CreateHeldAndCache(const std::string& name) {
    auto created = client_->Create(kube::Deployments(), ns_, DeploymentObject(ns_, name, "web:a"));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    json cached = *created;
    cached["apiVersion"] = "apps/v1";
    cached["kind"] = "Deployment";
    canaries_.Upsert(FlatCanary(cached, policy_));
    api::SlimDeployment(cached);
    deployments_.Upsert(cached);
    return *created;
  }

  json Get(const std::string& name) {
    auto got = client_->Get(kube::Deployments(), ns_, name);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    return got.ok() ? *got : json::object();
  }

  std::unique_ptr<kube::Client> client_;
  std::string ns_;
  kube::Store policies_, canaries_, deployments_, pods_, jobs_;
  api::AllocatorPolicy policy_;
  ControllerContext ctx_;
};

// The control: with nothing changed since the cache read it, A's Flat
// canary releases A. (Without this the race below could not fail.)
TEST_F(RolloutRaceTest, AFlatCanaryReleasesTheTemplateItProved) {
  CreateHeldAndCache("control");
  RolloutReconciler reconciler(ctx_);
  auto result = reconciler.Reconcile(ns_ + "/control");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const json after = Get("control");
  EXPECT_EQ(after["spec"].value("paused", false), false) << after.dump();
  EXPECT_FALSE(after["metadata"]["annotations"].contains(api::kHeldCandidateAnnotation));
}

// The race, kRounds times: template B is pushed (and held) between the
// cache's read and the operator's write. Zero unproven releases.
TEST_F(RolloutRaceTest, AStaleCacheNeverReleasesTheNewTemplate) {
  RolloutReconciler reconciler(ctx_);
  int unproven_releases = 0;
  int conflicts = 0;
  for (int i = 0; i < kRounds; ++i) {
    const std::string name = "web-" + std::to_string(i);
    CreateHeldAndCache(name);
    // The user pushes template B; the webhook holds it (paused, B's hash).
    std::string hash_b;
    auto updated = client_->UpdateWithRetry(kube::Deployments(), ns_, name, [&](json& d) {
      d["spec"]["template"]["spec"]["containers"][0]["image"] = "web:b";
      hash_b = admission::TemplateHash(d["spec"]["template"]);
      d["metadata"]["annotations"][api::kHeldCandidateAnnotation] = hash_b;
      return Status::Ok();
    });
    ASSERT_TRUE(updated.ok()) << updated.status().ToString();
    // The operator reconciles from the cache that still shows A.
    auto result = reconciler.Reconcile(ns_ + "/" + name);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    if (result->requeue_after.has_value()) ++conflicts;
    const json after = Get(name);
    const bool paused = after["spec"].value("paused", false);
    const json& annotations = after["metadata"]["annotations"];
    const bool still_held = annotations.contains(api::kHeldCandidateAnnotation) &&
                            annotations[api::kHeldCandidateAnnotation] == hash_b;
    if (!paused || !still_held) {
      ++unproven_releases;
      ADD_FAILURE() << "round " << i << ": template B released unproven: " << after.dump();
    }
  }
  std::printf("rollout race: %d rounds, %d unproven releases, %d refused as conflicts\n", kRounds,
              unproven_releases, conflicts);
  EXPECT_EQ(unproven_releases, 0);
  EXPECT_EQ(conflicts, kRounds) << "every stale release is refused by the API server";
}

}  // namespace
}  // namespace allocguard::controllers
