#include "operator/api/workloads.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/deployment.h"

namespace allocguard::api {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseDeploymentSummaryTest, ReadsWhatTheSlimCacheKeeps) {
  const json object = {
      {"metadata", {{"name", "web"}, {"namespace", "shop"}, {"annotations", {{"a", "1"}}}}},
      {kCachedTemplateHashField, "digest"},
      {"spec",
       {{"paused", true},
        {"template",
         {{"metadata", {{"labels", {{"app", "web"}}}, {"annotations", {{"b", "2"}}}}}}}}}};
  std::vector<std::string> problems;
  const DeploymentSummary d = ParseDeploymentSummary(object, &problems);
  EXPECT_THAT(problems, IsEmpty());
  EXPECT_EQ(d.meta.Key(), "shop/web");
  EXPECT_EQ(d.meta.Annotation("a"), "1");
  EXPECT_TRUE(d.paused);
  EXPECT_EQ(d.template_labels, (std::map<std::string, std::string>{{"app", "web"}}));
  EXPECT_EQ(d.template_annotations, (std::map<std::string, std::string>{{"b", "2"}}));
  EXPECT_EQ(d.cached_template_hash, "digest");
  EXPECT_EQ(d.pod_template, object["spec"]["template"]);
}

// A running Pod as the API server returns it, with what a kubelet writes.
json RunningPod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-7d9c-abcde", "generateName": "web-7d9c-", "namespace": "shop",
      "uid": "u-1", "resourceVersion": "42", "generation": 1,
      "creationTimestamp": "2026-12-05T10:00:00Z",
      "labels": {"app": "web", "pod-template-hash": "7d9c"},
      "annotations": {"allocguard.io/injected": "jemalloc", "allocguard.io/policy": "p",
        "allocguard.io/policy-generation": "3",
        "kubectl.kubernetes.io/restartedAt": "2026-12-05T09:00:00Z",
        "prometheus.io/scrape": "true"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9c",
        "uid": "rs-1", "controller": true}],
      "finalizers": ["example.com/keep"]},
    "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "web:1"}]},
    "status": {"phase": "Running", "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}],
      "hostIP": "192.168.1.2", "startTime": "2026-12-05T10:00:01Z", "qosClass": "Burstable",
      "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
        "message": "containers with unready status: [app]",
        "lastTransitionTime": "2026-12-05T10:00:05Z", "lastProbeTime": null}],
      "containerStatuses": [{"name": "app", "ready": false, "restartCount": 2,
        "image": "web:1", "imageID": "sha256:abc", "containerID": "containerd://1",
        "started": false,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
        "lastState": {"terminated": {"exitCode": 127, "reason": "Error",
          "message": "libjemalloc.so.2: cannot open shared object file",
          "startedAt": "2026-12-05T10:00:02Z", "finishedAt": "2026-12-05T10:00:02Z"}}}],
      "initContainerStatuses": [{"name": "install", "ready": true, "restartCount": 0,
        "image": "allocguard:1", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "lastState": {}}]}
  })");
}

TEST(SlimPodTest, ThePodSummaryReadsTheSameFromTheSlimPod) {
  const json whole = RunningPod();
  json slim = whole;
  SlimPod(slim);
  PodSummary expected = ParsePodSummary(whole);
  // The annotations a controller reads of a Pod are allocguard's own.
  expected.meta.annotations.erase("kubectl.kubernetes.io/restartedAt");
  expected.meta.annotations.erase("prometheus.io/scrape");
  std::vector<std::string> problems;
  EXPECT_EQ(ParsePodSummary(slim, &problems), expected);
  EXPECT_THAT(problems, IsEmpty());
  EXPECT_EQ(slim["metadata"]["annotations"].size(), 3u);
  // An event about the Pod names it by these.
  EXPECT_EQ(slim["apiVersion"], "v1");
  EXPECT_EQ(slim["kind"], "Pod");
  EXPECT_EQ(slim["spec"], json({{"nodeName", "node-1"}}));
  EXPECT_FALSE(slim["status"].contains("podIP"));
  EXPECT_FALSE(slim["status"]["containerStatuses"][0].contains("image"));
  EXPECT_FALSE(slim["metadata"].contains("finalizers"));
  EXPECT_LT(slim.dump().size(), whole.dump().size() * 3 / 4);
}

TEST(SlimPodTest, NeverThrowsAndLeavesMembersOfOtherTypesForTheReader) {
  for (const char* text :
       {R"(null)", R"([])", R"("pod")", R"({"metadata": 5})",
        R"({"metadata": {"annotations": []}})",
        R"({"status": {"conditions": "Ready", "containerStatuses": [5, "x", null]}})",
        R"({"spec": [1], "status": []})"}) {
    json pod = json::parse(text);
    EXPECT_NO_THROW(SlimPod(pod)) << text;
    EXPECT_NO_THROW(ParsePodSummary(pod)) << text;
  }
  json pod = json::parse(R"({"metadata": {"annotations": ["a"]}})");
  SlimPod(pod);
  EXPECT_EQ(pod["metadata"]["annotations"], json::array({"a"}));
}

