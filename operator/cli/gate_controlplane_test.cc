// `allocguard gate` against a real etcd + kube-apiserver (e2e/cluster/up.sh).
// No operator runs: the test plays its part by writing what the operator and
// its webhooks would write — the Deployment's held/released annotations and
// spec.paused, and the ReplayCanary (as the rollout reconciler builds it) with
// the status the canary reconciler would give it — and then runs the real
// binary as a CI job would, checking its exit code and what it prints.
//
// Reads ALLOCGUARD_TEST_KUBECONFIG and ALLOCGUARD_TEST_KUBECTL; skipped
// without them.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/testing/controlplane_support.h"

namespace allocguard {
namespace {

using kube::testing::Env;
using kube::testing::RandomSuffix;
using nlohmann::json;

struct GateRun {
  int exit_code = -1;
  std::string out;  // stdout: the answer
  std::string err;  // stderr: progress while waiting
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class GateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    kubeconfig_ = Env("ALLOCGUARD_TEST_KUBECONFIG");
    const std::string kubectl = Env("ALLOCGUARD_TEST_KUBECTL");
    if (kubeconfig_.empty()) return;  // no control plane: the tests skip
    // From here on a failure fails every test with what went wrong: a
    // control plane that is there but cannot be set up is not a skip.
    if (kubectl.empty()) {
      setup_error_ = "ALLOCGUARD_TEST_KUBECTL unset";
      return;
    }
    auto config = kube::LoadKubeconfig({kubeconfig_, "", "", ""});
    if (!config.ok()) {
      setup_error_ = "kubeconfig: " + config.status().ToString();
      return;
    }
    auto client = kube::Client::Create(*config);
    if (!client.ok()) {
      setup_error_ = "client: " + client.status().ToString();
      return;
    }
    client_ = std::move(*client).release();
    ns_ = "gate-" + RandomSuffix();
    (void)client_->Create(kube::Namespaces(), "", {{"metadata", {{"name", ns_}}}});
    const std::string apply = kubectl + " --kubeconfig " + kubeconfig_ + " apply -f " +
                              ALLOCGUARD_SOURCE_DIR + "/crds/ >/dev/null 2>&1";
    if (std::system(apply.c_str()) != 0) {
      setup_error_ = "kubectl apply -f crds/ failed";
      return;
    }
    // The CRDs take a moment to be served.
    const json policy = {
        {"apiVersion", "allocguard.io/v1alpha1"},
        {"kind", "AllocatorPolicy"},
        {"metadata", {{"name", "gated"}, {"namespace", ns_}}},
        {"spec",
         {{"selector", {{"matchLabels", {{"gated", "true"}}}}},
          {"allocator", {{"name", "jemalloc"}}},
          {"rollout", {{"mode", "Enforce"}}},
          {"canary",
           {{"duration", "10m"},
            {"load",
             {{"port", 8080}, {"rate", 20}, {"requests", {{{"name", "get"}, {"path", "/"}}}}}},
            {"variants", {{{"name", "glibc"}, {"allocator", {{"name", "glibc"}}}}}}}}}}};
    const bool created = kube::testing::Eventually(
        [&] {
          auto p = client_->Create(kube::AllocatorPolicies(), ns_, policy);
          return p.ok() || p.error().IsAlreadyExists();
        },
        std::chrono::seconds(30), std::chrono::milliseconds(200));
    if (!created) {
      setup_error_ = "the AllocatorPolicy could not be created within 30 s";
      return;
    }
    auto stored = client_->Get(kube::AllocatorPolicies(), ns_, "gated");
    if (!stored.ok()) {
      setup_error_ = "reading the policy back: " + stored.status().ToString();
      return;
    }
    auto parsed = api::ParseAllocatorPolicy(*stored);
    if (!parsed.ok()) {
      setup_error_ = "parsing the stored policy: " + parsed.status().ToString();
      return;
    }
    policy_ = new api::AllocatorPolicy(*parsed);
  }

  static void TearDownTestSuite() {
    if (client_ != nullptr) (void)client_->Delete(kube::Namespaces(), "", ns_);
  }

  void SetUp() override {
    if (kubeconfig_.empty()) GTEST_SKIP() << "no control plane (run e2e/cluster/up.sh)";
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    ASSERT_NE(policy_, nullptr);
  }

