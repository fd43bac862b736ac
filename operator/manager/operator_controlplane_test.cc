// The operator end to end against a real etcd + kube-apiserver: the real
// `allocguard operator` binary runs as a local process, registers its
// webhooks by URL (TLS, self-managed CA) and is driven through the API and
// the real kubectl. No kubelet or Job controller runs here, so the test
// plays their part for canary Jobs: it creates each Job's pod and writes the
// replay driver's termination message into the pod's status, as the kubelet
// would.
//
// Reads ALLOCGUARD_TEST_KUBECONFIG and ALLOCGUARD_TEST_KUBECTL (see
// e2e/cluster/up.sh); skipped without them.

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/deployment.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/canary/job_builder.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/testing/controlplane_support.h"
#include "operator/replay/canary_result.h"
#include "operator/replay/in_pod.h"

namespace allocguard {
namespace {

using kube::testing::Env;
using kube::testing::RandomSuffix;

// kubectl runs inside some conditions: poll every 100 ms.
template <typename F>
bool Eventually(F cond, std::chrono::seconds limit = std::chrono::seconds(60)) {
  return kube::testing::Eventually(cond, limit, std::chrono::milliseconds(100));
}

using kube::Object;
using nlohmann::json;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs a command through the shell, feeding `input` on stdin.
CommandResult RunCommand(const std::string& command, const std::string& input = "") {
  const std::string dir = std::filesystem::temp_directory_path() / ("ag-e2e-" + RandomSuffix());
  std::filesystem::create_directories(dir);
  const std::string in = dir + "/in";
  const std::string out = dir + "/out";
  std::ofstream(in) << input;
  CommandResult r;
  int status = std::system((command + " <" + in + " >" + out + " 2>&1").c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  r.output = ss.str();
  std::filesystem::remove_all(dir);
  return r;
}

int FreePort() {
  // Bind port 0 through python-free means: ask the kernel via a socket.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

const json& Field(const json& o, const char* key) {
  static const json kNull;
  return o.is_object() && o.contains(key) ? o[key] : kNull;
}

std::string Str(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : "";
}

std::string Annotation(const json& o, const char* key) {
  const json& a = Field(Field(o, "metadata"), "annotations");
  return a.is_object() && a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : "";
}

const json* Condition(const json& object, const std::string& type) {
  const json& conditions = Field(Field(object, "status"), "conditions");
  if (!conditions.is_array()) return nullptr;
  for (const json& c : conditions) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

// The shared fixture: one operator process for the suite.
class OperatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kubeconfig_ = Env("ALLOCGUARD_TEST_KUBECONFIG");
    kubectl_ = Env("ALLOCGUARD_TEST_KUBECTL");
    if (kubeconfig_.empty() || kubectl_.empty()) return;
    auto config = kube::LoadKubeconfig({kubeconfig_, "", "", ""});
    if (!config.ok()) return;
    auto client = kube::Client::Create(*config);
    if (!client.ok()) return;
    client_ = std::move(*client).release();
    suffix_ = RandomSuffix();
    ns_ = "e2e-" + suffix_;
    operator_ns_ = "allocguard-" + suffix_;
    for (const std::string& n : {ns_, operator_ns_}) {
      (void)client_->Create(kube::Namespaces(), "", {{"metadata", {{"name", n}}}});
    }
    // Pods need their namespace's default ServiceAccount, which the
    // controller-manager (not running here) would create.
    const kube::ResourceType service_accounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
    for (const std::string& n : {ns_, std::string("kube-system")}) {
      (void)client_->Create(service_accounts, n,
                            {{"metadata", {{"name", "default"}, {"namespace", n}}}});
    }
    CommandResult crds = Kubectl("apply -f " + std::string(ALLOCGUARD_SOURCE_DIR) + "/crds/");
    if (crds.exit_code != 0) {
      setup_error_ = "applying crds/: " + crds.output;
      return;
    }
    Kubectl(
        "wait --for condition=Established --timeout=60s crd/allocatorpolicies.allocguard.io "
        "crd/replaycanaries.allocguard.io");
    webhook_port_ = FreePort();
    StartOperator();
    if (!WaitReady()) setup_error_ = "the operator did not become ready: " + OperatorLog();
  }

  static void TearDownTestSuite() {
    StopOperator();
    if (client_ == nullptr) return;
    (void)client_->Delete(kube::MutatingWebhookConfigurations(), "", WebhookConfigName());
    (void)client_->Delete(kube::ValidatingWebhookConfigurations(), "", WebhookConfigName());
    (void)client_->Delete(kube::Namespaces(), "", ns_);
    (void)client_->Delete(kube::Namespaces(), "", operator_ns_);
    delete client_;
    client_ = nullptr;
  }

  void SetUp() override {
    if (kubeconfig_.empty() || kubectl_.empty()) {
      GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECONFIG/KUBECTL unset";
    }
    ASSERT_NE(client_, nullptr);
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  // Whatever a test did, the operator never wrote what its own CRDs refuse
  // (422: say, a status with an empty date-time): a refused write loses the
  // whole status, so it is a failure here, not a warning in its log.
  void TearDown() override {
    if (log_path_.empty()) return;
    std::ifstream f(log_path_);
    std::string line;
    while (std::getline(f, line)) {
      if (line.find(" is invalid") != std::string::npos ||
          line.find("Unprocessable") != std::string::npos) {
        ADD_FAILURE() << "the operator wrote something the API server refused: " << line;
      }
    }
  }

  static std::string WebhookConfigName() { return "allocguard-" + suffix_; }

  // kubectl's arguments for the events of `target` ("statefulset/db") in
  // the test's namespace.
  static std::string EventsFor(const std::string& target) {
    std::string args = "events -n ";
    args.append(ns_).append(" --for ").append(target);
    return args;
  }

  static CommandResult Kubectl(const std::string& args, const std::string& input = "") {
    return RunCommand(kubectl_ + " --kubeconfig " + kubeconfig_ + " " + args, input);
  }

  static void StartOperator() {
    log_path_ =
        std::filesystem::temp_directory_path() / ("allocguard-operator-" + suffix_ + ".log");
    ports_path_ = log_path_ + ".ports";
    std::filesystem::remove(ports_path_);
    const std::string port = std::to_string(webhook_port_);
    std::vector<std::string> args = {
        ALLOCGUARD_BINARY, "operator", "--kubeconfig", kubeconfig_, "--operator-namespace",
        operator_ns_, "--leader-elect", "--health-probe-bind-address", "127.0.0.1:0",
        "--metrics-bind-address", "127.0.0.1:0", "--webhook-bind-address", "127.0.0.1:" + port,
        "--webhook-url", "https://127.0.0.1:" + port, "--webhook-extra-san", "127.0.0.1",
        "--mutating-webhook-configuration", WebhookConfigName(),
        "--validating-webhook-configuration", WebhookConfigName(), "--image", "allocguard:e2e",
        "--bound-addresses-file", ports_path_, "--max-concurrent-canaries", "2",
        // Only this run's namespace: canaries an earlier run
        // left in the cluster must not count against the limit.
        "--namespace", ns_};
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    operator_pid_ = rc == 0 ? pid : 0;
  }

  // kill -9 when hard: the restart tests must survive a crash, not only a
  // clean shutdown.
  static void StopOperator(bool hard = false) {
    if (operator_pid_ <= 0) return;
    kill(operator_pid_, hard ? SIGKILL : SIGTERM);
    int status = 0;
    waitpid(operator_pid_, &status, 0);
    operator_pid_ = 0;
  }

  static std::string OperatorLog() {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
  }

  static bool WaitReady() {
    return Eventually(
        [] {
          std::ifstream f(ports_path_);
          std::string line;
          int health = 0;
          while (std::getline(f, line)) {
            if (line.rfind("health=", 0) == 0) health = std::stoi(line.substr(7));
          }
          if (health == 0) return false;
          CommandResult r =
              RunCommand("curl -fs http://127.0.0.1:" + std::to_string(health) + "/readyz");
          return r.exit_code == 0;
        },
        std::chrono::seconds(90));
  }

  static Object Policy(const std::string& name, const std::string& app, const std::string& mode) {
    return {{"apiVersion", "allocguard.io/v1alpha1"},
            {"kind", "AllocatorPolicy"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", app}}}}},
              {"allocator", {{"name", "jemalloc"}, {"jemalloc", {{"mallocConf", "narenas:2"}}}}},
              {"rollout", {{"mode", mode}}},
              {"canary",
               {{"duration", "10m"},
                {"load",
                 {{"port", 8080},
                  {"rate", 20},
                  {"requests", {{{"name", "get"}, {"path", "/item?id={key}"}}}}}},
                {"variants", {{{"name", "glibc"}, {"allocator", {{"name", "glibc"}}}}}}}}}}};
  }

  static Object Deployment(const std::string& name, const std::string& app,
                           const std::string& image) {
    return {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"replicas", 1},
              {"selector", {{"matchLabels", {{"app", app}}}}},
              {"template",
               {{"metadata", {{"labels", {{"app", app}}}}},
                {"spec",
                 {{"containers",
                   {{{"name", "server"},
                     {"image", image},
                     // A template of its own per test: Deployments of one
                     // namespace whose templates measure alike share a
                     // canary and its verdict (an earlier test's Flat one
                     // would let this test's template through).
                     {"env", {{{"name", "WORKLOAD"}, {"value", name}}}},
                     {"ports", {{{"containerPort", 8080}}}}}}}}}}}}}};
  }