TEST(SlimDeploymentTest, KeepsWhatTheReconcilersReadAndTheTemplatesDigest) {
  const json tmpl = {
      {"metadata", {{"labels", {{"app", "web"}}}, {"annotations", {{"b", "2"}}}, {"name", "x"}}},
      {"spec", {{"containers", {{{"name", "app"}, {"image", "web:1"}}}}}}};
  json object = {{"metadata", {{"name", "web"}, {"namespace", "shop"}}},
                 {"spec", {{"paused", true}, {"replicas", 3}, {"template", tmpl}}},
                 {"status", {{"replicas", 3}}}};
  SlimDeployment(object);
  EXPECT_EQ(
      object["spec"],
      (json{{"paused", true},
            {"template",
             {{"metadata", {{"labels", {{"app", "web"}}}, {"annotations", {{"b", "2"}}}}}}}}));
  EXPECT_EQ(object[kCachedTemplateHashField], PodTemplateHash(tmpl));
  EXPECT_EQ(object["status"], (json{{"replicas", 3}})) << "only spec is slimmed";
  const DeploymentSummary d = ParseDeploymentSummary(object);
  EXPECT_EQ(d.cached_template_hash, PodTemplateHash(tmpl));
  EXPECT_EQ(d.cached_measured_hash, MeasuredTemplateHash(tmpl));
  EXPECT_EQ(MeasuredHashOf(d), MeasuredTemplateHash(tmpl)) << "from the cache";
  EXPECT_EQ(MeasuredHashOf(ParseDeploymentSummary(json{{"spec", {{"template", tmpl}}}})),
            MeasuredTemplateHash(tmpl))
      << "from a workload read whole";
  EXPECT_TRUE(d.paused);
  EXPECT_EQ(d.template_labels, (std::map<std::string, std::string>{{"app", "web"}}));

  for (json hostile : {json(), json(5), json{{"spec", "x"}}, json{{"spec", {{"template", 3}}}},
                       json{{"spec", {{"template", {{"metadata", 1}}}}}}}) {
    const json before = hostile;
    EXPECT_NO_THROW(SlimDeployment(hostile)) << before;
  }
}

TEST(ParseDeploymentSummaryTest, WrongTypesAreReportedWithTheirPathNeverThrown) {
  const json object = {
      {"metadata", {{"name", "web"}}},
      {kCachedTemplateHashField, 7},
      {"spec",
       {{"paused", "yes"},
        {"template", {{"metadata", {{"labels", {{"app", 1}, {"tier", "db"}}}}}}}}}};
  std::vector<std::string> problems;
  DeploymentSummary d;
  EXPECT_NO_THROW(d = ParseDeploymentSummary(object, &problems));
  EXPECT_FALSE(d.paused);
  EXPECT_EQ(d.cached_template_hash, "");
  EXPECT_EQ(d.template_labels, (std::map<std::string, std::string>{{"tier", "db"}}));
  EXPECT_THAT(problems, Contains(HasSubstr("spec.paused")));
  EXPECT_THAT(problems, Contains(HasSubstr("spec.template.metadata.labels.app")));
  EXPECT_THAT(problems, Contains(HasSubstr(kCachedTemplateHashField)));

  for (const json& hostile :
       {json(), json(5), json::array(), json{{"spec", "x"}}, json{{"spec", {{"template", 3}}}}}) {
    EXPECT_NO_THROW(ParseDeploymentSummary(hostile, &problems)) << hostile;
  }
}

TEST(ParsePodSummaryTest, ReadsPhaseAndContainerStatuses) {
  const json object = {
      {"metadata",
       {{"name", "web-1"},
        {"ownerReferences", {{{"kind", "ReplicaSet"}, {"name", "web-7d"}, {"controller", true}}}}}},
      {"status",
       {{"phase", "Running"},
        {"initContainerStatuses", {{{"name", "init"}, {"ready", true}}}},
        {"containerStatuses",
         {{{"name", "app"},
           {"ready", false},
           {"restartCount", 3},
           {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}}}}},
           {"lastState",
            {{"terminated", {{"exitCode", 127}, {"reason", "Error"}, {"message", "ld.so"}}}}}}}}}}};
  std::vector<std::string> problems;
  const PodSummary pod = ParsePodSummary(object, &problems);
  EXPECT_THAT(problems, IsEmpty());
  EXPECT_EQ(pod.phase, "Running");
  EXPECT_FALSE(pod.Finished());
  ASSERT_EQ(pod.init_container_statuses.size(), 1u);
  EXPECT_TRUE(pod.init_container_statuses[0].ready);
  ASSERT_EQ(pod.container_statuses.size(), 1u);
  const ContainerStatusSummary& app = pod.container_statuses[0];
  EXPECT_EQ(app.name, "app");
  EXPECT_EQ(app.restart_count, 3);
  EXPECT_EQ(app.state.waiting_reason, "CrashLoopBackOff");
  EXPECT_EQ(app.last_state.terminated_message, "ld.so");
  EXPECT_EQ(app.last_state.terminated_reason, "Error");
  EXPECT_EQ(app.last_state.exit_code, 127);
  ASSERT_NE(pod.meta.ControllerRef(), nullptr);
  EXPECT_EQ(pod.meta.ControllerRef()->name, "web-7d");
}

