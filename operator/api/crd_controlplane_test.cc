// The CRDs of crds/ against a real kube-apiserver (e2e/cluster/up.sh), driven
// by the real kubectl as a user would: they establish, every example in
// docs/examples/ applies, `kubectl get` shows the printer columns, the server
// applies the defaults ParseAllocatorPolicy expects, and every invalid policy
// of invalid_resources_for_test.h is refused with a message naming its field.
//
// Reads ALLOCGUARD_TEST_KUBECTL and ALLOCGUARD_TEST_KUBECONFIG; skipped when
// they are unset. Each test works in a namespace of its own.

#include <fcntl.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include "operator/kube/testing/controlplane_support.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "operator/api/invalid_resources_for_test.h"
#include "operator/api/policy.h"

namespace allocguard::api {
namespace {

using kube::testing::Env;
using kube::testing::RandomSuffix;

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kSourceDir = ALLOCGUARD_SOURCE_DIR;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] with argv, no shell, and collects its output.
CommandResult RunCommand(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {-1, "pipe failed"};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> args;
    args.reserve(argv.size());
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  CommandResult result;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) result.output.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class CrdControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = Env("ALLOCGUARD_TEST_KUBECTL");
    kubeconfig_ = Env("ALLOCGUARD_TEST_KUBECONFIG");
    if (kubectl_.empty() || kubeconfig_.empty()) {
      GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECTL or ALLOCGUARD_TEST_KUBECONFIG "
                      "unset";
    }
    // Server-side apply: the CRDs are too large for kubectl's
    // last-applied-configuration annotation to be comfortable.
    CommandResult crds =
        Kubectl({"apply", "--server-side", "--force-conflicts", "--field-manager=allocguard-test",
                 "-f", (kSourceDir / "crds").string()});
    ASSERT_EQ(crds.exit_code, 0) << crds.output;
    CommandResult established =
        Kubectl({"wait", "--for=condition=Established", "--timeout=60s",
                 "crd/allocatorpolicies.allocguard.io", "crd/replaycanaries.allocguard.io"});
    ASSERT_EQ(established.exit_code, 0) << established.output;
    ns_ = "agapi-" + RandomSuffix();
    CommandResult created = Kubectl({"create", "namespace", ns_});
    ASSERT_EQ(created.exit_code, 0) << created.output;
    dir_ = fs::temp_directory_path() / ("agapi-" + ns_);
    fs::create_directories(dir_);
  }

  void TearDown() override {
    if (!ns_.empty()) (void)Kubectl({"delete", "namespace", ns_, "--wait=false"});
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  CommandResult Kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig", kubeconfig_});
    return RunCommand(args);
  }

  // Writes the object to a file and `kubectl apply`s it in the namespace.
  CommandResult Apply(const json& object, const std::string& file = "object.json") {
    fs::path path = dir_ / file;
    std::ofstream(path) << object.dump(2);
    return Kubectl({"apply", "-n", ns_, "-f", path.string()});
  }

  json GetJson(const std::string& resource, const std::string& name) {
    CommandResult got = Kubectl({"get", "-n", ns_, resource, name, "-o", "json"});
    EXPECT_EQ(got.exit_code, 0) << got.output;
    json j = json::parse(got.output, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << got.output;
    return j;
  }

  std::string kubectl_, kubeconfig_, ns_;
  fs::path dir_;
};