  static Object Pod(const std::string& name, const std::string& ns, const std::string& app,
                    json annotations = json::object(), json env = json::array()) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", ns},
              {"labels", {{"app", app}}},
              {"annotations", annotations}}},
            {"spec", {{"containers", {{{"name", "server"}, {"image", "web:1"}, {"env", env}}}}}}};
  }

  // Waits for the policy's Ready condition at its current generation.
  static bool PolicyReady(const std::string& name) {
    return Eventually([&] {
      auto p = client_->Get(kube::AllocatorPolicies(), ns_, name);
      if (!p.ok()) return false;
      const json* ready = Condition(*p, "Ready");
      return ready != nullptr && (*ready)["status"] == "True" &&
             Field(Field(*p, "status"), "observedGeneration") == (*p)["metadata"]["generation"];
    });
  }

  // Plays the Job controller and the kubelet for one canary Job: creates
  // its pod and writes the driver's termination message into the status.
  static void FinishCanaryJob(const json& job, const replay::CanaryResult& result,
                              bool oom_killed = false) {
    const std::string job_name = job["metadata"]["name"];
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", job_name + "-pod"},
                  {"namespace", ns_},
                  {"labels", job["spec"]["template"]["metadata"]["labels"]},
                  {"annotations", job["spec"]["template"]["metadata"]["annotations"]}}},
                {"spec", job["spec"]["template"]["spec"]}};
    pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = job_name;
    auto created = client_->Create(kube::Pods(), ns_, pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    json status_pod = *created;
    json statuses = json::array();
    for (const json& c : status_pod["spec"]["containers"]) {
      const std::string name = c["name"];
      json terminated = {{"exitCode", 0}, {"reason", "Completed"}};
      if (name == api::kDriverContainerName) {
        terminated["message"] = replay::EncodeCanaryResult(result);
      } else if (oom_killed) {
        terminated = {{"exitCode", 137}, {"reason", "OOMKilled"}};
      }
      statuses.push_back({{"name", name},
                          {"image", c["image"]},
                          {"imageID", ""},
                          {"ready", false},
                          {"restartCount", 0},
                          {"state", {{"terminated", terminated}}}});
    }
    status_pod["status"] = {{"phase", "Running"}, {"containerStatuses", statuses}};
    auto updated = client_->UpdateStatus(kube::Pods(), status_pod);
    ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  }

  static replay::CanaryResult Result(const std::string& variant, const std::string& verdict,
                                     double slope) {
    replay::CanaryResult r;
    r.variant = variant;
    r.verdict = VerdictFromName(verdict).value();
    r.floors_mib = {300, 300 + slope * 17, 300 + slope * 34, 300 + slope * 51};
    r.slope_gib_per_hour = slope;
    r.slope_low = slope - 0.2;
    r.slope_high = slope + 0.2;
    r.peak_mib = 900;
    r.requests = 12000;
    r.minutes = 10;
    r.message = "floor slope as measured by the test";
    return r;
  }

  // The Jobs of a canary, by variant label.
  static std::map<std::string, json> CanaryJobs(const std::string& canary) {
    kube::ListOptions lo;
    lo.label_selector = std::string(api::kCanaryLabel) + "=" + canary;
    std::map<std::string, json> out;
    auto jobs = client_->List(kube::Jobs(), ns_, lo);
    if (!jobs.ok()) return out;
    for (const json& j : jobs->items) {
      if (Field(j["metadata"], "deletionTimestamp").is_null()) {
        out[j["metadata"]["labels"][api::kVariantLabel]] = j;
      }
    }
    return out;
  }

  // Waits for the Job of `variant` and finishes it with `result`.
  static void RunVariant(const std::string& canary, const std::string& variant,
                         const replay::CanaryResult& result) {
    json job;
    ASSERT_TRUE(Eventually([&] {
      auto jobs = CanaryJobs(canary);
      if (!jobs.contains(variant)) return false;
      job = jobs[variant];
      return true;
    })) << "no Job for variant "
        << variant << " of " << canary << "\n"
        << OperatorLog();
    FinishCanaryJob(job, result);
  }

  static std::string HeldHash(const std::string& deployment) {
    auto d = client_->Get(kube::Deployments(), ns_, deployment);
    return d.ok() ? Annotation(*d, api::kHeldCandidateAnnotation) : "";
  }

  // The canary the operator runs for a Deployment's template under its
  // policy as it is now (the name carries the policy's canary key).
  static std::string CanaryFor(const std::string& workload, const std::string& hash,
                               const std::string& policy,
                               api::WorkloadKind kind = api::WorkloadKind::kDeployment) {
    auto p = client_->Get(kube::AllocatorPolicies(), ns_, policy);
    if (!p.ok()) return "";
    auto parsed = api::ParseAllocatorPolicy(*p);
    if (!parsed.ok()) return "";
    // Named for what is measured: the template whose hash is `hash`, as the
    // workload has it now (a StatefulSet's claims with it) or as a canary of
    // it stored it.
    const kube::ResourceType type = kind == api::WorkloadKind::kStatefulSet ? kube::StatefulSets()
                                    : kind == api::WorkloadKind::kDaemonSet ? kube::DaemonSets()
                                                                            : kube::Deployments();
    if (auto w = client_->Get(type, ns_, workload); w.ok()) {
      if (api::PodTemplateHash(Field(Field(*w, "spec"), "template")) == hash) {
        return controllers::CanaryName(
            controllers::CanaryKey(controllers::MeasuredTemplateOf(kind, *w), *parsed));
      }
    }
    std::optional<json> tmpl;
    auto canaries = client_->List(kube::ReplayCanaries(), ns_, kube::ListOptions{});
    if (canaries.ok()) {
      for (const json& c : canaries->items) {
        const json& t = Field(Field(c, "spec"), "template");
        if (api::PodTemplateHash(t) == hash) tmpl = t;
      }
    }
    if (!tmpl.has_value()) return "";
    controllers::MeasuredTemplate measured;
    measured.kind = kind;
    measured.hash = api::MeasuredTemplateHash(*tmpl);
    return controllers::CanaryName(controllers::CanaryKey(measured, *parsed));
  }

  // Plays every Job of `canary` (each variant with results[variant]) until
  // the canary has completed.
  static void RunCanary(const std::string& canary,
                        const std::map<std::string, replay::CanaryResult>& results) {
    std::set<std::string> finished;
    ASSERT_TRUE(Eventually(
        [&] {
          auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
          if (c.ok() && Str(Field(*c, "status"), "phase") == "Completed") return true;
          for (const auto& [variant, job] : CanaryJobs(canary)) {
            const std::string name = job["metadata"]["name"];
            if (finished.contains(name) || !results.contains(variant)) continue;
            FinishCanaryJob(job, results.at(variant));
            finished.insert(name);
          }
          return false;
        },
        std::chrono::seconds(120)))
        << "canary " << canary << " did not complete\n"
        << OperatorLog();
  }

  // `allocguard gate TARGET -o json`, as a CI job runs it: its exit code and
  // its answer (the JSON line on stdout; progress goes to stderr, which
  // RunCommand mixes in).
  static std::pair<int, json> Gate(const std::string& target, const std::string& timeout) {
    CommandResult r =
        RunCommand(std::string(ALLOCGUARD_BINARY) + " gate --kubeconfig " + kubeconfig_ + " -n " +
                   ns_ + " --poll-interval 200ms -o json " + "--timeout " + timeout + " " + target);
    std::istringstream lines(r.output);
    json answer(r.output);
    for (std::string line; std::getline(lines, line);) {
      json parsed = json::parse(line, nullptr, false);
      if (parsed.is_object()) answer = std::move(parsed);
    }
    return {r.exit_code, answer};
  }

  static inline kube::Client* client_ = nullptr;
  static inline std::string kubeconfig_, kubectl_, suffix_, ns_, operator_ns_, setup_error_;
  static inline std::string log_path_, ports_path_;
  static inline int webhook_port_ = 0;
  static inline pid_t operator_pid_ = 0;
};

TEST_F(OperatorTest, PolicyAppliesShowsColumnsAndBecomesReady) {
  CommandResult applied = Kubectl("apply -f -", Policy("columns", "columns", "Audit").dump());
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  ASSERT_TRUE(PolicyReady("columns")) << OperatorLog();
  CommandResult got = Kubectl("get agp columns -n " + ns_);
  ASSERT_EQ(got.exit_code, 0) << got.output;
  for (const char* column : {"ALLOCATOR", "MODE", "VERDICT", "jemalloc", "Audit"}) {
    EXPECT_NE(got.output.find(column), std::string::npos) << column << " in\n" << got.output;
  }
}

