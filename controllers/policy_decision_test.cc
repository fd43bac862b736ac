#include "controllers/policy_decision.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <vector>

#include "controllers/rollout_decision.h"
#include "operator/api/names.h"
#include "operator/api/policy_status.h"
#include "operator/api/workloads.h"

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

// The measured hash the slim cache keeps for a template whose hash is
// `hash`: the same, for templates whose labels count for nothing here.
std::string MeasuredOf(const std::string& hash) { return hash; }

// A Deployment as the slim cache keeps it; a held one shows its held
// template.
json Deployment(const std::string& name, const std::string& app, const std::string& held = "") {
  json annotations = json::object();
  if (!held.empty()) annotations[api::kHeldCandidateAnnotation] = held;
  json d = {{"metadata", {{"name", name}, {"namespace", "shop"}, {"annotations", annotations}}},
            {"spec", {{"template", {{"metadata", {{"labels", {{"app", app}}}}}}}}}};
  if (!held.empty()) {
    d[api::kCachedTemplateHashField] = held;
    d[api::kCachedMeasuredHashField] = MeasuredOf(held);
  }
  return d;
}

json Pod(const std::string& name, const std::string& ns, json annotations,
         json labels = {{"app", "web"}}) {
  return {{"metadata",
           {{"name", name}, {"namespace", ns}, {"labels", labels}, {"annotations", annotations}}},
          {"status", {{"phase", "Running"}}}};
}

json Canary(const std::string& deployment, const std::string& hash, const std::string& verdict,
            const std::string& time, const std::string& flat_variant = "",
            WorkloadKind kind = WorkloadKind::kDeployment) {
  MeasuredTemplate measured;
  measured.kind = kind;
  measured.hash = MeasuredOf(hash);
  return {{"metadata", {{"name", CanaryName(CanaryKey(measured, Policy()))}}},
          {"spec",
           {{"target", {{"kind", WorkloadKindName(kind)}, {"name", deployment}}},
            {"templateHash", measured.hash}}},
          {"status",
           {{"phase", "Completed"},
            {"verdict", verdict},
            {"floorSlope", "+1.00 GiB/h"},
            {"flatVariant", flat_variant},
            {"explanation", "why"},
            {"completionTime", time}}}};
}

// The status as written (api::AllocatorPolicyStatusToJson).
json Json(const api::AllocatorPolicyStatus& status) {
  return api::AllocatorPolicyStatusToJson(status);
}

std::optional<json> Condition(const api::AllocatorPolicyStatus& status, const std::string& type) {
  const json written = Json(status);
  for (const json& c : written["conditions"]) {
    if (c["type"] == type) return c;
  }
  return std::nullopt;
}

// The objects as the reconciler parses them from its caches.
std::vector<api::DeploymentSummary> Deployments(const std::vector<json>& objects) {
  std::vector<api::DeploymentSummary> out;
  out.reserve(objects.size());
  for (const json& o : objects) out.push_back(api::ParseDeploymentSummary(o));
  return out;
}

std::vector<api::PodSummary> Pods(const std::vector<json>& objects) {
  std::vector<api::PodSummary> out;
  out.reserve(objects.size());
  for (const json& o : objects) out.push_back(api::ParsePodSummary(o));
  return out;
}

std::vector<api::ReplayCanarySummary> Canaries(const std::vector<json>& objects) {
  std::vector<api::ReplayCanarySummary> out;
  out.reserve(objects.size());
  for (const json& o : objects) out.push_back(api::ParseReplayCanarySummary(o));
  return out;
}

