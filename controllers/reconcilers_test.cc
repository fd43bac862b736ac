// The reconcilers against an in-memory API server (kube::testing::
// FakeApiServer) through the real kube::Client: each test puts objects where
// the reconciler reads them (the API and the informer caches), reconciles,
// and checks what a user would see in the API: the status written, the Job
// created, the hold released, the event recorded.

#include "controllers/reconcilers.h"

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controllers/canary_fixture_for_test.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/admission/workload_hold.h"
#include "operator/api/deployment.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/api/workload_kinds.h"
#include "operator/kube/testing/fake_api_server.h"

namespace allocguard::controllers {
namespace {

using kube::testing::FakeApiServer;
using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr char kNs[] = "shop";

json PolicyObject(const std::string& mode = "Enforce") {
  return {{"apiVersion", "allocguard.io/v1alpha1"},
          {"kind", "AllocatorPolicy"},
          {"metadata", {{"name", "web-policy"}, {"namespace", kNs}}},
          {"spec",
           {{"selector", {{"matchLabels", {{"app", "web"}}}}},
            {"allocator", {{"name", "jemalloc"}}},
            {"rollout", {{"mode", mode}}},
            {"canary",
             {{"duration", "10m"},
              {"load",
               {{"port", 8080},
                {"rate", 20},
                {"requests", {{{"name", "get"}, {"path", "/item?id={key}"}}}}}}}}}}};
}

json DeploymentObject(const std::string& image = "web:2") {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", "web"}, {"namespace", kNs}}},
          {"spec",
           {{"replicas", 1},
            {"selector", {{"matchLabels", {{"app", "web"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "web"}}}}},
              {"spec", {{"containers", {{{"name", "server"}, {"image", image}}}}}}}}}}};
}

