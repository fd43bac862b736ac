#pragma once

// The hold of a StatefulSet's or a DaemonSet's new pod template until its
// replay canary is Flat, as pure decisions: the admission-time hold (the
// counterpart of DecideDeploymentGate) and the operator's release once the
// held template is Flat. Each answers with an RFC 6902 JSON Patch against
// the object it was given. The StatefulSet and DaemonSet webhooks
// (admission_handlers.h) call the gates, the rollout reconciler the releases
// (docs/workload-kinds.md says what is wired and what is not).
//
// The same api::kHeldCandidateAnnotation / api::kReleasedCandidateAnnotation
// as on Deployments; what a hold replaces is remembered beside them
// (api::kUserPartitionAnnotation, api::kUserUpdateStrategyAnnotation) and put
// back by the release. Once a hold has pinned a field, that field belongs to
// the hold until the release: a value a user writes there meanwhile becomes
// the remembered one (and is restored by the release), and the pin stays.
//
// Gate rules, in order (the first that applies decides), for both kinds:
//   1. No governing policy, mode Off, kube-system or the operator's
//      namespace, or api::kInjectAnnotation == "false" on the object or its
//      template: allowed untouched (NotGated, deployment_gate.h).
//   2. UPDATE whose template hash did not change: allowed; a hold stays held
//      and its pin is kept (rule S2 / D2). With api::kOverrideHoldAnnotation
//      set, untouched: the user is releasing the hold by hand.
//   3. CREATE: never held. Neither kind can hold its first revision (a new
//      StatefulSet's pods below the partition are created from the current
//      revision, which is the first one; a new DaemonSet creates its pods
//      whatever its strategy). Allowed untouched and canaried; a Flat
//      template is recorded as released.
//   4. The new template has a Flat verdict: allowed, released-candidate set to
//      it; a hold of an earlier candidate is released in the same admission
//      (see the release rules).
//   5. Audit: allowed untouched and canaried.
//   6. Enforce: held (kHeldCandidateAnnotation = hash), kind by kind:
// StatefulSet:
//   S1. RollingUpdate: spec.updateStrategy.rollingUpdate.partition is pinned
//       to kHeldPartition, above any replica count a StatefulSet can reach
//       (spec.replicas is an int32), so no pod is replaced and pods created
//       below the partition (a scale-up, a deleted pod) get the current
//       revision. A scale through the /scale subresource (kubectl scale, an
//       autoscaler), which no webhook on statefulsets sees, thus cannot let
//       new ordinals take the candidate either. The user's own partition is
//       remembered in kUserPartitionAnnotation ("" for none) when the hold
//       begins; a later candidate held on top keeps it.
//   S2. Held and the template unchanged: the pin stays (a scale changes
//       nothing); a partition the user writes becomes the remembered one.
//   S3. OnDelete: nothing in the spec changes and the hold is recorded
//       (kHeldCandidateAnnotation only). The controller replaces no pod by
//       itself, but a pod deleted while held (by a user, an eviction, a node
//       loss) comes back with the candidate template; the reason says so.
//       Switching to RollingUpdate with a partition is not done: an OnDelete
//       StatefulSet's status.currentRevision can be older than what its pods
//       run, and a pod recreated below the partition would then go back to
//       that older template.
// DaemonSet:
//   D1. RollingUpdate: spec.updateStrategy becomes {"type": "OnDelete"}, the
//       user's strategy as it was stored remembered as JSON in
//       kUserUpdateStrategyAnnotation. Running pods are not replaced; the
//       pod a node that joins, or a pod deleted while held, would get is
//       refused (D4).
//   D2. Held and the template unchanged: the strategy stays OnDelete; a
//       strategy the user writes becomes the remembered one.
//   D3. The user's own strategy is OnDelete: the hold is recorded only
//       (as S3), and D4 refuses the pods the controller creates meanwhile.
//
//   D4. At Pod admission, while held: the DaemonSet controller makes every
//       pod it creates (for a node that joins, in place of a pod deleted or
//       evicted) from the current template, which is the held candidate, so
//       such a pod is refused (RefusePodOfHeldDaemonSet, below). The
//       controller retries it with its backoff, and creates it as soon as
//       the release changes the DaemonSet. The node runs no pod of that
//       DaemonSet meanwhile: the hold chooses no pod over an unproven one.
//
// Release rules (ReleaseStatefulSetHold, ReleaseDaemonSetHold, and rule 4):
//   R1. Not held: nothing.
//   R2. The remembered value is restored: a StatefulSet's partition is set to
//       it, or removed when it was "" (with an emptied rollingUpdate); a
//       DaemonSet's spec.updateStrategy is set to the remembered JSON, or
//       removed when it was null. The held and remembered annotations are
//       removed and kReleasedCandidateAnnotation set.
//   R3. A recorded-only hold (S3, D3): the annotations change, the spec does
//       not; the reason says pods take the template as they are deleted.
//   R4. The remembered annotation is missing although the spec is pinned (a
//       user removed it): the hold is released but the pin is left as it is,
//       and the reason says which field to set to roll out; guessing the
//       user's value could replace pods they did not mean to replace.
//   R5. The remembered annotation does not parse (a StatefulSet's: not an
//       integer in [0, kHeldPartition]): not released (kHold, empty patch);
//       the reason names the annotation and what is wrong with it.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/admission/deployment_gate.h"
#include "operator/api/object_meta.h"
#include "operator/api/types.h"
#include "operator/api/workloads.h"