TEST(InvalidPolicyStatusTest, ReadyFalseNamesTheErrorAndKeepsTheRest) {
  api::AllocatorPolicyStatus current;
  current.observed_generation = 3;
  current.governed_count = 4;
  api::SetCondition(current.conditions, "Ready", "True", "Ready", "ok", 3, "2026-12-01T10:00:00Z");
  const api::AllocatorPolicyStatus status = InvalidPolicyStatus(
      current, 5, "spec.allocator.name: must be a string, got 7", "2026-12-05T10:00:00Z");
  EXPECT_EQ(status.observed_generation, 5);
  EXPECT_EQ(status.governed_count, 4) << "what was known stays";
  const api::Condition* ready = api::FindCondition(status.conditions, "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, "False");
  EXPECT_EQ(ready->reason, "InvalidSpec");
  EXPECT_EQ(ready->message, "spec.allocator.name: must be a string, got 7");
  EXPECT_EQ(ready->last_transition_time, "2026-12-05T10:00:00Z");
  EXPECT_EQ(InvalidPolicyStatus(status, 5, ready->message, "2026-12-05T11:00:00Z"), status)
      << "unchanged, so the reconciler writes nothing";
}

TEST(DecidePolicyStatusTest, CountsGovernedAndReportsReady) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = Deployments({Deployment("web", "web"), Deployment("api", "api")});
  in.now_rfc3339 = "2026-11-29T10:00:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ(Json(a.status)["governedCount"], 1);
  EXPECT_EQ(Json(a.status)["governed"][0]["name"], "web");
  EXPECT_EQ(Json(a.status)["observedGeneration"], 2);
  EXPECT_EQ((*Condition(a.status, "Ready"))["status"], "True");
  EXPECT_EQ((*Condition(a.status, "Ready"))["observedGeneration"], 2);
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "Unknown");
  EXPECT_EQ((*Condition(a.status, "RolloutBlocked"))["status"], "False");
}

TEST(DecidePolicyStatusTest, ListsGovernedStatefulSetsAndDaemonSetsWithTheirKind) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = Deployments({Deployment("web", "web")});
  in.statefulsets = Deployments({Deployment("db", "web", "hash1"), Deployment("cache", "other")});
  in.daemonsets = Deployments({Deployment("agent", "web", "hash2")});
  in.canaries = Canaries({Canary("db", "hash1", "AllocatorRetention", "2026-11-29T10:00:00Z",
                                 "jemalloc", WorkloadKind::kStatefulSet),
                          // A Deployment's canary of the same template is not the StatefulSet's.
                          Canary("web", "hash2", "AllocatorRetention", "2026-11-29T10:00:00Z")});
  in.now_rfc3339 = "2026-11-29T10:01:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  const json written = Json(a.status);
  EXPECT_EQ(written["governedCount"], 3);
  EXPECT_EQ(written["governed"],
            json({{{"kind", "Deployment"}, {"name", "web"}, {"namespace", "shop"}},
                  {{"kind", "StatefulSet"}, {"name", "db"}, {"namespace", "shop"}},
                  {{"kind", "DaemonSet"}, {"name", "agent"}, {"namespace", "shop"}}}));
  EXPECT_EQ((*Condition(a.status, "Ready"))["message"].get<std::string>().rfind("governs 3 ", 0),
            0u);
  const std::optional<json> blocked = Condition(a.status, "RolloutBlocked");
  EXPECT_EQ((*blocked)["status"], "True");
  EXPECT_NE((*blocked)["message"].get<std::string>().find(
                "statefulset/db (template hash1): AllocatorRetention"),
            std::string::npos)
      << (*blocked)["message"];
  // The DaemonSet's canary has not finished: it waits.
  in.canaries.clear();
  a = DecidePolicyStatus(in);
  EXPECT_EQ((*Condition(a.status, "RolloutBlocked"))["message"],
            "waiting for canaries of statefulset/db, daemonset/agent");
}