json PodObject(const std::string& name, json annotations = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", kNs},
            {"labels", {{"app", "web"}}},
            {"annotations", annotations}}},
          {"spec", {{"containers", {{{"name", "server"}, {"image", "web:2"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest() {
    for (kube::Store* s :
         {&policies_, &canaries_, &deployments_, &pods_, &jobs_, &statefulsets_, &daemonsets_}) {
      AddNamespaceIndex(*s);
    }
    AddCanaryJobIndex(pods_);
    AddCanaryIndexes(canaries_);
    for (kube::Store* s : {&deployments_, &statefulsets_, &daemonsets_}) {
      AddMeasuredTemplateIndex(*s);
    }
    ctx_.client = &client_;
    ctx_.policies = &policies_;
    ctx_.canaries = &canaries_;
    ctx_.deployments = &deployments_;
    ctx_.statefulsets = &statefulsets_;
    ctx_.daemonsets = &daemonsets_;
    ctx_.pods = &pods_;
    ctx_.jobs = &jobs_;
    ctx_.events = &events_;
    ctx_.clock = &clock_;
    ctx_.operator_namespace = "allocguard-system";
    ctx_.job_options.image = "allocguard:test";
    clock_.Advance(std::chrono::hours(24 * 365 * 56));  // in 2026
  }

  // Creates `object` in the API and shows it in `cache` as the informer
  // would (Deployments slimmed); returns it as stored.
  json Put(const kube::ResourceType& type, kube::Store& cache, json object) {
    json stored = server_->Seed(type, std::move(object));
    json cached = stored;
    if (&cache == &deployments_ || &cache == &daemonsets_) api::SlimDeployment(cached);
    if (&cache == &statefulsets_) api::SlimStatefulSet(cached);
    cache.Upsert(cached);
    return stored;
  }

  // The Enforce (or `mode`) policy, in the API and the cache, as parsed.
  api::AllocatorPolicy PutPolicy(const std::string& mode = "Enforce") {
    auto parsed =
        api::ParseAllocatorPolicy(Put(kube::AllocatorPolicies(), policies_, PolicyObject(mode)));
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    return parsed.ok() ? *parsed : api::AllocatorPolicy{};
  }

  // A finished canary the operator would trust for `workload`'s template.
  void PutCanary(WorkloadKind kind, const json& workload, const api::AllocatorPolicy& policy,
                 const std::string& verdict, const std::string& flat_variant = "") {
    Put(kube::ReplayCanaries(), canaries_,
        testing::TrustedCanaryOf(kind, workload, policy,
                                 admission::TemplateHash(workload["spec"]["template"]), "Completed",
                                 verdict, flat_variant));
  }

  std::vector<std::string> EventReasons() const {
    std::vector<std::string> out;
    for (const json& e : server_->List(kube::EventsV1(), "")) out.push_back(e.value("reason", ""));
    return out;
  }

  std::shared_ptr<FakeApiServer> server_ = std::make_shared<FakeApiServer>();
  kube::Client client_{server_, nullptr};
  kube::EventRecorder events_{&client_, {}};
  FakeClock clock_;
  kube::Store policies_, canaries_, deployments_, pods_, jobs_, statefulsets_, daemonsets_;
  ControllerContext ctx_;
};

TEST_F(ReconcilerTest, FakeApiServerAnswersAsTheApiServerDoes) {
  auto missing = client_.Get(kube::Deployments(), kNs, "web");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.error().IsNotFound());
  auto created = client_.Create(kube::Deployments(), kNs, DeploymentObject());
  ASSERT_TRUE(created.ok());
  const std::string rv = (*created)["metadata"]["resourceVersion"];
  auto again = client_.Create(kube::Deployments(), kNs, DeploymentObject());
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.error().IsAlreadyExists());
  json patch = {{"metadata", {{"resourceVersion", rv}, {"annotations", {{"a", "1"}}}}}};
  ASSERT_TRUE(client_.Patch(kube::Deployments(), kNs, "web", kube::PatchType::kMerge, patch).ok());
  auto stale = client_.Patch(kube::Deployments(), kNs, "web", kube::PatchType::kMerge, patch);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(stale.error().IsConflict());
  kube::DeleteOptions options;
  options.precondition_uid = "another";
  auto deleted = client_.Delete(kube::Deployments(), kNs, "web", options);
  ASSERT_FALSE(deleted.ok());
  EXPECT_TRUE(deleted.error().IsConflict());
  EXPECT_EQ(server_->List(kube::Deployments(), kNs).size(), 1u);
}

// The policy's status as written, from a canary that finished without a
// completionTime (nor a creationTimestamp): the write must not carry an
// empty date-time, which the CRD would refuse with the whole status.
TEST_F(ReconcilerTest, PolicyStatusIsWrittenWithoutInvalidDateTimes) {
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  json deployment = DeploymentObject();
  Put(kube::Deployments(), deployments_, deployment);
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  json canary = BuildReplayCanary(deployment, *parsed);
  canary["metadata"]["creationTimestamp"] = "";
  canary["status"] = {{"phase", "Completed"}, {"verdict", "Flat"}, {"explanation", "flat"}};
  Put(kube::ReplayCanaries(), canaries_, canary);

  PolicyReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web-policy").ok());
  std::optional<json> written = server_->Get(kube::AllocatorPolicies(), kNs, "web-policy");
  ASSERT_TRUE(written.has_value());
  const json& status = (*written)["status"];
  EXPECT_EQ(status["governedCount"], 1);
  EXPECT_EQ(status["governed"][0]["name"], "web");
  ASSERT_EQ(status["verdicts"].size(), 1u);
  EXPECT_EQ(status["verdicts"][0]["verdict"], "Flat");
  EXPECT_FALSE(status["verdicts"][0].contains("time")) << status["verdicts"][0];
  EXPECT_FALSE(status["lastVerdict"].contains("time"));
  bool passed = false;
  for (const json& c : status["conditions"]) {
    EXPECT_FALSE(c["lastTransitionTime"].get<std::string>().empty()) << c;
    if (c["type"] == "CanaryPassed") passed = c["status"] == "True";
  }
  EXPECT_TRUE(passed);
}

TEST_F(ReconcilerTest, RolloutReleasesAHoldOnATrustedFlatCanary) {
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = DeploymentObject();
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  deployment["metadata"]["annotations"] = {{api::kHeldCandidateAnnotation, hash}};
  deployment["spec"]["paused"] = true;
  deployment = Put(kube::Deployments(), deployments_, deployment);
  Put(kube::ReplayCanaries(), canaries_,
      testing::TrustedCanary(deployment, *parsed, hash, "Completed", "Flat"));

  RolloutReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web").ok());
  std::optional<json> released = server_->Get(kube::Deployments(), kNs, "web");
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ((*released)["spec"]["paused"], false);
  const json& annotations = (*released)["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_EQ(annotations[api::kReleasedCandidateAnnotation], hash);
  EXPECT_THAT(EventReasons(), Contains("RolloutReleased"));
}

// The cache still shows the Deployment as it was; a user changed it since:
// the release is refused (409) and decided again, nothing is written.
TEST_F(ReconcilerTest, RolloutDoesNotReleaseWhatChangedSinceTheCacheSawIt) {
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = DeploymentObject();
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  deployment["metadata"]["annotations"] = {{api::kHeldCandidateAnnotation, hash}};
  deployment["spec"]["paused"] = true;
  deployment = Put(kube::Deployments(), deployments_, deployment);
  Put(kube::ReplayCanaries(), canaries_,
      testing::TrustedCanary(deployment, *parsed, hash, "Completed", "Flat"));
  json changed = deployment;
  changed["spec"]["template"]["spec"]["containers"][0]["image"] = "web:3";
  ASSERT_TRUE(client_.Update(kube::Deployments(), changed, "").ok());

  RolloutReconciler reconciler(ctx_);
  auto result = reconciler.Reconcile(std::string(kNs) + "/web");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->requeue_after.has_value()) << "decided again after a look";
  std::optional<json> now = server_->Get(kube::Deployments(), kNs, "web");
  EXPECT_EQ((*now)["spec"]["paused"], true);
  EXPECT_EQ((*now)["metadata"]["annotations"][api::kHeldCandidateAnnotation], hash);
  EXPECT_THAT(EventReasons(), ::testing::Not(Contains("RolloutReleased")));
}

TEST_F(ReconcilerTest, RolloutStartsACanaryForAHeldTemplate) {
  Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  json deployment = DeploymentObject();
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  deployment["metadata"]["annotations"] = {{api::kHeldCandidateAnnotation, hash}};
  deployment["spec"]["paused"] = true;
  Put(kube::Deployments(), deployments_, deployment);

  RolloutReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web").ok());
  const std::vector<json> created = server_->List(kube::ReplayCanaries(), kNs);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0]["spec"]["templateHash"],
            api::MeasuredTemplateHash(deployment["spec"]["template"]));
  EXPECT_EQ(created[0]["spec"]["template"], deployment["spec"]["template"])
      << "the full template, read from the API, not the cache's slim one";
  EXPECT_THAT(EventReasons(), Contains("CanaryStarted"));
}

// Two Deployments whose templates differ only in their labels: the first
// starts the canary, the second joins it (an owner beside the first), and
// the canary's verdict reaches both, each with an event that names it.
TEST_F(ReconcilerTest, TwoDeploymentsWithOneTemplateShareOneCanaryAndItsVerdict) {
  const api::AllocatorPolicy policy = PutPolicy("Audit");
  json web = Put(kube::Deployments(), deployments_, DeploymentObject());
  json sibling = DeploymentObject();
  sibling["metadata"]["name"] = "web-b";
  sibling["spec"]["template"]["metadata"]["labels"]["instance"] = "b";
  sibling = Put(kube::Deployments(), deployments_, sibling);

  RolloutReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web").ok());
  std::vector<json> canaries = server_->List(kube::ReplayCanaries(), kNs);
  ASSERT_EQ(canaries.size(), 1u);
  canaries_.Upsert(canaries[0]);  // as the informer shows it
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web-b").ok());
  canaries = server_->List(kube::ReplayCanaries(), kNs);
  ASSERT_EQ(canaries.size(), 1u) << "one canary for one measured template";
  const std::string name = canaries[0]["metadata"]["name"];
  const json& owners = canaries[0]["metadata"]["ownerReferences"];
  ASSERT_EQ(owners.size(), 2u) << owners;
  EXPECT_EQ(owners[0]["name"], "web");
  EXPECT_EQ(owners[1]["name"], "web-b");
  EXPECT_EQ(owners[1]["uid"], sibling["metadata"]["uid"]);
  EXPECT_THAT(EventReasons(), Contains("CanaryShared"));

  // The canary finishes Flat (as the canary reconciler would write it).
  json finished = testing::TrustedCanaryOf(WorkloadKind::kDeployment, web, policy,
                                           admission::TemplateHash(web["spec"]["template"]),
                                           "Completed", "Flat");
  finished["metadata"] = canaries[0]["metadata"];
  ASSERT_TRUE(client_.UpdateStatus(kube::ReplayCanaries(), finished).ok());
  canaries_.Upsert(*server_->Get(kube::ReplayCanaries(), kNs, name));
  for (const json& w : {web, sibling}) {
    const std::string n = w["metadata"]["name"];
    ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/" + n).ok()) << n;
    std::optional<json> recorded = server_->Get(kube::Deployments(), kNs, n);
    ASSERT_TRUE(recorded.has_value());
    EXPECT_EQ((*recorded)["metadata"]["annotations"][api::kReleasedCandidateAnnotation],
              admission::TemplateHash(w["spec"]["template"]))
        << n;
  }
  int passed = 0;
  for (const json& e : server_->List(kube::EventsV1(), "")) {
    if (e.value("reason", "") != "CanaryPassed") continue;
    ++passed;
    EXPECT_THAT(e.value("note", ""), HasSubstr(name));
  }
  EXPECT_EQ(passed, 2) << "one event per Deployment, naming the canary";
}

// A ReplayCanary a user created under the shared name with another template:
// the waiting Deployment neither joins it nor takes its verdict.
TEST_F(ReconcilerTest, AHostileCanaryWithTheSharedNameIsNotJoined) {
  const api::AllocatorPolicy policy = PutPolicy("Audit");
  json web = Put(kube::Deployments(), deployments_, DeploymentObject());
  json hostile = testing::TrustedCanaryOf(WorkloadKind::kDeployment, web, policy,
                                          admission::TemplateHash(web["spec"]["template"]),
                                          "Completed", "Flat");
  hostile["spec"]["template"]["spec"]["containers"][0]["image"] = "web:flat";
  hostile["metadata"]["ownerReferences"] = json::array();
  hostile = Put(kube::ReplayCanaries(), canaries_, hostile);

  RolloutReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web").ok());
  std::optional<json> after =
      server_->Get(kube::ReplayCanaries(), kNs, hostile["metadata"]["name"]);
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE((*after)["metadata"]["ownerReferences"].empty()) << "not joined";
  std::optional<json> now = server_->Get(kube::Deployments(), kNs, "web");
  EXPECT_FALSE((*now)["metadata"].contains("annotations") &&
               (*now)["metadata"]["annotations"].contains(api::kReleasedCandidateAnnotation))
      << "no verdict recorded from it";
  EXPECT_THAT(EventReasons(), Contains("CanaryNotTrusted"));
}

TEST_F(ReconcilerTest, CanaryCreatesTheJobOfItsFirstVariantAndSaysSo) {
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = Put(kube::Deployments(), deployments_, DeploymentObject());
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  json canary = Put(kube::ReplayCanaries(), canaries_, BuildReplayCanary(deployment, *parsed));

  CanaryReconciler reconciler(ctx_);
  const std::string name = canary["metadata"]["name"];
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/" + name).ok());
  const std::vector<json> jobs = server_->List(kube::Jobs(), kNs);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_THAT(jobs[0]["metadata"]["name"].get<std::string>(), HasSubstr("candidate"));
  std::optional<json> written = server_->Get(kube::ReplayCanaries(), kNs, name);
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ((*written)["status"]["phase"], "Running");
}

// A hand-made canary whose template asks for host access cannot be run with
// the operator's rights: its variant fails with the message, no Job is
// created, and the event says why.
TEST_F(ReconcilerTest, CanaryWhoseJobCannotBeBuiltFailsTheVariant) {
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = Put(kube::Deployments(), deployments_, DeploymentObject());
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  json hostile = deployment;
  hostile["spec"]["template"]["spec"]["hostPID"] = true;
  json canary = Put(kube::ReplayCanaries(), canaries_, BuildReplayCanary(hostile, *parsed));

  CanaryReconciler reconciler(ctx_);
  const std::string name = canary["metadata"]["name"];
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/" + name).ok());
  EXPECT_TRUE(server_->List(kube::Jobs(), kNs).empty());
  std::optional<json> written = server_->Get(kube::ReplayCanaries(), kNs, name);
  ASSERT_TRUE(written.has_value());
  const json& candidate = (*written)["status"]["variants"][0];
  EXPECT_EQ(candidate["name"], "candidate");
  EXPECT_EQ(candidate["phase"], "Failed");
  EXPECT_EQ(candidate["verdict"], "Failed");
  EXPECT_THAT(candidate["message"].get<std::string>(),
              HasSubstr("cannot build the canary Job: the template asks for "
                        "spec.template.spec.hostPID"));
  EXPECT_THAT(EventReasons(), Contains("CanaryJobInvalid"));
}

// With the cluster-wide limit reached, a new canary waits: phase Pending with
// its queue position, no Job.
TEST_F(ReconcilerTest, CanaryWaitsForASlotWithItsQueuePosition) {
  ctx_.max_concurrent_canaries = 1;
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = Put(kube::Deployments(), deployments_, DeploymentObject());
  const std::string hash = admission::TemplateHash(deployment["spec"]["template"]);
  json running = BuildReplayCanary(deployment, *parsed);
  running["metadata"]["name"] = "running-canary";
  running["status"] = {{"phase", "Running"}};
  Put(kube::ReplayCanaries(), canaries_, running);
  json canary = Put(kube::ReplayCanaries(), canaries_, BuildReplayCanary(deployment, *parsed));

  CanaryReconciler reconciler(ctx_);
  const std::string name = canary["metadata"]["name"];
  auto result = reconciler.Reconcile(std::string(kNs) + "/" + name);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->requeue_after, std::chrono::seconds(15));
  EXPECT_TRUE(server_->List(kube::Jobs(), kNs).empty());
  std::optional<json> written = server_->Get(kube::ReplayCanaries(), kNs, name);
  ASSERT_TRUE(written.has_value());
  const json& status = (*written)["status"];
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["queuePosition"], 1);
  EXPECT_EQ(status["explanation"],
            "queued: position 1 of 1 waiting; 1 canaries are running, the limit is 1 "
            "(--max-concurrent-canaries)");
  EXPECT_FALSE(status.contains("variants"));
}