TEST_F(OperatorTest, OverlappingPolicyIsRefusedNamingTheOtherPolicy) {
  ASSERT_EQ(Kubectl("apply -f -", Policy("first", "overlap", "Audit").dump()).exit_code, 0);
  ASSERT_TRUE(PolicyReady("first"));
  CommandResult second = Kubectl("apply -f -", Policy("second", "overlap", "Audit").dump());
  EXPECT_NE(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("spec.selector"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("first"), std::string::npos) << second.output;
}

TEST_F(OperatorTest, PodsAreInjectedMergedSkippedAndNeverDuplicated) {
  ASSERT_EQ(client_->Create(kube::AllocatorPolicies(), ns_, Policy("inject", "inject", "Audit"))
                .status()
                .ok(),
            true);
  ASSERT_TRUE(PolicyReady("inject"));

  auto pod = client_->Create(kube::Pods(), ns_,
                             Pod("merged", ns_, "inject", json::object(),
                                 {{{"name", "LD_PRELOAD"}, {"value", "/usr/lib/libtrace.so"}}}));
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(Annotation(*pod, api::kInjectedAnnotation), "jemalloc");
  EXPECT_EQ(Annotation(*pod, api::kPolicyAnnotation), "inject");
  EXPECT_FALSE(Annotation(*pod, api::kPolicyGenerationAnnotation).empty());
  ASSERT_EQ((*pod)["spec"]["initContainers"].size(), 1u) << (*pod)["spec"].dump(2);
  EXPECT_EQ((*pod)["spec"]["initContainers"][0]["name"], api::kInitContainerName);
  EXPECT_EQ((*pod)["spec"]["initContainers"][0]["image"], "allocguard:e2e");
  std::string preload;
  std::string malloc_conf;
  for (const json& e : (*pod)["spec"]["containers"][0]["env"]) {
    if (e["name"] == "LD_PRELOAD") preload = e.value("value", "");
    if (e["name"] == "MALLOC_CONF") malloc_conf = e.value("value", "");
  }
  EXPECT_EQ(preload.rfind("/usr/lib/libtrace.so:", 0), 0u) << "kept first: " << preload;
  EXPECT_NE(preload.find("libjemalloc.so.2"), std::string::npos) << preload;
  EXPECT_EQ(malloc_conf, "narenas:2");

  // The injected Pod admitted again (same spec, new name): nothing doubles.
  json again = *pod;
  again["metadata"] = {{"name", "merged-again"},
                       {"namespace", ns_},
                       {"labels", (*pod)["metadata"]["labels"]},
                       {"annotations", (*pod)["metadata"]["annotations"]}};
  again.erase("status");
  auto second = client_->Create(kube::Pods(), ns_, again);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)["spec"]["initContainers"].size(), 1u);
  EXPECT_EQ((*second)["spec"]["volumes"].size(), (*pod)["spec"]["volumes"].size());
  int preloads = 0;
  for (const json& e : (*second)["spec"]["containers"][0]["env"]) {
    if (e["name"] == "LD_PRELOAD") {
      ++preloads;
      EXPECT_EQ(e["value"], preload);
    }
  }
  EXPECT_EQ(preloads, 1);

  auto opted_out = client_->Create(
      kube::Pods(), ns_, Pod("opted-out", ns_, "inject", {{api::kInjectAnnotation, "false"}}));
  ASSERT_TRUE(opted_out.ok()) << opted_out.status().ToString();
  EXPECT_FALSE((*opted_out)["spec"].contains("initContainers"));
  EXPECT_TRUE(Annotation(*opted_out, api::kInjectedAnnotation).empty());

  auto system_pod =
      client_->Create(kube::Pods(), "kube-system", Pod("sys-" + suffix_, "kube-system", "inject"));
  ASSERT_TRUE(system_pod.ok()) << system_pod.status().ToString();
  EXPECT_FALSE((*system_pod)["spec"].contains("initContainers"));
  (void)client_->Delete(kube::Pods(), "kube-system", "sys-" + suffix_);
}

TEST_F(OperatorTest, FlatCanaryReleasesTheHeldRollout) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("flat", "flat", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("flat"));
  auto created = client_->Create(kube::Deployments(), ns_, Deployment("flat", "flat", "web:1"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();

  // Release whatever the creation held, then change the image.
  const std::string first_hash = HeldHash("flat");
  if (!first_hash.empty()) {
    RunVariant(CanaryFor("flat", first_hash, "flat"), "candidate",
               Result("candidate", "Flat", 0.02));
    RunVariant(CanaryFor("flat", first_hash, "flat"), "glibc", Result("glibc", "Flat", 0.01));
    ASSERT_TRUE(Eventually([&] { return HeldHash("flat").empty(); })) << OperatorLog();
  }
  auto patched = client_->Patch(
      kube::Deployments(), ns_, "flat", kube::PatchType::kStrategicMerge,
      {{"spec",
        {{"template", {{"spec", {{"containers", {{{"name", "server"}, {"image", "web:2"}}}}}}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["spec"]["paused"], true) << "paused in the same request";
  const std::string hash = Annotation(*patched, api::kHeldCandidateAnnotation);
  ASSERT_FALSE(hash.empty());
  EXPECT_EQ(hash, admission::TemplateHash((*patched)["spec"]["template"]));

  const std::string canary = CanaryFor("flat", hash, "flat");
  json job;
  ASSERT_TRUE(Eventually([&] {
    auto jobs = CanaryJobs(canary);
    if (!jobs.contains("candidate")) return false;
    job = jobs["candidate"];
    return true;
  })) << OperatorLog();
  // The Job's pod: the candidate's containers, labels replaced, the replay
  // driver beside them, the candidate's allocator injected.
  const json& tmpl = job["spec"]["template"];
  EXPECT_EQ(Field(tmpl["metadata"]["labels"], "app"), json()) << "no Service may select it";
  EXPECT_EQ(tmpl["metadata"]["labels"][api::kCanaryLabel], canary);
  EXPECT_EQ(tmpl["spec"]["shareProcessNamespace"], true);
  bool has_driver = false;
  bool has_server = false;
  for (const json& c : tmpl["spec"]["containers"]) {
    if (c["name"] == api::kDriverContainerName) has_driver = true;
    if (c["name"] == "server") {
      has_server = c["image"] == "web:2";
    }
  }
  EXPECT_TRUE(has_driver);
  EXPECT_TRUE(has_server) << "the candidate's image";
  EXPECT_EQ(CanaryJobs(canary).size(), 1u) << "variants run one at a time";

  FinishCanaryJob(job, Result("candidate", "Flat", 0.03));
  RunVariant(canary, "glibc", Result("glibc", "Flat", 0.01));
  ASSERT_TRUE(Eventually([&] {
    auto d = client_->Get(kube::Deployments(), ns_, "flat");
    return d.ok() && Field((*d)["spec"], "paused") != true &&
           Annotation(*d, api::kReleasedCandidateAnnotation) == hash;
  })) << OperatorLog();
  auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["status"]["verdict"], "Flat");
  EXPECT_EQ((*c)["status"]["variants"].size(), 2u);
  EXPECT_TRUE(Eventually([&] { return CanaryJobs(canary).empty(); })) << "Jobs deleted afterwards";
}

TEST_F(OperatorTest, RatchetKeepsTheRolloutHeldAndAManualUnpauseIsRefused) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("ratchet", "ratchet", "Enforce"))
          .ok());
  ASSERT_TRUE(PolicyReady("ratchet"));
  auto created =
      client_->Create(kube::Deployments(), ns_, Deployment("ratchet", "ratchet", "web:1"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_EQ((*created)["spec"]["paused"], true) << "a new governed Deployment is held";
  const std::string hash = HeldHash("ratchet");
  ASSERT_FALSE(hash.empty());
  const std::string canary = CanaryFor("ratchet", hash, "ratchet");
  RunVariant(canary, "candidate", Result("candidate", "Ratchet", 2.6));
  RunVariant(canary, "glibc", Result("glibc", "Flat", 0.04));

  ASSERT_TRUE(Eventually([&] {
    auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
    return c.ok() && Field(Field(*c, "status"), "phase") == "Completed";
  })) << OperatorLog();
  auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
  EXPECT_EQ((*c)["status"]["verdict"], "AllocatorRetention");
  EXPECT_EQ((*c)["status"]["flatVariant"], "glibc");

  // Still held, with a Warning event on the Deployment and a condition on
  // the policy that names the flat variant.
  ASSERT_TRUE(Eventually([&] {
    CommandResult events = Kubectl("events -n " + ns_ + " --for deployment/ratchet");
    return events.output.find("RolloutHeld") != std::string::npos;
  })) << OperatorLog();
  auto d = client_->Get(kube::Deployments(), ns_, "ratchet");
  EXPECT_EQ((*d)["spec"]["paused"], true);
  ASSERT_TRUE(Eventually([&] {
    auto p = client_->Get(kube::AllocatorPolicies(), ns_, "ratchet");
    const json* blocked = p.ok() ? Condition(*p, "RolloutBlocked") : nullptr;
    return blocked != nullptr && (*blocked)["status"] == "True" &&
           (*blocked)["message"].get<std::string>().find("glibc") != std::string::npos;
  })) << OperatorLog();

  CommandResult unpause = Kubectl("patch deployment ratchet -n " + ns_ +
                                  R"( --type merge -p '{"spec":{"paused":false}}')");
  EXPECT_NE(unpause.exit_code, 0) << unpause.output;
  EXPECT_NE(unpause.output.find(api::kOverrideHoldAnnotation), std::string::npos) << unpause.output;

  // Lifting the hold needs the override verb: "dev" may patch Deployments
  // (RBAC lets the patch through) but not override; "lead" may both.
  const std::string roles = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: dev}
rules:
- {apiGroups: [apps], resources: [deployments], verbs: [get, patch, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: dev}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dev}, {apiGroup: rbac.authorization.k8s.io, kind: User, name: lead}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lead}
rules:
- {apiGroups: [allocguard.io], resources: [allocatorpolicies], verbs: [override]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lead}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lead}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: lead}]
)";
  ASSERT_EQ(Kubectl("apply -n " + ns_ + " -f -", roles).exit_code, 0);
  const std::string override_patch = R"( --type merge -p '{"metadata":{"annotations":{")" +
                                     std::string(api::kOverrideHoldAnnotation) +
                                     R"(":"incident 42"}},"spec":{"paused":false}}')";
  CommandResult by_dev =
      Kubectl("patch deployment ratchet -n " + ns_ + " --as=dev" + override_patch);
  EXPECT_NE(by_dev.exit_code, 0) << by_dev.output;
  EXPECT_NE(by_dev.output.find("user \"dev\" may not override allocatorpolicies.allocguard.io"),
            std::string::npos)
      << by_dev.output;
  CommandResult opt_out = Kubectl("patch deployment ratchet -n " + ns_ +
                                  R"( --as=dev --type merge -p '{"metadata":{"annotations":{")" +
                                  std::string(api::kInjectAnnotation) + R"(":"false"}}}')");
  EXPECT_NE(opt_out.exit_code, 0) << opt_out.output;
  EXPECT_NE(opt_out.output.find("opts out"), std::string::npos) << opt_out.output;
  CommandResult delete_policy = Kubectl("delete allocatorpolicy ratchet -n " + ns_ + " --as=lead");
  EXPECT_NE(delete_policy.exit_code, 0)
      << "lead may override but not delete policies (RBAC): " << delete_policy.output;
  d = client_->Get(kube::Deployments(), ns_, "ratchet");
  EXPECT_EQ((*d)["spec"]["paused"], true) << "still held after the refused attempts";

  CommandResult overridden =
      Kubectl("patch deployment ratchet -n " + ns_ + " --as=lead" + override_patch);
  EXPECT_EQ(overridden.exit_code, 0) << overridden.output;
  EXPECT_TRUE(Eventually([&] {
    CommandResult events = Kubectl("events -n " + ns_ + " --for deployment/ratchet");
    return events.output.find("(by lead, who may override holds here)") != std::string::npos;
  })) << Kubectl("events -n " + ns_ + " --for deployment/ratchet").output;
}

