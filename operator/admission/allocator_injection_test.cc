#include "operator/admission/allocator_injection.h"

#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/names.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

InjectionOptions Options() {
  InjectionOptions options;
  options.image = "ghcr.io/allocguard/allocguard:0.1.0";
  return options;
}

api::AllocatorSpec Jemalloc(std::string conf = "") {
  api::AllocatorSpec spec;
  spec.name = api::Allocator::kJemalloc;
  spec.jemalloc_malloc_conf = std::move(conf);
  return spec;
}

json AppPod() {
  return json::parse(R"({
    "containers": [{"name": "app", "image": "web:1", "env": [{"name": "PORT", "value": "8080"}]}]
  })");
}

const json* FindByName(const json& list, const std::string& name) {
  for (const json& e : list) {
    if (e.value("name", "") == name) return &e;
  }
  return nullptr;
}

const json* Env(const json& container, const std::string& name) {
  if (!container.contains("env")) return nullptr;
  return FindByName(container["env"], name);
}

TEST(InjectAllocatorTest, JemallocAddsVolumeInitContainerMountAndEnv) {
  json spec = AppPod();
  std::vector<std::string> conflicts;
  ASSERT_TRUE(
      InjectAllocator(spec, Jemalloc("background_thread:true"), {}, Options(), &conflicts).ok());
  EXPECT_THAT(conflicts, IsEmpty());

  const json expected = json::parse(R"({
    "volumes": [{"name": "allocguard-lib", "emptyDir": {}}],
    "initContainers": [{
      "name": "allocguard-init",
      "image": "ghcr.io/allocguard/allocguard:0.1.0",
      "imagePullPolicy": "IfNotPresent",
      "command": ["allocguard", "install-allocator", "--from", "/opt/allocguard/lib",
                  "--to", "/opt/allocguard/inject", "libjemalloc.so.2"],
      "volumeMounts": [{"name": "allocguard-lib", "mountPath": "/opt/allocguard/inject"}],
      "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"cpu": "100m", "memory": "64Mi"}},
      "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                          "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                          "capabilities": {"drop": ["ALL"]},
                          "seccompProfile": {"type": "RuntimeDefault"}}
    }],
    "containers": [{
      "name": "app", "image": "web:1",
      "env": [{"name": "PORT", "value": "8080"},
              {"name": "LD_PRELOAD", "value": "/opt/allocguard/inject/$LIB/libjemalloc.so.2"},
              {"name": "MALLOC_CONF", "value": "background_thread:true"}],
      "volumeMounts": [{"name": "allocguard-lib", "mountPath": "/opt/allocguard/inject",
                        "readOnly": true}],
      "terminationMessagePolicy": "FallbackToLogsOnError"
    }]
  })");
  EXPECT_EQ(spec, expected) << spec.dump(2);
}

struct AllocatorCase {
  std::string label;
  api::AllocatorSpec allocator;
  std::string library;  // empty: no init container expected
  std::vector<std::pair<std::string, std::string>> env;
};

void PrintTo(const AllocatorCase& c, std::ostream* os) { *os << c.label; }

class InjectAllocatorKindsTest : public ::testing::TestWithParam<AllocatorCase> {};