// The queue is not polled: when the running canary goes, the waiting one is
// woken (the canary reconciler's queue) and starts its Job at once.
TEST_F(ReconcilerTest, ACanaryThatGoesWakesTheCanaryWaitingForItsSlot) {
  ctx_.max_concurrent_canaries = 1;
  std::vector<std::string> woken;
  ctx_.canary_slots->SetWake([&woken](const std::string& key) { woken.push_back(key); });
  json policy = Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  auto parsed = api::ParseAllocatorPolicy(policy);
  ASSERT_TRUE(parsed.ok());
  json deployment = Put(kube::Deployments(), deployments_, DeploymentObject());
  json running = BuildReplayCanary(deployment, *parsed);
  running["metadata"]["name"] = "running-canary";
  running["status"] = {{"phase", "Running"}};
  running = Put(kube::ReplayCanaries(), canaries_, running);
  json canary = Put(kube::ReplayCanaries(), canaries_, BuildReplayCanary(deployment, *parsed));
  const std::string key = std::string(kNs) + "/" + canary["metadata"]["name"].get<std::string>();

  CanaryReconciler reconciler(ctx_);
  auto queued = reconciler.Reconcile(key);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->requeue_after, std::chrono::seconds(15));
  EXPECT_TRUE(server_->List(kube::Jobs(), kNs).empty());
  EXPECT_TRUE(woken.empty()) << "no slot is free";

  canaries_.Remove(running);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/running-canary").ok());
  EXPECT_EQ(woken, std::vector<std::string>{key});
  // The watch brings the queue note the first reconcile wrote.
  canaries_.Upsert(*server_->Get(kube::ReplayCanaries(), kNs, canary["metadata"]["name"]));
  auto started = reconciler.Reconcile(key);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  EXPECT_EQ(server_->List(kube::Jobs(), kNs).size(), 1u) << "the woken canary started its Job";
}

