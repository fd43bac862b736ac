#pragma once

// The status of an AllocatorPolicy, computed from what it governs: a pure
// function, so the policy reconciler only lists objects and writes the result.
//
// Conditions (each with observedGeneration; lastTransitionTime changes only
// when the condition's status does):
//   Ready           True once the policy is accepted, with what it governs.
//   CanaryPassed    the latest finished canary: True when Flat.
//   RolloutBlocked  True while a governed workload is held by a finished,
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

#include "controllers/injection_breaker.h"
#include "operator/api/policy_status.h"
#include "operator/api/types.h"
#include "operator/api/workloads.h"

namespace allocguard::controllers {

// What the policy reconciler read, parsed at the edge.
struct PolicyInput {
  api::AllocatorPolicy policy;
  api::AllocatorPolicyStatus status;                // current .status
  std::vector<api::DeploymentSummary> deployments;  // in the policy's namespace
  // The StatefulSets and DaemonSets of the namespace, as
  // api::ParseDeploymentSummary reads any of the three kinds.
  std::vector<api::DeploymentSummary> statefulsets;
  std::vector<api::DeploymentSummary> daemonsets;
  std::vector<api::PodSummary> pods;               // in the policy's namespace
  std::vector<api::ReplayCanarySummary> canaries;  // labelled with the policy's name
  std::string operator_namespace;
  std::string now_rfc3339;
  std::set<std::string> deleted_pod_uids;  // pods the circuit breaker already deleted
};

struct DriftedPod {
  std::string pod;
  std::string reason;
};

struct PolicyActions {
  api::AllocatorPolicyStatus status;
  bool status_changed = false;    // status differs from PolicyInput::status
  std::vector<DriftedPod> drift;  // for events on the pods
  // Circuit breaker: templates suspended now (Warning events InjectionFailing
  // on the policy and the workload), and failing pods to delete after the
  // status is written (a Warning event on each).
  std::vector<SuspendedTemplate> injection_failing;
  std::vector<PodDeletion> delete_pods;
};

// Governed Pods that run without allocguard's injection: not in kube-system
// or the operator's namespace, not terminating or finished, not a canary's,
// selected by the policy, not opted out (allocguard.io/inject=false), and
// neither injected nor kept uninjected by the circuit breaker.
std::vector<DriftedPod> FindInjectionDrift(const api::AllocatorPolicy& policy,
                                           const std::vector<api::PodSummary>& pods,
                                           const std::string& operator_namespace);

// The whole status, as the rules below compute it in this order:
//   1. observedGeneration: the policy's generation;
//   2. governed, governedCount: Deployments, StatefulSets and DaemonSets
//      (in that order, each by name) whose template labels match the
//      selector (at most 50 listed, all counted); held ones are blocked
//      (their canary ended) or waiting, and named in the conditions as
//      `allocguard gate` takes them ("web", "statefulset/db");
//   3. verdicts, lastVerdict: finished canaries, newest first (at most 50);
//   4. injectionDrift: FindInjectionDrift (at most 50 listed);
//   5. injectionSuspended: DecideInjectionBreaker;
//   6. the conditions Ready, CanaryPassed, RolloutBlocked, InjectionDrift,
//      InjectionFailing (see the top of this file).
PolicyActions DecidePolicyStatus(const PolicyInput& input);

// The status of a policy whose spec does not parse (stored before the schema
// refused it, or written around it): `current` with observedGeneration set
// to `generation` and Ready False, reason InvalidSpec, saying `error`.
api::AllocatorPolicyStatus InvalidPolicyStatus(const api::AllocatorPolicyStatus& current,
                                               int64_t generation, const std::string& error,
                                               const std::string& now_rfc3339);

}  // namespace allocguard::controllers