TEST_P(InjectAllocatorKindsTest, InjectsLibraryAndTunables) {
  const AllocatorCase& c = GetParam();
  json spec = AppPod();
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, c.allocator, {}, Options(), &conflicts).ok());
  EXPECT_THAT(conflicts, IsEmpty());
  const json& app = spec["containers"][0];
  if (c.library.empty()) {
    EXPECT_FALSE(spec.contains("initContainers"));
    EXPECT_FALSE(spec.contains("volumes"));
    EXPECT_FALSE(app.contains("volumeMounts"));
    EXPECT_EQ(Env(app, "LD_PRELOAD"), nullptr);
    EXPECT_FALSE(app.contains("terminationMessagePolicy"));
  } else {
    EXPECT_EQ(app.value("terminationMessagePolicy", ""), "FallbackToLogsOnError");
    const json* init = FindByName(spec["initContainers"], api::kInitContainerName);
    ASSERT_NE(init, nullptr);
    EXPECT_EQ((*init)["command"].back(), c.library);
    ASSERT_NE(Env(app, "LD_PRELOAD"), nullptr);
    EXPECT_EQ((*Env(app, "LD_PRELOAD"))["value"], "/opt/allocguard/inject/$LIB/" + c.library);
  }
  for (const auto& [name, value] : c.env) {
    const json* var = Env(app, name);
    ASSERT_NE(var, nullptr) << name;
    EXPECT_EQ((*var)["value"], value) << name;
  }
  // env = PORT + LD_PRELOAD (if any) + tunables: nothing else.
  EXPECT_THAT(app["env"], SizeIs(1 + (c.library.empty() ? 0 : 1) + c.env.size()));

  json again = spec;
  ASSERT_TRUE(InjectAllocator(again, c.allocator, {}, Options(), &conflicts).ok());
  EXPECT_EQ(again, spec) << "second injection changed the spec";
  EXPECT_THAT(conflicts, IsEmpty());
}

AllocatorCase Glibc() {
  api::AllocatorSpec a;
  a.name = api::Allocator::kGlibc;
  a.glibc_arena_max = 2;
  a.glibc_trim_threshold = 131072;
  a.glibc_mmap_threshold = 65536;
  return {"glibc",
          a,
          "",
          {{"MALLOC_ARENA_MAX", "2"},
           {"MALLOC_TRIM_THRESHOLD_", "131072"},
           {"MALLOC_MMAP_THRESHOLD_", "65536"}}};
}
AllocatorCase Mimalloc() {
  api::AllocatorSpec a;
  a.name = api::Allocator::kMimalloc;
  a.mimalloc_options = {{"purge_delay", "0"}, {"arena_eager_commit", "2"}};
  return {"mimalloc",
          a,
          "libmimalloc.so.2",
          {{"MIMALLOC_ARENA_EAGER_COMMIT", "2"}, {"MIMALLOC_PURGE_DELAY", "0"}}};
}
AllocatorCase Tcmalloc() {
  api::AllocatorSpec a;
  a.name = api::Allocator::kTcmalloc;
  a.tcmalloc_release_rate = 2.5;
  a.tcmalloc_max_total_thread_cache = 33554432;
  return {
      "tcmalloc",
      a,
      "libtcmalloc_minimal.so.4",
      {{"TCMALLOC_RELEASE_RATE", "2.5"}, {"TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES", "33554432"}}};
}

INSTANTIATE_TEST_SUITE_P(Allocators, InjectAllocatorKindsTest,
                         ::testing::Values(Glibc(), Mimalloc(), Tcmalloc(),
                                           AllocatorCase{
                                               "jemalloc", Jemalloc(), "libjemalloc.so.2", {}},
                                           AllocatorCase{"jemalloc_conf",
                                                         Jemalloc("dirty_decay_ms:1000"),
                                                         "libjemalloc.so.2",
                                                         {{"MALLOC_CONF", "dirty_decay_ms:1000"}}}),
                         [](const auto& test_case) { return test_case.param.label; });

// The loader's stderr must reach the termination message (the circuit
// breaker and the canary read it there), but a container's own policy wins.
struct TerminationPolicyCase {
  std::string label;
  json container;
  std::vector<std::string> policy_containers;
  std::string expected;  // "": no terminationMessagePolicy field
};

void PrintTo(const TerminationPolicyCase& c, std::ostream* os) { *os << c.label; }

class TerminationMessagePolicyTest : public ::testing::TestWithParam<TerminationPolicyCase> {};

