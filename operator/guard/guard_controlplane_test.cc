// The guard against a real kube-apiserver (e2e/cluster/up.sh; no kubelet):
// a Pod created through the API, the guard writing its readiness-gate and
// allocator conditions and its events with a service account that holds only
// the Role docs/guard.md asks for. Skipped without ALLOCGUARD_TEST_KUBECONFIG.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "operator/guard/guard.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/testing/controlplane_support.h"

namespace allocguard::guard {
namespace {

using kube::testing::Env;
using kube::testing::Eventually;
using kube::testing::RandomSuffix;
using ::testing::HasSubstr;

kube::ResourceType ServiceAccounts() {
  return {"", "v1", "serviceaccounts", "ServiceAccount", true};
}
kube::ResourceType Roles() { return {"rbac.authorization.k8s.io", "v1", "roles", "Role", true}; }
kube::ResourceType RoleBindings() {
  return {"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true};
}

// A workload whose anon memory follows a script (MiB per sample); the last
// value repeats. The API side is what this test is about.
class ScriptedSource final : public WorkloadSource {
 public:
  void Push(int64_t mib) { script_.push_back(mib); }
  Result<WorkloadReading> Read() override {
    WorkloadReading r;
    r.pids = r.main_pids = {4242};
    if (!script_.empty()) {
      last_ = script_.front();
      script_.pop_front();
    }
    r.sample.anon_bytes = last_ << 20;
    return r;
  }
  AllocatorObservation ObserveAllocator(pid_t pid) override {
    AllocatorObservation o;
    o.pid = pid;
    o.not_loaded_reason = "static binary: no shared libraries are mapped";
    return o;
  }
  Status Terminate(pid_t) override { return Status::Ok(); }

 private:
  std::deque<int64_t> script_;
  int64_t last_ = 0;
};

// The Role the guard's service account needs (docs/guard.md), nothing more.
kube::Object GuardRole() {
  return {{"metadata", {{"name", "allocguard-guard"}}},
          {"rules",
           {{{"apiGroups", {""}}, {"resources", {"pods/status"}}, {"verbs", {"patch"}}},
            {{"apiGroups", {"events.k8s.io"}},
             {"resources", {"events"}},
             {"verbs", {"create", "patch"}}}}}};
}

class GuardControlPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string kubeconfig = Env("ALLOCGUARD_TEST_KUBECONFIG");
    if (kubeconfig.empty()) GTEST_SKIP() << "no control plane: ALLOCGUARD_TEST_KUBECONFIG unset";
    auto config = kube::LoadKubeconfig({kubeconfig, "", "", ""});
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto admin = kube::Client::Create(*config);
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    admin_ = std::move(*admin);
    ns_ = "guard-" + RandomSuffix();
    ASSERT_TRUE(admin_->Create(kube::Namespaces(), "", {{"metadata", {{"name", ns_}}}}).ok());
    ASSERT_TRUE(admin_->Create(ServiceAccounts(), ns_, {{"metadata", {{"name", "web"}}}}).ok());
    auto role = admin_->Create(Roles(), ns_, GuardRole());
    ASSERT_TRUE(role.ok()) << role.status().ToString();
    ASSERT_TRUE(
        admin_
            ->Create(
                RoleBindings(), ns_,
                {{"metadata", {{"name", "allocguard-guard"}}},
                 {"roleRef",
                  {{"apiGroup", "rbac.authorization.k8s.io"},
                   {"kind", "Role"},
                   {"name", "allocguard-guard"}}},
                 {"subjects", {{{"kind", "ServiceAccount"}, {"name", "web"}, {"namespace", ns_}}}}})
            .ok());
    // The pod as the injection webhook leaves it: a readiness gate for the guard.
    auto pod =
        admin_->Create(kube::Pods(), ns_,
                       {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", "web-0"}}},
                        {"spec",
                         {{"serviceAccountName", "web"},
                          {"readinessGates", {{{"conditionType", api::kMemoryHeadroomCondition}}}},
                          {"containers", {{{"name", "app"}, {"image", "web:1"}}}}}}});
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    pod_uid_ = (*pod)["metadata"]["uid"].get<std::string>();

    // The guard talks with the pod's service account token, as in a pod.
    auto token = admin_->Create({"", "v1", "serviceaccounts/web/token", "TokenRequest", true}, ns_,
                                {{"apiVersion", "authentication.k8s.io/v1"},
                                 {"kind", "TokenRequest"},
                                 {"spec", {{"expirationSeconds", 3600}}}});
    ASSERT_TRUE(token.ok()) << token.status().ToString();
    kube::RestConfig as_pod;
    as_pod.server = config->server;
    as_pod.tls.ca_pem = config->tls.ca_pem;
    as_pod.tls.ca_file = config->tls.ca_file;
    as_pod.token = (*token)["status"]["token"].get<std::string>();
    auto client = kube::Client::Create(as_pod);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    guard_client_ = std::move(*client);
  }
  void TearDown() override {
    if (admin_) (void)admin_->Delete(kube::Namespaces(), "", ns_);
  }