  // Creates a Deployment; governed ones carry the policy's label. Returns it
  // as stored (with the server's defaults, which the template hash covers).
  // Each has an image of its own: Deployments whose templates differ only in
  // labels would share one canary, and each test gives its own a verdict.
  static json CreateDeployment(const std::string& name, bool governed) {
    json labels = {{"app", name}};
    if (governed) labels["gated"] = "true";
    json d = {{"apiVersion", "apps/v1"},
              {"kind", "Deployment"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec",
               {{"replicas", 1},
                {"selector", {{"matchLabels", {{"app", name}}}}},
                {"template",
                 {{"metadata", {{"labels", labels}}},
                  {"spec", {{"containers", {{{"name", "server"}, {"image", name + ":2"}}}}}}}}}}};
    auto created = client_->Create(kube::Deployments(), ns_, d);
    EXPECT_TRUE(created.ok()) << created.error().ToString();
    return created.ok() ? *created : json();
  }

  static std::string Hash(const json& deployment) {
    return admission::TemplateHash(deployment["spec"]["template"]);
  }

  // What the webhook does to a changed template under Enforce: pause it and
  // record the candidate; or what the operator does when it releases one.
  static void MarkHeld(const json& deployment) {
    json patch = {
        {"metadata", {{"annotations", {{api::kHeldCandidateAnnotation, Hash(deployment)}}}}},
        {"spec", {{"paused", true}}}};
    auto r = client_->Patch(kube::Deployments(), ns_, deployment["metadata"]["name"],
                            kube::PatchType::kMerge, patch);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }
  static void MarkReleased(const json& deployment) {
    json patch = {
        {"metadata", {{"annotations", {{api::kReleasedCandidateAnnotation, Hash(deployment)}}}}}};
    auto r = client_->Patch(kube::Deployments(), ns_, deployment["metadata"]["name"],
                            kube::PatchType::kMerge, patch);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }

  // The rollout reconciler's canary for the Deployment's template, with the
  // status the canary reconciler writes.
  static std::string CreateCanary(const json& deployment, const json& status) {
    json canary = controllers::BuildReplayCanary(deployment, *policy_);
    auto created = client_->Create(kube::ReplayCanaries(), ns_, canary);
    EXPECT_TRUE(created.ok()) << created.error().ToString();
    if (!created.ok()) return "";
    SetCanaryStatus(*created, status);
    return canary["metadata"]["name"];
  }
  static void SetCanaryStatus(const std::string& name, const json& status) {
    auto current = client_->Get(kube::ReplayCanaries(), ns_, name);
    ASSERT_TRUE(current.ok()) << current.error().ToString();
    SetCanaryStatus(*current, status);
  }
  static void SetCanaryStatus(json canary, const json& status) {
    canary["status"] = status;
    auto r = client_->UpdateStatus(kube::ReplayCanaries(), canary);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
  }

  static json Finished(const std::string& verdict) {
    return {{"phase", "Completed"},
            {"verdict", verdict},
            {"floorSlope", verdict == "Flat" ? "+0.01 GiB/h" : "+2.40 GiB/h"},
            {"explanation", "the test's " + verdict + " explanation"},
            {"flatVariant", "glibc"}};
  }