// An Inconclusive candidate is run once more, in a Job of its own on the
// next load seed; still Inconclusive, the rollout stays held with what would
// decide it, and the first run's figures stay in the stored status.
TEST_F(OperatorTest, AnInconclusiveCandidateRunsOnceMoreThenHoldsSayingWhatWouldDecideIt) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("undecided", "undecided", "Enforce"))
          .ok());
  ASSERT_TRUE(PolicyReady("undecided"));
  ASSERT_TRUE(
      client_->Create(kube::Deployments(), ns_, Deployment("undecided", "undecided", "web:1"))
          .ok());
  const std::string hash = HeldHash("undecided");
  ASSERT_FALSE(hash.empty());
  const std::string canary = CanaryFor("undecided", hash, "undecided");
  replay::CanaryResult undecided = Result("candidate", "Inconclusive", 0.2);
  undecided.slope_low = -0.6;
  undecided.slope_high = 1.0;
  RunVariant(canary, "candidate", undecided);

  const std::string rerun_name = canary::CanaryJobName(canary, "candidate", 1);
  json rerun;
  ASSERT_TRUE(Eventually([&] {
    auto jobs = CanaryJobs(canary);
    auto it = jobs.find("candidate");
    if (it == jobs.end() || it->second["metadata"]["name"] != rerun_name) return false;
    rerun = it->second;
    return true;
  })) << "no rerun Job "
      << rerun_name << "\n"
      << OperatorLog();
  std::string load_text;
  for (const json& c : rerun["spec"]["template"]["spec"]["containers"]) {
    if (c["name"] != api::kDriverContainerName) continue;
    const json& args = c["args"];
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--load-json") load_text = args[i + 1];
    }
  }
  auto load = replay::ParseInPodLoad(load_text, 8080);
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->seed, 2u) << "the rerun drives the next seed";
  FinishCanaryJob(rerun, undecided);
  RunVariant(canary, "glibc", Result("glibc", "Flat", 0.01));

  ASSERT_TRUE(Eventually([&] {
    auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
    return c.ok() && Field(Field(*c, "status"), "phase") == "Completed";
  })) << OperatorLog();
  auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["status"]["verdict"], "Inconclusive");
  const std::string explanation = (*c)["status"]["explanation"];
  EXPECT_NE(explanation.find("the candidate ran 2 times (seeds 1 and 2)"), std::string::npos)
      << explanation;
  EXPECT_NE(explanation.find("set canary.maxDuration to"), std::string::npos) << explanation;
  const json& candidate = (*c)["status"]["variants"][0];
  EXPECT_EQ(candidate["seed"], 2);
  ASSERT_EQ(Field(candidate, "earlierRuns").size(), 1u) << candidate.dump();
  EXPECT_EQ(candidate["earlierRuns"][0]["verdict"], "Inconclusive");
  EXPECT_EQ(candidate["earlierRuns"][0]["seed"], 1);
  EXPECT_EQ(candidate["earlierRuns"][0]["floorsMiB"].size(), undecided.floors_mib.size());

  ASSERT_TRUE(Eventually([&] {
    CommandResult events = Kubectl("events -n " + ns_ + " --for deployment/undecided");
    return events.output.find("RolloutHeld") != std::string::npos &&
           events.output.find("ran 2 times") != std::string::npos;
  })) << Kubectl("events -n " + ns_ + " --for deployment/undecided").output;
  auto d = client_->Get(kube::Deployments(), ns_, "undecided");
  EXPECT_EQ((*d)["spec"]["paused"], true);
}

// Deleting an Enforce policy while it holds a Deployment lifts the hold: only
// for users with the override verb.
TEST_F(OperatorTest, DeletingAPolicyThatHoldsARolloutNeedsTheOverride) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("keep", "keep", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("keep"));
  ASSERT_TRUE(client_->Create(kube::Deployments(), ns_, Deployment("keep", "keep", "web:1")).ok());
  ASSERT_FALSE(HeldHash("keep").empty());
  const std::string role = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: policy-editor}
rules:
- {apiGroups: [allocguard.io], resources: [allocatorpolicies], verbs: [get, delete, patch, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: policy-editor}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: policy-editor}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: editor}]
)";
  ASSERT_EQ(Kubectl("apply -n " + ns_ + " -f -", role).exit_code, 0);
  // The cache must show the hold before the webhook can see it.
  ASSERT_TRUE(Eventually([&] {
    CommandResult relaxed = Kubectl("patch allocatorpolicy keep -n " + ns_ +
                                    " --as=editor --dry-run=server --type merge -p "
                                    "'{\"spec\":{\"rollout\":{\"mode\":\"Audit\"}}}'");
    return relaxed.exit_code != 0 &&
           relaxed.output.find("sets spec.rollout.mode of policy keep to Audit") !=
               std::string::npos;
  })) << OperatorLog();
  CommandResult deleted = Kubectl("delete allocatorpolicy keep -n " + ns_ + " --as=editor");
  EXPECT_NE(deleted.exit_code, 0) << deleted.output;
  EXPECT_NE(deleted.output.find("deletes policy keep"), std::string::npos) << deleted.output;
  EXPECT_TRUE(client_->Get(kube::AllocatorPolicies(), ns_, "keep").ok());
  // The admin of the test may: the hold is then released, unproven.
  EXPECT_EQ(Kubectl("delete allocatorpolicy keep -n " + ns_).exit_code, 0);
  EXPECT_TRUE(Eventually([&] {
    auto d = client_->Get(kube::Deployments(), ns_, "keep");
    return d.ok() && Field((*d)["spec"], "paused") != true;
  })) << OperatorLog();
}

// The validating webhook refuses a malformed ReplayCanary at apply, naming
// the field, and a hand-made one whose template asks for host access. (With
// the webhook off, the operator's own parsing answers: the unit tests of
// CheckPodTemplate and ControllerRunner.)
TEST_F(OperatorTest, AMalformedCanaryIsRefusedAtApplyNamingTheField) {
  json canary = {
      {"apiVersion", "allocguard.io/v1alpha1"},
      {"kind", "ReplayCanary"},
      {"metadata", {{"name", "malformed"}, {"namespace", ns_}}},
      {"spec",
       {{"template",
         {{"spec",
           {{"containers",
             {{{"name", "app"}, {"image", "web:1"}, {"terminationMessagePolicy", 5}}}}}}}},
        {"candidate", {{"allocator", {{"name", "jemalloc"}}}}},
        {"canary", {{"load", {{"requests", {{{"name", "a"}, {"path", "/"}}}}}}}}}}};
  CommandResult applied = Kubectl("apply -f -", canary.dump());
  EXPECT_NE(applied.exit_code, 0) << applied.output;
  EXPECT_NE(
      applied.output.find("spec.template.spec.containers[0].terminationMessagePolicy: must be a "
                          "string, got 5"),
      std::string::npos)
      << applied.output;
  // Hand-made canaries of users other than the operator (this test's
  // kubectl shares the operator's identity, so it impersonates them): one
  // who may create canaries but not Jobs is refused; one who may create Jobs
  // is refused host access that its target does not have.
  const std::string roles = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: canary-author}