// Two canaries of one template: the status names a held Deployment's or
// DaemonSet's canary of the current policy (by its name), whatever else
// measured the same template and wherever it is listed; a held StatefulSet's
// (found by kind and measured hash, its claims not being cached) is the
// first of them the cache lists.
TEST(DecidePolicyStatusTest, HeldCanaryOfTheCurrentPolicyAmongCanariesOfOneTemplate) {
  api::AllocatorPolicy earlier = Policy();
  earlier.spec.allocator.name = api::Allocator::kMimalloc;
  // What the policy measured before its allocator changed: ended, Ratchet.
  auto earlier_canary = [&](WorkloadKind kind) {
    json c = Canary("web", "hash1", "Ratchet", "2026-11-29T09:00:00Z", "", kind);
    MeasuredTemplate measured;
    measured.kind = kind;
    measured.hash = MeasuredOf("hash1");
    c["metadata"]["name"] = CanaryName(CanaryKey(measured, earlier));
    c["metadata"]["creationTimestamp"] = "2026-11-29T08:50:00Z";
    return c;
  };
  // The current policy's canary of the same template: still running.
  auto current_canary = [](WorkloadKind kind) {
    json c = Canary("web", "hash1", "", "", "", kind);
    c["status"] = {{"phase", "Running"}};
    c["metadata"]["creationTimestamp"] = "2026-11-29T09:30:00Z";
    return c;
  };
  for (WorkloadKind kind : {WorkloadKind::kDeployment, WorkloadKind::kDaemonSet}) {
    for (bool earlier_first : {true, false}) {
      SCOPED_TRACE(std::string(WorkloadKindName(kind)) +
                   (earlier_first ? ", earlier listed first" : ", current listed first"));
      PolicyInput in;
      in.policy = Policy();
      (kind == WorkloadKind::kDeployment ? in.deployments : in.daemonsets) =
          Deployments({Deployment("web", "web", "hash1")});
      in.canaries = earlier_first ? Canaries({earlier_canary(kind), current_canary(kind)})
                                  : Canaries({current_canary(kind), earlier_canary(kind)});
      in.now_rfc3339 = "2026-11-29T10:01:00Z";
      const std::optional<json> blocked =
          Condition(DecidePolicyStatus(in).status, "RolloutBlocked");
      EXPECT_EQ((*blocked)["status"], "False");
      EXPECT_EQ((*blocked)["reason"], "CanaryRunning") << (*blocked)["message"];
    }
  }
  // A StatefulSet's canary is found by kind and template (its key holds
  // claims the summary does not keep): the newest, the current spec's,
  // whichever is listed first.
  PolicyInput in;
  in.policy = Policy();
  in.statefulsets = Deployments({Deployment("db", "web", "hash1")});
  in.canaries = Canaries(
      {current_canary(WorkloadKind::kStatefulSet), earlier_canary(WorkloadKind::kStatefulSet)});
  in.now_rfc3339 = "2026-11-29T10:01:00Z";
  EXPECT_EQ((*Condition(DecidePolicyStatus(in).status, "RolloutBlocked"))["reason"],
            "CanaryRunning");
  std::swap(in.canaries[0], in.canaries[1]);
  const std::optional<json> blocked = Condition(DecidePolicyStatus(in).status, "RolloutBlocked");
  EXPECT_EQ((*blocked)["reason"], "CanaryRunning") << (*blocked)["message"];
}

TEST(DecidePolicyStatusTest, BlockedRolloutNamesTheFlatVariant) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = Deployments({Deployment("web", "web", "hash1")});
  in.canaries =
      Canaries({Canary("web", "hash1", "AllocatorRetention", "2026-11-29T10:00:00Z", "jemalloc")});
  in.now_rfc3339 = "2026-11-29T10:01:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  const std::optional<json> blocked = Condition(a.status, "RolloutBlocked");
  EXPECT_EQ((*blocked)["status"], "True");
  EXPECT_NE((*blocked)["message"].get<std::string>().find("variant jemalloc was flat instead"),
            std::string::npos)
      << (*blocked)["message"];
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "False");
  EXPECT_EQ(Json(a.status)["lastVerdict"]["verdict"], "AllocatorRetention");
  EXPECT_EQ(Json(a.status)["lastVerdict"]["floorSlope"], "+1.00 GiB/h");
}