TEST_P(TerminationMessagePolicyTest, LoaderErrorsReachTheTerminationMessage) {
  const TerminationPolicyCase& c = GetParam();
  json spec = {{"containers", {c.container}}};
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), c.policy_containers, Options(), nullptr).ok());
  EXPECT_EQ(spec["containers"][0].value("terminationMessagePolicy", ""), c.expected)
      << spec.dump(2);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TerminationMessagePolicyTest,
    ::testing::Values(
        TerminationPolicyCase{"unset_becomes_fallback",
                              {{"name", "app"}, {"image", "web:1"}},
                              {},
                              "FallbackToLogsOnError"},
        // What the API server stores in every Deployment's template: a
        // kept File would hide every loader error from the circuit breaker.
        TerminationPolicyCase{
            "file_the_api_servers_default_becomes_fallback",
            {{"name", "app"}, {"image", "web:1"}, {"terminationMessagePolicy", "File"}},
            {},
            "FallbackToLogsOnError"},
        TerminationPolicyCase{"unselected_container_untouched",
                              {{"name", "sidecar"}, {"image", "proxy:1"}},
                              {"app"},
                              ""},
        TerminationPolicyCase{
            "mount_conflict_no_preload_no_change",
            {{"name", "app"},
             {"image", "web:1"},
             {"volumeMounts", {{{"name", "mine"}, {"mountPath", "/opt/allocguard/inject"}}}}},
            {},
            ""}),
    [](const auto& test_case) { return test_case.param.label; });

struct PreloadCase {
  std::string label;
  json ld_preload_entry;  // null: the container sets no LD_PRELOAD
  json expected_entry;
  bool conflict;
};

void PrintTo(const PreloadCase& c, std::ostream* os) { *os << c.label; }

class PreloadMergeTest : public ::testing::TestWithParam<PreloadCase> {};

TEST_P(PreloadMergeTest, MergesNeverOverwrites) {
  const PreloadCase& c = GetParam();
  json spec = AppPod();
  if (!c.ld_preload_entry.is_null()) spec["containers"][0]["env"].push_back(c.ld_preload_entry);
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, Options(), &conflicts).ok());
  const json* var = Env(spec["containers"][0], "LD_PRELOAD");
  ASSERT_NE(var, nullptr);
  EXPECT_EQ(*var, c.expected_entry);
  // Exactly one LD_PRELOAD entry.
  int count = 0;
  for (const json& e : spec["containers"][0]["env"]) count += e["name"] == "LD_PRELOAD";
  EXPECT_EQ(count, 1);
  if (c.conflict) {
    ASSERT_THAT(conflicts, SizeIs(1));
    EXPECT_THAT(conflicts[0], HasSubstr("\"app\""));
    EXPECT_THAT(conflicts[0], HasSubstr("valueFrom"));
  } else {
    EXPECT_THAT(conflicts, IsEmpty());
  }
  json again = spec;
  ASSERT_TRUE(InjectAllocator(again, Jemalloc(), {}, Options(), nullptr).ok());
  EXPECT_EQ(again, spec);
}

const char kOurs[] = "/opt/allocguard/inject/$LIB/libjemalloc.so.2";

