#include "operator/manager/event_routing.h"

#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/api/names.h"
#include "operator/kube/object.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).
const auto& Field = kube::FieldOrNull;
const auto& Str = kube::StringField;

std::map<std::string, std::string> Labels(const json& object) {
  return kube::StringMap(Field(Field(object, "metadata"), "labels"));
}

std::string Namespace(const json& object) { return Str(Field(object, "metadata"), "namespace"); }

void AddInNamespace(const char* controller, const kube::Store& store, const std::string& ns,
                    std::vector<ReconcileRequest>& out) {
  for (std::string& key : store.KeysByIndex(controllers::kNamespaceIndex, ns)) {
    out.push_back({controller, std::move(key)});
  }
}

}  // namespace

std::vector<ReconcileRequest> PolicyEventRequests(const json& policy,
                                                  const kube::Store& deployments,
                                                  const kube::Store* statefulsets,
                                                  const kube::Store* daemonsets) {
  std::vector<ReconcileRequest> out = {{kPolicyController, kube::ObjectKey(policy)}};
  AddInNamespace(kRolloutController, deployments, Namespace(policy), out);
  if (statefulsets != nullptr) {
    AddInNamespace(controllers::RolloutControllerName(controllers::WorkloadKind::kStatefulSet),
                   *statefulsets, Namespace(policy), out);
  }
  if (daemonsets != nullptr) {
    AddInNamespace(controllers::RolloutControllerName(controllers::WorkloadKind::kDaemonSet),
                   *daemonsets, Namespace(policy), out);
  }
  return out;
}

std::vector<ReconcileRequest> CanaryEventRequests(const json& canary,
                                                  const kube::Store* deployments,
                                                  const kube::Store* statefulsets,
                                                  const kube::Store* daemonsets) {
  std::vector<ReconcileRequest> out = {{kCanaryController, kube::ObjectKey(canary)}};
  const json& target_ref = Field(Field(canary, "spec"), "target");
  const std::string target = Str(target_ref, "name");
  const std::string kind_name = Str(target_ref, "kind");
  const std::optional<controllers::WorkloadKind> kind =
      kind_name.empty() ? controllers::WorkloadKind::kDeployment
                        : controllers::WorkloadKindFromName(kind_name);
  if (!target.empty() && kind.has_value()) {
    out.push_back({controllers::RolloutControllerName(*kind), Namespace(canary) + "/" + target});
  }
  // Every workload the canary serves: its verdict is theirs too.
  const std::string measured = Str(Field(canary, "spec"), "templateHash");
  const kube::Store* workloads = !kind.has_value()                                  ? nullptr
                                 : *kind == controllers::WorkloadKind::kDeployment  ? deployments
                                 : *kind == controllers::WorkloadKind::kStatefulSet ? statefulsets
                                                                                    : daemonsets;
  if (workloads != nullptr && !measured.empty()) {
    // Keys only: the workload caches are packed, and ByIndex would decode
    // every workload of the template (a thousand, for a template stamped
    // per tenant) on every change of the canary.
    const std::string target_key = Namespace(canary) + "/" + target;
    for (std::string& key : workloads->KeysByIndex(controllers::kMeasuredTemplateIndex,
                                                   Namespace(canary) + "/" + measured)) {
      if (key != target_key) {
        out.push_back({controllers::RolloutControllerName(*kind), std::move(key)});
      }
    }
  }
  auto labels = Labels(canary);
  auto policy = labels.find(controllers::kPolicyLabel);
  if (policy != labels.end()) {
    out.push_back({kPolicyController, Namespace(canary) + "/" + policy->second});
  }
  return out;
}

std::vector<ReconcileRequest> DeploymentEventRequests(const json& deployment,
                                                      const kube::Store& policies) {
  std::vector<ReconcileRequest> out = {{kRolloutController, kube::ObjectKey(deployment)}};
  AddInNamespace(kPolicyController, policies, Namespace(deployment), out);
  return out;
}

std::vector<ReconcileRequest> WorkloadEventRequests(const char* rollout_controller,
                                                    const json& workload,
                                                    const kube::Store& policies) {
  std::vector<ReconcileRequest> out = {{rollout_controller, kube::ObjectKey(workload)}};
  AddInNamespace(kPolicyController, policies, Namespace(workload), out);
  return out;
}

std::vector<ReconcileRequest> CanaryJobEventRequests(const json& job) {
  auto labels = Labels(job);
  auto canary = labels.find(api::kCanaryLabel);
  if (canary == labels.end()) return {};
  return {{kCanaryController, Namespace(job) + "/" + canary->second}};
}

std::vector<ReconcileRequest> PodEventRequests(const json& pod, const kube::Store& policies) {
  if (Labels(pod).contains(api::kCanaryLabel)) return CanaryJobEventRequests(pod);
  std::vector<ReconcileRequest> out = {{kDriftController, kube::ObjectKey(pod)}};
  AddInNamespace(kPolicyController, policies, Namespace(pod), out);
  return out;
}

std::vector<ReconcileRequest> PodLeadingRequests(const json& pod) {
  if (Labels(pod).contains(api::kCanaryLabel)) return {};
  return {{kDriftController, kube::ObjectKey(pod)}};
}

void AddEventRouting(Manager& manager, const WatchedStores& stores) {
  const kube::Store* deployments = stores.deployments;
  const kube::Store* statefulsets = stores.statefulsets;
  const kube::Store* daemonsets = stores.daemonsets;
  const kube::Store* policies = stores.policies;
  auto policy_map = [deployments, statefulsets, daemonsets](const json& p) {
    return PolicyEventRequests(p, *deployments, statefulsets, daemonsets);
  };
  manager.Watches(stores.policies, policy_map, policy_map);
  auto canary_map = [deployments, statefulsets, daemonsets](const json& c) {
    return CanaryEventRequests(c, deployments, statefulsets, daemonsets);
  };
  manager.Watches(stores.canaries, canary_map, canary_map);
  manager.Watches(stores.deployments,
                  [policies](const json& d) { return DeploymentEventRequests(d, *policies); });
  manager.Watches(
      stores.pods, [policies](const json& p) { return PodEventRequests(p, *policies); },
      PodLeadingRequests);
  manager.Watches(stores.jobs, CanaryJobEventRequests);
  for (auto [store, kind] :
       {std::pair{stores.statefulsets, controllers::WorkloadKind::kStatefulSet},
        std::pair{stores.daemonsets, controllers::WorkloadKind::kDaemonSet}}) {
    if (store == nullptr) continue;
    const char* controller = controllers::RolloutControllerName(kind);
    manager.Watches(store, [policies, controller](const json& w) {
      return WorkloadEventRequests(controller, w, *policies);
    });
  }
}

}  // namespace allocguard::manager