TEST(DecidePolicyStatusTest, LastVerdictIsTheNewest) {
  PolicyInput in;
  in.policy = Policy();
  in.canaries = Canaries({Canary("web", "h1", "Ratchet", "2026-11-29T10:00:00Z"),
                          Canary("web", "h2", "Flat", "2026-11-29T11:00:00Z")});
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ(Json(a.status)["lastVerdict"]["templateHash"], "h2");
  EXPECT_EQ(Json(a.status)["verdicts"].size(), 2u);
  EXPECT_EQ((*Condition(a.status, "CanaryPassed"))["status"], "True");
}

// A canary read before its completionTime was written (or finished by hand)
// must not put an empty date-time into the policy's status: the API server
// refuses the whole status write for it (422), and the policy's status is lost.
TEST(DecidePolicyStatusTest, VerdictTimeIsAValidDateTimeOrAbsent) {
  PolicyInput in;
  in.policy = Policy();
  json no_time = Canary("web", "h1", "Flat", "");
  no_time["status"].erase("completionTime");
  json empty_time = Canary("web", "h2", "Ratchet", "");
  empty_time["metadata"]["creationTimestamp"] = "2026-11-29T09:00:00Z";
  json bad_time = Canary("web", "h3", "Ratchet", "yesterday");
  json number_time = Canary("web", "h4", "Ratchet", "");
  number_time["status"]["completionTime"] = 5;
  json offset_time = Canary("web", "h5", "Ratchet", "2026-11-29T11:00:00+01:00");
  in.canaries = Canaries({no_time, empty_time, bad_time, number_time, offset_time});
  in.now_rfc3339 = "2026-11-29T12:00:00Z";
  PolicyActions a = DecidePolicyStatus(in);
  const json written = Json(a.status);
  ASSERT_EQ(written["verdicts"].size(), 5u);
  std::map<std::string, json> by_hash;
  for (const json& v : written["verdicts"]) by_hash[v["templateHash"]] = v;
  EXPECT_FALSE(by_hash["h1"].contains("time")) << by_hash["h1"];
  EXPECT_EQ(by_hash["h2"]["time"], "2026-11-29T09:00:00Z");  // its creationTimestamp
  EXPECT_FALSE(by_hash["h3"].contains("time")) << by_hash["h3"];
  EXPECT_FALSE(by_hash["h4"].contains("time")) << by_hash["h4"];
  EXPECT_EQ(by_hash["h5"]["time"], "2026-11-29T10:00:00Z");  // normalised to UTC
  // The newest verdict with a time leads.
  EXPECT_EQ(Json(a.status)["lastVerdict"]["templateHash"], "h5");
  for (const json& v : written["verdicts"]) {
    if (v.contains("time")) {
      EXPECT_FALSE(v["time"].get<std::string>().empty()) << v;
    }
  }
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
      {"kept uninjected by the circuit breaker",
       Pod("g", "shop", {{api::kInjectionSuspendedAnnotation, "AllocatorPolicy web-policy ..."}}),
       false},
  };
  for (const Case& c : cases) {
    auto drift = FindInjectionDrift(Policy(), Pods({c.pod}), "allocguard-system");
    EXPECT_EQ(!drift.empty(), c.drift) << c.name;
  }
}

TEST(DecidePolicyStatusTest, DriftBecomesACondition) {
  PolicyInput in;
  in.policy = Policy();
  in.pods = Pods({Pod("web-1", "shop", json::object())});
  in.operator_namespace = "allocguard-system";
  PolicyActions a = DecidePolicyStatus(in);
  EXPECT_EQ((*Condition(a.status, "InjectionDrift"))["status"], "True");
  EXPECT_NE((*Condition(a.status, "InjectionDrift"))["message"].get<std::string>().find("web-1"),
            std::string::npos);
  EXPECT_EQ(Json(a.status)["injectionDrift"][0]["pod"], "web-1");
  ASSERT_EQ(a.drift.size(), 1u);
}