INSTANTIATE_TEST_SUITE_P(
    Cases, PreloadMergeTest,
    ::testing::Values(
        PreloadCase{"absent", nullptr, {{"name", "LD_PRELOAD"}, {"value", kOurs}}, false},
        PreloadCase{
            "existing_literal",
            {{"name", "LD_PRELOAD"}, {"value", "/usr/lib/libtrace.so"}},
            {{"name", "LD_PRELOAD"}, {"value", std::string("/usr/lib/libtrace.so:") + kOurs}},
            false},
        PreloadCase{"empty_literal",
                    {{"name", "LD_PRELOAD"}, {"value", ""}},
                    {{"name", "LD_PRELOAD"}, {"value", kOurs}},
                    false},
        PreloadCase{"ours_already_first",
                    {{"name", "LD_PRELOAD"}, {"value", std::string(kOurs) + ":/usr/lib/a.so"}},
                    {{"name", "LD_PRELOAD"}, {"value", std::string(kOurs) + ":/usr/lib/a.so"}},
                    false},
        // An earlier injection's entry (another allocator, another libc)
        // is replaced, never kept beside the new one.
        PreloadCase{"earlier_injection_replaced",
                    {{"name", "LD_PRELOAD"},
                     {"value", "/usr/lib/a.so:/opt/allocguard/inject/glibc/libmimalloc.so.2"}},
                    {{"name", "LD_PRELOAD"}, {"value", std::string("/usr/lib/a.so:") + kOurs}},
                    false},
        PreloadCase{"ours_space_separated",
                    {{"name", "LD_PRELOAD"}, {"value", std::string("/usr/lib/a.so ") + kOurs}},
                    {{"name", "LD_PRELOAD"}, {"value", std::string("/usr/lib/a.so ") + kOurs}},
                    false},
        PreloadCase{"value_from_is_conflict", json::parse(R"({"name": "LD_PRELOAD", "valueFrom":
                        {"configMapKeyRef": {"name": "cfg", "key": "preload"}}})"),
                    json::parse(R"({"name": "LD_PRELOAD", "valueFrom":
                        {"configMapKeyRef": {"name": "cfg", "key": "preload"}}})"),
                    true}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(InjectAllocatorTest, UserTunableWinsAndIsReported) {
  json spec = AppPod();
  spec["containers"][0]["env"].push_back({{"name", "MALLOC_CONF"}, {"value", "narenas:1"}});
  std::vector<std::string> conflicts;
  ASSERT_TRUE(
      InjectAllocator(spec, Jemalloc("background_thread:true"), {}, Options(), &conflicts).ok());
  EXPECT_EQ((*Env(spec["containers"][0], "MALLOC_CONF"))["value"], "narenas:1");
  ASSERT_THAT(conflicts, SizeIs(1));
  EXPECT_THAT(conflicts[0], HasSubstr("MALLOC_CONF"));
  EXPECT_THAT(conflicts[0], HasSubstr("narenas:1"));
  EXPECT_THAT(conflicts[0], HasSubstr("background_thread:true"));
  // LD_PRELOAD is still injected.
  EXPECT_EQ((*Env(spec["containers"][0], "LD_PRELOAD"))["value"], kOurs);
}

TEST(InjectAllocatorTest, UserTunableWithSameValueIsNoConflict) {
  json spec = AppPod();
  spec["containers"][0]["env"].push_back({{"name", "MALLOC_CONF"}, {"value", "narenas:1"}});
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc("narenas:1"), {}, Options(), &conflicts).ok());
  EXPECT_THAT(conflicts, IsEmpty());
}

json TwoContainersAndInit() {
  return json::parse(R"({
    "initContainers": [{"name": "migrate", "image": "web:1"}],
    "containers": [{"name": "app", "image": "web:1"}, {"name": "proxy", "image": "envoy:1"}]
  })");
}

struct SelectionCase {
  std::string label;
  std::vector<std::string> containers;
  std::vector<std::string> injected;  // containers that must carry LD_PRELOAD
  bool conflict;
};

void PrintTo(const SelectionCase& c, std::ostream* os) { *os << c.label; }

class ContainerSelectionTest : public ::testing::TestWithParam<SelectionCase> {};

TEST_P(ContainerSelectionTest, OnlySelectedContainersAreTouched) {
  const SelectionCase& c = GetParam();
  const json original = TwoContainersAndInit();
  json spec = original;
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), c.containers, Options(), &conflicts).ok());
  for (const char* list : {"initContainers", "containers"}) {
    for (const json& container : original[list]) {
      const std::string name = container["name"];
      const json* now = FindByName(spec[list], name);
      ASSERT_NE(now, nullptr);
      const bool expected =
          std::find(c.injected.begin(), c.injected.end(), name) != c.injected.end();
      if (expected) {
        EXPECT_NE(Env(*now, "LD_PRELOAD"), nullptr) << name;
      } else {
        EXPECT_EQ(*now, container) << name << " was changed";
      }
    }
  }
  EXPECT_EQ(
      FindByName(spec.value("initContainers", json::array()), api::kInitContainerName) != nullptr,
      !c.injected.empty());
  EXPECT_EQ(!conflicts.empty(), c.conflict);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ContainerSelectionTest,
    ::testing::Values(SelectionCase{"all_regular", {}, {"app", "proxy"}, false},
                      SelectionCase{"subset", {"app"}, {"app"}, false},
                      SelectionCase{
                          "named_init", {"migrate", "proxy"}, {"migrate", "proxy"}, false},
                      SelectionCase{"missing_names", {"worker"}, {}, true},
                      SelectionCase{"partly_missing", {"worker", "app"}, {"app"}, false}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(InjectAllocatorTest, InitContainerRunsFirstSoSelectedInitContainersFindTheLibrary) {
  json spec = TwoContainersAndInit();
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {"migrate"}, Options(), nullptr).ok());
  ASSERT_THAT(spec["initContainers"], SizeIs(2));
  EXPECT_EQ(spec["initContainers"][0]["name"], api::kInitContainerName);
  EXPECT_EQ(spec["initContainers"][1]["name"], "migrate");
}

