#include "operator/admission/pod_injection.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/names.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

api::AllocatorPolicy Policy(std::string name, std::map<std::string, std::string> match_labels,
                            api::Allocator allocator = api::Allocator::kJemalloc) {
  api::AllocatorPolicy policy;
  policy.ns = "shop";
  policy.name = std::move(name);
  policy.generation = 3;
  policy.spec.selector.match_labels = std::move(match_labels);
  policy.spec.allocator.name = allocator;
  return policy;
}

json WebPod() {
  return json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "web-7d9f-", "namespace": "shop",
                 "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "image": "web:1"}]}
  })");
}

PodInjectionInput Input(json pod = WebPod()) {
  PodInjectionInput input;
  input.pod = std::move(pod);
  input.ns = "shop";
  input.policies = {Policy("web-jemalloc", {{"app", "web"}}), Policy("db", {{"app", "db"}})};
  input.operator_namespace = "allocguard-system";
  input.options.image = "allocguard:0.1.0";
  input.native_sidecars = true;
  return input;
}

// Applies the decision's patch to the input pod; fails the test on a bad patch.
json Apply(const PodInjectionInput& input, const PodInjectionDecision& decision) {
  try {
    return input.pod.patch(decision.patch);
  } catch (const json::exception& e) {
    ADD_FAILURE() << "patch does not apply: " << e.what() << "\n" << decision.patch.dump(2);
    return input.pod;
  }
}

const json* FindByName(const json& list, const std::string& name) {
  if (!list.is_array()) return nullptr;
  for (const json& e : list) {
    if (e.value("name", "") == name) return &e;
  }
  return nullptr;
}

struct SkipCase {
  std::string label;
  std::function<void(PodInjectionInput&)> setup;
  std::string reason_part;
  bool conflict;
};

void PrintTo(const SkipCase& c, std::ostream* os) { *os << c.label; }

class PodInjectionSkipTest : public ::testing::TestWithParam<SkipCase> {};

TEST_P(PodInjectionSkipTest, SkipsWithAReasonAndAnEmptyPatch) {
  const SkipCase& c = GetParam();
  PodInjectionInput input = Input();
  c.setup(input);
  PodInjectionDecision decision = DecidePodInjection(input);
  EXPECT_EQ(decision.action, PodInjectionAction::kSkip);
  EXPECT_EQ(decision.patch, json::array());
  EXPECT_THAT(decision.annotations, IsEmpty());
  EXPECT_THAT(decision.reason, HasSubstr(c.reason_part));
  EXPECT_EQ(!decision.conflicts.empty(), c.conflict) << decision.reason;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodInjectionSkipTest,
    ::testing::Values(
        SkipCase{"kube_system", [](auto& in) { in.ns = "kube-system"; }, "kube-system", false},
        SkipCase{"operator_namespace", [](auto& in) { in.ns = "allocguard-system"; },
                 "allocguard-system", false},
        SkipCase{
            "opt_out",
            [](auto& in) { in.pod["metadata"]["annotations"][api::kInjectAnnotation] = "false"; },
            "opted out", false},
        SkipCase{"already_injected",
                 [](auto& in) {
                   in.pod["metadata"]["annotations"][api::kInjectedAnnotation] = "mimalloc";
                 },
                 "already injected (mimalloc)", false},
        SkipCase{"canary_pod",
                 [](auto& in) { in.pod["metadata"]["labels"][api::kCanaryLabel] = "web-abc"; },
                 "canary", false},
        SkipCase{"no_policy", [](auto& in) { in.pod["metadata"]["labels"]["app"] = "api"; },
                 "no AllocatorPolicy in shop selects pod web-7d9f-*", false},
        SkipCase{"no_labels", [](auto& in) { in.pod["metadata"].erase("labels"); },
                 "no AllocatorPolicy", false},
        SkipCase{"two_policies",
                 [](auto& in) {
                   in.policies.push_back(Policy("all-web", {{"app", "web"}}));
                 },
                 "all-web, web-jemalloc all select", true},
        SkipCase{"policy_containers_absent",
                 [](auto& in) { in.policies[0].spec.containers = {"worker"}; },
                 "none of its containers", true},
        SkipCase{"no_spec", [](auto& in) { in.pod.erase("spec"); }, "not a pod", false},
        SkipCase{"not_an_object", [](auto& in) { in.pod = json::array(); }, "not a pod", false},
        SkipCase{"malformed_containers", [](auto& in) { in.pod["spec"]["containers"] = "app"; },
                 "not injected", true}),
    [](const auto& test_case) { return test_case.param.label; });

// Found by fuzz/admission_fuzzer: a container whose name is not a string
// made the guard's fitting throw out of the webhook handler. It is no
// match for the policy's containers, and the others are injected.
TEST(PodInjectionTest, ContainerNameOfAnotherTypeIsNoMatchNotAnException) {
  json pod = WebPod();
  pod["spec"]["securityContext"] = {{"runAsUser", 1000}};
  pod["spec"]["containers"].push_back({{"name", {{"not", "a string"}}}, {"image", "x:1"}});
  PodInjectionInput input = Input(pod);
  input.policies[0].spec.guard.enabled = true;
  PodInjectionDecision d;
  ASSERT_NO_THROW(d = DecidePodInjection(input));
  EXPECT_EQ(d.action, PodInjectionAction::kInject);
  json patched = Apply(input, d);
  EXPECT_THAT(patched["spec"]["containers"][0]["env"].dump(), HasSubstr("LD_PRELOAD"));
}

