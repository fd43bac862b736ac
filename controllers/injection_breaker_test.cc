#include "controllers/injection_breaker.h"

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controllers/reconcilers.h"
#include "operator/admission/pod_injection.h"
#include "operator/api/names.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// --- FindLoaderError -----------------------------------------------------------

struct LoaderCase {
  std::string label;
  std::string text;
  std::optional<std::string> expected;
};

void PrintTo(const LoaderCase& c, std::ostream* os) { *os << c.label; }

class FindLoaderErrorTest : public ::testing::TestWithParam<LoaderCase> {};

TEST_P(FindLoaderErrorTest, FindsTheLoadersLine) {
  EXPECT_EQ(FindLoaderError(GetParam().text), GetParam().expected);
}

// The messages glibc's ld.so and musl's loader print (docs/allocators.md).
INSTANTIATE_TEST_SUITE_P(
    Cases, FindLoaderErrorTest,
    ::testing::Values(
        LoaderCase{"glibc_symbol_version",
                   "/bin/echo: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found "
                   "(required by /opt/allocguard/inject/libjemalloc.so.2)\n",
                   "/bin/echo: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found "
                   "(required by /opt/allocguard/inject/libjemalloc.so.2)"},
        LoaderCase{"glibc_missing_dependency",
                   "/app/server: error while loading shared libraries: libstdc++.so.6: cannot "
                   "open shared object file: No such file or directory",
                   "/app/server: error while loading shared libraries: libstdc++.so.6: cannot "
                   "open shared object file: No such file or directory"},
        LoaderCase{"glibc_loading_a_musl_build",
                   "/app/server: error while loading shared libraries: /usr/lib/x86_64-linux-gnu/"
                   "libc.so: invalid ELF header",
                   "/app/server: error while loading shared libraries: /usr/lib/x86_64-linux-gnu/"
                   "libc.so: invalid ELF header"},
        LoaderCase{"glibc_preload_ignored",
                   "ERROR: ld.so: object '/opt/allocguard/inject/libjemalloc.so.2' from "
                   "LD_PRELOAD cannot be preloaded (wrong ELF class: ELFCLASS64): ignored.\n"
                   "Segmentation fault",
                   "ERROR: ld.so: object '/opt/allocguard/inject/libjemalloc.so.2' from "
                   "LD_PRELOAD cannot be preloaded (wrong ELF class: ELFCLASS64): ignored."},
        LoaderCase{"glibc_symbol_lookup",
                   "/app/server: symbol lookup error: /opt/allocguard/inject/libmimalloc.so.2: "
                   "undefined symbol: __libc_single_threaded",
                   "/app/server: symbol lookup error: /opt/allocguard/inject/libmimalloc.so.2: "
                   "undefined symbol: __libc_single_threaded"},
        LoaderCase{"musl_relocating",
                   "Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: "
                   "symbol not found\r\n",
                   "Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: "
                   "symbol not found"},
        LoaderCase{"musl_loading",
                   "Error loading shared library libstdc++.so.6: No such file or directory "
                   "(needed by /opt/allocguard/inject/libtcmalloc_minimal.so.4)",
                   "Error loading shared library libstdc++.so.6: No such file or directory "
                   "(needed by /opt/allocguard/inject/libtcmalloc_minimal.so.4)"},
        LoaderCase{"found_among_log_lines",
                   "starting\n  /app: /lib/libc.so.6: version `GLIBC_2.38' not found (required by "
                   "/app)  \nbye\n",
                   "/app: /lib/libc.so.6: version `GLIBC_2.38' not found (required by /app)"},
        LoaderCase{"application_panic", "panic: runtime error: index out of range\n", std::nullopt},
        LoaderCase{"connection_refused", "dial tcp 10.0.0.1:5432: connection refused",
                   std::nullopt},
        LoaderCase{"empty", "", std::nullopt}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(FindLoaderErrorTest, LongLinesAreCutOnACharacterBoundary) {
  // 510 ASCII bytes, then two-byte characters: the cut falls inside one.
  std::string line = "Error relocating " + std::string(493, 'x');
  for (int i = 0; i < 100; ++i) line += "\xC3\xA9";  // é
  std::optional<std::string> found = FindLoaderError(line);
  ASSERT_TRUE(found.has_value());
  EXPECT_LE(found->size(), 515u);
  EXPECT_NO_THROW((void)json(*found).dump()) << "not valid UTF-8";
  EXPECT_THAT(*found, HasSubstr("..."));
}

// --- DetectInjectionFailure ------------------------------------------------------

constexpr char kGlibcMessage[] =
    "/app/server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by "
    "/opt/allocguard/inject/libjemalloc.so.2)";

api::AllocatorPolicy Policy() {
  api::AllocatorPolicy p;
  p.ns = "shop";
  p.name = "web-policy";
  p.generation = 4;
  p.spec.selector.match_labels = {{"app", "web"}};
  p.spec.allocator.name = api::Allocator::kJemalloc;
  return p;
}

// A pod of Deployment "web" injected by Policy(), its container "app"
// crash-looping on the loader's error, next to a running guard.
json FailingPod(const std::string& name = "web-7d9f8c6b5-abcde",
                const std::string& hash = "7d9f8c6b5") {
  return {
      {"metadata",
       {{"name", name},
        {"namespace", "shop"},
        {"uid", "uid-" + name},
        {"labels", {{"app", "web"}, {api::kPodTemplateHashLabel, hash}}},
        {"annotations",
         {{api::kInjectedAnnotation, "jemalloc"},
          {api::kPolicyAnnotation, "web-policy"},
          {api::kPolicyGenerationAnnotation, "4"}}},
        {"ownerReferences",
         {{{"kind", "ReplicaSet"}, {"name", "web-" + hash}, {"controller", true}}}}}},
      {"status",
       {{"phase", "Running"},
        {"containerStatuses",
         {{{"name", "app"},
           {"ready", false},
           {"restartCount", 1},
           {"state",
            {{"waiting",
              {{"reason", "CrashLoopBackOff"}, {"message", "back-off 10s restarting failed"}}}}},
           {"lastState",
            {{"terminated", {{"exitCode", 1}, {"reason", "Error"}, {"message", kGlibcMessage}}}}}},
          {{"name", api::kGuardContainerName},
           {"ready", true},
           {"restartCount", 0},
           {"state", {{"running", json::object()}}}}}}}}};
}

json& AppStatus(json& pod) { return pod["status"]["containerStatuses"][0]; }

struct DetectCase {
  std::string label;
  std::function<void(api::AllocatorPolicy&, json&)> change;
  bool trips;
};

void PrintTo(const DetectCase& c, std::ostream* os) { *os << c.label; }

class DetectInjectionFailureTest : public ::testing::TestWithParam<DetectCase> {};

TEST_P(DetectInjectionFailureTest, TripsOnlyOnRepeatedLoaderFailuresOfInjectedPods) {
  api::AllocatorPolicy policy = Policy();
  json pod = FailingPod();
  GetParam().change(policy, pod);
  std::optional<InjectionFailure> failure =
      DetectInjectionFailure(policy, api::ParsePodSummary(pod));
  EXPECT_EQ(failure.has_value(), GetParam().trips);
  if (failure.has_value()) {
    EXPECT_EQ(failure->key.workload, "Deployment/web");
    EXPECT_EQ(failure->key.pod_template_hash, "7d9f8c6b5");
    EXPECT_EQ(failure->container, policy.spec.containers.empty() ? "app" : "migrate");
    EXPECT_THAT(failure->loader_message, HasSubstr("GLIBC_2.34"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DetectInjectionFailureTest,
    ::testing::Values(
        DetectCase{"crash_loop_back_off", [](auto&, json&) {}, true},
        DetectCase{"two_restarts_while_starting_again",
                   [](auto&, json& pod) {
                     AppStatus(pod)["restartCount"] = 2;
                     AppStatus(pod)["state"] = json::object({{"running", json::object()}});
                   },
                   true},
        DetectCase{"message_in_the_current_termination",
                   [](auto&, json& pod) {
                     AppStatus(pod)["restartCount"] = 2;
                     AppStatus(pod)["state"] = json::object(
                         {{"terminated", {{"exitCode", 127}, {"message", kGlibcMessage}}}});
                     AppStatus(pod)["lastState"] = json::object();
                   },
                   true},
        DetectCase{"first_failure_only",
                   [](auto&, json& pod) {
                     AppStatus(pod)["restartCount"] = 1;
                     AppStatus(pod)["state"] = json::object({{"running", json::object()}});
                   },
                   false},
        DetectCase{"crash_loop_without_loader_error",
                   [](auto&, json& pod) {
                     AppStatus(pod)["lastState"]["terminated"]["message"] = "panic: boom";
                   },
                   false},
        DetectCase{"crash_loop_without_message",
                   [](auto&, json& pod) { AppStatus(pod)["lastState"] = json::object(); }, false},
        DetectCase{"not_injected",
                   [](auto&, json& pod) {
                     pod["metadata"]["annotations"].erase(api::kInjectedAnnotation);
                   },
                   false},
        DetectCase{"injected_by_another_policy",
                   [](auto&, json& pod) {
                     pod["metadata"]["annotations"][api::kPolicyAnnotation] = "other";
                   },
                   false},
        DetectCase{"injected_at_an_older_generation",
                   [](auto&, json& pod) {
                     pod["metadata"]["annotations"][api::kPolicyGenerationAnnotation] = "3";
                   },
                   false},
        DetectCase{
            "no_pod_template_hash",
            [](auto&, json& pod) { pod["metadata"]["labels"].erase(api::kPodTemplateHashLabel); },
            false},
        DetectCase{"not_selected_any_more",
                   [](auto&, json& pod) { pod["metadata"]["labels"]["app"] = "api"; }, false},
        DetectCase{"canary_pod",
                   [](auto&, json& pod) { pod["metadata"]["labels"][api::kCanaryLabel] = "c"; },
                   false},
        DetectCase{
            "terminating",
            [](auto&, json& pod) { pod["metadata"]["deletionTimestamp"] = "2026-11-30T06:00:00Z"; },
            false},
        DetectCase{"only_the_guard_fails",
                   [](auto&, json& pod) {
                     json& statuses = pod["status"]["containerStatuses"];
                     std::swap(statuses[0]["name"], statuses[1]["name"]);
                   },
                   false},
        DetectCase{"init_container_the_policy_names",
                   [](api::AllocatorPolicy& policy, json& pod) {
                     policy.spec.containers = {"migrate"};
                     json failing = AppStatus(pod);
                     failing["name"] = "migrate";
                     pod["status"]["initContainerStatuses"] = json::array({failing});
                     AppStatus(pod) = {{"name", "app"}, {"ready", false}, {"restartCount", 0}};
                   },
                   true},
        DetectCase{"container_the_policy_does_not_govern",
                   [](api::AllocatorPolicy& policy, json&) { policy.spec.containers = {"worker"}; },
                   false}),
    [](const auto& test_case) { return test_case.param.label; });

// --- DecideInjectionBreaker -----------------------------------------------------------

json WebDeployment(const std::string& digest = "tmpl-a") {
  return {{"metadata", {{"name", "web"}, {"namespace", "shop"}}},
          {kCachedTemplateHashField, digest},
          {"spec", {{"template", {{"metadata", {{"labels", {{"app", "web"}}}}}}}}}};
}

json Entry(int64_t generation = 4, const std::string& digest = "tmpl-a") {
  return {{"workload", "Deployment/web"},   {"podTemplateHash", "7d9f8c6b5"},
          {"templateHash", digest},         {"policyGeneration", generation},
          {"pod", "web-7d9f8c6b5-abcde"},   {"container", "app"},
          {"reason", "LoaderError"},        {"message", "container app ... GLIBC_2.34"},
          {"since", "2026-11-30T05:59:00Z"}};
}

// The objects as the policy reconciler parses them.
std::vector<api::PodSummary> Pods(const std::vector<json>& objects) {
  std::vector<api::PodSummary> out;
  out.reserve(objects.size());
  for (const json& o : objects) out.push_back(api::ParsePodSummary(o));
  return out;
}

std::vector<api::InjectionSuspendedStatus> Recorded(const json& list) {
  return api::ParseInjectionSuspended(list, "status.injectionSuspended");
}

// The new status.injectionSuspended as written.
json Suspended(const BreakerDecision& d) {
  json out = json::array();
  for (const api::InjectionSuspendedStatus& e : d.suspended) {
    out.push_back(api::InjectionSuspendedToJson(e));
  }
  return out;
}

BreakerInput Input() {
  BreakerInput in;
  in.policy = Policy();
  in.workload_templates = {{"Deployment/web", "tmpl-a"}};
  in.pods = Pods({FailingPod()});
  in.now_rfc3339 = "2026-11-30T06:00:00Z";
  return in;
}

TEST(DecideInjectionBreakerTest, AFailingTemplateIsSuspendedBeforeAnyPodIsDeleted) {
  BreakerDecision d = DecideInjectionBreaker(Input());
  ASSERT_THAT(d.suspended, SizeIs(1));
  const json e = Suspended(d)[0];
  EXPECT_EQ(e["workload"], "Deployment/web");
  EXPECT_EQ(e["podTemplateHash"], "7d9f8c6b5");
  EXPECT_EQ(e["templateHash"], "tmpl-a");
  EXPECT_EQ(e["policyGeneration"], 4);
  EXPECT_EQ(e["reason"], "LoaderError");
  EXPECT_EQ(e["since"], "2026-11-30T06:00:00Z");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("version `GLIBC_2.34' not found"));
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("container app of pod web-7d9f8c6b5"));
  ASSERT_THAT(d.tripped, SizeIs(1));
  EXPECT_EQ(d.tripped[0].workload, "Deployment/web");
  EXPECT_THAT(d.tripped[0].note, HasSubstr("web-policy stopped injecting jemalloc"));
  EXPECT_THAT(d.tripped[0].note, HasSubstr("GLIBC_2.34"));
  // The webhook reads the suspension from the cache: a pod deleted before
  // the status is written could come back injected.
  EXPECT_THAT(d.delete_pods, IsEmpty());
}

TEST(DecideInjectionBreakerTest, ARecordedSuspensionDeletesTheFailingPodsOnce) {
  BreakerInput in = Input();
  in.recorded = Recorded(json::array({Entry()}));
  json ready = FailingPod("web-7d9f8c6b5-ready");
  AppStatus(ready) = {{"name", "app"}, {"ready", true}, {"restartCount", 0}};
  json recreated = FailingPod("web-7d9f8c6b5-fresh");
  recreated["metadata"]["annotations"] = {
      {api::kInjectionSuspendedAnnotation, "AllocatorPolicy web-policy ..."}};
  AppStatus(recreated) = {{"name", "app"}, {"ready", false}, {"restartCount", 0}};
  json terminating = FailingPod("web-7d9f8c6b5-going");
  terminating["metadata"]["deletionTimestamp"] = "2026-11-30T06:00:00Z";
  json deleted = FailingPod("web-7d9f8c6b5-deleted");
  json other_template = FailingPod("web-5c8f6d9b7-other", "5c8f6d9b7");
  AppStatus(other_template) = {{"name", "app"}, {"ready", false}, {"restartCount", 0}};
  in.pods = Pods({FailingPod(), ready, recreated, terminating, deleted, other_template});
  in.deleted_pod_uids = {"uid-web-7d9f8c6b5-deleted"};
  BreakerDecision d = DecideInjectionBreaker(in);
  EXPECT_EQ(Suspended(d), json::array({Entry()})) << "kept as recorded, since unchanged";
  EXPECT_THAT(d.tripped, IsEmpty()) << "no second event for the same template";
  ASSERT_THAT(d.delete_pods, SizeIs(1));
  EXPECT_EQ(d.delete_pods[0].pod, "web-7d9f8c6b5-abcde");
  EXPECT_EQ(d.delete_pods[0].uid, "uid-web-7d9f8c6b5-abcde");
  EXPECT_THAT(d.delete_pods[0].note, HasSubstr("recreates this pod without it"));
}

struct PruneCase {
  std::string label;
  std::function<void(BreakerInput&)> change;
  bool kept;
};

void PrintTo(const PruneCase& c, std::ostream* os) { *os << c.label; }

class InjectionResumesTest : public ::testing::TestWithParam<PruneCase> {};

TEST_P(InjectionResumesTest, WhenThePolicyOrTheTemplateChanges) {
  BreakerInput in = Input();
  in.pods = {};
  in.recorded = Recorded(json::array({Entry()}));
  GetParam().change(in);
  BreakerDecision d = DecideInjectionBreaker(in);
  EXPECT_EQ(d.suspended.size(), GetParam().kept ? 1u : 0u) << Suspended(d).dump();
  EXPECT_THAT(d.delete_pods, IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InjectionResumesTest,
    ::testing::Values(
        PruneCase{"nothing_changed", [](BreakerInput&) {}, true},
        PruneCase{"policy_edited", [](BreakerInput& in) { in.policy.generation = 5; }, false},
        PruneCase{"template_edited",
                  [](BreakerInput& in) {
                    in.workload_templates = {{"Deployment/web", "tmpl-b"}};
                  },
                  false},
        PruneCase{"deployment_deleted", [](BreakerInput& in) { in.workload_templates.clear(); },
                  false},
        PruneCase{"malformed_entry",
                  [](BreakerInput& in) { in.recorded = Recorded(json::array({"Deployment/web"})); },
                  false}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(DecideInjectionBreakerTest, AfterAPolicyEditTheSameFailureTripsAgain) {
  BreakerInput in = Input();
  in.recorded = Recorded(json::array({Entry(3)}));
  BreakerDecision d = DecideInjectionBreaker(in);
  ASSERT_THAT(d.suspended, SizeIs(1));
  EXPECT_EQ(Suspended(d)[0]["policyGeneration"], 4);
  EXPECT_THAT(d.tripped, SizeIs(1));
  EXPECT_THAT(d.delete_pods, IsEmpty()) << "the new entry is not in the cache yet";
}

TEST(DecideInjectionBreakerTest, PodsOfAnUnknownDeploymentDoNotTrip) {
  BreakerInput in = Input();
  in.workload_templates = {};
  BreakerDecision d = DecideInjectionBreaker(in);
  EXPECT_THAT(d.suspended, IsEmpty());
  EXPECT_THAT(d.tripped, IsEmpty());
}

// --- Every kind of workload ---------------------------------------------------------

// FailingPod() made a pod of another owner: `owner` is its controller
// (kind, name, uid), `revision` its controller-revision-hash label (none
// when empty); no pod-template-hash label.
json PodOf(const std::string& name, const json& owner, const std::string& revision = "") {
  json pod = FailingPod(name);
  pod["metadata"]["labels"].erase(api::kPodTemplateHashLabel);
  if (!revision.empty()) pod["metadata"]["labels"][api::kControllerRevisionHashLabel] = revision;
  if (owner.is_null()) {
    pod["metadata"].erase("ownerReferences");
  } else {
    pod["metadata"]["ownerReferences"] = json::array({owner});
  }
  return pod;
}

json Owner(const std::string& kind, const std::string& name, const std::string& uid) {
  return {{"kind", kind}, {"name", name}, {"uid", uid}, {"controller", true}};
}

struct KindCase {
  std::string label;
  json pod;
  std::map<std::string, std::string> templates;  // BreakerInput::workload_templates
  std::string workload;                          // the suspension's key, as recorded
  std::string revision;
  std::string template_hash;  // recorded with it
  bool deleted;               // whether a recorded suspension deletes the failing pod
};

void PrintTo(const KindCase& c, std::ostream* os) { *os << c.label; }

class BreakerKindTest : public ::testing::TestWithParam<KindCase> {};

TEST_P(BreakerKindTest, TripsKeyedByTheOwnersRevisionAndDeletesOnlyWhatComesBack) {
  const KindCase& c = GetParam();
  BreakerInput in = Input();
  in.workload_templates = c.templates;
  in.pods = Pods({c.pod});
  BreakerDecision first = DecideInjectionBreaker(in);
  ASSERT_THAT(first.suspended, SizeIs(1));
  EXPECT_EQ(first.suspended[0].workload, c.workload);
  EXPECT_EQ(first.suspended[0].pod_template_hash, c.revision);
  EXPECT_EQ(first.suspended[0].template_hash, c.template_hash);
  ASSERT_THAT(first.tripped, SizeIs(1));
  EXPECT_EQ(first.tripped[0].workload, c.workload);
  EXPECT_THAT(first.tripped[0].note,
              HasSubstr(c.deleted ? "come back on the system allocator" : "re-create it"));

  // The next pass reads the suspension back from the status.
  in.recorded = first.suspended;
  BreakerDecision second = DecideInjectionBreaker(in);
  EXPECT_THAT(second.suspended, SizeIs(1));
  EXPECT_THAT(second.tripped, IsEmpty());
  EXPECT_EQ(second.delete_pods.size(), c.deleted ? 1u : 0u);

  // Its admission sees the same key as the breaker recorded.
  json admitted = c.pod;
  if (c.workload == "Pod") {
    admitted["metadata"]["annotations"].erase(api::kPodTemplateDigestAnnotation);
  }
  const admission::PodTemplateKey key = admission::PodTemplateKeyOf(admitted);
  EXPECT_EQ(key.workload, c.workload);
  EXPECT_EQ(key.pod_template_hash, c.revision);
}

json BarePod() {
  json pod = PodOf("one-off", nullptr);
  pod["spec"] = {{"containers", {{{"name", "app"}, {"image", "registry.example/app:1"}}}}};
  pod["metadata"]["annotations"][api::kPodTemplateDigestAnnotation] = admission::BarePodDigest(pod);
  return pod;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BreakerKindTest,
    ::testing::Values(KindCase{"statefulset",
                               PodOf("db-0", Owner("StatefulSet", "db", "uid-db"), "db-6b8d7c9f4"),
                               {{"StatefulSet/db", "tmpl-db"}},
                               "StatefulSet/db",
                               "db-6b8d7c9f4",
                               "tmpl-db",
                               true},
                      KindCase{"daemonset",
                               PodOf("agent-x7k2p", Owner("DaemonSet", "agent", "uid-agent"),
                                     "5f7d9c8b6"),
                               {{"DaemonSet/agent", "tmpl-agent"}},
                               "DaemonSet/agent",
                               "5f7d9c8b6",
                               "tmpl-agent",
                               true},
                      KindCase{"replicaset_of_its_own",
                               PodOf("workers-q8v2m", Owner("ReplicaSet", "workers", "uid-rs")),
                               {},
                               "ReplicaSet/workers",
                               "uid-rs",
                               "uid-rs",
                               true},
                      KindCase{"job",
                               PodOf("migrate-4kx9z", Owner("Job", "migrate", "uid-job")),
                               {},
                               "Job/migrate",
                               "uid-job",
                               "uid-job",
                               true},
                      KindCase{"bare_pod",
                               BarePod(),
                               {},
                               "Pod",
                               admission::BarePodDigest(BarePod()),
                               admission::BarePodDigest(BarePod()),
                               false}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(BreakerKindTest, AStatefulSetsNewRevisionResumesInjection) {
  BreakerInput in = Input();
  in.workload_templates = {{"StatefulSet/db", "tmpl-db"}};
  in.pods = Pods({PodOf("db-0", Owner("StatefulSet", "db", "uid-db"), "db-6b8d7c9f4")});
  in.recorded = DecideInjectionBreaker(in).suspended;
  ASSERT_THAT(in.recorded, SizeIs(1));
  in.pods = {};                                               // the failing pod was replaced
  in.workload_templates = {{"StatefulSet/db", "tmpl-db-2"}};  // the user fixed the template
  EXPECT_THAT(DecideInjectionBreaker(in).suspended, IsEmpty());
  in.workload_templates = {};  // or deleted the StatefulSet
  EXPECT_THAT(DecideInjectionBreaker(in).suspended, IsEmpty());
}

TEST(BreakerKindTest, AJobsSuspensionLastsWhileAPodOfItIsLeft) {
  BreakerInput in = Input();
  const json failing = PodOf("migrate-4kx9z", Owner("Job", "migrate", "uid-job"));
  in.pods = Pods({failing});
  in.recorded = DecideInjectionBreaker(in).suspended;
  ASSERT_THAT(in.recorded, SizeIs(1));
  // The Job's replacement, admitted without the allocator, keeps it.
  json replacement = PodOf("migrate-p2n7d", Owner("Job", "migrate", "uid-job"));
  replacement["metadata"]["annotations"] = {{api::kInjectionSuspendedAnnotation, "..."}};
  in.pods = Pods({replacement});
  EXPECT_THAT(DecideInjectionBreaker(in).suspended, SizeIs(1));
  // A new Job of the same name is a new key: the old suspension goes.
  in.pods = Pods({PodOf("migrate-zz9k1", Owner("Job", "migrate", "uid-job-2"))});
  BreakerDecision d = DecideInjectionBreaker(in);
  ASSERT_THAT(d.suspended, SizeIs(1)) << "the new Job's failing pod trips on its own";
  EXPECT_EQ(d.suspended[0].pod_template_hash, "uid-job-2");
  in.pods = {};
  EXPECT_THAT(DecideInjectionBreaker(in).suspended, IsEmpty());
}

TEST(BarePodDigestTest, KeepsWhatDecidesLoadingAndNothingPerPod) {
  json pod = BarePod();
  pod["metadata"]["annotations"].erase(api::kPodTemplateDigestAnnotation);
  const std::string digest = admission::BarePodDigest(pod);
  EXPECT_EQ(digest.size(), 16u);
  json token = pod;
  token["spec"]["volumes"] = {{{"name", "kube-api-access-x7k2p"}}};
  token["spec"]["containers"][0]["volumeMounts"] = {{{"name", "kube-api-access-x7k2p"}}};
  token["metadata"]["name"] = "one-off-2";
  EXPECT_EQ(admission::BarePodDigest(token), digest) << "the random token volume is left out";
  json image = pod;
  image["spec"]["containers"][0]["image"] = "registry.example/app:2";
  EXPECT_NE(admission::BarePodDigest(image), digest);
  json command = pod;
  command["spec"]["containers"][0]["command"] = {"/app/other"};
  EXPECT_NE(admission::BarePodDigest(command), digest);
  json hostile = pod;
  hostile["spec"]["containers"] = "not a list";
  EXPECT_NO_THROW((void)admission::BarePodDigest(hostile));
  hostile["spec"] = 7;
  EXPECT_NO_THROW((void)admission::BarePodDigest(hostile));
}

TEST(DeploymentTemplateDigestTest, CachedDigestElseComputed) {
  EXPECT_EQ(DeploymentTemplateDigest(api::ParseDeploymentSummary(WebDeployment("tmpl-a"))),
            "tmpl-a");
  json full = WebDeployment();
  full.erase(kCachedTemplateHashField);
  const std::string computed = DeploymentTemplateDigest(api::ParseDeploymentSummary(full));
  EXPECT_FALSE(computed.empty());
  full["spec"]["template"]["metadata"]["labels"]["version"] = "2";
  EXPECT_NE(DeploymentTemplateDigest(api::ParseDeploymentSummary(full)), computed);
}

}  // namespace
}  // namespace allocguard::controllers