TEST(ParsePodSummaryTest, HostileStatusesReadAsAbsent) {
  const json object = {{"status",
                        {{"phase", 3},
                         {"containerStatuses",
                          {"app", {{"name", "app"}, {"restartCount", "many"}, {"state", 1}}}}}}};
  std::vector<std::string> problems;
  PodSummary pod;
  EXPECT_NO_THROW(pod = ParsePodSummary(object, &problems));
  EXPECT_EQ(pod.phase, "");
  ASSERT_EQ(pod.container_statuses.size(), 1u);
  EXPECT_EQ(pod.container_statuses[0].restart_count, 0);
  EXPECT_THAT(problems, Contains(HasSubstr("status.phase")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.containerStatuses[0]")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.containerStatuses[1].restartCount")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.containerStatuses[1].state")));
}

TEST(ParseReplayCanarySummaryTest, ReadsTargetHashAndStatus) {
  const json object = {{"metadata", {{"name", "web-abc"}, {"labels", {{"p", "x"}}}}},
                       {"spec", {{"target", {{"name", "web"}}}, {"templateHash", "abc"}}},
                       {"status", {{"phase", "Completed"}, {"verdict", "Flat"}}}};
  const ReplayCanarySummary c = ParseReplayCanarySummary(object);
  EXPECT_EQ(c.meta.name, "web-abc");
  EXPECT_EQ(c.target_name, "web");
  EXPECT_EQ(c.template_hash, "abc");
  EXPECT_EQ(c.status.phase, CanaryPhase::kCompleted);
  EXPECT_EQ(c.status.verdict, Verdict::kFlat);
  std::vector<std::string> problems;
  EXPECT_NO_THROW(ParseReplayCanarySummary(json{{"spec", {{"target", "web"}}}}, &problems));
  EXPECT_THAT(problems, Contains(HasSubstr("spec.target")));
}

}  // namespace
}  // namespace allocguard::api

namespace allocguard::api {
namespace {

TEST(ParseJobSummaryTest, ReadsConditionsAndReportsHostileOnes) {
  const nlohmann::json job = {
      {"metadata", {{"name", "web-abc-candidate"}}},
      {"status",
       {{"conditions",
         {{{"type", "Failed"}, {"status", "True"}, {"reason", "BackoffLimitExceeded"}},
          "Complete",
          {{"type", 3}}}}}}};
  std::vector<std::string> problems;
  const JobSummary j = ParseJobSummary(job, &problems);
  EXPECT_EQ(j.meta.name, "web-abc-candidate");
  ASSERT_EQ(j.conditions.size(), 2u);
  EXPECT_EQ(j.conditions[0], (ObjectCondition{"Failed", "True", "BackoffLimitExceeded", ""}));
  EXPECT_EQ(j.conditions[1].type, "");
  EXPECT_THAT(problems, ::testing::Contains(::testing::HasSubstr("status.conditions[1]")));
  EXPECT_THAT(problems, ::testing::Contains(::testing::HasSubstr("status.conditions[2].type")));
}

TEST(ParsePodSummaryTest, ReadsStatusConditionsReasonAndWaitingMessage) {
  const nlohmann::json pod = {
      {"status",
       {{"phase", "Failed"},
        {"reason", "Evicted"},
        {"message", "low on memory"},
        {"conditions", {{{"type", "PodScheduled"}, {"status", "False"}, {"message", "0/3"}}}},
        {"containerStatuses",
         {{{"name", "app"},
           {"state", {{"waiting", {{"reason", "ErrImagePull"}, {"message", "no such image"}}}}},
           {"lastState", {{"terminated", nlohmann::json::object()}}}}}}}}};
  const PodSummary p = ParsePodSummary(pod);
  EXPECT_TRUE(p.Finished());
  EXPECT_EQ(p.reason, "Evicted");
  EXPECT_EQ(p.message, "low on memory");
  ASSERT_EQ(p.conditions.size(), 1u);
  EXPECT_EQ(p.conditions[0].message, "0/3");
  ASSERT_EQ(p.container_statuses.size(), 1u);
  EXPECT_EQ(p.container_statuses[0].state.waiting_message, "no such image");
  EXPECT_FALSE(p.container_statuses[0].state.terminated);
  EXPECT_TRUE(p.container_statuses[0].last_state.terminated);
}

}  // namespace
}  // namespace allocguard::api