TEST(PodInjectionTest, OptOutOtherThanFalseStillInjects) {
  PodInjectionInput input = Input();
  input.pod["metadata"]["annotations"][api::kInjectAnnotation] = "true";
  EXPECT_EQ(DecidePodInjection(input).action, PodInjectionAction::kInject);
}

TEST(PodInjectionTest, GenerateNamePodIsInjectedAsSpecified) {
  PodInjectionInput input = Input();
  input.policies[0].spec.allocator.jemalloc_malloc_conf = "background_thread:true";
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject) << decision.reason;
  ASSERT_TRUE(decision.policy.has_value());
  EXPECT_EQ(decision.policy->name, "web-jemalloc");
  EXPECT_THAT(decision.conflicts, IsEmpty());
  EXPECT_THAT(decision.reason, HasSubstr("web-7d9f-*"));

  json expected = input.pod;
  std::vector<std::string> ignored;
  ASSERT_TRUE(InjectAllocator(expected["spec"], input.policies[0].spec.allocator, {}, input.options,
                              &ignored)
                  .ok());
  // A pod without a controller also carries the digest its suspension
  // would be keyed by.
  expected["metadata"]["annotations"] = {
      {"allocguard.io/injected", "jemalloc"},
      {"allocguard.io/policy", "web-jemalloc"},
      {"allocguard.io/policy-generation", "3"},
      {"allocguard.io/pod-template-digest", BarePodDigest(input.pod)}};
  EXPECT_EQ(Apply(input, decision), expected) << decision.patch.dump(2);
  EXPECT_EQ(decision.annotations.at(api::kInjectedAnnotation), "jemalloc");
  EXPECT_EQ(decision.annotations.at(api::kPolicyGenerationAnnotation), "3");
  // The pod gained exactly one init container and no other container.
  const json mutated = Apply(input, decision);
  EXPECT_THAT(mutated["spec"]["initContainers"], SizeIs(1));
  EXPECT_THAT(mutated["spec"]["containers"], SizeIs(1));
  EXPECT_FALSE(mutated["spec"].contains("shareProcessNamespace"));
}

TEST(PodInjectionTest, AnnotationKeysAreEscapedInPatchPointers) {
  PodInjectionInput input = Input();
  input.pod["metadata"]["annotations"] = {{"team", "shop"}};
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject);
  std::vector<std::string> paths;
  for (const json& op : decision.patch) paths.push_back(op["path"]);
  EXPECT_THAT(paths, ::testing::Contains("/metadata/annotations/allocguard.io~1injected"));
  const json mutated = Apply(input, decision);
  EXPECT_EQ(mutated["metadata"]["annotations"]["team"], "shop");
  EXPECT_EQ(mutated["metadata"]["annotations"]["allocguard.io/policy"], "web-jemalloc");
}

TEST(PodInjectionTest, SecondAdmissionOfTheMutatedPodGivesAnEmptyPatch) {
  for (bool guard : {false, true}) {
    PodInjectionInput input = Input();
    input.policies[0].spec.guard.enabled = guard;
    input.pod["spec"]["containers"][0]["env"] = {{{"name", "LD_PRELOAD"}, {"value", "/x.so"}}};
    PodInjectionDecision first = DecidePodInjection(input);
    ASSERT_EQ(first.action, PodInjectionAction::kInject);
    PodInjectionInput again = input;
    again.pod = Apply(input, first);
    PodInjectionDecision second = DecidePodInjection(again);
    EXPECT_EQ(second.action, PodInjectionAction::kSkip);
    EXPECT_EQ(second.patch, json::array());
    // No duplicated containers, volumes or env after both admissions.
    const json& spec = again.pod["spec"];
    EXPECT_THAT(spec["volumes"], SizeIs(1));
    EXPECT_THAT(spec["initContainers"], SizeIs(guard ? 2 : 1));
    EXPECT_THAT(spec["containers"][0]["env"], SizeIs(1));
  }
}

TEST(PodInjectionTest, ExistingLdPreloadIsMergedThroughThePatch) {
  PodInjectionInput input = Input();
  input.pod["spec"]["containers"][0]["env"] = {
      {{"name", "LD_PRELOAD"}, {"value", "/usr/lib/libtrace.so"}}};
  const json mutated = Apply(input, DecidePodInjection(input));
  EXPECT_EQ(mutated["spec"]["containers"][0]["env"][0]["value"],
            "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/libjemalloc.so.2");
}

TEST(PodInjectionTest, LibcAnnotationOverridesThePolicy) {
  auto preload = [](const json& pod) {
    for (const json& var : pod["spec"]["containers"][0]["env"]) {
      if (var["name"] == "LD_PRELOAD") return var["value"].get<std::string>();
    }
    return std::string("(none)");
  };
  PodInjectionInput input = Input();
  input.policies[0].spec.libc = api::Libc::kGlibc;
  json plain = Apply(input, DecidePodInjection(input));
  EXPECT_EQ(preload(plain), "/opt/allocguard/inject/glibc/libjemalloc.so.2");

  input.pod["metadata"]["annotations"][api::kLibcAnnotation] = "musl";
  const PodInjectionDecision decision = DecidePodInjection(input);
  EXPECT_THAT(decision.reason, HasSubstr("libc musl"));
  json annotated = Apply(input, decision);
  EXPECT_EQ(preload(annotated), "/opt/allocguard/inject/musl/libjemalloc.so.2");
}