rules:
- {apiGroups: [allocguard.io], resources: [replaycanaries], verbs: [get, create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: canary-author}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: canary-author}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: no-jobs}, {apiGroup: rbac.authorization.k8s.io, kind: User, name: jobs}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: job-author}
rules:
- {apiGroups: [batch], resources: [jobs], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: job-author}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: job-author}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: jobs}]
)";
  ASSERT_EQ(Kubectl("apply -n " + ns_ + " -f -", roles).exit_code, 0);
  json plain = canary;
  plain["metadata"]["name"] = "by-hand";
  plain["spec"]["template"]["spec"]["containers"][0].erase("terminationMessagePolicy");
  CommandResult no_jobs = Kubectl("apply --as=no-jobs -f -", plain.dump());
  EXPECT_NE(no_jobs.exit_code, 0) << no_jobs.output;
  EXPECT_NE(no_jobs.output.find("user \"no-jobs\" may not create jobs.batch"), std::string::npos)
      << no_jobs.output;
  json hostile = plain;
  hostile["spec"]["template"]["spec"]["hostPID"] = true;
  hostile["spec"]["template"]["spec"]["volumes"] = {
      {{"name", "root"}, {"hostPath", {{"path", "/"}}}}};
  CommandResult host = Kubectl("apply --as=jobs -f -", hostile.dump());
  EXPECT_NE(host.exit_code, 0) << host.output;
  EXPECT_NE(host.output.find("spec.template.spec.hostPID"), std::string::npos) << host.output;
  EXPECT_NE(host.output.find("spec.template.spec.volumes[0].hostPath"), std::string::npos)
      << host.output;
  // The same user's ordinary canary is admitted: ad-hoc comparisons stay possible.
  CommandResult ordinary = Kubectl("apply --as=jobs -f -", plain.dump());
  EXPECT_EQ(ordinary.exit_code, 0) << ordinary.output;
}