  // Runs the real binary the way a CI job would.
  GateRun Gate(const std::string& args) {
    const std::string dir = std::filesystem::temp_directory_path() / ("ag-gate-" + RandomSuffix());
    std::filesystem::create_directories(dir);
    const std::string command = std::string(ALLOCGUARD_BINARY) + " gate --kubeconfig " +
                                kubeconfig_ + " -n " + ns_ + " --poll-interval 200ms " + args +
                                " >" + dir + "/out 2>" + dir + "/err";
    GateRun r;
    const int status = std::system(command.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadAll(dir + "/out");
    r.err = ReadAll(dir + "/err");
    std::filesystem::remove_all(dir);
    return r;
  }

  static json Json(const GateRun& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  static inline std::string kubeconfig_;
  static inline std::string ns_;
  static inline kube::Client* client_ = nullptr;
  static inline api::AllocatorPolicy* policy_ = nullptr;
  static inline std::string setup_error_;
};

TEST_F(GateTest, HeldDeploymentWhoseCanaryRatchetedExits2) {
  json d = CreateDeployment("held", true);
  MarkHeld(d);
  const std::string canary = CreateCanary(d, Finished("Ratchet"));
  GateRun text = Gate("deployment/held --timeout 30s");
  EXPECT_EQ(text.exit_code, 2) << text.out << text.err;
  EXPECT_EQ(text.out.rfind("deployment/held Held CanaryNotFlat: ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("found Ratchet (floor slope +2.40 GiB/h)"), std::string::npos);
  EXPECT_NE(text.out.find(api::kOverrideHoldAnnotation), std::string::npos)
      << "says how to override";
  EXPECT_EQ(std::count(text.out.begin(), text.out.end(), '\n'), 1) << "one line";

  GateRun j = Gate("held -o json --timeout 30s");
  EXPECT_EQ(j.exit_code, 2);
  json answer = Json(j);
  EXPECT_EQ(answer["state"], "Held");
  EXPECT_EQ(answer["exitCode"], 2);
  EXPECT_EQ(answer["verdict"], "Ratchet");
  EXPECT_EQ(answer["canary"], canary);
  EXPECT_EQ(answer["templateHash"], Hash(d));
  EXPECT_EQ(answer["policy"], "gated");
  EXPECT_EQ(answer["target"], "deployment/held");

  // The ReplayCanary itself gives the same answer.
  GateRun direct = Gate("replaycanary/" + canary + " --timeout 30s");
  EXPECT_EQ(direct.exit_code, 2) << direct.out;
}

TEST_F(GateTest, ReleasedDeploymentProceeds) {
  json d = CreateDeployment("released", true);
  CreateCanary(d, Finished("Flat"));
  MarkReleased(d);
  GateRun r = Gate("deployment/released -o json --timeout 30s");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json answer = Json(r);
  EXPECT_EQ(answer["state"], "Proceed");
  EXPECT_EQ(answer["reason"], "Released");
  EXPECT_EQ(answer["verdict"], "Flat");
}

TEST_F(GateTest, FailedCanaryExits3) {
  json d = CreateDeployment("failed", true);
  MarkHeld(d);
  CreateCanary(d, {{"phase", "Completed"},
                   {"verdict", "Failed"},
                   {"explanation", "candidate: the workload exited with code 1"}});
  GateRun r = Gate("deployment/failed --timeout 30s");
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("Failed CanaryFailed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with code 1"), std::string::npos) << r.out;
}

TEST_F(GateTest, RunningCanaryTimesOutWith4) {
  json d = CreateDeployment("slow", true);
  MarkHeld(d);
  CreateCanary(d, {{"phase", "Running"}});
  GateRun r = Gate("deployment/slow -o json --timeout 1s");
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  json answer = Json(r);
  EXPECT_EQ(answer["state"], "TimedOut");
  EXPECT_EQ(answer["reason"], "CanaryRunning");
  EXPECT_NE(r.err.find("Waiting CanaryRunning"), std::string::npos) << "progress on stderr";
}

TEST_F(GateTest, WaitsUntilTheVerdictArrives) {
  json d = CreateDeployment("waits", true);
  MarkHeld(d);
  const std::string canary = CreateCanary(d, {{"phase", "Running"}});
  // The gate runs in the background; once it reports that it waits, the
  // canary finishes and the gate must answer with its verdict.
  const std::string dir = std::filesystem::temp_directory_path() / ("ag-gate-" + RandomSuffix());
  std::filesystem::create_directories(dir);
  int exit_code = -1;
  std::thread gate([&] {
    const std::string command =
        std::string(ALLOCGUARD_BINARY) + " gate --kubeconfig " + kubeconfig_ + " -n " + ns_ +
        " --poll-interval 200ms --timeout 120s deployment/waits >" + dir + "/out 2>" + dir + "/err";
    const int status = std::system(command.c_str());
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  });
  const bool waiting = kube::testing::Eventually(
      [&] { return ReadAll(dir + "/err").find("Waiting CanaryRunning") != std::string::npos; },
      std::chrono::seconds(60), std::chrono::milliseconds(100));
  EXPECT_TRUE(waiting) << ReadAll(dir + "/err");
  SetCanaryStatus(canary, Finished("Ratchet"));
  gate.join();
  EXPECT_EQ(exit_code, 2) << ReadAll(dir + "/out") << ReadAll(dir + "/err");
  EXPECT_NE(ReadAll(dir + "/out").find("Held CanaryNotFlat"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_F(GateTest, UngovernedDeploymentProceedsAndSaysSo) {
  CreateDeployment("free", false);
  GateRun r = Gate("deployment/free --timeout 30s");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Proceed Ungoverned"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does not gate"), std::string::npos) << r.out;
}

TEST_F(GateTest, MissingObjectsExit5) {
  GateRun d = Gate("deployment/nope --timeout 30s");
  EXPECT_EQ(d.exit_code, 5) << d.out << d.err;
  EXPECT_NE(d.out.find("NotFound"), std::string::npos);
  GateRun c = Gate("replaycanary/nope -o json --timeout 30s");
  EXPECT_EQ(c.exit_code, 5) << c.out << c.err;
  EXPECT_EQ(Json(c)["state"], "NotFound");
}

TEST_F(GateTest, BadTargetIsAUsageError) {
  GateRun r = Gate("pod/web");
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("unknown kind"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace allocguard