TEST(PodInjectionTest, ValueFromLdPreloadIsAConflictNotClobbered) {
  PodInjectionInput input = Input();
  const json entry = json::parse(
      R"({"name": "LD_PRELOAD", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})");
  input.pod["spec"]["containers"][0]["env"] = json::array({entry});
  PodInjectionDecision decision = DecidePodInjection(input);
  EXPECT_EQ(decision.action, PodInjectionAction::kInject);
  ASSERT_THAT(decision.conflicts, SizeIs(1));
  EXPECT_THAT(decision.conflicts[0], HasSubstr("valueFrom"));
  const json mutated = Apply(input, decision);
  EXPECT_EQ(mutated["spec"]["containers"][0]["env"], json::array({entry}));
}

TEST(PodInjectionTest, PolicyContainersSubsetAndInitContainersUntouchedUnlessSelected) {
  PodInjectionInput input = Input();
  input.pod["spec"] = json::parse(R"({
    "initContainers": [{"name": "migrate", "image": "web:1"}],
    "containers": [{"name": "app", "image": "web:1"}, {"name": "proxy", "image": "envoy:1"}]
  })");
  input.policies[0].spec.containers = {"app"};
  const json mutated = Apply(input, DecidePodInjection(input));
  EXPECT_EQ(*FindByName(mutated["spec"]["initContainers"], "migrate"),
            input.pod["spec"]["initContainers"][0]);
  EXPECT_EQ(*FindByName(mutated["spec"]["containers"], "proxy"),
            input.pod["spec"]["containers"][1]);
  EXPECT_TRUE(FindByName(mutated["spec"]["containers"], "app")->contains("env"));

  input.policies[0].spec.containers = {"app", "migrate"};
  const json both = Apply(input, DecidePodInjection(input));
  EXPECT_TRUE(FindByName(both["spec"]["initContainers"], "migrate")->contains("env"));
}

struct SidecarCase {
  std::string label;
  bool native;
  const char* list;        // where the guard must be
  const char* other_list;  // where it must not be
};

void PrintTo(const SidecarCase& c, std::ostream* os) { *os << c.label; }

class GuardSidecarTest : public ::testing::TestWithParam<SidecarCase> {};

