#include "controllers/policy_decision.h"

#include <gtest/gtest.h>

#include "controllers/rollout_decision.h"
#include "operator/api/names.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

api::AllocatorPolicy Policy() {
  api::AllocatorPolicy p;
  p.ns = "shop";
  p.name = "web-policy";
  p.generation = 2;
  p.spec.selector.match_labels = {{"app", "web"}};
  p.spec.allocator.name = api::Allocator::kJemalloc;
  p.spec.rollout.mode = api::RolloutMode::kEnforce;
  return p;
}

json Deployment(const std::string& name, const std::string& app, const std::string& held = "") {
  json annotations = json::object();
  if (!held.empty()) annotations[api::kHeldCandidateAnnotation] = held;
  return {{"metadata", {{"name", name}, {"namespace", "shop"}, {"annotations", annotations}}},
          {"spec", {{"template", {{"metadata", {{"labels", {{"app", app}}}}}}}}}};
}

json Pod(const std::string& name, const std::string& ns, json annotations,
         json labels = {{"app", "web"}}) {
  return {{"metadata",
           {{"name", name}, {"namespace", ns}, {"labels", labels}, {"annotations", annotations}}},
          {"status", {{"phase", "Running"}}}};
}

json Canary(const std::string& deployment, const std::string& hash, const std::string& verdict,
            const std::string& time, const std::string& flat_variant = "") {
  return {{"metadata", {{"name", CanaryName(deployment, hash, CanaryPolicyKey(Policy()))}}},
          {"spec", {{"target", {{"name", deployment}}}, {"templateHash", hash}}},
          {"status",
           {{"phase", "Completed"},
            {"verdict", verdict},
            {"floorSlope", "+1.00 GiB/h"},
            {"flatVariant", flat_variant},
            {"explanation", "why"},
            {"completionTime", time}}}};
}

const json* Condition(const json& status, const std::string& type) {
  for (const json& c : status["conditions"]) {
    if (c["type"] == type) return &c;
  }
  return nullptr;
}

TEST(DecidePolicyStatusTest, CountsGovernedAndReportsReady) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = {Deployment("web", "web"), Deployment("api", "api")};
  in.now_rfc3339 = "2026-11-29T10:00:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ(a.status["governedCount"], 1);
  EXPECT_EQ(a.status["governed"][0]["name"], "web");
  EXPECT_EQ(a.status["observedGeneration"], 2);
  EXPECT_EQ((*Condition(a.status, "Ready"))["status"], "True");
  EXPECT_EQ((*Condition(a.status, "Ready"))["observedGeneration"], 2);
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "Unknown");
  EXPECT_EQ((*Condition(a.status, "RolloutBlocked"))["status"], "False");
}

TEST(DecidePolicyStatusTest, BlockedRolloutNamesTheFlatVariant) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = {Deployment("web", "web", "hash1")};
  in.canaries = {Canary("web", "hash1", "AllocatorRetention", "2026-11-29T10:00:00Z", "jemalloc")};
  in.now_rfc3339 = "2026-11-29T10:01:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  const json* blocked = Condition(a.status, "RolloutBlocked");
  EXPECT_EQ((*blocked)["status"], "True");
  EXPECT_NE((*blocked)["message"].get<std::string>().find("variant jemalloc was flat instead"),
            std::string::npos)
      << (*blocked)["message"];
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "False");
  EXPECT_EQ(a.status["lastVerdict"]["verdict"], "AllocatorRetention");
  EXPECT_EQ(a.status["lastVerdict"]["floorSlope"], "+1.00 GiB/h");
}

TEST(DecidePolicyStatusTest, LastVerdictIsTheNewest) {
  PolicyInput in;
  in.policy = Policy();
  in.canaries = {Canary("web", "h1", "Ratchet", "2026-11-29T10:00:00Z"),
                 Canary("web", "h2", "Flat", "2026-11-29T11:00:00Z")};
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ(a.status["lastVerdict"]["templateHash"], "h2");
  EXPECT_EQ(a.status["verdicts"].size(), 2u);
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "True");
}

TEST(DecidePolicyStatusTest, TransitionTimeKeptWhileStatusUnchanged) {
  PolicyInput in;
  in.policy = Policy();
  in.now_rfc3339 = "2026-11-29T10:00:00Z";
  PolicyActions first = DecidePolicyStatus(in);
  in.status = first.status;
  in.now_rfc3339 = "2026-11-29T12:00:00Z";
  PolicyActions second = DecidePolicyStatus(in);
  EXPECT_FALSE(second.status_changed);
  EXPECT_EQ((*Condition(second.status, "Ready"))["lastTransitionTime"], "2026-11-29T10:00:00Z");
}

TEST(FindInjectionDriftTest, Table) {
  const json injected = {{api::kInjectedAnnotation, "jemalloc"}};
  const json opted_out = {{api::kInjectAnnotation, "false"}};
  json finished = Pod("done", "shop", json::object());
  finished["status"]["phase"] = "Succeeded";
  json canary_pod =
      Pod("canary", "shop", json::object(), {{"app", "web"}, {api::kCanaryLabel, "web-abc"}});
  struct Case {
    const char* name;
    json pod;
    bool drift;
  };
  const std::vector<Case> cases = {
      {"injected", Pod("a", "shop", injected), false},
      {"not injected", Pod("b", "shop", json::object()), true},
      {"opted out", Pod("c", "shop", opted_out), false},
      {"other app", Pod("d", "shop", json::object(), {{"app", "api"}}), false},
      {"kube-system", Pod("e", "kube-system", json::object()), false},
      {"operator namespace", Pod("f", "allocguard-system", json::object()), false},
      {"finished", finished, false},
      {"canary pod", canary_pod, false},
  };
  for (const Case& c : cases) {
    auto drift = FindInjectionDrift(Policy(), {c.pod}, "allocguard-system");
    EXPECT_EQ(!drift.empty(), c.drift) << c.name;
  }
}

TEST(DecidePolicyStatusTest, DriftBecomesACondition) {
  PolicyInput in;
  in.policy = Policy();
  in.pods = {Pod("web-1", "shop", json::object())};
  in.operator_namespace = "allocguard-system";
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ((*Condition(a.status, "InjectionDrift"))["status"], "True");
  EXPECT_NE((*Condition(a.status, "InjectionDrift"))["message"].get<std::string>().find("web-1"),
            std::string::npos);
  EXPECT_EQ(a.status["injectionDrift"][0]["pod"], "web-1");
  ASSERT_EQ(a.drift.size(), 1u);
}

}  // namespace
}  // namespace allocguard::controllers