TEST_F(CrdControlPlaneTest, ExamplesApplyAndShowTheirColumns) {
  std::vector<fs::path> examples;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "docs" / "examples")) {
    if (entry.path().extension() == ".yaml") examples.push_back(entry.path());
  }
  ASSERT_GE(examples.size(), 4u);
  for (const fs::path& example : examples) {
    CommandResult applied = Kubectl({"apply", "-n", ns_, "-f", example.string()});
    EXPECT_EQ(applied.exit_code, 0) << example << ":\n" << applied.output;
    EXPECT_NE(applied.output.find("created"), std::string::npos) << applied.output;
  }

  // The operator's status writes show in the columns.
  CommandResult patched =
      Kubectl({"patch", "-n", ns_, "agp", "checkout-jemalloc", "--subresource=status",
               "--type=merge", "-p", R"({"status": {"observedGeneration": 1, "governedCount": 3,
                 "lastVerdict": {"workload": "Deployment/checkout", "templateHash": "6d5f",
                                 "canary": "checkout-6d5f", "verdict": "AllocatorRetention",
                                 "floorSlope": "+0.12 GiB/h", "flatVariant": "jemalloc",
                                 "time": "2026-01-02T03:04:05Z"},
                 "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled",
                                 "message": "3 workloads governed",
                                 "lastTransitionTime": "2026-01-02T03:04:05Z"}]}})"});
  ASSERT_EQ(patched.exit_code, 0) << patched.output;

  CommandResult table = Kubectl({"get", "agp", "-n", ns_});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  for (const char* column :
       {"NAME", "ALLOCATOR", "MODE", "VERDICT", "FLOOR SLOPE", "GOVERNED", "READY", "AGE"}) {
    EXPECT_NE(table.output.find(column), std::string::npos) << column << "\n" << table.output;
  }
  std::istringstream lines(table.output);
  std::string line;
  std::string checkout_row;
  while (std::getline(lines, line)) {
    if (line.rfind("checkout-jemalloc", 0) == 0) checkout_row = line;
  }
  for (const char* cell :
       {"jemalloc", "Enforce", "AllocatorRetention", "+0.12 GiB/h", " 3 ", "True"}) {
    EXPECT_NE(checkout_row.find(cell), std::string::npos) << cell << "\n" << table.output;
  }
  EXPECT_NE(table.output.find("reports-glibc-arena2"), std::string::npos);
  EXPECT_NE(table.output.find("Audit"), std::string::npos);

  CommandResult canaries = Kubectl({"get", "agcanary", "-n", ns_});
  ASSERT_EQ(canaries.exit_code, 0) << canaries.output;
  for (const char* text : {"TARGET", "VERDICT", "FLOOR SLOPE", "PHASE", "thumbnailer"}) {
    EXPECT_NE(canaries.output.find(text), std::string::npos) << text << "\n" << canaries.output;
  }
  // The category lists both kinds.
  CommandResult category = Kubectl({"get", "allocguard", "-n", ns_, "-o", "name"});
  EXPECT_NE(category.output.find("allocatorpolicy.allocguard.io/cache-mimalloc"), std::string::npos)
      << category.output;
  EXPECT_NE(category.output.find("replaycanary.allocguard.io/thumbnailer-tcmalloc-trial"),
            std::string::npos)
      << category.output;

  // Every example policy reads back through the parser.
  CommandResult list = Kubectl({"get", "agp", "-n", ns_, "-o", "json"});
  json items = json::parse(list.output, nullptr, false)["items"];
  ASSERT_EQ(items.size(), 3u);
  for (const json& item : items) {
    auto parsed = ParseAllocatorPolicy(item);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  }
  auto canary = ParseReplayCanary(GetJson("agc", "thumbnailer-tcmalloc-trial"));
  EXPECT_TRUE(canary.ok()) << canary.status().ToString();
}

TEST_F(CrdControlPlaneTest, InvalidPoliciesAreRefusedNamingTheField) {
  // The valid base applies, so each refusal below is for the patched field.
  CommandResult valid = Apply(ValidPolicyForTest());
  ASSERT_EQ(valid.exit_code, 0) << valid.output;
  ASSERT_EQ(Kubectl({"delete", "-n", ns_, "agp", "invalid"}).exit_code, 0);

  int refused = 0;
  int total = 0;
  for (const InvalidCaseForTest& c : InvalidPolicyCasesForTest()) {
    ++total;
    json object = ValidPolicyForTest();
    object.merge_patch(json::parse(c.patch));
    CommandResult r = Apply(object);
    EXPECT_NE(r.exit_code, 0) << c.name << ": accepted\n" << r.output;
    bool named = r.output.find(c.field) != std::string::npos;
    EXPECT_TRUE(named) << c.name << ": want " << c.field << " in\n" << r.output;
    if (r.exit_code != 0 && named) ++refused;
  }
  std::printf("[ INFO     ] %d of %d invalid AllocatorPolicies refused naming the field\n", refused,
              total);
  EXPECT_GE(total, 30);

  CommandResult canary = Apply(ValidCanaryForTest());
  ASSERT_EQ(canary.exit_code, 0) << canary.output;
  ASSERT_EQ(Kubectl({"delete", "-n", ns_, "agc", "invalid"}).exit_code, 0);
  int canaries_refused = 0;
  int canaries = 0;
  for (const InvalidCaseForTest& c : InvalidCanaryCasesForTest()) {
    ++canaries;
    json object = ValidCanaryForTest();
    object.merge_patch(json::parse(c.patch));
    CommandResult r = Apply(object);
    EXPECT_NE(r.exit_code, 0) << c.name << ": accepted\n" << r.output;
    bool named = r.output.find(c.field) != std::string::npos;
    EXPECT_TRUE(named) << c.name << ": want " << c.field << " in\n" << r.output;
    if (r.exit_code != 0 && named) ++canaries_refused;
  }
  std::printf("[ INFO     ] %d of %d invalid ReplayCanaries refused naming the field\n",
              canaries_refused, canaries);
  CommandResult left = Kubectl({"get", "allocguard", "-n", ns_, "-o", "name"});
  EXPECT_EQ(left.output, "") << "refused objects must not exist";
}

