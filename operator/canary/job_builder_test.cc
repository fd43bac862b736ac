#include "operator/canary/job_builder.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "operator/api/names.h"
#include "operator/replay/in_pod.h"

namespace allocguard::canary {
namespace {

using nlohmann::json;

// A Deployment's template that an earlier allocguard injection (jemalloc)
// already touched, with a claim-backed volume and a user preload.
const char* kTemplate = R"({
  "metadata": {
    "labels": {"app": "web", "tier": "front"},
    "annotations": {"allocguard.io/injected": "jemalloc", "allocguard.io/policy": "p",
                    "prometheus.io/scrape": "true"}
  },
  "spec": {
    "initContainers": [{"name": "allocguard-init", "image": "allocguard:old"}],
    "containers": [
      {"name": "web", "image": "web:2",
       "env": [{"name": "LD_PRELOAD",
                "value": "/opt/allocguard/inject/libjemalloc.so.2:/usr/lib/libtrace.so"},
               {"name": "MALLOC_CONF", "value": "background_thread:true"},
               {"name": "LOG_LEVEL", "value": "info"}],
       "volumeMounts": [{"name": "data", "mountPath": "/data"},
                        {"name": "allocguard-lib", "mountPath": "/opt/allocguard/inject",
                         "readOnly": true}]}
    ],
    "volumes": [
      {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
      {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
      {"name": "config", "configMap": {"name": "web-config"}},
      {"name": "allocguard-lib", "emptyDir": {}}
    ],
    "restartPolicy": "Always"
  }
})";

api::ReplayCanary Canary() {
  api::ReplayCanary c;
  c.ns = "shop";
  c.name = "web-5d8f9";
  c.uid = "0b9e-uid";
  c.spec.pod_template_json = kTemplate;
  c.spec.candidate_allocator.name = api::Allocator::kTcmalloc;
  c.spec.canary.load.port = 8080;
  c.spec.canary.load.rate = 50;
  c.spec.canary.load.ready_path = "/healthz";
  c.spec.canary.load.requests = {{.name = "get", .path = "/item/{key}", .key_space = 100}};
  return c;
}

api::VariantSpec Variant(const std::string& name, api::Allocator allocator) {
  api::VariantSpec v;
  v.name = name;
  v.allocator.name = allocator;
  return v;
}

CanaryJobOptions Options() {
  CanaryJobOptions o;
  o.image = "ghcr.io/example/allocguard:1.0";
  return o;
}

const json& Container(const json& job, const std::string& name) {
  for (const json& c : job["spec"]["template"]["spec"]["containers"]) {
    if (c["name"] == name) return c;
  }
  static const json kNone;
  ADD_FAILURE() << "no container " << name;
  return kNone;
}

std::optional<std::string> Env(const json& container, const std::string& name) {
  if (!container.contains("env")) return std::nullopt;
  for (const json& e : container["env"]) {
    if (e["name"] == name) return e.value("value", "");
  }
  return std::nullopt;
}

std::vector<std::string> Args(const json& container) {
  return container["args"].get<std::vector<std::string>>();
}

std::string ArgAfter(const json& container, const std::string& flag) {
  auto args = Args(container);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "<absent>";
}

json Build(const api::ReplayCanary& c, const api::VariantSpec& v, CanaryJobInfo* info = nullptr) {
  auto job = BuildCanaryJob(c, v, Options(), info);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : json::object();
}

TEST(BuildCanaryJobTest, JobMetadataOwnerAndLimits) {
  json job = Build(Canary(), Variant("glibc", api::Allocator::kGlibc));
  EXPECT_EQ(job["apiVersion"], "batch/v1");
  EXPECT_EQ(job["kind"], "Job");
  EXPECT_EQ(job["metadata"]["name"], "web-5d8f9-glibc");
  EXPECT_EQ(job["metadata"]["namespace"], "shop");
  ASSERT_EQ(job["metadata"]["ownerReferences"].size(), 1u);
  const json& owner = job["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["apiVersion"], "allocguard.io/v1alpha1");
  EXPECT_EQ(owner["kind"], "ReplayCanary");
  EXPECT_EQ(owner["name"], "web-5d8f9");
  EXPECT_EQ(owner["uid"], "0b9e-uid");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(owner["blockOwnerDeletion"], true);
  EXPECT_EQ(job["spec"]["backoffLimit"], 0);
  // The default maxDuration (30 min: a variant undecided at its 15 minutes
  // runs on) + 60 s ready timeout + 300 s slack.
  EXPECT_EQ(job["spec"]["activeDeadlineSeconds"], 1800 + 60 + 300);
  EXPECT_EQ(job["spec"]["ttlSecondsAfterFinished"], 3600);
  const json want_labels = {{api::kCanaryLabel, "web-5d8f9"},
                            {api::kVariantLabel, "glibc"},
                            {api::kManagedByLabel, "allocguard"}};
  EXPECT_EQ(job["metadata"]["labels"], want_labels);
}

TEST(BuildCanaryJobTest, PodIsCutOffFromServicesStorageAndTheWebhook) {
  json job = Build(Canary(), Variant("glibc", api::Allocator::kGlibc));
  const json& pod = job["spec"]["template"];
  // Only the canary labels: no Service selecting app=web picks the canary up.
  const json want_labels = {{api::kCanaryLabel, "web-5d8f9"},
                            {api::kVariantLabel, "glibc"},
                            {api::kManagedByLabel, "allocguard"}};
  EXPECT_EQ(pod["metadata"]["labels"], want_labels);
  const json& annotations = pod["metadata"]["annotations"];
  EXPECT_EQ(annotations[api::kInjectAnnotation], "false");
  EXPECT_EQ(annotations["prometheus.io/scrape"], "true");
  EXPECT_FALSE(annotations.contains(api::kInjectedAnnotation));
  EXPECT_FALSE(annotations.contains(api::kPolicyAnnotation));
  // Claims become emptyDirs of the same name; other volumes stay.
  std::map<std::string, json> volumes;
  for (const json& v : pod["spec"]["volumes"]) volumes[v["name"]] = v;
  EXPECT_EQ(volumes["data"], (json{{"name", "data"}, {"emptyDir", json::object()}}));
  EXPECT_EQ(volumes["scratch"], (json{{"name", "scratch"}, {"emptyDir", json::object()}}));
  EXPECT_EQ(volumes["config"]["configMap"]["name"], "web-config");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["shareProcessNamespace"], true);
  EXPECT_EQ(job.dump().find("web-data"), std::string::npos) << "the claim is still referenced";
}

// A StatefulSet's template mounts its claims without declaring them; each
// becomes an emptyDir of the claim's size, replacing a template volume of
// the same name as the StatefulSet controller does.
TEST(BuildCanaryJobTest, StatefulSetClaimsBecomeSizedEmptyDirs) {
  api::ReplayCanary canary = Canary();
  json tmpl = json::parse(kTemplate);
  tmpl["spec"]["containers"][0]["volumeMounts"].push_back({{"name", "wal"}, {"mountPath", "/wal"}});
  canary.spec.pod_template_json = tmpl.dump();
  CanaryJobOptions options = Options();
  options.claim_volumes = {{"wal", int64_t{10} << 30}, {"config", std::nullopt}};
  auto job = BuildCanaryJob(canary, Variant("candidate", api::Allocator::kTcmalloc), options);
  ASSERT_TRUE(job.ok()) << job.status().message();
  const json& volumes = (*job)["spec"]["template"]["spec"]["volumes"];
  std::map<std::string, json> by_name;
  for (const json& v : volumes) by_name[v["name"]] = v;
  EXPECT_EQ(by_name["wal"], json({{"name", "wal"}, {"emptyDir", {{"sizeLimit", "10Gi"}}}}));
  EXPECT_EQ(by_name["config"], json({{"name", "config"}, {"emptyDir", json::object()}}))
      << "a claim replaces the template's volume of its name";
  EXPECT_EQ(by_name["data"], json({{"name", "data"}, {"emptyDir", json::object()}}));
  size_t wal = 0;
  for (const json& v : volumes) wal += v["name"] == "wal" ? 1 : 0;
  EXPECT_EQ(wal, 1u);
}

// A StatefulSet's canary pod says the name of the set's first pod where the
// workload reads its identity: its hostname and its downward-API env.
TEST(BuildCanaryJobTest, StatefulSetCanaryCarriesThePodIdentity) {
  api::ReplayCanary canary = Canary();
  json tmpl = json::parse(kTemplate);
  tmpl["spec"]["containers"][0]["env"] = {
      {{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
      {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
      {{"name", "MODE"}, {"value", "primary"}},
      "not an object"};
  canary.spec.pod_template_json = tmpl.dump();
  CanaryJobOptions options = Options();
  options.pod_identity = "db-0";
  auto job = BuildCanaryJob(canary, Variant("candidate", api::Allocator::kJemalloc), options);
  ASSERT_TRUE(job.ok()) << job.status().message();
  const json& spec = (*job)["spec"]["template"]["spec"];
  EXPECT_EQ(spec["hostname"], "db-0");
  EXPECT_FALSE(spec.contains("subdomain")) << "the canary takes no peer's DNS name";
  const json& env = spec["containers"][0]["env"];
  EXPECT_EQ(env[0], json({{"name", "POD_NAME"}, {"value", "db-0"}}));
  EXPECT_EQ(env[1]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP") << "left as written";
  EXPECT_EQ(env[2], json({{"name", "MODE"}, {"value", "primary"}}));

  // Not a DNS label (a name past 63 characters): left out, as without one.
  options.pod_identity = std::string(70, 'a') + "-0";
  auto long_name = BuildCanaryJob(canary, Variant("candidate", api::Allocator::kJemalloc), options);
  ASSERT_TRUE(long_name.ok());
  EXPECT_FALSE((*long_name)["spec"]["template"]["spec"].contains("hostname"));
  // Without an identity (a Deployment's canary): no hostname.
  options.pod_identity.clear();
  auto deployment =
      BuildCanaryJob(canary, Variant("candidate", api::Allocator::kJemalloc), options);
  ASSERT_TRUE(deployment.ok());
  EXPECT_FALSE((*deployment)["spec"]["template"]["spec"].contains("hostname"));
}

TEST(BuildCanaryJobTest, EarlierInjectionIsReplacedByTheVariants) {
  struct Case {
    const char* name;
    api::VariantSpec variant;
    std::optional<std::string> preload;
    int init_containers;
    bool library_volume;
  };
  const std::vector<Case> cases = {
      {"candidate runs the candidate's allocator (tcmalloc)",
       Variant("candidate", api::Allocator::kGlibc),
       "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/libtcmalloc_minimal.so.4", 1, true},
      {"glibc: no preload of ours, no init container, no library volume",
       Variant("glibc", api::Allocator::kGlibc), "/usr/lib/libtrace.so", 0, false},
      {"mimalloc", Variant("mimalloc", api::Allocator::kMimalloc),
       "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/libmimalloc.so.2", 1, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json job = Build(Canary(), c.variant);
    const json& spec = job["spec"]["template"]["spec"];
    const json& web = Container(job, "web");
    EXPECT_EQ(Env(web, "LD_PRELOAD"), c.preload);
    // The earlier injection's tunable is gone (the template said it was injected).
    EXPECT_EQ(Env(web, "MALLOC_CONF"), std::nullopt);
    EXPECT_EQ(Env(web, "LOG_LEVEL"), "info");
    int inits = 0;
    for (const json& i : spec.value("initContainers", json::array())) {
      EXPECT_EQ(i["name"], api::kInitContainerName);
      EXPECT_EQ(i["image"], Options().image);
      ++inits;
    }
    EXPECT_EQ(inits, c.init_containers);
    int lib_volumes = 0;
    int lib_mounts = 0;
    for (const json& v : spec["volumes"]) lib_volumes += v["name"] == api::kLibraryVolumeName;
    for (const json& m : web["volumeMounts"]) lib_mounts += m["name"] == api::kLibraryVolumeName;
    EXPECT_EQ(lib_volumes, c.library_volume ? 1 : 0);
    EXPECT_EQ(lib_mounts, c.library_volume ? 1 : 0);
  }
}

TEST(BuildCanaryJobTest, VariantsPreloadTheBuildOfThePodsLibc) {
  api::ReplayCanary canary = Canary();
  canary.spec.libc = api::Libc::kGlibc;
  json job = Build(canary, Variant("mimalloc", api::Allocator::kMimalloc));
  EXPECT_EQ(Env(Container(job, "web"), "LD_PRELOAD"),
            "/usr/lib/libtrace.so:/opt/allocguard/inject/glibc/libmimalloc.so.2");

  // The template's own annotation wins, as it does in the webhook.
  json pod_template = json::parse(canary.spec.pod_template_json);
  pod_template["metadata"]["annotations"]["allocguard.io/libc"] = "musl";
  canary.spec.pod_template_json = pod_template.dump();
  job = Build(canary, Variant("mimalloc", api::Allocator::kMimalloc));
  EXPECT_EQ(Env(Container(job, "web"), "LD_PRELOAD"),
            "/usr/lib/libtrace.so:/opt/allocguard/inject/musl/libmimalloc.so.2");
}

TEST(BuildCanaryJobTest, ArenaLimitOfProduction) {
  struct Case {
    const char* name;
    std::function<void(api::ReplayCanary&, api::VariantSpec&)> setup;
    std::optional<std::string> arena_env;
    ArenaLimitSource source;
    std::string value;
    json node_selector;
  };
  const json kNoSelector = nullptr;
  const std::vector<Case> cases = {
      {"glibc, production CPUs, no node selector: 8 x CPUs",
       [](auto& c, auto& v) {
         c.spec.canary.production_cpus = 64;
         v = Variant("glibc", api::Allocator::kGlibc);
       },
       "512", ArenaLimitSource::kArenaMaxEnv, "512", kNoSelector},
      {"glibc sets its own arenaMax: kept",
       [](auto& c, auto& v) {
         c.spec.canary.production_cpus = 64;
         v = Variant("glibc", api::Allocator::kGlibc);
         v.allocator.glibc_arena_max = 2;
       },
       "2", ArenaLimitSource::kArenaMaxEnv, "2", kNoSelector},
      {"node selector wins over production CPUs",
       [](auto& c, auto& v) {
         c.spec.canary.production_cpus = 64;
         c.spec.canary.node_selector = {{"node.kubernetes.io/instance-type", "m6i.16xlarge"}};
         v = Variant("glibc", api::Allocator::kGlibc);
       },
       std::nullopt, ArenaLimitSource::kNodeSelector,
       "node.kubernetes.io/instance-type=m6i.16xlarge",
       json{{"node.kubernetes.io/instance-type", "m6i.16xlarge"}}},
      {"node selector applies to every variant",
       [](auto& c, auto& v) {
         c.spec.canary.node_selector = {{"pool", "big"}, {"arch", "amd64"}};
         v = Variant("jemalloc", api::Allocator::kJemalloc);
       },
       std::nullopt, ArenaLimitSource::kNodeSelector, "arch=amd64,pool=big",
       json{{"arch", "amd64"}, {"pool", "big"}}},
      {"jemalloc with production CPUs: no arena env",
       [](auto& c, auto& v) {
         c.spec.canary.production_cpus = 64;
         v = Variant("jemalloc", api::Allocator::kJemalloc);
       },
       std::nullopt, ArenaLimitSource::kCanaryNode, "", kNoSelector},
      {"glibc candidate gets it too",
       [](auto& c, auto& v) {
         c.spec.canary.production_cpus = 3;
         c.spec.candidate_allocator = {.name = api::Allocator::kGlibc};
         v = Variant("candidate", api::Allocator::kJemalloc);
       },
       "24", ArenaLimitSource::kArenaMaxEnv, "24", kNoSelector},
      {"nothing known: the canary's node",
       [](auto&, auto& v) { v = Variant("glibc", api::Allocator::kGlibc); }, std::nullopt,
       ArenaLimitSource::kCanaryNode, "", kNoSelector},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api::ReplayCanary canary = Canary();
    api::VariantSpec variant;
    c.setup(canary, variant);
    CanaryJobInfo info;
    json job = Build(canary, variant, &info);
    EXPECT_EQ(Env(Container(job, "web"), "MALLOC_ARENA_MAX"), c.arena_env);
    EXPECT_EQ(Env(Container(job, api::kDriverContainerName), "MALLOC_ARENA_MAX"), std::nullopt);
    EXPECT_EQ(info.arena_limit.source, c.source);
    EXPECT_EQ(info.arena_limit.value, c.value);
    const json& spec = job["spec"]["template"]["spec"];
    if (c.node_selector.is_null()) {
      EXPECT_FALSE(spec.contains("nodeSelector"));
    } else {
      EXPECT_EQ(spec["nodeSelector"], c.node_selector);
    }
    std::string annotation = ArenaLimitSourceName(c.source);
    if (!c.value.empty()) annotation += "=" + c.value;
    EXPECT_EQ(job["metadata"]["annotations"][kArenaLimitAnnotation], annotation);
  }
}

TEST(BuildCanaryJobTest, NamesStayWithin63Characters) {
  struct Case {
    std::string canary, variant, want;
  };
  const std::string long_canary(60, 'a');
  const std::vector<Case> cases = {
      {"web-5d8f9", "candidate", "web-5d8f9-candidate"},
      {std::string(53, 'b'), "candidate", std::string(53, 'b') + "-candidate"},  // exactly 63
  };
  for (const Case& c : cases) EXPECT_EQ(CanaryJobName(c.canary, c.variant), c.want);

  std::string a = CanaryJobName(long_canary, "candidate");
  std::string b = CanaryJobName(long_canary, "glibc");
  EXPECT_EQ(a.size(), 63u);
  EXPECT_LE(b.size(), 63u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, CanaryJobName(long_canary, "candidate"));
  EXPECT_EQ(a.substr(0, 54), std::string(54, 'a'));
  // A cut never leaves "--" or a trailing '-' before the hash.
  std::string dashed = CanaryJobName(std::string(53, 'c') + "-", "x-y-z-long-variant");
  EXPECT_EQ(dashed.find("--"), std::string::npos) << dashed;

  api::ReplayCanary canary = Canary();
  canary.name = std::string(100, 'd');
  CanaryJobInfo info;
  json job = Build(canary, Variant("glibc", api::Allocator::kGlibc), &info);
  EXPECT_EQ(job["metadata"]["name"], info.name);
  EXPECT_LE(info.name.size(), 63u);
  EXPECT_LE(job["metadata"]["labels"][api::kCanaryLabel].get<std::string>().size(), 63u);
  EXPECT_EQ(job["metadata"]["ownerReferences"][0]["name"], canary.name);
}

// A rerun of an Inconclusive run has a Job of its own (so a restarted
// operator never takes the first run's for it) and drives the next seed.
TEST(BuildCanaryJobTest, ARerunIsNamedForItsNumberAndDrivesTheNextSeed) {
  EXPECT_EQ(CanaryJobName("web-5d8f9", "candidate", 1), "web-5d8f9-candidate-r1");
  EXPECT_EQ(CanaryJobName("web-5d8f9", "candidate", 0), "web-5d8f9-candidate");
  api::ReplayCanary canary = Canary();
  canary.spec.canary.load.seed = 41;
  CanaryJobOptions o = Options();
  o.rerun = 2;
  CanaryJobInfo info;
  auto job = BuildCanaryJob(canary, Variant("candidate", api::Allocator::kJemalloc), o, &info);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ((*job)["metadata"]["name"], "web-5d8f9-candidate-r2");
  EXPECT_EQ(info.name, "web-5d8f9-candidate-r2");
  EXPECT_EQ((*job)["metadata"]["labels"][api::kVariantLabel], "candidate");
  auto load = replay::ParseInPodLoad(
      ArgAfter(Container(*job, api::kDriverContainerName), "--load-json"), 8080);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->seed, 43u);
  // The seed stays a non-negative int64 (the CRD's integer) at the top.
  EXPECT_EQ(api::RerunSeed(0x7fffffffffffffffULL, 1), 0u);
}

TEST(BuildCanaryJobTest, DriverRunsTheInPodReplayWithTheCanarysSettings) {
  api::ReplayCanary canary = Canary();
  canary.spec.canary.duration = std::chrono::minutes(20);
  canary.spec.canary.sample_interval = std::chrono::milliseconds(1500);
  canary.spec.limits.max_floor_slope_bytes_per_hour = 256LL << 20;
  CanaryJobInfo info;
  json job = Build(canary, Variant("jemalloc", api::Allocator::kJemalloc), &info);
  const json& driver = Container(job, api::kDriverContainerName);
  EXPECT_EQ(driver["image"], Options().image);
  auto args = Args(driver);
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[0], "replay");
  EXPECT_EQ(args[1], "--in-pod");
  EXPECT_EQ(ArgAfter(driver, "--port"), "8080");
  EXPECT_EQ(ArgAfter(driver, "--duration"), "1200s");
  EXPECT_EQ(ArgAfter(driver, "--max-duration"),
            std::to_string(canary.spec.canary.max_duration.count()) + "s");
  EXPECT_EQ(ArgAfter(driver, "--interval"), "1500ms");
  EXPECT_EQ(ArgAfter(driver, "--max-slope"), "0.25");
  EXPECT_EQ(ArgAfter(driver, "--variant"), "jemalloc");
  EXPECT_EQ(ArgAfter(driver, "--allocator"), "jemalloc");
  EXPECT_EQ(ArgAfter(driver, "--termination-log"), "/dev/termination-log");
  EXPECT_EQ(ArgAfter(driver, "--target-comm"), "<absent>");
  // The driver can read the load it is given.
  auto load = replay::ParseInPodLoad(ArgAfter(driver, "--load-json"), 8080);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->base_url, "http://127.0.0.1:8080");
  EXPECT_EQ(load->ready.path, "/healthz");
  EXPECT_DOUBLE_EQ(load->rate, 50);
  ASSERT_EQ(load->requests.size(), 1u);
  EXPECT_EQ(load->requests[0].path, "/item/{key}");

  EXPECT_EQ(driver["terminationMessagePolicy"], "File");
  EXPECT_EQ(driver["terminationMessagePath"], "/dev/termination-log");
  const json& sc = driver["securityContext"];
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_TRUE(driver["resources"]["limits"].contains("memory"));
  // The driver is not injected with the variant's allocator.
  EXPECT_EQ(Env(driver, "LD_PRELOAD"), std::nullopt);
  // It writes under /tmp, an emptyDir.
  EXPECT_EQ(driver["volumeMounts"][0]["mountPath"], "/tmp");

  CanaryJobOptions o = Options();
  o.target_comm = "web-server";
  auto with_comm = BuildCanaryJob(canary, Variant("glibc", api::Allocator::kGlibc), o);
  ASSERT_TRUE(with_comm.ok());
  EXPECT_EQ(ArgAfter(Container(*with_comm, api::kDriverContainerName), "--target-comm"),
            "web-server");
}

// With the agent in the image, every variant preloads it (glibc too, alone),
// whatever the policy's spec.stats says, and the driver reads its books from
// the books volume, read-only.
TEST(BuildCanaryJobTest, EveryVariantRecordsTheBooksWhenTheImageShipsTheAgent) {
  CanaryJobOptions o = Options();
  o.stats_agent = true;
  for (const auto& [variant, preload] : std::vector<std::pair<api::VariantSpec, std::string>>{
           {Variant("glibc", api::Allocator::kGlibc),
            "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/liballocguard_stats.so"},
           {Variant("jemalloc", api::Allocator::kJemalloc),
            "/usr/lib/libtrace.so:/opt/allocguard/inject/$LIB/libjemalloc.so.2:"
            "/opt/allocguard/inject/$LIB/liballocguard_stats.so"}}) {
    auto job = BuildCanaryJob(Canary(), variant, o);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    const json& web = Container(*job, "web");
    EXPECT_EQ(Env(web, "LD_PRELOAD"), preload) << variant.name;
    EXPECT_EQ(Env(web, "ALLOCGUARD_STATS_DIR"), "/var/run/allocguard/books") << variant.name;
    const json& driver = Container(*job, api::kDriverContainerName);
    EXPECT_EQ(ArgAfter(driver, "--books-dir"), "/var/run/allocguard/books") << variant.name;
    EXPECT_EQ(Env(driver, "LD_PRELOAD"), std::nullopt);
    bool mounted = false;
    for (const json& m : driver["volumeMounts"]) {
      if (m["name"] == api::kBooksVolumeName) {
        mounted = true;
        EXPECT_EQ(m["mountPath"], "/var/run/allocguard/books");
        EXPECT_EQ(m["readOnly"], true);
        EXPECT_FALSE(m.contains("subPath")) << "the driver reads every container's directory";
      }
    }
    EXPECT_TRUE(mounted) << variant.name << ": " << driver["volumeMounts"].dump();
  }
}

TEST(BuildCanaryJobTest, WithoutTheAgentNoVariantPreloadsItAndTheDriverReadsNoBooks) {
  json job = Build(Canary(), Variant("glibc", api::Allocator::kGlibc));
  const json& web = Container(job, "web");
  EXPECT_EQ(Env(web, "LD_PRELOAD"), "/usr/lib/libtrace.so");
  EXPECT_EQ(Env(web, "ALLOCGUARD_STATS_DIR"), std::nullopt);
  EXPECT_EQ(ArgAfter(Container(job, api::kDriverContainerName), "--books-dir"), "<absent>");
}

// A template an earlier injection gave the agent: its books volume, mount and
// ALLOCGUARD_STATS_DIR go with the rest of that injection.
TEST(BuildCanaryJobTest, AnEarlierInjectionsBooksAreRemoved) {
  api::ReplayCanary canary = Canary();
  json tmpl = json::parse(kTemplate);
  json& web = tmpl["spec"]["containers"][0];
  web["env"].push_back({{"name", "ALLOCGUARD_STATS_DIR"}, {"value", "/var/run/allocguard/books"}});
  web["volumeMounts"].push_back({{"name", "allocguard-books"},
                                 {"mountPath", "/var/run/allocguard/books"},
                                 {"subPath", "web"}});
  tmpl["spec"]["volumes"].push_back({{"name", "allocguard-books"}, {"emptyDir", json::object()}});
  canary.spec.pod_template_json = tmpl.dump();
  json job = Build(canary, Variant("tcmalloc", api::Allocator::kTcmalloc));
  const json& pod = job["spec"]["template"]["spec"];
  EXPECT_EQ(Env(Container(job, "web"), "ALLOCGUARD_STATS_DIR"), std::nullopt);
  for (const json& v : pod["volumes"]) EXPECT_NE(v["name"], "allocguard-books");
  for (const json& m : Container(job, "web")["volumeMounts"]) {
    EXPECT_NE(m["name"], "allocguard-books");
  }
}

TEST(BuildCanaryJobTest, SameInputSameJob) {
  api::ReplayCanary canary = Canary();
  api::VariantSpec v = Variant("candidate", api::Allocator::kGlibc);
  EXPECT_EQ(Build(canary, v), Build(canary, v));
}

TEST(BuildCanaryJobTest, BadInputIsAnError) {
  api::ReplayCanary canary = Canary();
  for (const std::string& bad :
       {std::string("not json"), std::string("[]"), std::string("{\"metadata\":{}}"),
        std::string(R"({"spec":{"containers":{}}})")}) {
    canary.spec.pod_template_json = bad;
    auto job = BuildCanaryJob(canary, Variant("glibc", api::Allocator::kGlibc), Options());
    EXPECT_FALSE(job.ok()) << bad;
    if (!job.ok()) {
      EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
    }
  }
  CanaryJobOptions no_image;
  auto job = BuildCanaryJob(Canary(), Variant("glibc", api::Allocator::kGlibc), no_image);
  EXPECT_FALSE(job.ok());
}

}  // namespace
}  // namespace allocguard::canary
