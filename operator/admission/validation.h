#pragma once

// The validating webhook's decisions: manual unpausing of held Deployments,
// and what CEL in the CRD cannot check about an AllocatorPolicy. Pure.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/deployment.h"
#include "operator/api/types.h"

namespace allocguard::admission {

struct ValidationDecision {
  bool allowed = true;
  // Why it was refused, for the user's terminal (names the field); empty when allowed.
  std::string message;
  // When non-empty, the shell records an event on the object with this text
  // (an override of a hold is allowed but never silent).
  std::string event_reason;
  // When non-empty, the update lifts a hold (this says how, for the denial
  // and the event) and is allowed only to a requester that a
  // SubjectAccessReview finds allowed the `override` verb on
  // allocatorpolicies.allocguard.io in the namespace (kOverrideVerb).
  std::string needs_override;
};

// The verb, on allocatorpolicies.allocguard.io in a namespace, that lifting
// a hold there needs. The chart's allocguard-override ClusterRole grants it
// and is aggregated into `admin` only.
inline constexpr char kOverrideVerb[] = "override";

// Who sent an update, as the shell reads it from AdmissionRequest.userInfo.
enum class Requester {
  kUnknown,   // the shell cannot tell
  kOperator,  // allocguard's own service account
  kOther,     // a user, a CI job, a GitOps controller...
};

// A Deployment is held when it has api::kHeldCandidateAnnotation and
// spec.paused: true. For a held `old_deployment`:
//   - new has spec.paused false (or absent), still carries the held
//     annotation and no api::kOverrideHoldAnnotation: refused — a held
//     Deployment cannot be unpaused by hand.
//   - new sets (or changes) api::kOverrideHoldAnnotation, drops the held
//     annotation, or adds api::kInjectAnnotation=false: each lifts the hold,
//     so unless requester is kOperator the decision's needs_override says
//     what the update does, and the shell allows it only to a requester with
//     the override permission; event_reason quotes an override's reason.
// Any update of a Deployment that is not held is allowed.
ValidationDecision ValidateDeploymentUpdate(const api::Deployment& old_deployment,
                                            const api::Deployment& new_deployment,
                                            Requester requester = Requester::kUnknown);
// The same over the AdmissionRequest's oldObject and object, parsed with
// api::ParseDeployment.
ValidationDecision ValidateDeploymentUpdate(const nlohmann::json& old_deployment,
                                            const nlohmann::json& new_deployment,
                                            Requester requester = Requester::kUnknown);

// The same rules for a held StatefulSet or DaemonSet (the hold of
// workload_hold.h: api::kHeldCandidateAnnotation, with or without a pinned
// field), through the same check as a Deployment's:
//   - the field the hold pinned is released by hand while the object is
//     still marked and has no api::kOverrideHoldAnnotation: refused, as a
//     manual unpause is. A StatefulSet's is pinned when it has
//     api::kUserPartitionAnnotation and type RollingUpdate; a partition
//     below the stored one, or type OnDelete, releases it. A DaemonSet's is
//     pinned when it has api::kUserUpdateStrategyAnnotation and type
//     OnDelete; any other type releases it. (The mutating webhook, which
//     runs first, pins again whatever a user writes there; this refusal
//     covers an update it did not see.) A recorded-only hold (OnDelete of
//     the user's own) pins nothing.
//   - setting the override annotation, removing the held annotation or
//     opting out lifts the hold: needs_override, as for a Deployment.
// For the three kinds, the held annotation removed by the mutating webhook
// itself (the new template has a Flat verdict, so it released the hold in
// the same admission: the template changed and api::kReleasedCandidateAnnotation
// is the new template's hash) lifts nothing.
ValidationDecision ValidateStatefulSetUpdate(const nlohmann::json& old_statefulset,
                                             const nlohmann::json& new_statefulset,
                                             Requester requester = Requester::kUnknown);
ValidationDecision ValidateDaemonSetUpdate(const nlohmann::json& old_daemonset,
                                           const nlohmann::json& new_daemonset,
                                           Requester requester = Requester::kUnknown);

// Deleting an Enforce policy (new_policy null) or setting its rollout mode to
// Audit or Off lifts the hold of every workload it holds (`held`, names as
// the message shows them: "web", "statefulset/db", "daemonset/agent"): the
// decision's needs_override says so. Any other change needs nothing.
ValidationDecision ValidatePolicyChange(const api::AllocatorPolicy& old_policy,
                                        const api::AllocatorPolicy* new_policy,
                                        const std::vector<std::string>& held);

// Checks an AllocatorPolicy (CREATE or UPDATE) against the other policies of
// its namespace. `others_in_namespace` may include the stored version of the
// candidate itself (same name); it is ignored.
//
// Refused:
//   - spec.selector can select no pod at all (e.g. app In [a] and app NotIn
//     [a]): the policy would silently govern nothing.
//   - spec.selector overlaps another policy's: some set of labels satisfies
//     both selectors, so both could select the same pod and neither would be
//     injected. The check is exact for metav1.LabelSelector semantics: labels
//     are independent, so two selectors overlap unless, for some key, no
//     single state of that key (absent, or one value) satisfies both
//     selectors' requirements on it. Which containers each policy names does
//     not matter: one policy per pod. The message names the other policy,
//     the field spec.selector and an example pod's labels.
ValidationDecision ValidatePolicy(const api::AllocatorPolicy& candidate,
                                  const std::vector<api::AllocatorPolicy>& others_in_namespace);

// Whether some labels satisfy both selectors; when they do and `example` is
// not null, *example holds such labels ("app=web,tier=x"; "" when the empty
// label set does).
bool SelectorsOverlap(const api::LabelSelector& a, const api::LabelSelector& b,
                      std::string* example);

}  // namespace allocguard::admission