TEST_F(CrdControlPlaneTest, ServerDefaultsRoundTripThroughTheParser) {
  json minimal = json::parse(R"({
    "apiVersion": "allocguard.io/v1alpha1", "kind": "AllocatorPolicy",
    "metadata": {"name": "minimal"},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "allocator": {"name": "mimalloc"},
             "canary": {"load": {"requests": [{"path": "/"}]}}}})");
  CommandResult applied = Apply(minimal);
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  json stored = GetJson("allocatorpolicy", "minimal");
  const json& spec = stored["spec"];
  // Defaults written by the server, as a user sees them in -o yaml.
  EXPECT_EQ(spec["canary"]["duration"], "15m");
  EXPECT_EQ(spec["canary"]["sampleInterval"], "2s");
  EXPECT_EQ(spec["canary"]["load"]["port"], 8080);
  EXPECT_EQ(spec["canary"]["load"]["rate"], 10);
  EXPECT_EQ(spec["canary"]["load"]["workers"], 4);
  EXPECT_EQ(spec["canary"]["load"]["ready"]["timeout"], "60s");
  EXPECT_EQ(spec["canary"]["load"]["requests"][0]["expect"], json::array({200}));
  // Not defaulted by the server, so that a bake-off without variants can be
  // told apart; the parser gives the glibc baseline (below).
  EXPECT_FALSE(spec["canary"].contains("variants"));
  EXPECT_EQ(spec["limits"]["maxFloorSlopePerHour"], "512Mi");
  EXPECT_EQ(spec["rollout"]["mode"], "Audit");
  EXPECT_EQ(spec["guard"]["enabled"], false);
  EXPECT_EQ(spec["guard"]["action"], "None");

  auto parsed = ParseAllocatorPolicy(stored);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->ns, ns_);
  EXPECT_EQ(parsed->generation, 1);
  EXPECT_FALSE(parsed->uid.empty());
  // What the server defaulted equals what the parser defaults on its own.
  auto local = ParseAllocatorPolicy(minimal);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ(parsed->spec, local->spec);
  EXPECT_EQ(parsed->spec.allocator.name, Allocator::kMimalloc);
  ASSERT_EQ(parsed->spec.canary.variants.size(), 1u);
  EXPECT_EQ(parsed->spec.canary.variants[0].allocator.name, Allocator::kGlibc);
  EXPECT_EQ(parsed->spec.rollout.mode, RolloutMode::kAudit);
}

TEST_F(CrdControlPlaneTest, WrittenCanarySpecIsAcceptedAndImmutable) {
  ReplayCanarySpec spec;
  spec.policy = "web";
  spec.target_name = "web";
  spec.template_hash = "abc123";
  spec.pod_template_json = R"({"spec": {"containers": [{"name": "web", "image": "web:1"}]}})";
  spec.candidate_allocator = {.name = Allocator::kGlibc, .glibc_arena_max = 2};
  spec.canary.duration = std::chrono::minutes(5);
  spec.canary.sample_interval = std::chrono::milliseconds(1500);
  spec.canary.load.requests = {{.name = "home", .path = "/", .expect = {200, 304}}};
  spec.canary.variants = {
      {"je", {.name = Allocator::kJemalloc, .jemalloc_malloc_conf = "background_thread:true"}}};
  spec.canary.production_cpus = 16;
  spec.limits.memory_bytes = int64_t{3} << 29;
  json object = {{"apiVersion", kApiVersion},
                 {"kind", "ReplayCanary"},
                 {"metadata", {{"name", "written"}}},
                 {"spec", ReplayCanarySpecToJson(spec)}};
  CommandResult applied = Apply(object);
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  auto parsed = ParseReplayCanary(GetJson("replaycanary", "written"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(json::parse(parsed->spec.pod_template_json), json::parse(spec.pod_template_json));
  parsed->spec.pod_template_json = spec.pod_template_json;
  EXPECT_EQ(parsed->spec, spec);

  object["spec"]["canary"]["duration"] = "10m";
  CommandResult changed = Apply(object);
  EXPECT_NE(changed.exit_code, 0) << changed.output;
  EXPECT_NE(changed.output.find("spec is immutable"), std::string::npos) << changed.output;
}

}  // namespace
}  // namespace allocguard::api