  // The pod's condition of `type` as the API server stores it; null when absent.
  kube::Object Condition(const std::string& type) {
    auto pod = admin_->Get(kube::Pods(), ns_, "web-0");
    if (!pod.ok()) return nullptr;
    for (const auto& c : (*pod)["status"].value("conditions", kube::Object::array())) {
      if (c.value("type", "") == type) return c;
    }
    return nullptr;
  }
  bool ConditionIs(const std::string& type, const std::string& status) {
    kube::Object c = Condition(type);
    return c.is_object() && c.value("status", "") == status;
  }

  std::unique_ptr<kube::Client> admin_;
  std::unique_ptr<kube::Client> guard_client_;
  std::string ns_;
  std::string pod_uid_;
};

TEST_F(GuardControlPlaneTest, BackpressureFlipsTheReadinessGateAndAllocatorMismatchIsReported) {
  kube::EventRecorderOptions event_options;
  event_options.reporting_controller = "allocguard.io/guard";
  event_options.reporting_instance = "web-0";
  kube::EventRecorder events(guard_client_.get(), event_options);
  std::vector<std::string> failures;
  std::mutex failures_mu;
  AsyncReporterOptions reporter_options;
  reporter_options.log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(failures_mu);
    failures.push_back(l);
  };
  AsyncReporter reporter(NewKubePodReporter(guard_client_.get(), &events, ns_, "web-0", pod_uid_),
                         reporter_options);
  ScriptedSource source;
  GuardOptions options;
  options.action = GuardAction::kBackpressure;
  options.threshold_bytes = 1LL << 30;
  options.expected_allocator = replay::Allocator::kJemalloc;
  FakeClock clock;
  Guard guard(options, &source, &reporter, nullptr, &clock, nullptr);

  source.Push(500);
  guard.Step();
  ASSERT_TRUE(Eventually([&] { return ConditionIs(api::kMemoryHeadroomCondition, "True"); }))
      << ::testing::PrintToString(failures);
  // A static binary ignored the preload: a condition and a Warning event.
  ASSERT_TRUE(Eventually([&] { return ConditionIs(api::kAllocatorLoadedCondition, "False"); }));
  EXPECT_EQ(Condition(api::kAllocatorLoadedCondition)["reason"], "AllocatorNotLoaded");

  source.Push(1500);  // over the 1 GiB threshold
  guard.Step();
  ASSERT_TRUE(Eventually([&] { return ConditionIs(api::kMemoryHeadroomCondition, "False"); }));
  kube::Object closed = Condition(api::kMemoryHeadroomCondition);
  EXPECT_EQ(closed["reason"], "AboveThreshold");
  EXPECT_THAT(closed["message"].get<std::string>(),
              HasSubstr("1500 MiB exceeds the guard threshold 1024 MiB"));
  // The allocator condition written before is still there: a patch, not a replace.
  EXPECT_TRUE(ConditionIs(api::kAllocatorLoadedCondition, "False"));

  // Hysteresis: 950 MiB is under the threshold but above 90 % of it.
  for (int64_t mib : {950, 900, 900, 900}) {
    source.Push(mib);
    guard.Step();
    clock.Advance(std::chrono::seconds(2));
    if (mib == 950) {
      // Nothing to wait for: assert on the guard's own state.
      EXPECT_FALSE(guard.Snapshot().gate_open);
    }
  }
  ASSERT_TRUE(Eventually([&] { return ConditionIs(api::kMemoryHeadroomCondition, "True"); }));
  EXPECT_EQ(Condition(api::kMemoryHeadroomCondition)["reason"], "BelowThreshold");

  // Events, about this pod, from the guard.
  std::set<std::string> reasons;
  ASSERT_TRUE(Eventually([&] {
    auto list = admin_->List(kube::EventsV1(), ns_);
    if (!list.ok()) return false;
    reasons.clear();
    for (const auto& e : list->items) {
      if (e["regarding"].value("uid", "") == pod_uid_) reasons.insert(e.value("reason", ""));
    }
    return reasons.contains("MemoryBackpressure") &&
           reasons.contains("MemoryBackpressureReleased") && reasons.contains("AllocatorNotLoaded");
  })) << ::testing::PrintToString(reasons);
  std::lock_guard<std::mutex> lock(failures_mu);
  EXPECT_THAT(failures, ::testing::IsEmpty());
}

TEST_F(GuardControlPlaneTest, TheGuardsRoleGrantsNothingElse) {
  // Not the pod itself, not its spec, not other pods' existence.
  auto get = guard_client_->Get(kube::Pods(), ns_, "web-0");
  ASSERT_FALSE(get.ok());
  EXPECT_EQ(get.error().code, 403);
  auto patch_spec = guard_client_->Patch(kube::Pods(), ns_, "web-0", kube::PatchType::kMerge,
                                         {{"metadata", {{"labels", {{"x", "y"}}}}}});
  ASSERT_FALSE(patch_spec.ok());
  EXPECT_EQ(patch_spec.error().code, 403);
  auto del = guard_client_->Delete(kube::Pods(), ns_, "web-0");
  ASSERT_FALSE(del.ok());
  EXPECT_EQ(del.error().code, 403);
}

}  // namespace
}  // namespace allocguard::guard