TEST_P(GuardSidecarTest, GuardIsAddedAsNativeOrRegularSidecar) {
  const SidecarCase& c = GetParam();
  PodInjectionInput input = Input();
  input.native_sidecars = c.native;
  input.policies[0].spec.guard.enabled = true;
  input.policies[0].spec.guard.threshold_bytes = 1536LL << 20;
  input.policies[0].spec.guard.action = api::GuardAction::kBackpressure;
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject);
  const json mutated = Apply(input, decision);
  const json& spec = mutated["spec"];
  EXPECT_EQ(spec["shareProcessNamespace"], true);
  const json* guard = FindByName(spec[c.list], api::kGuardContainerName);
  ASSERT_NE(guard, nullptr) << spec.dump(2);
  EXPECT_EQ(FindByName(spec.value(c.other_list, json::array()), api::kGuardContainerName), nullptr);
  EXPECT_EQ((*guard)["command"], json({"/usr/local/bin/allocguard", "guard"}));
  EXPECT_EQ((*guard)["args"], json({"--threshold-bytes", "1610612736", "--action", "Backpressure",
                                    "--interval", "2s", "--expected-allocator", "jemalloc"}));
  EXPECT_EQ(guard->contains("restartPolicy"), c.native);
  if (c.native) {
    EXPECT_EQ((*guard)["restartPolicy"], "Always");
    // After the library copier, before nothing of the user's.
    EXPECT_EQ(spec["initContainers"][0]["name"], api::kInitContainerName);
    EXPECT_EQ(spec["initContainers"][1]["name"], api::kGuardContainerName);
  } else {
    EXPECT_EQ(spec["containers"].back()["name"], api::kGuardContainerName);
  }
  // The guard does not get the allocator preloaded.
  EXPECT_EQ(FindByName((*guard)["env"], "LD_PRELOAD"), nullptr);
  EXPECT_EQ((*guard)["securityContext"], RestrictedSecurityContext());
  EXPECT_TRUE((*guard)["resources"]["limits"].contains("memory"));
  EXPECT_THAT(decision.reason, HasSubstr("guard"));
  // Its /metrics port is declared by name, and the pod is labelled for a
  // PodMonitor to select.
  EXPECT_EQ(
      (*guard)["ports"],
      json::parse(R"([{"name": "guard-metrics", "containerPort": 9464, "protocol": "TCP"}])"));
  EXPECT_EQ(mutated["metadata"]["labels"][api::kGuardLabel], "true");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GuardSidecarTest,
    ::testing::Values(SidecarCase{"native", true, "initContainers", "containers"},
                      SidecarCase{"regular", false, "containers", "initContainers"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(PodInjectionTest, GuardWithoutThresholdOmitsTheFlag) {
  api::AllocatorPolicy policy = Policy("p", {});
  policy.spec.guard.enabled = true;
  const json guard = GuardContainer(policy, {"img", "/lib"}, false);
  EXPECT_EQ(guard["args"],
            json({"--action", "None", "--interval", "2s", "--expected-allocator", "jemalloc"}));
  // The pod's identity comes from the downward API.
  for (const auto& [name, path] :
       std::map<std::string, std::string>{{"POD_NAME", "metadata.name"},
                                          {"POD_NAMESPACE", "metadata.namespace"},
                                          {"POD_UID", "metadata.uid"}}) {
    const json* env = FindByName(guard["env"], name);
    ASSERT_NE(env, nullptr) << name;
    EXPECT_EQ((*env)["valueFrom"]["fieldRef"]["fieldPath"], path) << name;
  }
}

TEST(PodInjectionTest, BackpressureAddsTheReadinessGateOnce) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  input.policies[0].spec.guard.threshold_bytes = 1LL << 30;
  input.policies[0].spec.guard.action = api::GuardAction::kBackpressure;
  input.pod["spec"]["readinessGates"] = {{{"conditionType", "example.com/Warm"}}};
  json mutated = Apply(input, DecidePodInjection(input));
  EXPECT_EQ(mutated["spec"]["readinessGates"],
            json({{{"conditionType", "example.com/Warm"}},
                  {{"conditionType", "allocguard.io/MemoryHeadroom"}}}));
  // Other actions need no gate.
  for (api::GuardAction action : {api::GuardAction::kNone, api::GuardAction::kRestart}) {
    input.policies[0].spec.guard.action = action;
    mutated = Apply(input, DecidePodInjection(input));
    EXPECT_EQ(mutated["spec"]["readinessGates"], json({{{"conditionType", "example.com/Warm"}}}));
  }
}

TEST(PodInjectionTest, GuardRunsAsTheWorkloadsUserAndKnowsItsLimit) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  input.policies[0].spec.guard.action = api::GuardAction::kRestart;
  input.pod["spec"]["securityContext"] = {{"runAsUser", 1000}, {"runAsGroup", 3000}};
  input.pod["spec"]["containers"][0]["resources"] = {{"limits", {{"memory", "768Mi"}}}};
  json mutated = Apply(input, DecidePodInjection(input));
  const json* guard = FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName);
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ((*guard)["securityContext"]["runAsUser"], 1000);
  EXPECT_EQ((*guard)["securityContext"]["runAsGroup"], 3000);
  EXPECT_EQ((*guard)["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ((*guard)["securityContext"]["capabilities"]["drop"], json({"ALL"}));
  EXPECT_FALSE((*guard)["securityContext"]["capabilities"].contains("add"));
  const json& args = (*guard)["args"];
  auto at = std::find(args.begin(), args.end(), "--limit-bytes");
  ASSERT_NE(at, args.end()) << args.dump();
  EXPECT_EQ(*(at + 1), std::to_string(768LL << 20));

  // A container's own runAsUser wins over the pod's; root stays root.
  input.pod["spec"]["containers"][0]["securityContext"] = {{"runAsUser", 0}};
  mutated = Apply(input, DecidePodInjection(input));
  guard = FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName);
  EXPECT_EQ((*guard)["securityContext"]["runAsUser"], 0);
  EXPECT_EQ((*guard)["securityContext"]["runAsNonRoot"], false);

  // Unknown user (the image's default): the restricted 65532 is kept.
  input = Input();
  input.policies[0].spec.guard.enabled = true;
  mutated = Apply(input, DecidePodInjection(input));
  guard = FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName);
  EXPECT_EQ((*guard)["securityContext"], RestrictedSecurityContext());
  EXPECT_EQ(std::find((*guard)["args"].begin(), (*guard)["args"].end(), "--limit-bytes"),
            (*guard)["args"].end());
}

TEST(PodInjectionTest, GlibcGuardPodIsNativeSidecarFirst) {
  PodInjectionInput input = Input();
  input.policies[0].spec.allocator.name = api::Allocator::kGlibc;
  input.policies[0].spec.allocator.glibc_arena_max = 2;
  input.policies[0].spec.guard.enabled = true;
  input.pod["spec"]["initContainers"] = {{{"name", "migrate"}, {"image", "web:1"}}};
  const json mutated = Apply(input, DecidePodInjection(input));
  ASSERT_THAT(mutated["spec"]["initContainers"], SizeIs(2));
  EXPECT_EQ(mutated["spec"]["initContainers"][0]["name"], api::kGuardContainerName);
  EXPECT_FALSE(mutated["spec"].contains("volumes"));
  EXPECT_EQ(mutated["metadata"]["annotations"][api::kInjectedAnnotation], "glibc");
}

TEST(PodInjectionTest, ShareProcessNamespaceFalseKeepsTheGuardOut) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  input.pod["spec"]["shareProcessNamespace"] = false;
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject);
  ASSERT_THAT(decision.conflicts, SizeIs(1));
  EXPECT_THAT(decision.conflicts[0], HasSubstr("shareProcessNamespace"));
  const json mutated = Apply(input, decision);
  EXPECT_EQ(mutated["spec"]["shareProcessNamespace"], false);
  EXPECT_EQ(FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName), nullptr);
  // No guard, so no label that a PodMonitor would scrape in vain.
  EXPECT_FALSE(mutated["metadata"].value("labels", json::object()).contains(api::kGuardLabel));
  EXPECT_THAT(decision.reason, Not(HasSubstr("guard")));
}