TEST_F(ReconcilerTest, DriftRecordsAWarningOnAnUninjectedPod) {
  Put(kube::AllocatorPolicies(), policies_, PolicyObject());
  Put(kube::Pods(), pods_, PodObject("web-1"));
  Put(kube::Pods(), pods_, PodObject("web-2", {{api::kInjectedAnnotation, "jemalloc"}}));

  DriftReconciler reconciler(ctx_);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web-1").ok());
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/web-2").ok());
  const std::vector<json> events = server_->List(kube::EventsV1(), kNs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "InjectionMissing");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["regarding"]["name"], "web-1");
}

// --- StatefulSets and DaemonSets ---------------------------------------------

// A StatefulSet of 3 replicas with a volumeClaimTemplate, whose template
// change the webhook held (DecideStatefulSetGate): the partition pinned
// above any replica count, the user's own partition (1) remembered.
json HeldStatefulSetObject() {
  json set = {{"apiVersion", "apps/v1"},
              {"kind", "StatefulSet"},
              {"metadata", {{"name", "db"}, {"namespace", kNs}}},
              {"spec",
               {{"replicas", 3},
                {"serviceName", "db"},
                {"selector", {{"matchLabels", {{"app", "web"}}}}},
                {"updateStrategy",
                 {{"type", "RollingUpdate"},
                  {"rollingUpdate", {{"partition", admission::kHeldPartition}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "web"}}}}},
                  {"spec",
                   {{"containers",
                     {{{"name", "server"},
                       {"image", "db:2"},
                       {"volumeMounts", {{{"name", "data"}, {"mountPath", "/var/lib/db"}}}}}}}}}}},
                {"volumeClaimTemplates",
                 {{{"metadata", {{"name", "data"}}},
                   {"spec",
                    {{"accessModes", {"ReadWriteOnce"}},
                     {"resources", {{"requests", {{"storage", "2Gi"}}}}}}}}}}}}};
  set["metadata"]["annotations"] = {
      {api::kHeldCandidateAnnotation, admission::TemplateHash(set["spec"]["template"])},
      {api::kUserPartitionAnnotation, "1"}};
  return set;
}

