#pragma once

// The validating webhook's decisions: manual unpausing of held Deployments,
// and what CEL in the CRD cannot check about an AllocatorPolicy. Pure.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/types.h"

namespace allocguard::admission {

struct ValidationDecision {
  bool allowed = true;
  // Why it was refused, for the user's terminal (names the field); empty when allowed.
  std::string message;
  // When non-empty, the shell records an event on the object with this text
  // (an override of a hold is allowed but never silent).
  std::string event_reason;
};

// Who sent an update, as the shell reads it from AdmissionRequest.userInfo.
enum class Requester {
  kUnknown,   // the shell cannot tell
  kOperator,  // allocguard's own service account
  kOther,     // a user, a CI job, a GitOps controller...
};

// A Deployment is held when it has api::kHeldCandidateAnnotation and
// spec.paused: true. For a held `old_deployment`:
//   - new carries api::kOverrideHoldAnnotation (non-empty): allowed; the
//     decision's event_reason quotes the override's reason.
//   - new has spec.paused false (or absent) and still carries the held
//     annotation: refused — a held Deployment cannot be unpaused by hand.
//   - new drops the held annotation (the operator's release, paused false in
//     the same update): allowed, unless requester is kOther, who is refused
//     (removing the annotation by hand would slip past the hold).
// Any update of a Deployment that is not held is allowed.
ValidationDecision ValidateDeploymentUpdate(const nlohmann::json& old_deployment,
                                            const nlohmann::json& new_deployment,
                                            Requester requester = Requester::kUnknown);

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