TEST(PodInjectionTest, HostNetworkPodGetsAGuardWithoutAPort) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  input.pod["spec"]["hostNetwork"] = true;
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject);
  ASSERT_THAT(decision.conflicts, SizeIs(1));
  EXPECT_THAT(decision.conflicts[0], HasSubstr("hostNetwork"));
  const json mutated = Apply(input, decision);
  const json* guard = FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName);
  ASSERT_NE(guard, nullptr);
  // No containerPort (it would become the node's hostPort 9464) and no
  // server to collide with another guarded pod's on the node.
  EXPECT_FALSE(guard->contains("ports")) << guard->dump();
  const json& args = (*guard)["args"];
  const auto bind = std::find(args.begin(), args.end(), "--metrics-bind-address");
  ASSERT_NE(bind, args.end()) << args.dump();
  EXPECT_EQ(*(bind + 1), "0");
}

TEST(PodInjectionTest, GuardLogsAsTheOperatorDoes) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  input.options.guard_log_flags = {"--log-format", "json"};
  const json mutated = Apply(input, DecidePodInjection(input));
  const json* guard = FindByName(mutated["spec"]["initContainers"], api::kGuardContainerName);
  ASSERT_NE(guard, nullptr);
  const json& args = (*guard)["args"];
  EXPECT_EQ(json(std::vector<json>(args.end() - 2, args.end())), json({"--log-format", "json"}));
}

TEST(PodInjectionTest, EveryInjectedContainerIsRestricted) {
  PodInjectionInput input = Input();
  input.policies[0].spec.guard.enabled = true;
  const json mutated = Apply(input, DecidePodInjection(input));
  int injected = 0;
  for (const char* list : {"initContainers", "containers"}) {
    for (const json& c : mutated["spec"].value(list, json::array())) {
      const std::string name = c["name"];
      if (name.rfind("allocguard-", 0) != 0) continue;
      ++injected;
      const json& sc = c["securityContext"];
      EXPECT_EQ(sc["runAsNonRoot"], true) << name;
      EXPECT_EQ(sc["allowPrivilegeEscalation"], false) << name;
      EXPECT_EQ(sc["capabilities"]["drop"], json({"ALL"})) << name;
      EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault") << name;
      EXPECT_TRUE(c["resources"]["requests"].contains("memory")) << name;
      EXPECT_TRUE(c["resources"]["limits"].contains("memory")) << name;
    }
  }
  EXPECT_EQ(injected, 2);
}

TEST(PodInjectionTest, PolicySelectorWithExpressions) {
  PodInjectionInput input = Input();
  input.policies = {Policy("tiered", {})};
  input.policies[0].spec.selector.match_expressions = {{"tier", "In", {"front", "edge"}}};
  EXPECT_EQ(DecidePodInjection(input).action, PodInjectionAction::kSkip);
  input.pod["metadata"]["labels"]["tier"] = "edge";
  EXPECT_EQ(DecidePodInjection(input).action, PodInjectionAction::kInject);
}

// A pod as the ReplicaSet controller of Deployment "web" creates it.
json ReplicaSetPod(const std::string& hash = "7d9f8c6b5") {
  json pod = WebPod();
  pod["metadata"]["generateName"] = "web-" + hash + "-";
  pod["metadata"]["labels"][api::kPodTemplateHashLabel] = hash;
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                         {"kind", "ReplicaSet"},
                                         {"name", "web-" + hash},
                                         {"uid", "rs-uid"},
                                         {"controller", true}}};
  return pod;
}

InjectionSuspension Suspended(std::string policy = "web-jemalloc", int64_t generation = 3,
                              std::string hash = "7d9f8c6b5",
                              std::string workload = "Deployment/web") {
  return {std::move(policy), std::move(workload), std::move(hash), generation,
          "/app: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by "
          "/opt/allocguard/inject/libjemalloc.so.2)"};
}

struct SuspensionCase {
  std::string label;
  json pod;
  InjectionSuspension suspension;
  PodInjectionAction expected;
};

void PrintTo(const SuspensionCase& c, std::ostream* os) { *os << c.label; }

class PodInjectionSuspensionTest : public ::testing::TestWithParam<SuspensionCase> {};

