#pragma once

// The status of an AllocatorPolicy, computed from what it governs: a pure
// function, so the policy reconciler only lists objects and writes the result.
//
// Conditions (each with observedGeneration; lastTransitionTime changes only
// when the condition's status does):
//   Ready           True once the policy is accepted, with what it governs.
//   CanaryPassed    the latest finished canary: True when Flat.
//   RolloutBlocked  True while a governed Deployment is held by a finished,
//                   non-Flat canary; the message names the flat variant.
//   InjectionDrift  True while governed Pods run without the injection
//                   (created while the webhook was down, or before the policy).
//                   Pods the circuit breaker kept uninjected are not drift.
//   InjectionFailing True while the circuit breaker suspends injection for a
//                   pod template whose pods failed to start with the
//                   allocator (status.injectionSuspended; injection_breaker.h);
//                   the message names the workloads and the loader's words.

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/injection_breaker.h"
#include "operator/api/types.h"

namespace allocguard::controllers {

struct PolicyInput {
  api::AllocatorPolicy policy;
  nlohmann::json status;                    // current .status (may be null)
  std::vector<nlohmann::json> deployments;  // in the policy's namespace
  std::vector<nlohmann::json> pods;         // in the policy's namespace
  std::vector<nlohmann::json> canaries;     // labelled with the policy's name
  std::string operator_namespace;
  std::string now_rfc3339;
  std::set<std::string> deleted_pod_uids;  // pods the circuit breaker already deleted
};

struct DriftedPod {
  std::string pod;
  std::string reason;
};

struct PolicyActions {
  nlohmann::json status;
  bool status_changed = false;
  std::vector<DriftedPod> drift;  // for events on the pods
  // Circuit breaker: templates suspended now (Warning events InjectionFailing
  // on the policy and the Deployment), and failing pods to delete after the
  // status is written (a Warning event on each).
  std::vector<SuspendedTemplate> injection_failing;
  std::vector<PodDeletion> delete_pods;
};

// Governed Pods that run without allocguard's injection.
std::vector<DriftedPod> FindInjectionDrift(const api::AllocatorPolicy& policy,
                                           const std::vector<nlohmann::json>& pods,
                                           const std::string& operator_namespace);

PolicyActions DecidePolicyStatus(const PolicyInput& input);

// Sets or updates one condition in a conditions array (metav1.Condition
// shape), keeping lastTransitionTime when the status is unchanged.
void SetCondition(nlohmann::json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, int64_t generation,
                  const std::string& now_rfc3339);

}  // namespace allocguard::controllers