namespace allocguard::admission {

// The partition a StatefulSet's hold pins (rule S1): the largest int32.
inline constexpr int64_t kHeldPartition = 2147483647;

// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct WorkloadGateInput {
  AdmissionOperation operation = AdmissionOperation::kUpdate;
  nlohmann::json old_object;                   // null on CREATE
  nlohmann::json new_object;                   // AdmissionRequest.object
  std::optional<api::AllocatorPolicy> policy;  // the policy governing it, if any
  // Whether a template hash already has a Flat verdict; empty means none has.
  std::function<bool(const std::string& template_hash)> has_flat_verdict;
  std::string operator_namespace;
};

// The admission-time decision for a StatefulSet (rules 1-6, S1-S3).
GateDecision DecideStatefulSetGate(const WorkloadGateInput& input);
// The admission-time decision for a DaemonSet (rules 1-6, D1-D3).
GateDecision DecideDaemonSetGate(const WorkloadGateInput& input);

// The operator's release of a held StatefulSet or DaemonSet whose held
// template is Flat (rules R1-R5): kRelease with the patch, kAllow with an
// empty patch when it is not held, kHold when the release must wait (R5).
// The caller has established the verdict; these only write the release.
GateDecision ReleaseStatefulSetHold(const nlohmann::json& statefulset);
GateDecision ReleaseDaemonSetHold(const nlohmann::json& daemonset);

// Rule D4: what the Pod webhook knows of a Pod being created.
// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct HeldDaemonSetPodInput {
  api::ObjectMeta pod;  // the Pod's metadata
  // The DaemonSet its controller reference names, as read (a GET, or the
  // cache when the GET failed); nullopt when there is none by that name.
  std::optional<api::DeploymentSummary> daemonset;
  // The policy governing that DaemonSet's template (GoverningPolicy).
  std::optional<api::AllocatorPolicy> policy;
  std::string operator_namespace;
};

// Rule D4: why the Pod must be refused, or nullopt to admit it. Refused only
// when its controller reference is an apps/v1 DaemonSet with the uid of
// `daemonset` (never by name alone), the DaemonSet is gated (NotGated) under
// Enforce, and it carries kHeldCandidateAnnotation without
// kOverrideHoldAnnotation (an override a user was allowed to make admits its
// pods).
std::optional<std::string> RefusePodOfHeldDaemonSet(const HeldDaemonSetPodInput& input);

// The override of a held StatefulSet or DaemonSet (docs/workload-kinds.md,
// "Overriding a hold"): a user with the override permission (checked by the
// validating webhook) sets api::kOverrideHoldAnnotation and puts the pinned
// field back by hand; the webhook leaves that request untouched (rule 2) and
// the operator lifts nothing with its own rights. What still holds the pin,
// as a sentence naming the field to set; nullopt when nothing is pinned any
// more (a recorded-only hold, S3 and D3, or the user set the field), and
// the operator then only clears the hold's annotations.
std::optional<std::string> StatefulSetPinInPlace(const nlohmann::json& statefulset);
std::optional<std::string> DaemonSetPinInPlace(const nlohmann::json& daemonset);

}  // namespace allocguard::admission