TEST(InjectAllocatorTest, OwnContainersAreNeverSelected) {
  json spec = AppPod();
  spec["containers"].push_back({{"name", api::kGuardContainerName}, {"image", "allocguard"}});
  spec["containers"].push_back({{"name", api::kDriverContainerName}, {"image", "allocguard"}});
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, Options(), nullptr).ok());
  EXPECT_EQ(SelectContainerNames(spec, {}), std::vector<std::string>{"app"});
  EXPECT_FALSE(spec["containers"][1].contains("env"));
  EXPECT_FALSE(spec["containers"][2].contains("env"));
}

TEST(InjectAllocatorTest, MountPathTakenByAnotherVolumeIsAConflict) {
  json spec = AppPod();
  spec["containers"][0]["volumeMounts"] =
      json::parse(R"([{"name": "data", "mountPath": "/opt/allocguard/inject"}])");
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, Options(), &conflicts).ok());
  EXPECT_EQ(Env(spec["containers"][0], "LD_PRELOAD"), nullptr);
  EXPECT_THAT(spec["containers"][0]["volumeMounts"], SizeIs(1));
  ASSERT_THAT(conflicts, SizeIs(1));
  EXPECT_THAT(conflicts[0], HasSubstr("\"data\""));
}

TEST(InjectAllocatorTest, ExistingVolumesAndInitContainersAreKept) {
  json spec = TwoContainersAndInit();
  spec["volumes"] = json::parse(R"([{"name": "cache", "emptyDir": {}}])");
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, Options(), nullptr).ok());
  EXPECT_THAT(spec["volumes"], SizeIs(2));
  EXPECT_EQ(spec["volumes"][0]["name"], "cache");
  EXPECT_EQ(spec["volumes"][1]["name"], api::kLibraryVolumeName);
  EXPECT_EQ(spec["initContainers"][1], json::parse(R"({"name": "migrate", "image": "web:1"})"));
}

TEST(InjectAllocatorTest, CustomAllocatorDir) {
  json spec = AppPod();
  InjectionOptions options = Options();
  options.allocator_dir = "/usr/lib/x86_64-linux-gnu/";
  ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, options, nullptr).ok());
  EXPECT_EQ(spec["initContainers"][0]["command"],
            json({"allocguard", "install-allocator", "--from", "/usr/lib/x86_64-linux-gnu", "--to",
                  "/opt/allocguard/inject", "libjemalloc.so.2"}));
}

TEST(InjectAllocatorTest, LibcChoosesThePreloadedBuild) {
  const std::vector<std::pair<api::Libc, std::string>> cases = {
      {api::Libc::kAuto, "/opt/allocguard/inject/$LIB/libjemalloc.so.2"},
      {api::Libc::kGlibc, "/opt/allocguard/inject/glibc/libjemalloc.so.2"},
      {api::Libc::kMusl, "/opt/allocguard/inject/musl/libjemalloc.so.2"}};
  for (const auto& [libc, preload] : cases) {
    json spec = AppPod();
    InjectionOptions options = Options();
    options.libc = libc;
    std::vector<std::string> conflicts;
    ASSERT_TRUE(InjectAllocator(spec, Jemalloc(), {}, options, &conflicts).ok());
    EXPECT_THAT(conflicts, IsEmpty());
    EXPECT_EQ((*Env(spec["containers"][0], "LD_PRELOAD"))["value"], preload) << api::LibcName(libc);
  }
}