TEST_P(PodInjectionSuspensionTest, SuspendedTemplatesAreNotInjected) {
  const SuspensionCase& c = GetParam();
  PodInjectionInput input = Input(c.pod);
  input.suspensions = {c.suspension};
  PodInjectionDecision decision = DecidePodInjection(input);
  EXPECT_EQ(decision.action, c.expected) << decision.reason;
  const json mutated = Apply(input, decision);
  const json& annotations = mutated["metadata"].value("annotations", json::object());
  if (c.expected == PodInjectionAction::kSuspended) {
    // Only the annotation: no allocator, no guard, no injected marker.
    EXPECT_EQ(mutated["spec"], c.pod["spec"]);
    EXPECT_FALSE(annotations.contains(api::kInjectedAnnotation));
    ASSERT_TRUE(annotations.contains(api::kInjectionSuspendedAnnotation));
    const std::string why = annotations[api::kInjectionSuspendedAnnotation];
    EXPECT_THAT(why, HasSubstr("web-jemalloc"));
    EXPECT_THAT(why, HasSubstr("Deployment/web pod-template-hash 7d9f8c6b5"));
    EXPECT_THAT(why, HasSubstr("GLIBC_2.34"));
    EXPECT_THAT(decision.reason, HasSubstr("not injected"));
  } else {
    EXPECT_TRUE(annotations.contains(api::kInjectedAnnotation));
    EXPECT_FALSE(annotations.contains(api::kInjectionSuspendedAnnotation));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodInjectionSuspensionTest,
    ::testing::Values(SuspensionCase{"same_template_and_generation", ReplicaSetPod(), Suspended(),
                                     PodInjectionAction::kSuspended},
                      // A policy edit moves the generation on: injection resumes.
                      SuspensionCase{"older_policy_generation", ReplicaSetPod(),
                                     Suspended("web-jemalloc", 2), PodInjectionAction::kInject},
                      // A template edit gives a new pod-template-hash: injection resumes.
                      SuspensionCase{"new_template", ReplicaSetPod("5c8f6d9b7"), Suspended(),
                                     PodInjectionAction::kInject},
                      SuspensionCase{"other_workload", ReplicaSetPod(),
                                     Suspended("web-jemalloc", 3, "7d9f8c6b5", "Deployment/api"),
                                     PodInjectionAction::kInject},
                      SuspensionCase{"other_policy", ReplicaSetPod(), Suspended("db"),
                                     PodInjectionAction::kInject},
                      SuspensionCase{"pod_without_replicaset", WebPod(), Suspended(),
                                     PodInjectionAction::kInject}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(PodInjectionTest, ASuspendedStatefulSetPodNamesItsRevisionLabel) {
  json pod = ReplicaSetPod();
  pod["metadata"]["ownerReferences"][0]["kind"] = "StatefulSet";
  pod["metadata"]["ownerReferences"][0]["name"] = "db";
  pod["metadata"]["labels"][api::kControllerRevisionHashLabel] = "db-7466c6f96b";
  PodInjectionInput input = Input(pod);
  input.suspensions = {Suspended("web-jemalloc", 3, "db-7466c6f96b", "StatefulSet/db")};
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kSuspended) << decision.reason;
  EXPECT_THAT(Apply(input, decision)["metadata"]["annotations"][api::kInjectionSuspendedAnnotation]
                  .get<std::string>(),
              HasSubstr("StatefulSet/db controller-revision-hash db-7466c6f96b"));
}

TEST(PodInjectionTest, PodTemplateKeyComesFromTheControllingOwner) {
  EXPECT_EQ(PodTemplateKeyOf(ReplicaSetPod()), (PodTemplateKey{"Deployment/web", "7d9f8c6b5"}));
  // An owner that is not the controller does not count: a bare pod, keyed
  // by its containers.
  json not_controller = ReplicaSetPod();
  not_controller["metadata"]["ownerReferences"][0]["controller"] = false;
  EXPECT_EQ(PodTemplateKeyOf(not_controller),
            (PodTemplateKey{kBarePods, BarePodDigest(not_controller)}));
  EXPECT_FALSE(PodTemplateKeyOf(not_controller).Replaced());
  // A ReplicaSet that is not "<deployment>-<hash>": keyed by its uid, and
  // not at all without one.
  json bare_replicaset = ReplicaSetPod();
  bare_replicaset["metadata"]["ownerReferences"][0]["name"] = "web";
  EXPECT_EQ(PodTemplateKeyOf(bare_replicaset), (PodTemplateKey{"ReplicaSet/web", "rs-uid"}));
  bare_replicaset["metadata"]["ownerReferences"][0].erase("uid");
  EXPECT_EQ(PodTemplateKeyOf(bare_replicaset), PodTemplateKey{});
  bare_replicaset["metadata"]["ownerReferences"][0]["uid"] = "rs-uid";
  EXPECT_TRUE(PodTemplateKeyOf(bare_replicaset).Replaced());
  // A bare pod as admitted, and as the cache keeps it after injection.
  const PodTemplateKey bare = PodTemplateKeyOf(WebPod());
  EXPECT_EQ(bare, (PodTemplateKey{kBarePods, BarePodDigest(WebPod())}));
  json injected = WebPod();
  injected["metadata"]["annotations"][api::kPodTemplateDigestAnnotation] = bare.pod_template_hash;
  injected["spec"]["containers"][0]["image"] = "changed after admission";
  EXPECT_EQ(PodTemplateKeyOf(api::ParseObjectMeta(injected)), bare);
}

TEST(PodInjectionTest, ABarePodRecordsItsTemplateDigestWhenInjectedOrSuspended) {
  PodInjectionInput in = Input(WebPod());
  PodInjectionDecision injected = DecidePodInjection(in);
  ASSERT_EQ(injected.action, PodInjectionAction::kInject) << injected.reason;
  EXPECT_EQ(injected.annotations[api::kPodTemplateDigestAnnotation], BarePodDigest(WebPod()));
  in.suspensions = {{"web-jemalloc", kBarePods, BarePodDigest(WebPod()), 3, "loader"}};
  PodInjectionDecision suspended = DecidePodInjection(in);
  ASSERT_EQ(suspended.action, PodInjectionAction::kSuspended) << suspended.reason;
  EXPECT_EQ(suspended.annotations[api::kPodTemplateDigestAnnotation], BarePodDigest(WebPod()));
  // A Deployment's pod needs no digest: its labels carry the revision.
  PodInjectionDecision deployment_pod = DecidePodInjection(Input(ReplicaSetPod()));
  EXPECT_FALSE(deployment_pod.annotations.contains(api::kPodTemplateDigestAnnotation));
}

TEST(PodInjectionTest, SuspensionsAreReadFromThePolicyStatus) {
  const json policy = json::parse(R"({
    "metadata": {"name": "web-jemalloc", "namespace": "shop"},
    "status": {"injectionSuspended": [
      {"workload": "Deployment/web", "podTemplateHash": "7d9f8c6b5", "policyGeneration": 3,
       "message": "Error relocating /opt/allocguard/inject/libjemalloc.so.2: __memcpy_chk: symbol not found"},
      {"workload": "Deployment/api", "podTemplateHash": "6b5", "policyGeneration": "3"},
      {"podTemplateHash": "6b5", "policyGeneration": 3},
      "junk"
    ]}
  })");
  std::vector<InjectionSuspension> s = SuspensionsOfPolicy(policy);
  ASSERT_THAT(s, SizeIs(1));
  EXPECT_EQ(s[0].policy, "web-jemalloc");
  EXPECT_EQ(s[0].workload, "Deployment/web");
  EXPECT_EQ(s[0].pod_template_hash, "7d9f8c6b5");
  EXPECT_EQ(s[0].policy_generation, 3);
  EXPECT_THAT(s[0].message, HasSubstr("Error relocating"));
  EXPECT_THAT(SuspensionsOfPolicy(json::parse(R"({"metadata": {"name": "p"}})")), IsEmpty());
}

TEST(PodInjectionTest, PodDisplayNames) {
  EXPECT_EQ(PodDisplayName(json::parse(R"({"metadata": {"name": "a"}})")), "a");
  EXPECT_EQ(PodDisplayName(json::parse(R"({"metadata": {"generateName": "a-"}})")), "a-*");
  EXPECT_EQ(PodDisplayName(json::object()), "(unnamed pod)");
}

// ---- the stats agent (spec.stats, docs/allocator-books.md) ----

// The entry `name` of the list obj[key]; null when either is absent.
const json* Named(const json& obj, const char* key, const std::string& name) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : FindByName(*it, name);
}