// A DaemonSet whose RollingUpdate strategy the webhook switched to OnDelete
// (DecideDaemonSetGate), remembering the user's.
json HeldDaemonSetObject() {
  json set = {{"apiVersion", "apps/v1"},
              {"kind", "DaemonSet"},
              {"metadata", {{"name", "agent"}, {"namespace", kNs}}},
              {"spec",
               {{"selector", {{"matchLabels", {{"app", "web"}}}}},
                {"updateStrategy", {{"type", "OnDelete"}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "web"}}}}},
                  {"spec", {{"containers", {{{"name", "agent"}, {"image", "agent:2"}}}}}}}}}}};
  set["metadata"]["annotations"] = {
      {api::kHeldCandidateAnnotation, admission::TemplateHash(set["spec"]["template"])},
      {api::kUserUpdateStrategyAnnotation,
       R"({"rollingUpdate":{"maxSurge":0,"maxUnavailable":2},"type":"RollingUpdate"})"}};
  return set;
}

TEST_F(ReconcilerTest, StatefulSetHeldIsCanariedThenReleasedToItsOwnPartitionWhenFlat) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = Put(kube::StatefulSets(), statefulsets_, HeldStatefulSetObject());
  const std::string hash = admission::TemplateHash(set["spec"]["template"]);
  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);
  EXPECT_STREQ(reconciler.name(), "statefulset-rollout");

  // Held: the canary of the held template, owned by this very StatefulSet.
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const std::vector<json> created = server_->List(kube::ReplayCanaries(), kNs);
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0]["spec"]["target"], json({{"kind", "StatefulSet"}, {"name", "db"}}));
  EXPECT_EQ(created[0]["spec"]["templateHash"], api::MeasuredTemplateHash(set["spec"]["template"]));
  EXPECT_EQ(created[0]["spec"]["template"], set["spec"]["template"]);
  EXPECT_EQ(created[0]["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
  EXPECT_EQ(created[0]["metadata"]["ownerReferences"][0]["uid"], set["metadata"]["uid"]);
  EXPECT_THAT(EventReasons(), Contains("CanaryStarted"));
  const json running = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(running["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            admission::kHeldPartition)
      << "nothing released while the canary runs";

  // Flat: the user's partition is back, the hold recorded as released.
  PutCanary(WorkloadKind::kStatefulSet, set, policy, "Flat");
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const json released = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(released["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 1);
  EXPECT_EQ(released["spec"]["replicas"], 3);
  const json& annotations = released["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kUserPartitionAnnotation)) << annotations;
  EXPECT_EQ(annotations[api::kReleasedCandidateAnnotation], hash);
  EXPECT_THAT(EventReasons(), Contains("RolloutReleased"));
}

TEST_F(ReconcilerTest, DaemonSetHeldIsReleasedToItsOwnStrategyWhenFlat) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = Put(kube::DaemonSets(), daemonsets_, HeldDaemonSetObject());
  const std::string hash = admission::TemplateHash(set["spec"]["template"]);
  PutCanary(WorkloadKind::kDaemonSet, set, policy, "Flat");

  RolloutReconciler reconciler(ctx_, WorkloadKind::kDaemonSet);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/agent").ok());
  const json released = server_->Get(kube::DaemonSets(), kNs, "agent").value();
  EXPECT_EQ(released["spec"]["updateStrategy"],
            json({{"type", "RollingUpdate"},
                  {"rollingUpdate", {{"maxSurge", 0}, {"maxUnavailable", 2}}}}));
  const json& annotations = released["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kUserUpdateStrategyAnnotation)) << annotations;
  EXPECT_EQ(annotations[api::kReleasedCandidateAnnotation], hash);
  EXPECT_THAT(EventReasons(), Contains("RolloutReleased"));
}

TEST_F(ReconcilerTest, StatefulSetStaysHeldOnAllocatorRetentionNamingTheFlatAllocator) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = Put(kube::StatefulSets(), statefulsets_, HeldStatefulSetObject());
  const std::string hash = admission::TemplateHash(set["spec"]["template"]);
  PutCanary(WorkloadKind::kStatefulSet, set, policy, "AllocatorRetention", "jemalloc");

  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const json held = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(held["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            admission::kHeldPartition);
  EXPECT_EQ(held["metadata"]["annotations"][api::kHeldCandidateAnnotation], hash);
  const std::vector<json> events = server_->List(kube::EventsV1(), kNs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], "RolloutHeld");
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["regarding"]["kind"], "StatefulSet");
  EXPECT_THAT(events[0]["note"].get<std::string>(), HasSubstr("variant jemalloc stayed flat"));
}

// An override of a held StatefulSet: the operator lifts no pin with its own
// rights. While the partition is still the hold's, the annotation alone
// releases nothing and a Warning names the field; once the user (whom the
// validating webhook let set it) puts the partition back, the hold and the
// override are cleared, the override recorded.
TEST_F(ReconcilerTest, StatefulSetOverrideIsConsumedOnlyOnceTheUserLiftsThePin) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = HeldStatefulSetObject();
  set["metadata"]["annotations"][api::kOverrideHoldAnnotation] = "INC-7 hotfix";
  set = Put(kube::StatefulSets(), statefulsets_, set);
  const std::string hash = admission::TemplateHash(set["spec"]["template"]);
  PutCanary(WorkloadKind::kStatefulSet, set, policy, "AllocatorRetention", "jemalloc");
  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);

  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  json now = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(now["spec"]["updateStrategy"]["rollingUpdate"]["partition"], admission::kHeldPartition)
      << "the operator does not lift the pin for an override";
  EXPECT_EQ(now["metadata"]["annotations"][api::kHeldCandidateAnnotation], hash);
  const std::vector<json> events = server_->List(kube::EventsV1(), kNs);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["reason"], "RolloutHeld");
  EXPECT_THAT(events.back()["note"].get<std::string>(),
              HasSubstr("spec.updateStrategy.rollingUpdate.partition is still 2147483647"));

  // The user sets the partition back (0: every pod takes the template).
  now["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 0;
  ASSERT_TRUE(client_.Update(kube::StatefulSets(), now, "").ok());
  json cached = server_->Get(kube::StatefulSets(), kNs, "db").value();
  api::SlimStatefulSet(cached);
  statefulsets_.Upsert(cached);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const json cleared = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(cleared["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
  const json& annotations = cleared["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kOverrideHoldAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kUserPartitionAnnotation)) << annotations;
  EXPECT_EQ(annotations[api::kOverriddenCandidateAnnotation], hash + " INC-7 hotfix");
  EXPECT_EQ(annotations[api::kReleasedCandidateAnnotation], hash);
  EXPECT_THAT(EventReasons(), Contains("HoldCleared"));
}

// The override annotation set, the pin left in place: the hold goes on as
// without it. The held template is canaried, and a Flat canary releases the
// hold to the user's own partition, the unused override removed with it.
TEST_F(ReconcilerTest, StatefulSetOverrideWithThePinInPlaceStillCanariesAndReleasesWhenFlat) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = HeldStatefulSetObject();
  set["metadata"]["annotations"][api::kOverrideHoldAnnotation] = "INC-7 hotfix";
  set = Put(kube::StatefulSets(), statefulsets_, set);
  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);

  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const std::vector<json> created = server_->List(kube::ReplayCanaries(), kNs);
  ASSERT_EQ(created.size(), 1u) << "the held template is canaried";
  EXPECT_EQ(created[0]["spec"]["template"], set["spec"]["template"]);
  EXPECT_THAT(EventReasons(), Contains("CanaryStarted"));

  PutCanary(WorkloadKind::kStatefulSet, set, policy, "Flat");
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const json released = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(released["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 1);
  const json& annotations = released["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kOverrideHoldAnnotation))
      << "an override left behind would lift the next hold without the permission";
  EXPECT_FALSE(annotations.contains(api::kOverriddenCandidateAnnotation)) << annotations;
  EXPECT_EQ(annotations[api::kReleasedCandidateAnnotation],
            admission::TemplateHash(set["spec"]["template"]));
  EXPECT_THAT(EventReasons(), Contains("RolloutReleased"));
  EXPECT_THAT(EventReasons(), ::testing::Not(Contains("HoldCleared")));
}

// The cache shows the hold of the template the canary proved; the StatefulSet
// was changed since (a new candidate held): nothing is released.
TEST_F(ReconcilerTest, StatefulSetReleaseWaitsWhenTheObjectHoldsAnotherTemplateNow) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = Put(kube::StatefulSets(), statefulsets_, HeldStatefulSetObject());
  PutCanary(WorkloadKind::kStatefulSet, set, policy, "Flat");
  json changed = set;
  changed["spec"]["template"]["spec"]["containers"][0]["image"] = "db:3";
  changed["metadata"]["annotations"][api::kHeldCandidateAnnotation] =
      admission::TemplateHash(changed["spec"]["template"]);
  ASSERT_TRUE(client_.Update(kube::StatefulSets(), changed, "").ok());

  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);
  auto result = reconciler.Reconcile(std::string(kNs) + "/db");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->requeue_after.has_value()) << "decided again after a look";
  const json now = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(now["spec"]["updateStrategy"]["rollingUpdate"]["partition"], admission::kHeldPartition);
  EXPECT_THAT(EventReasons(), ::testing::Not(Contains("RolloutReleased")));
}

// A hold no Enforce policy stands behind is released, as for Deployments,
// without recording the unproven template as released.
TEST_F(ReconcilerTest, StatefulSetHoldIsReleasedWhenThePolicyTurnsAudit) {
  Put(kube::AllocatorPolicies(), policies_, PolicyObject("Audit"));
  Put(kube::StatefulSets(), statefulsets_, HeldStatefulSetObject());

  RolloutReconciler reconciler(ctx_, WorkloadKind::kStatefulSet);
  ASSERT_TRUE(reconciler.Reconcile(std::string(kNs) + "/db").ok());
  const json released = server_->Get(kube::StatefulSets(), kNs, "db").value();
  EXPECT_EQ(released["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 1);
  const json& annotations = released["metadata"]["annotations"];
  EXPECT_FALSE(annotations.contains(api::kHeldCandidateAnnotation)) << annotations;
  EXPECT_FALSE(annotations.contains(api::kReleasedCandidateAnnotation)) << annotations;
  EXPECT_THAT(EventReasons(), Contains("HoldReleased"));
}

// The canary Job of a StatefulSet's template: its claim is an emptyDir of
// the claim's size, so the template's mount has a volume.
TEST_F(ReconcilerTest, StatefulSetCanaryJobMountsItsClaimAsASizedEmptyDir) {
  const api::AllocatorPolicy policy = PutPolicy();
  json set = Put(kube::StatefulSets(), statefulsets_, HeldStatefulSetObject());
  const std::string hash = admission::TemplateHash(set["spec"]["template"]);
  json canary = Put(kube::ReplayCanaries(), canaries_,
                    BuildReplayCanary(set, policy, WorkloadKind::kStatefulSet));

  CanaryReconciler reconciler(ctx_);
  ASSERT_TRUE(
      reconciler.Reconcile(std::string(kNs) + "/" + canary["metadata"]["name"].get<std::string>())
          .ok());
  const std::vector<json> jobs = server_->List(kube::Jobs(), kNs);
  ASSERT_EQ(jobs.size(), 1u);
  const json& volumes = jobs[0]["spec"]["template"]["spec"]["volumes"];
  const std::vector<json> listed(volumes.begin(), volumes.end());
  EXPECT_THAT(listed, Contains(json({{"name", "data"}, {"emptyDir", {{"sizeLimit", "2Gi"}}}})))
      << volumes;
}

}  // namespace
}  // namespace allocguard::controllers