TEST_F(OperatorTest, SwitchingTheHeldPolicysAllocatorRunsANewCanaryThatReleases) {
  // The policy's comparison variant is glibc, the candidate first glibc,
  // then jemalloc: the second canary runs only what is new.
  json glibc_policy = Policy("switch", "switch", "Enforce");
  glibc_policy["spec"]["allocator"] = {{"name", "glibc"}};
  ASSERT_TRUE(client_->Create(kube::AllocatorPolicies(), ns_, glibc_policy).ok());
  ASSERT_TRUE(PolicyReady("switch"));
  ASSERT_TRUE(
      client_->Create(kube::Deployments(), ns_, Deployment("switch", "switch", "web:1")).ok());
  const std::string hash = HeldHash("switch");
  ASSERT_FALSE(hash.empty());
  const std::string glibc_canary = CanaryFor("switch", hash, "switch");
  RunVariant(glibc_canary, "candidate", Result("candidate", "Ratchet", 2.6));
  RunVariant(glibc_canary, "glibc", Result("glibc", "Ratchet", 2.4));
  ASSERT_TRUE(Eventually([&] {
    CommandResult events = Kubectl("events -n " + ns_ + " --for deployment/switch");
    return events.output.find("RolloutHeld") != std::string::npos;
  })) << OperatorLog();

  // The user follows the advice: the policy's allocator becomes jemalloc.
  auto patched = client_->Patch(kube::AllocatorPolicies(), ns_, "switch", kube::PatchType::kMerge,
                                {{"spec", {{"allocator", {{"name", "jemalloc"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  ASSERT_TRUE(PolicyReady("switch"));
  const std::string jemalloc_canary = CanaryFor("switch", hash, "switch");
  ASSERT_NE(jemalloc_canary, glibc_canary) << "the switched policy keys a new canary";
  json job;
  ASSERT_TRUE(Eventually([&] {
    auto jobs = CanaryJobs(jemalloc_canary);
    if (!jobs.contains("candidate")) return false;
    job = jobs["candidate"];
    return true;
  })) << OperatorLog();
  EXPECT_NE(job.dump().find("libjemalloc.so.2"), std::string::npos)
      << "the new canary's candidate runs jemalloc";
  FinishCanaryJob(job, Result("candidate", "Flat", 0.02));
  // The glibc comparison is exactly what the first canary measured (same
  // template, allocator, load and limits): it is copied, not run again.
  std::string reused_from;
  ASSERT_TRUE(Eventually([&] {
    auto c = client_->Get(kube::ReplayCanaries(), ns_, jemalloc_canary);
    if (!c.ok()) return false;
    const json& variants = Field(Field(*c, "status"), "variants");
    if (!variants.is_array()) return false;
    for (const json& v : variants) {
      if (v.value("name", "") == "glibc" && v.value("phase", "") == "Completed") {
        reused_from = v.value("reusedFrom", "");
        return true;
      }
    }
    return false;
  })) << OperatorLog();
  EXPECT_EQ(reused_from, glibc_canary);
  EXPECT_EQ(CanaryJobs(jemalloc_canary).count("glibc"), 0u) << "no second run of glibc";
  ASSERT_TRUE(Eventually([&] {
    auto d = client_->Get(kube::Deployments(), ns_, "switch");
    return d.ok() && Field((*d)["spec"], "paused") != true &&
           Annotation(*d, api::kReleasedCandidateAnnotation) == hash;
  })) << OperatorLog();
  auto old = client_->Get(kube::ReplayCanaries(), ns_, glibc_canary);
  ASSERT_TRUE(old.ok()) << "the earlier verdict stays on record";
  EXPECT_EQ((*old)["status"]["verdict"], "Leak");
}

// A StatefulSet (2 replicas, its own partition, a volumeClaimTemplate) and a
// DaemonSet (its own RollingUpdate) under an Enforce policy: a template
// change is held in the same admission, a scale does not release it, an
// AllocatorRetention verdict keeps it held naming the flat variant, lifting
// the hold by hand needs the override verb, and once the policy is switched
// the new canary's Flat verdict releases both with the user's own partition
// and strategy restored. `allocguard gate` answers for both kinds
// throughout, and the policy's status lists both.
TEST_F(OperatorTest, StatefulSetAndDaemonSetAreHeldAndReleasedWithTheirOwnStrategy) {
  json policy = Policy("kinds", "kinds", "Enforce");
  policy["spec"]["allocator"] = {{"name", "glibc"}};
  policy["spec"]["canary"]["variants"] = {
      {{"name", "jemalloc"}, {"allocator", {{"name", "jemalloc"}}}}};
  ASSERT_TRUE(client_->Create(kube::AllocatorPolicies(), ns_, policy).ok());
  ASSERT_TRUE(PolicyReady("kinds"));

  const json pod_template = {
      {"metadata", {{"labels", {{"app", "kinds"}}}}},
      {"spec",
       {{"containers",
         {{{"name", "server"},
           {"image", "web:1"},
           {"ports", {{{"containerPort", 8080}}}},
           {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}}}}}}}}};
  json sts = {
      {"apiVersion", "apps/v1"},
      {"kind", "StatefulSet"},
      {"metadata", {{"name", "kinds-db"}, {"namespace", ns_}}},
      {"spec",
       {{"replicas", 2},
        {"serviceName", "kinds-db"},
        {"selector", {{"matchLabels", {{"app", "kinds"}}}}},
        {"updateStrategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"partition", 1}}}}},
        {"template", pod_template},
        {"volumeClaimTemplates",
         {{{"metadata", {{"name", "data"}}},
           {"spec",
            {{"accessModes", {"ReadWriteOnce"}},
             {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}}}}}};
  json ds_template = pod_template;
  ds_template["spec"]["containers"][0].erase("volumeMounts");
  json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", "kinds-agent"}, {"namespace", ns_}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "kinds"}}}}},
        {"updateStrategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 2}}}}},
        {"template", ds_template}}}};
  auto created_sts = client_->Create(kube::StatefulSets(), ns_, sts);
  ASSERT_TRUE(created_sts.ok()) << created_sts.status().ToString();
  auto created_ds = client_->Create(kube::DaemonSets(), ns_, ds);
  ASSERT_TRUE(created_ds.ok()) << created_ds.status().ToString();
  // As stored, with the API server's defaults: what the release must restore.
  const json ds_strategy = (*created_ds)["spec"]["updateStrategy"];
  // Running before their first change: adopted as the baseline, not held.
  for (const auto& [kind_type, kind_name, object] :
       {std::tuple{kube::StatefulSets(), "kinds-db", *created_sts},
        std::tuple{kube::DaemonSets(), "kinds-agent", *created_ds}}) {
    // Copies: a lambda may not capture a structured binding (before C++20's
    // rule, which clang-tidy's clang does not apply yet).
    const kube::ResourceType type = kind_type;
    const std::string name = kind_name;
    EXPECT_EQ(Annotation(object, api::kHeldCandidateAnnotation), "") << name;
    const std::string first = admission::TemplateHash(object["spec"]["template"]);
    ASSERT_TRUE(Eventually([&] {
      auto w = client_->Get(type, ns_, name);
      return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == first;
    })) << name
        << "\n"
        << OperatorLog();
  }

  // The template change: held in the same admission.
  const json new_image = {
      {"spec",
       {{"template", {{"spec", {{"containers", {{{"name", "server"}, {"image", "web:2"}}}}}}}}}}};
  auto held_sts = client_->Patch(kube::StatefulSets(), ns_, "kinds-db",
                                 kube::PatchType::kStrategicMerge, new_image);
  ASSERT_TRUE(held_sts.ok()) << held_sts.status().ToString();
  const std::string sts_hash = admission::TemplateHash((*held_sts)["spec"]["template"]);
  EXPECT_EQ(Annotation(*held_sts, api::kHeldCandidateAnnotation), sts_hash);
  EXPECT_EQ((*held_sts)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2147483647)
      << "no pod is replaced";
  EXPECT_EQ(Annotation(*held_sts, api::kUserPartitionAnnotation), "1");
  auto held_ds = client_->Patch(kube::DaemonSets(), ns_, "kinds-agent",
                                kube::PatchType::kStrategicMerge, new_image);
  ASSERT_TRUE(held_ds.ok()) << held_ds.status().ToString();
  const std::string ds_hash = admission::TemplateHash((*held_ds)["spec"]["template"]);
  EXPECT_EQ(Annotation(*held_ds, api::kHeldCandidateAnnotation), ds_hash);
  EXPECT_EQ((*held_ds)["spec"]["updateStrategy"], json({{"type", "OnDelete"}}));
  EXPECT_EQ(json::parse(Annotation(*held_ds, api::kUserUpdateStrategyAnnotation), nullptr, false),
            ds_strategy);
  // The pod the DaemonSet controller would create while held (for a node
  // that joins, or in place of a deleted pod) runs the candidate: refused,
  // naming the hold (rule D4).
  json ds_pod = {{"apiVersion", "v1"},
                 {"kind", "Pod"},
                 {"metadata",
                  {{"name", "kinds-agent-n2"},
                   {"namespace", ns_},
                   {"labels", {{"app", "kinds"}}},
                   {"ownerReferences",
                    {{{"apiVersion", "apps/v1"},
                      {"kind", "DaemonSet"},
                      {"name", "kinds-agent"},
                      {"uid", (*held_ds)["metadata"]["uid"]},
                      {"controller", true}}}}}},
                 {"spec", (*held_ds)["spec"]["template"]["spec"]}};
  auto refused_pod = client_->Create(kube::Pods(), ns_, ds_pod);
  ASSERT_FALSE(refused_pod.ok()) << "a pod of the held DaemonSet was admitted";
  EXPECT_NE(refused_pod.error().message.find("DaemonSet " + ns_ +
                                             "/kinds-agent is held by AllocatorPolicy kinds"),
            std::string::npos)
      << refused_pod.error().message;

  // Scaling (through /scale, and through the object) does not release it.
  EXPECT_EQ(Kubectl("scale statefulset kinds-db --replicas=3 -n " + ns_).exit_code, 0);
  ASSERT_TRUE(client_
                  ->Patch(kube::StatefulSets(), ns_, "kinds-db", kube::PatchType::kMerge,
                          {{"spec", {{"replicas", 4}}}})
                  .ok());
  auto scaled = client_->Get(kube::StatefulSets(), ns_, "kinds-db");
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ((*scaled)["spec"]["replicas"], 4);
  EXPECT_EQ((*scaled)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2147483647);
  EXPECT_EQ(Annotation(*scaled, api::kHeldCandidateAnnotation), sts_hash);

  // While the canaries run, the gate waits.
  auto [waiting_code, waiting] = Gate("statefulset/kinds-db", "1s");
  EXPECT_EQ(waiting_code, 4) << waiting.dump();
  EXPECT_EQ(Field(waiting, "state"), "TimedOut") << waiting.dump();

  // The first canaries: the glibc candidate ratchets, jemalloc stays flat.
  const std::string sts_canary =
      CanaryFor("kinds-db", sts_hash, "kinds", api::WorkloadKind::kStatefulSet);
  const std::string ds_canary =
      CanaryFor("kinds-agent", ds_hash, "kinds", api::WorkloadKind::kDaemonSet);
  json sts_job;
  ASSERT_TRUE(Eventually([&] {
    auto jobs = CanaryJobs(sts_canary);
    if (!jobs.contains("candidate")) return false;
    sts_job = jobs["candidate"];
    return true;
  })) << OperatorLog();
  bool claim_volume = false;
  for (const json& v : Field(sts_job["spec"]["template"]["spec"], "volumes")) {
    if (v.value("name", "") == "data" && v.contains("emptyDir")) {
      claim_volume = Field(v["emptyDir"], "sizeLimit").is_string();
    }
  }
  EXPECT_TRUE(claim_volume) << "the claim is a sized emptyDir: " << sts_job.dump();
  const std::map<std::string, replay::CanaryResult> retention = {
      {"candidate", Result("candidate", "Ratchet", 2.6)},
      {"jemalloc", Result("jemalloc", "Flat", 0.02)}};
  RunCanary(sts_canary, retention);
  RunCanary(ds_canary, retention);
  for (const std::string& c : {sts_canary, ds_canary}) {
    auto canary = client_->Get(kube::ReplayCanaries(), ns_, c);
    ASSERT_TRUE(canary.ok());
    EXPECT_EQ((*canary)["status"]["verdict"], "AllocatorRetention") << c;
    EXPECT_EQ((*canary)["status"]["flatVariant"], "jemalloc") << c;
  }
  for (const std::string target : {"statefulset/kinds-db", "daemonset/kinds-agent"}) {
    ASSERT_TRUE(Eventually([&] {
      CommandResult events = Kubectl(EventsFor(target));
      return events.output.find("RolloutHeld") != std::string::npos &&
             events.output.find("variant jemalloc stayed flat") != std::string::npos;
    })) << target
        << "\n"
        << Kubectl(EventsFor(target)).output;
    auto [held_code, held] = Gate(target, "30s");
    EXPECT_EQ(held_code, 2) << target << " " << held.dump();
    EXPECT_EQ(Field(held, "state"), "Held") << held.dump();
    EXPECT_EQ(Field(held, "verdict"), "AllocatorRetention") << held.dump();
  }
  auto still = client_->Get(kube::StatefulSets(), ns_, "kinds-db");
  EXPECT_EQ((*still)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2147483647);
  auto still_ds = client_->Get(kube::DaemonSets(), ns_, "kinds-agent");
  EXPECT_EQ((*still_ds)["spec"]["updateStrategy"], json({{"type", "OnDelete"}}));

  // The policy's status lists both, with their kind.
  ASSERT_TRUE(Eventually([&] {
    auto p = client_->Get(kube::AllocatorPolicies(), ns_, "kinds");
    if (!p.ok()) return false;
    const json& governed = Field(Field(*p, "status"), "governed");
    return governed.is_array() &&
           governed.dump().find(R"({"kind":"StatefulSet","name":"kinds-db")") !=
               std::string::npos &&
           governed.dump().find(R"({"kind":"DaemonSet","name":"kinds-agent")") != std::string::npos;
  })) << OperatorLog();

  // Lifting the hold by hand needs the override verb: "kinds-dev" may patch
  // StatefulSets and DaemonSets (RBAC lets the patch through) but not override.
  const std::string role = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kinds-dev}
rules:
- {apiGroups: [apps], resources: [statefulsets, daemonsets], verbs: [get, patch, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kinds-dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kinds-dev}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kinds-dev}]
)";
  ASSERT_EQ(Kubectl("apply -n " + ns_ + " -f -", role).exit_code, 0);
  CommandResult by_dev =
      Kubectl("patch statefulset kinds-db -n " + ns_ +
              R"( --as=kinds-dev --type merge -p '{"metadata":{"annotations":{")" +
              std::string(api::kOverrideHoldAnnotation) +
              R"(":"now"}},"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}')");
  EXPECT_NE(by_dev.exit_code, 0) << by_dev.output;
  EXPECT_NE(
      by_dev.output.find("user \"kinds-dev\" may not override allocatorpolicies.allocguard.io"),
      std::string::npos)
      << by_dev.output;
  CommandResult ds_by_dev = Kubectl(
      "patch daemonset kinds-agent -n " + ns_ +
      R"( --as=kinds-dev --type json -p '[{"op":"remove","path":"/metadata/annotations/allocguard.io~1held-candidate"}]')");
  EXPECT_NE(ds_by_dev.exit_code, 0) << ds_by_dev.output;
  EXPECT_NE(ds_by_dev.output.find("removes allocguard.io/held-candidate"), std::string::npos)
      << ds_by_dev.output;

  // The user follows the advice: the policy's allocator becomes jemalloc; the
  // new canaries are Flat and release both, each with its own strategy back.
  auto switched = client_->Patch(
      kube::AllocatorPolicies(), ns_, "kinds", kube::PatchType::kMerge,
      {{"spec",
        {{"allocator", {{"name", "jemalloc"}}},
         {"canary", {{"variants", {{{"name", "glibc"}, {"allocator", {{"name", "glibc"}}}}}}}}}}});
  ASSERT_TRUE(switched.ok()) << switched.status().ToString();
  ASSERT_TRUE(PolicyReady("kinds"));
  const std::map<std::string, replay::CanaryResult> flat = {
      {"candidate", Result("candidate", "Flat", 0.02)}, {"glibc", Result("glibc", "Ratchet", 2.6)}};
  RunCanary(CanaryFor("kinds-db", sts_hash, "kinds", api::WorkloadKind::kStatefulSet), flat);
  RunCanary(CanaryFor("kinds-agent", ds_hash, "kinds", api::WorkloadKind::kDaemonSet), flat);
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::StatefulSets(), ns_, "kinds-db");
    return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == sts_hash;
  })) << OperatorLog();
  auto released = client_->Get(kube::StatefulSets(), ns_, "kinds-db");
  EXPECT_EQ((*released)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 1)
      << "the user's own partition";
  EXPECT_EQ(Annotation(*released, api::kHeldCandidateAnnotation), "");
  EXPECT_EQ(Annotation(*released, api::kUserPartitionAnnotation), "");
  EXPECT_EQ((*released)["spec"]["replicas"], 4);
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::DaemonSets(), ns_, "kinds-agent");
    return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == ds_hash;
  })) << OperatorLog();
  auto released_ds = client_->Get(kube::DaemonSets(), ns_, "kinds-agent");
  EXPECT_EQ((*released_ds)["spec"]["updateStrategy"], ds_strategy) << "the user's own strategy";
  EXPECT_EQ(Annotation(*released_ds, api::kUserUpdateStrategyAnnotation), "");
  // Released: its controller's pod is admitted (and injected).
  auto admitted_pod = client_->Create(kube::Pods(), ns_, ds_pod);
  ASSERT_TRUE(admitted_pod.ok()) << admitted_pod.status().ToString();
  EXPECT_NE(Annotation(*admitted_pod, api::kInjectedAnnotation), "");
  ASSERT_TRUE(client_->Delete(kube::Pods(), ns_, "kinds-agent-n2").ok());
  for (const std::string target : {"statefulset/kinds-db", "daemonset/kinds-agent"}) {
    auto [code, answer] = Gate(target, "30s");
    EXPECT_EQ(code, 0) << target << " " << answer.dump();
    EXPECT_EQ(Field(answer, "state"), "Proceed") << answer.dump();
    EXPECT_TRUE(Eventually([&] {
      CommandResult events = Kubectl(EventsFor(target));
      return events.output.find("RolloutReleased") != std::string::npos;
    })) << target;
  }
}