// A pod of Deployment "web" that policy generation 2 injected and whose
// container crash-loops on the loader's error.
json CrashLoopingPod(const std::string& name) {
  json pod = Pod(name, "shop",
                 {{api::kInjectedAnnotation, "jemalloc"},
                  {api::kPolicyAnnotation, "web-policy"},
                  {api::kPolicyGenerationAnnotation, "2"}},
                 {{"app", "web"}, {api::kPodTemplateHashLabel, "7d9f8c6b5"}});
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["ownerReferences"] = {
      {{"kind", "ReplicaSet"}, {"name", "web-7d9f8c6b5"}, {"controller", true}}};
  pod["status"]["containerStatuses"] = {
      {{"name", "app"},
       {"ready", false},
       {"restartCount", 3},
       {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
       {"lastState",
        {{"terminated",
          {{"exitCode", 127},
           {"message",
            "Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: symbol not "
            "found\n"}}}}}}};
  return pod;
}

TEST(DecidePolicyStatusTest, InjectionFailingFromTripToResumption) {
  PolicyInput in;
  in.policy = Policy();
  in.deployments = Deployments({Deployment("web", "web")});
  in.pods = Pods({CrashLoopingPod("web-7d9f8c6b5-a")});
  in.now_rfc3339 = "2026-11-30T06:00:00Z";

  // Trip: status, condition and events; no deletion before the status is stored.
  PolicyActions tripped = DecidePolicyStatus(in);
  const std::optional<json> failing = Condition(tripped.status, "InjectionFailing");
  ASSERT_TRUE(failing.has_value());
  EXPECT_EQ((*failing)["status"], "True");
  EXPECT_EQ((*failing)["reason"], "LoaderError");
  const std::string message = (*failing)["message"];
  EXPECT_NE(message.find("Deployment/web (template 7d9f8c6b5)"), std::string::npos) << message;
  EXPECT_NE(message.find("Error relocating"), std::string::npos) << message;
  ASSERT_EQ(Json(tripped.status)["injectionSuspended"].size(), 1u);
  ASSERT_EQ(tripped.injection_failing.size(), 1u);
  EXPECT_EQ(tripped.injection_failing[0].workload, "Deployment/web");
  EXPECT_TRUE(tripped.delete_pods.empty());
  EXPECT_TRUE(tripped.status_changed);

  // The stored status comes back: the failing pod is deleted, no new event.
  in.status = tripped.status;
  in.now_rfc3339 = "2026-11-30T06:00:05Z";
  PolicyActions acting = DecidePolicyStatus(in);
  EXPECT_FALSE(acting.status_changed);
  EXPECT_TRUE(acting.injection_failing.empty());
  ASSERT_EQ(acting.delete_pods.size(), 1u);
  EXPECT_EQ(acting.delete_pods[0].pod, "web-7d9f8c6b5-a");

  // The replacement runs without injection: not drift, still suspended.
  json replacement = Pod("web-7d9f8c6b5-b", "shop",
                         {{api::kInjectionSuspendedAnnotation, "AllocatorPolicy web-policy ..."}});
  in.pods = Pods({replacement});
  PolicyActions settled = DecidePolicyStatus(in);
  EXPECT_TRUE(settled.delete_pods.empty());
  EXPECT_EQ((*Condition(settled.status, "InjectionDrift"))["status"], "False");
  EXPECT_EQ((*Condition(settled.status, "InjectionFailing"))["status"], "True");

  // A policy edit resumes injection.
  in.policy.generation = 3;
  in.status = settled.status;
  PolicyActions resumed = DecidePolicyStatus(in);
  EXPECT_EQ(Json(resumed.status)["injectionSuspended"], json::array());
  EXPECT_EQ((*Condition(resumed.status, "InjectionFailing"))["status"], "False");
  EXPECT_EQ((*Condition(resumed.status, "InjectionFailing"))["reason"], "NoFailures");
}

}  // namespace
}  // namespace allocguard::controllers