TEST(InjectAllocatorTest, MuslWithoutAMuslBuildSetsOnlyTheTunables) {
  json spec = AppPod();
  InjectionOptions options = Options();
  options.libc = api::Libc::kMusl;
  api::AllocatorSpec tcmalloc{.name = api::Allocator::kTcmalloc, .tcmalloc_release_rate = 5};
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, tcmalloc, {}, options, &conflicts).ok());
  const json& app = spec["containers"][0];
  EXPECT_EQ(Env(app, "LD_PRELOAD"), nullptr);
  EXPECT_FALSE(spec.contains("initContainers"));
  EXPECT_FALSE(spec.contains("volumes"));
  ASSERT_NE(Env(app, "TCMALLOC_RELEASE_RATE"), nullptr);
  ASSERT_THAT(conflicts, SizeIs(1));
  EXPECT_THAT(conflicts[0], HasSubstr("tcmalloc has no musl build"));
}

TEST(ResolveLibcTest, AnnotationOverridesThePolicy) {
  const std::map<std::string, std::string> annotated = {{api::kLibcAnnotation, "musl"}};
  std::vector<std::string> conflicts;
  EXPECT_EQ(ResolveLibc(api::Libc::kAuto, annotated, &conflicts), api::Libc::kMusl);
  EXPECT_EQ(ResolveLibc(api::Libc::kGlibc, {}, &conflicts), api::Libc::kGlibc);
  EXPECT_EQ(ResolveLibc(api::Libc::kGlibc, {{"other", "musl"}}, &conflicts), api::Libc::kGlibc);
  EXPECT_THAT(conflicts, IsEmpty());
}

TEST(ResolveLibcTest, UnknownAnnotationKeepsThePolicysAndSaysSo) {
  std::vector<std::string> conflicts;
  EXPECT_EQ(ResolveLibc(api::Libc::kGlibc, {{api::kLibcAnnotation, "uclibc"}}, &conflicts),
            api::Libc::kGlibc);
  ASSERT_THAT(conflicts, SizeIs(1));
  EXPECT_THAT(conflicts[0], HasSubstr("\"uclibc\""));
  EXPECT_THAT(conflicts[0], HasSubstr("policy's libc \"glibc\""));
}

struct ErrorCase {
  std::string label;
  json spec;
  api::Allocator allocator;
  std::string image;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.label; }

class InjectAllocatorErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(InjectAllocatorErrorTest, RefusesAndLeavesSpecUntouched) {
  const ErrorCase& c = GetParam();
  json spec = c.spec;
  api::AllocatorSpec allocator;
  allocator.name = c.allocator;
  InjectionOptions options;
  options.image = c.image;
  Status status = InjectAllocator(spec, allocator, {}, options, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_EQ(spec, c.spec);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InjectAllocatorErrorTest,
    ::testing::Values(ErrorCase{"no_image", AppPod(), api::Allocator::kJemalloc, ""},
                      ErrorCase{"not_object", json::array(), api::Allocator::kGlibc, "x"},
                      ErrorCase{"containers_not_list", json::parse(R"({"containers": {}})"),
                                api::Allocator::kJemalloc, "x"},
                      ErrorCase{"container_not_object", json::parse(R"({"containers": [1]})"),
                                api::Allocator::kJemalloc, "x"},
                      ErrorCase{"volumes_not_list",
                                json::parse(R"({"containers": [], "volumes": 3})"),
                                api::Allocator::kJemalloc, "x"}),
    [](const auto& test_case) { return test_case.param.label; });

TEST(InjectAllocatorTest, GlibcNeedsNoImage) {
  json spec = AppPod();
  api::AllocatorSpec glibc;
  glibc.name = api::Allocator::kGlibc;
  glibc.glibc_arena_max = 4;
  ASSERT_TRUE(InjectAllocator(spec, glibc, {}, InjectionOptions{}, nullptr).ok());
  EXPECT_EQ((*Env(spec["containers"][0], "MALLOC_ARENA_MAX"))["value"], "4");
}

// ---- the stats agent (InjectionOptions::stats_agent) ----

api::AllocatorSpec GlibcSpec() {
  api::AllocatorSpec spec;
  spec.name = api::Allocator::kGlibc;
  return spec;
}

InjectionOptions WithAgent(api::Libc libc = api::Libc::kAuto) {
  InjectionOptions options = Options();
  options.stats_agent = true;
  options.libc = libc;
  return options;
}

std::string PreloadOf(const json& container) {
  const json* var = Env(container, "LD_PRELOAD");
  return var == nullptr ? "" : (*var)["value"].get<std::string>();
}

struct AgentPreloadCase {
  const char* label;
  api::Allocator allocator;
  api::Libc libc;
  const char* user_preload;  // the container's own LD_PRELOAD; nullptr: none
  const char* want;          // LD_PRELOAD after the injection
  const char* want_install;  // the init container's libraries, space-separated
};

void PrintTo(const AgentPreloadCase& c, std::ostream* os) { *os << c.label; }

class AgentPreloadTest : public ::testing::TestWithParam<AgentPreloadCase> {};

// What the container's loader is told to load: the agent after the
// allocator, alone for glibc, after a user's own entries, from the build the
// pod's libc resolution chose (the allocator's).
TEST_P(AgentPreloadTest, LdPreloadCarriesTheAgent) {
  const AgentPreloadCase& c = GetParam();
  json spec = AppPod();
  if (c.user_preload != nullptr) {
    spec["containers"][0]["env"].push_back({{"name", "LD_PRELOAD"}, {"value", c.user_preload}});
  }
  api::AllocatorSpec allocator;
  allocator.name = c.allocator;
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, allocator, {}, WithAgent(c.libc), &conflicts).ok());
  EXPECT_THAT(conflicts, IsEmpty());
  const json& app = spec["containers"][0];
  EXPECT_EQ(PreloadOf(app), c.want);
  ASSERT_NE(Env(app, "ALLOCGUARD_STATS_DIR"), nullptr);
  EXPECT_EQ((*Env(app, "ALLOCGUARD_STATS_DIR"))["value"], "/var/run/allocguard/books");
  ASSERT_NE(FindByName(app["volumeMounts"], "allocguard-lib"), nullptr) << app.dump(2);
  ASSERT_NE(FindByName(app["volumeMounts"], "allocguard-books"), nullptr) << app.dump(2);
  ASSERT_NE(FindByName(spec["volumes"], "allocguard-books"), nullptr);
  json install = {"allocguard", "install-allocator",     "--from", "/opt/allocguard/lib",
                  "--to",       "/opt/allocguard/inject"};
  std::string libs = c.want_install;
  for (size_t at = 0; at < libs.size();) {
    size_t end = libs.find(' ', at);
    if (end == std::string::npos) end = libs.size();
    install.push_back(libs.substr(at, end - at));
    at = end + 1;
  }
  EXPECT_EQ(FindByName(spec["initContainers"], api::kInitContainerName)->at("command"), install);

  // Idempotent: a second injection changes nothing.
  json again = spec;
  ASSERT_TRUE(InjectAllocator(again, allocator, {}, WithAgent(c.libc), nullptr).ok());
  EXPECT_EQ(again, spec);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AgentPreloadTest,
    ::testing::Values(
        AgentPreloadCase{"glibc_alone", api::Allocator::kGlibc, api::Libc::kAuto, nullptr,
                         "/opt/allocguard/inject/$LIB/liballocguard_stats.so",
                         "liballocguard_stats.so"},
        AgentPreloadCase{"glibc_alone_glibc_build", api::Allocator::kGlibc, api::Libc::kGlibc,
                         nullptr, "/opt/allocguard/inject/glibc/liballocguard_stats.so",
                         "liballocguard_stats.so"},
        AgentPreloadCase{"glibc_alone_musl_build", api::Allocator::kGlibc, api::Libc::kMusl,
                         nullptr, "/opt/allocguard/inject/musl/liballocguard_stats.so",
                         "liballocguard_stats.so"},
        AgentPreloadCase{"beside_jemalloc", api::Allocator::kJemalloc, api::Libc::kAuto, nullptr,
                         "/opt/allocguard/inject/$LIB/libjemalloc.so.2:"
                         "/opt/allocguard/inject/$LIB/liballocguard_stats.so",
                         "libjemalloc.so.2 liballocguard_stats.so"},
        AgentPreloadCase{"beside_jemalloc_musl_build", api::Allocator::kJemalloc, api::Libc::kMusl,
                         nullptr,
                         "/opt/allocguard/inject/musl/libjemalloc.so.2:"
                         "/opt/allocguard/inject/musl/liballocguard_stats.so",
                         "libjemalloc.so.2 liballocguard_stats.so"},
        AgentPreloadCase{"glibc_merged_with_the_users", api::Allocator::kGlibc, api::Libc::kAuto,
                         "/usr/lib/libtrace.so",
                         "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/liballocguard_stats.so",
                         "liballocguard_stats.so"},
        AgentPreloadCase{"jemalloc_merged_with_the_users", api::Allocator::kJemalloc,
                         api::Libc::kGlibc, "/usr/lib/libtrace.so",
                         "/usr/lib/libtrace.so:/opt/allocguard/inject/glibc/libjemalloc.so.2:"
                         "/opt/allocguard/inject/glibc/liballocguard_stats.so",
                         "libjemalloc.so.2 liballocguard_stats.so"}),
    [](const auto& test_case) { return std::string(test_case.param.label); });