// The override of a held StatefulSet, as an admin does it (this test's
// kubeconfig has every right): the annotation alone lifts nothing (the
// operator lifts no pin with its own rights) and a Warning names the field;
// the partition set back by the admin rolls the template out, and the
// operator then clears the hold and records the override.
TEST_F(OperatorTest, AStatefulSetOverrideIsConsumedOnceTheAdminSetsThePartitionBack) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("ovr", "ovr", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("ovr"));
  const json sts = {{"apiVersion", "apps/v1"},
                    {"kind", "StatefulSet"},
                    {"metadata", {{"name", "ovr-db"}, {"namespace", ns_}}},
                    {"spec",
                     {{"replicas", 1},
                      {"serviceName", "ovr-db"},
                      {"selector", {{"matchLabels", {{"app", "ovr"}}}}},
                      {"template",
                       {{"metadata", {{"labels", {{"app", "ovr"}}}}},
                        {"spec", {{"containers", {{{"name", "server"}, {"image", "web:1"}}}}}}}}}}};
  auto created = client_->Create(kube::StatefulSets(), ns_, sts);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const std::string first = admission::TemplateHash((*created)["spec"]["template"]);
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::StatefulSets(), ns_, "ovr-db");
    return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == first;
  })) << OperatorLog();
  auto held = client_->Patch(
      kube::StatefulSets(), ns_, "ovr-db", kube::PatchType::kStrategicMerge,
      {{"spec",
        {{"template", {{"spec", {{"containers", {{{"name", "server"}, {"image", "web:2"}}}}}}}}}}});
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const std::string hash = Annotation(*held, api::kHeldCandidateAnnotation);
  ASSERT_FALSE(hash.empty());
  EXPECT_EQ(Annotation(*held, api::kUserPartitionAnnotation), "0")
      << "the API server's default partition, remembered";

  // The annotation alone: still held, and the Warning says what to set.
  ASSERT_TRUE(
      client_
          ->Patch(kube::StatefulSets(), ns_, "ovr-db", kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{api::kOverrideHoldAnnotation, "INC-7"}}}}}})
          .ok());
  ASSERT_TRUE(Eventually([&] {
    return Kubectl(EventsFor("statefulset/ovr-db"))
               .output.find("rollingUpdate.partition is still") != std::string::npos;
  })) << Kubectl(EventsFor("statefulset/ovr-db")).output;
  auto still = client_->Get(kube::StatefulSets(), ns_, "ovr-db");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(Annotation(*still, api::kHeldCandidateAnnotation), hash);
  EXPECT_EQ((*still)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2147483647);

  // The admin sets the partition back: the override is consumed.
  ASSERT_TRUE(client_
                  ->Patch(kube::StatefulSets(), ns_, "ovr-db", kube::PatchType::kMerge,
                          {{"spec", {{"updateStrategy", {{"rollingUpdate", {{"partition", 0}}}}}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::StatefulSets(), ns_, "ovr-db");
    return w.ok() && Annotation(*w, api::kHeldCandidateAnnotation).empty();
  })) << OperatorLog();
  auto cleared = client_->Get(kube::StatefulSets(), ns_, "ovr-db");
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ((*cleared)["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
  EXPECT_EQ(Annotation(*cleared, api::kOverrideHoldAnnotation), "");
  EXPECT_EQ(Annotation(*cleared, api::kUserPartitionAnnotation), "");
  EXPECT_EQ(Annotation(*cleared, api::kOverriddenCandidateAnnotation), hash + " INC-7");
  EXPECT_EQ(Annotation(*cleared, api::kReleasedCandidateAnnotation), hash);
  EXPECT_NE(Kubectl(EventsFor("statefulset/ovr-db")).output.find("HoldCleared"), std::string::npos);
  auto [code, answer] = Gate("statefulset/ovr-db", "30s");
  EXPECT_EQ(code, 0) << answer.dump();
  EXPECT_EQ(Field(answer, "reason"), "Overridden") << answer.dump();

  // Free the canary slot for the tests after this one.
  const std::string canary = CanaryFor("ovr-db", hash, "ovr", api::WorkloadKind::kStatefulSet);
  ASSERT_TRUE(client_->Delete(kube::StatefulSets(), ns_, "ovr-db").ok());
  auto deleted = client_->Delete(kube::ReplayCanaries(), ns_, canary);
  EXPECT_TRUE(deleted.ok() || deleted.error().IsNotFound());
}

// An override asked for but not acted on (the annotation set, the
// DaemonSet's strategy left pinned at OnDelete): the hold goes on as without
// it, so its canary's Flat verdict releases it to the user's own strategy,
// and the unused annotation goes with the hold, or it would let the next hold
// be lifted without the override permission.
TEST_F(OperatorTest, ADaemonSetOverrideNotActedOnEndsWithTheHoldWhenItsCanaryIsFlat) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("dsovr", "dsovr", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("dsovr"));
  const json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", "dsovr-agent"}, {"namespace", ns_}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "dsovr"}}}}},
        {"updateStrategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 3}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "dsovr"}}}}},
          {"spec", {{"containers", {{{"name", "agent"}, {"image", "dsovr:1"}}}}}}}}}}};
  auto created = client_->Create(kube::DaemonSets(), ns_, ds);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const json strategy = (*created)["spec"]["updateStrategy"];
  const std::string first = admission::TemplateHash((*created)["spec"]["template"]);
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::DaemonSets(), ns_, "dsovr-agent");
    return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == first;
  })) << OperatorLog();
  auto held = client_->Patch(
      kube::DaemonSets(), ns_, "dsovr-agent", kube::PatchType::kStrategicMerge,
      {{"spec",
        {{"template",
          {{"spec", {{"containers", {{{"name", "agent"}, {"image", "dsovr:2"}}}}}}}}}}});
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const std::string hash = Annotation(*held, api::kHeldCandidateAnnotation);
  ASSERT_FALSE(hash.empty());
  ASSERT_EQ((*held)["spec"]["updateStrategy"], json({{"type", "OnDelete"}}));

  // The annotation alone, the strategy left pinned.
  ASSERT_TRUE(
      client_
          ->Patch(kube::DaemonSets(), ns_, "dsovr-agent", kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{api::kOverrideHoldAnnotation, "INC-9"}}}}}})
          .ok());
  RunCanary(
      CanaryFor("dsovr-agent", hash, "dsovr", api::WorkloadKind::kDaemonSet),
      {{"candidate", Result("candidate", "Flat", 0.02)}, {"glibc", Result("glibc", "Flat", 0.01)}});
  ASSERT_TRUE(Eventually([&] {
    auto w = client_->Get(kube::DaemonSets(), ns_, "dsovr-agent");
    return w.ok() && Annotation(*w, api::kReleasedCandidateAnnotation) == hash;
  })) << Kubectl(EventsFor("daemonset/dsovr-agent")).output
      << "\n"
      << OperatorLog();
  auto released = client_->Get(kube::DaemonSets(), ns_, "dsovr-agent");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ((*released)["spec"]["updateStrategy"], strategy) << "the user's own strategy";
  EXPECT_EQ(Annotation(*released, api::kHeldCandidateAnnotation), "");
  EXPECT_EQ(Annotation(*released, api::kOverrideHoldAnnotation), "")
      << "the override not acted on is removed with the hold";
  EXPECT_EQ(Annotation(*released, api::kOverriddenCandidateAnnotation), "")
      << "nothing was overridden: the canary proved the template";
  EXPECT_TRUE(Eventually([&] {
    return Kubectl(EventsFor("daemonset/dsovr-agent")).output.find("RolloutReleased") !=
           std::string::npos;
  }));
  ASSERT_TRUE(client_->Delete(kube::DaemonSets(), ns_, "dsovr-agent").ok());
}