const json* EnvNamed(const json& container, const std::string& name) {
  return Named(container, "env", name);
}

TEST(PodInjectionStatsTest, TheAgentGoesBesideTheAllocatorAndTheGuardReadsItsBooks) {
  PodInjectionInput input = Input();
  input.options.stats_agent = true;             // the image ships it
  input.policies[0].spec.guard.enabled = true;  // spec.stats absent: follows the guard
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject) << decision.reason;
  EXPECT_THAT(decision.conflicts, IsEmpty());
  EXPECT_THAT(decision.reason, HasSubstr("with the guard sidecar and the stats agent"));
  const json mutated = Apply(input, decision);
  const json& spec = mutated["spec"];

  const json* volume = FindByName(spec["volumes"], api::kBooksVolumeName);
  ASSERT_NE(volume, nullptr) << spec.dump(2);
  EXPECT_EQ((*volume)["emptyDir"], json({{"sizeLimit", "16Mi"}}));
  const json* init = FindByName(spec["initContainers"], api::kInitContainerName);
  ASSERT_NE(init, nullptr);
  EXPECT_EQ((*init)["command"],
            json({"allocguard", "install-allocator", "--from", "/opt/allocguard/lib", "--to",
                  "/opt/allocguard/inject", "libjemalloc.so.2", "liballocguard_stats.so"}));

  const json& app = spec["containers"][0];
  ASSERT_NE(EnvNamed(app, "LD_PRELOAD"), nullptr);
  EXPECT_EQ((*EnvNamed(app, "LD_PRELOAD"))["value"],
            "/opt/allocguard/inject/$LIB/libjemalloc.so.2:"
            "/opt/allocguard/inject/$LIB/liballocguard_stats.so");
  ASSERT_NE(EnvNamed(app, "ALLOCGUARD_STATS_DIR"), nullptr);
  EXPECT_EQ((*EnvNamed(app, "ALLOCGUARD_STATS_DIR"))["value"], "/var/run/allocguard/books");
  const json* books = FindByName(app["volumeMounts"], api::kBooksVolumeName);
  ASSERT_NE(books, nullptr) << app.dump(2);
  EXPECT_EQ(*books, json({{"name", "allocguard-books"},
                          {"mountPath", "/var/run/allocguard/books"},
                          {"subPath", "app"}}));

  const json* guard = FindByName(spec["initContainers"], api::kGuardContainerName);
  ASSERT_NE(guard, nullptr);
  const std::vector<std::string> args = (*guard)["args"];
  auto at = std::find(args.begin(), args.end(), "--books-dir");
  ASSERT_NE(at, args.end()) << (*guard)["args"].dump();
  ASSERT_NE(at + 1, args.end());
  EXPECT_EQ(*(at + 1), "/var/run/allocguard/books");
  const json* guard_books = FindByName((*guard)["volumeMounts"], api::kBooksVolumeName);
  ASSERT_NE(guard_books, nullptr);
  EXPECT_EQ(*guard_books, json({{"name", "allocguard-books"},
                                {"mountPath", "/var/run/allocguard/books"},
                                {"readOnly", true}}));
  EXPECT_EQ(EnvNamed(*guard, "LD_PRELOAD"), nullptr);

  // Injecting the result again changes nothing (a re-admitted template).
  json again = spec;
  std::vector<std::string> conflicts;
  InjectionOptions options = input.options;
  ASSERT_TRUE(
      InjectAllocator(again, input.policies[0].spec.allocator, {}, options, &conflicts).ok());
  EXPECT_EQ(again, spec);
}