// Without the agent, glibc stays what it was: tunables only.
TEST(InjectAllocatorTest, GlibcWithoutTheAgentGetsNoVolume) {
  json spec = AppPod();
  ASSERT_TRUE(InjectAllocator(spec, GlibcSpec(), {}, Options(), nullptr).ok());
  EXPECT_EQ(PreloadOf(spec["containers"][0]), "");
  EXPECT_FALSE(spec.contains("volumes"));
  EXPECT_FALSE(spec.contains("initContainers"));
}

// A container whose books path holds another volume gets nothing under
// glibc: the agent would be the only thing preloaded, and it has nowhere to
// write.
TEST(InjectAllocatorTest, GlibcWithTheBooksPathTakenPreloadsNothingThere) {
  json spec = AppPod();
  spec["containers"][0]["volumeMounts"] = {
      {{"name", "theirs"}, {"mountPath", "/var/run/allocguard/books"}}};
  std::vector<std::string> conflicts;
  ASSERT_TRUE(InjectAllocator(spec, GlibcSpec(), {}, WithAgent(), &conflicts).ok());
  const json& app = spec["containers"][0];
  EXPECT_EQ(PreloadOf(app), "");
  EXPECT_EQ(Env(app, "ALLOCGUARD_STATS_DIR"), nullptr);
  EXPECT_EQ(FindByName(app["volumeMounts"], "allocguard-lib"), nullptr);
  ASSERT_THAT(conflicts, SizeIs(1));
  EXPECT_THAT(conflicts[0], HasSubstr("already mounts volume \"theirs\""));
}

// tcmalloc on musl has no build: the process runs on musl's malloc, not the
// policy's, and gets no agent either.
TEST(InjectAllocatorTest, NoAgentWhereTheAllocatorHasNoBuildForTheLibc) {
  json spec = AppPod();
  api::AllocatorSpec tcmalloc{.name = api::Allocator::kTcmalloc};
  ASSERT_TRUE(InjectAllocator(spec, tcmalloc, {}, WithAgent(api::Libc::kMusl), nullptr).ok());
  EXPECT_EQ(PreloadOf(spec["containers"][0]), "");
  EXPECT_FALSE(spec.contains("volumes"));
}

TEST(InjectAllocatorTest, RestrictedSecurityContextHasEveryRequiredField) {
  const json sc = RestrictedSecurityContext();
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["runAsUser"], 65532);
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
  EXPECT_EQ(sc["capabilities"]["drop"], json({"ALL"}));
  EXPECT_FALSE(sc["capabilities"].contains("add"));
  EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
}

}  // namespace
}  // namespace allocguard::admission