TEST_F(OperatorTest, ADeploymentRunningBeforeAnEnforcePolicyIsAdoptedWithoutACanary) {
  ASSERT_TRUE(
      client_->Create(kube::Deployments(), ns_, Deployment("adopt", "adopt", "web:1")).ok());
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("adopt", "adopt", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("adopt"));
  std::string released;
  ASSERT_TRUE(Eventually([&] {
    auto d = client_->Get(kube::Deployments(), ns_, "adopt");
    if (!d.ok()) return false;
    released = Annotation(*d, api::kReleasedCandidateAnnotation);
    return !released.empty();
  })) << OperatorLog();
  auto d = client_->Get(kube::Deployments(), ns_, "adopt");
  EXPECT_EQ(released, admission::TemplateHash((*d)["spec"]["template"]));
  EXPECT_NE(Field((*d)["spec"], "paused"), true);
  kube::ListOptions lo;
  lo.label_selector = std::string(controllers::kWorkloadLabel) + "=adopt";
  auto canaries = client_->List(kube::ReplayCanaries(), ns_, lo);
  ASSERT_TRUE(canaries.ok());
  EXPECT_TRUE(canaries->items.empty()) << "the running template is the baseline, not a candidate";
  CommandResult events = Kubectl("events -n " + ns_ + " --for deployment/adopt");
  EXPECT_NE(events.output.find("TemplateAdopted"), std::string::npos) << events.output;

  // Its next template change is held.
  auto patched = client_->Patch(
      kube::Deployments(), ns_, "adopt", kube::PatchType::kStrategicMerge,
      {{"spec",
        {{"template", {{"spec", {{"containers", {{{"name", "server"}, {"image", "web:2"}}}}}}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["spec"]["paused"], true);
  // Free the canary slot for the tests after this one (no garbage collector
  // runs in this tier to delete the canary with its Deployment).
  const std::string hash = Annotation(*patched, api::kHeldCandidateAnnotation);
  ASSERT_TRUE(Eventually([&] {
    return client_->Get(kube::ReplayCanaries(), ns_, CanaryFor("adopt", hash, "adopt")).ok();
  })) << OperatorLog();
  ASSERT_TRUE(client_->Delete(kube::Deployments(), ns_, "adopt").ok());
  ASSERT_TRUE(client_->Delete(kube::ReplayCanaries(), ns_, CanaryFor("adopt", hash, "adopt")).ok());
}

TEST_F(OperatorTest, AuditRunsTheCanaryButNeverPauses) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("audit", "audit", "Audit")).ok());
  ASSERT_TRUE(PolicyReady("audit"));
  auto created = client_->Create(kube::Deployments(), ns_, Deployment("audit", "audit", "web:1"));
  ASSERT_TRUE(created.ok());
  EXPECT_NE(Field((*created)["spec"], "paused"), true);
  const std::string hash = admission::TemplateHash((*created)["spec"]["template"]);
  const std::string canary = CanaryFor("audit", hash, "audit");
  RunVariant(canary, "candidate", Result("candidate", "Ratchet", 3.0));
  RunVariant(canary, "glibc", Result("glibc", "Ratchet", 2.0));
  ASSERT_TRUE(Eventually([&] {
    auto d = client_->Get(kube::Deployments(), ns_, "audit");
    return d.ok() && Annotation(*d, api::kReleasedCandidateAnnotation) == hash;
  })) << OperatorLog();
  auto d = client_->Get(kube::Deployments(), ns_, "audit");
  EXPECT_NE(Field((*d)["spec"], "paused"), true);
  auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
  EXPECT_EQ((*c)["status"]["verdict"], "Leak");
}

TEST_F(OperatorTest, CanariesBeyondTheLimitWaitTheirTurn) {
  // The test operator runs with --max-concurrent-canaries 2.
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("queue", "queue", "Enforce")).ok());
  ASSERT_TRUE(PolicyReady("queue"));
  std::vector<std::string> canaries;
  for (const std::string name : {"queue-a", "queue-b", "queue-c"}) {
    json d = Deployment(name, "queue", "web:1");
    d["spec"]["selector"]["matchLabels"]["instance"] = name;
    d["spec"]["template"]["metadata"]["labels"]["instance"] = name;
    ASSERT_TRUE(client_->Create(kube::Deployments(), ns_, d).ok());
    const std::string hash = HeldHash(name);
    ASSERT_FALSE(hash.empty());
    canaries.push_back(CanaryFor(name, hash, "queue"));
  }
  auto phase = [&](const std::string& canary) {
    auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
    return c.ok() ? Str(Field(*c, "status"), "phase") : std::string();
  };
  ASSERT_TRUE(Eventually([&] {
    int running = 0;
    int queued = 0;
    for (const std::string& c : canaries) {
      running += phase(c) == "Running";
      queued += phase(c) == "Pending";
    }
    return running == 2 && queued == 1;
  })) << OperatorLog();
  int jobs = 0;
  for (const std::string& c : canaries) jobs += static_cast<int>(CanaryJobs(c).size());
  EXPECT_EQ(jobs, 2) << "the third canary has no Job while two run";
  std::string waiting;
  for (const std::string& c : canaries) {
    if (phase(c) == "Pending") waiting = c;
  }
  auto w = client_->Get(kube::ReplayCanaries(), ns_, waiting);
  EXPECT_NE(Str(Field(*w, "status"), "explanation").find("queued"), std::string::npos);
  // Finishing the running ones lets the waiting one start; all three end.
  for (const std::string& c : canaries) {
    if (c == waiting) continue;
    RunVariant(c, "candidate", Result("candidate", "Flat", 0.0));
    RunVariant(c, "glibc", Result("glibc", "Flat", 0.0));
  }
  RunVariant(waiting, "candidate", Result("candidate", "Flat", 0.0));
  RunVariant(waiting, "glibc", Result("glibc", "Flat", 0.0));
  for (const std::string& c : canaries) {
    EXPECT_TRUE(Eventually([&] { return phase(c) == "Completed"; })) << c;
  }
}

TEST_F(OperatorTest, OperatorKilledDuringACanaryRestartsWithoutDuplicates) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("restart", "restart", "Enforce"))
          .ok());
  ASSERT_TRUE(PolicyReady("restart"));
  ASSERT_TRUE(
      client_->Create(kube::Deployments(), ns_, Deployment("restart", "restart", "web:1")).ok());
  const std::string hash = HeldHash("restart");
  ASSERT_FALSE(hash.empty());
  const std::string canary = CanaryFor("restart", hash, "restart");
  ASSERT_TRUE(Eventually([&] { return CanaryJobs(canary).count("candidate") == 1; }))
      << OperatorLog();

  StopOperator(/*hard=*/true);
  StartOperator();
  ASSERT_TRUE(WaitReady()) << OperatorLog();
  // Give the restarted operator time to look at everything again, then count.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(CanaryJobs(canary).size(), 1u);
  kube::ListOptions lo;
  lo.label_selector = std::string(api::kCanaryLabel) + "=" + canary;
  auto all = client_->List(kube::Jobs(), ns_, lo);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 1u) << "no duplicate Job after the restart";

  RunVariant(canary, "candidate", Result("candidate", "Flat", 0.0));
  StopOperator(/*hard=*/true);  // killed between the variants
  StartOperator();
  ASSERT_TRUE(WaitReady()) << OperatorLog();
  RunVariant(canary, "glibc", Result("glibc", "Flat", 0.0));
  ASSERT_TRUE(Eventually([&] { return HeldHash("restart").empty(); })) << OperatorLog();
  auto c = client_->Get(kube::ReplayCanaries(), ns_, canary);
  EXPECT_EQ((*c)["status"]["verdict"], "Flat");
  EXPECT_EQ((*c)["status"]["variants"].size(), 2u) << "the candidate's result survived";
}

TEST_F(OperatorTest, WebhookDownPodsStillStartAndDriftIsReported) {
  ASSERT_TRUE(
      client_->Create(kube::AllocatorPolicies(), ns_, Policy("drift", "drift", "Audit")).ok());
  ASSERT_TRUE(PolicyReady("drift"));
  StopOperator();
  auto pod = client_->Create(kube::Pods(), ns_, Pod("uninjected", ns_, "drift"));
  ASSERT_TRUE(pod.ok()) << "fails open: " << pod.status().ToString();
  EXPECT_TRUE(Annotation(*pod, api::kInjectedAnnotation).empty());

  StartOperator();
  ASSERT_TRUE(WaitReady()) << OperatorLog();
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually(
      [&] {
        auto p = client_->Get(kube::AllocatorPolicies(), ns_, "drift");
        const json* drift = p.ok() ? Condition(*p, "InjectionDrift") : nullptr;
        return drift != nullptr && (*drift)["status"] == "True" &&
               (*drift)["message"].get<std::string>().find("uninjected") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << OperatorLog();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  std::printf("drift reported %.1f s after the operator was ready again\n", seconds);
  EXPECT_TRUE(Eventually([&] {
    CommandResult events = Kubectl("events -n " + ns_ + " --for pod/uninjected");
    return events.output.find("InjectionMissing") != std::string::npos;
  }));
}

}  // namespace
}  // namespace allocguard
