#pragma once

// Which reconcile keys of which controller an object's change concerns: the
// maps the operator's Manager routes informer events through (Watches).
// Pure functions of the object and the caches they read; the keys are
// "namespace/name".
//
//   AllocatorPolicy   its policy; the rollout of every Deployment,
//                     StatefulSet and DaemonSet in its namespace (their gate
//                     may change)
//   ReplayCanary      its canary; the rollout of its target (the rollout
//                     controller of the target's kind) and of every
//                     workload of that kind in its namespace whose template
//                     measures as spec.templateHash (the workloads a shared
//                     canary serves: controllers::kMeasuredTemplateIndex);
//                     the policy of its allocguard.io/policy label
//   Deployment        its rollout; every policy in its namespace
//   StatefulSet,      the rollout of its kind; every policy in its namespace
//   DaemonSet
//   Pod (canary)      the canary of its allocguard.io/canary label
//   Pod (other)       its drift check; every policy in its namespace
//   canary Job        the canary of its allocguard.io/canary label
//
// On gaining leadership every policy and canary is mapped as above, and
// every Pod that is not a canary's to its drift check only.

#include <vector>

#include <nlohmann/json.hpp>

#include "operator/kube/informer.h"
#include "operator/manager/runnable_manager.h"

namespace allocguard::manager {

// The controllers' names (controllers::Reconciler::name()).
inline constexpr char kPolicyController[] = "policy";
inline constexpr char kCanaryController[] = "canary";
inline constexpr char kRolloutController[] = "rollout";
inline constexpr char kDriftController[] = "drift";
// The StatefulSets' and DaemonSets' rollouts: controllers::RolloutControllerName.

// deployments and policies need the namespace index
// (controllers::AddNamespaceIndex), the workload stores the measured
// template index (controllers::AddMeasuredTemplateIndex).
// statefulsets and daemonsets may be null (not watched).
std::vector<ReconcileRequest> PolicyEventRequests(const nlohmann::json& policy,
                                                  const kube::Store& deployments,
                                                  const kube::Store* statefulsets = nullptr,
                                                  const kube::Store* daemonsets = nullptr);
// The stores may be null (no workloads of that kind routed beyond the
// target); they need controllers::AddMeasuredTemplateIndex.
std::vector<ReconcileRequest> CanaryEventRequests(const nlohmann::json& canary,
                                                  const kube::Store* deployments = nullptr,
                                                  const kube::Store* statefulsets = nullptr,
                                                  const kube::Store* daemonsets = nullptr);
std::vector<ReconcileRequest> DeploymentEventRequests(const nlohmann::json& deployment,
                                                      const kube::Store& policies);
// A StatefulSet's (kind "StatefulSet") or a DaemonSet's change.
std::vector<ReconcileRequest> WorkloadEventRequests(const char* rollout_controller,
                                                    const nlohmann::json& workload,
                                                    const kube::Store& policies);
std::vector<ReconcileRequest> PodEventRequests(const nlohmann::json& pod,
                                               const kube::Store& policies);
std::vector<ReconcileRequest> CanaryJobEventRequests(const nlohmann::json& job);
std::vector<ReconcileRequest> PodLeadingRequests(const nlohmann::json& pod);

struct WatchedStores {
  kube::Store* policies = nullptr;
  kube::Store* canaries = nullptr;
  kube::Store* deployments = nullptr;
  kube::Store* pods = nullptr;
  kube::Store* jobs = nullptr;          // allocguard's canary Jobs only
  kube::Store* statefulsets = nullptr;  // may be null: not watched
  kube::Store* daemonsets = nullptr;    // may be null: not watched
};

// Registers the maps above on manager, for the stores given.
void AddEventRouting(Manager& manager, const WatchedStores& stores);

}  // namespace allocguard::manager