struct StatsCase {
  const char* label;
  bool shipped;               // the image has the agent
  bool guard;                 // spec.guard.enabled
  std::optional<bool> stats;  // spec.stats.enabled
  api::Allocator allocator;
  bool agent;  // preloaded in the container
};

void PrintTo(const StatsCase& c, std::ostream* os) { *os << c.label; }
std::string StatsCaseName(const ::testing::TestParamInfo<StatsCase>& param) {
  return param.param.label;
}

class PodInjectionStatsCaseTest : public ::testing::TestWithParam<StatsCase> {};

TEST_P(PodInjectionStatsCaseTest, TheAgentIsPreloadedOnlyWhereItShouldBe) {
  const StatsCase& c = GetParam();
  PodInjectionInput input = Input();
  input.options.stats_agent = c.shipped;
  input.policies[0].spec.allocator.name = c.allocator;
  input.policies[0].spec.guard.enabled = c.guard;
  input.policies[0].spec.stats.enabled = c.stats;
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject) << decision.reason;
  const json mutated = Apply(input, decision);
  const json& spec = mutated["spec"];
  const json& app = spec["containers"][0];
  const json* preload = EnvNamed(app, "LD_PRELOAD");
  const std::string preloaded = preload != nullptr ? (*preload)["value"].get<std::string>() : "";
  EXPECT_EQ(preloaded.find("liballocguard_stats.so") != std::string::npos, c.agent) << preloaded;
  EXPECT_EQ(EnvNamed(app, "ALLOCGUARD_STATS_DIR") != nullptr, c.agent);
  EXPECT_EQ(Named(spec, "volumes", api::kBooksVolumeName) != nullptr, c.agent);
  const json* guard = Named(spec, "initContainers", api::kGuardContainerName);
  ASSERT_EQ(guard != nullptr, c.guard);
  if (guard != nullptr) {
    EXPECT_EQ((*guard)["args"].dump().find("--books-dir") != std::string::npos, c.agent);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodInjectionStatsCaseTest,
    ::testing::Values(
        StatsCase{"guard_on_stats_absent", true, true, std::nullopt, api::Allocator::kJemalloc,
                  true},
        StatsCase{"image_without_agent", false, true, std::nullopt, api::Allocator::kJemalloc,
                  false},
        StatsCase{"stats_off_explicitly", true, true, false, api::Allocator::kJemalloc, false},
        StatsCase{"guard_off_stats_absent", true, false, std::nullopt, api::Allocator::kJemalloc,
                  false},
        StatsCase{"guard_off_stats_on", true, false, true, api::Allocator::kMimalloc, true},
        StatsCase{"glibc_gets_the_agent_alone", true, true, std::nullopt, api::Allocator::kGlibc,
                  true},
        StatsCase{"glibc_stats_off", true, true, false, api::Allocator::kGlibc, false}),
    StatsCaseName);

TEST(PodInjectionStatsTest, AnotherVolumeAtTheBooksPathKeepsTheAgentOut) {
  json pod = WebPod();
  pod["spec"]["containers"][0]["volumeMounts"] = {
      {{"name", "theirs"}, {"mountPath", "/var/run/allocguard/books"}}};
  pod["spec"]["volumes"] = {{{"name", "theirs"}, {"emptyDir", json::object()}}};
  PodInjectionInput input = Input(pod);
  input.options.stats_agent = true;
  input.policies[0].spec.guard.enabled = true;
  PodInjectionDecision decision = DecidePodInjection(input);
  ASSERT_EQ(decision.action, PodInjectionAction::kInject) << decision.reason;
  EXPECT_THAT(decision.conflicts,
              ::testing::Contains(HasSubstr("already mounts volume \"theirs\" at "
                                            "/var/run/allocguard/books")));
  const json mutated = Apply(input, decision);
  const json& app = mutated["spec"]["containers"][0];
  EXPECT_EQ((*EnvNamed(app, "LD_PRELOAD"))["value"],
            "/opt/allocguard/inject/$LIB/libjemalloc.so.2");
  EXPECT_EQ(EnvNamed(app, "ALLOCGUARD_STATS_DIR"), nullptr);
}

TEST(PodInjectionStatsTest, TheAgentIsShippedWhenItsGlibcBuildIsInTheImage) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("stats_shipped_test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "glibc");
  EXPECT_FALSE(StatsAgentShipped(dir.string()));
  fs::create_directories(dir / "glibc" / "liballocguard_stats.so");  // a directory is not it
  EXPECT_FALSE(StatsAgentShipped(dir.string()));
  fs::remove(dir / "glibc" / "liballocguard_stats.so");
  std::ofstream(dir / "glibc" / "liballocguard_stats.so") << "ELF";
  EXPECT_TRUE(StatsAgentShipped(dir.string()));
  EXPECT_FALSE(StatsAgentShipped((dir / "absent").string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace allocguard::admission
