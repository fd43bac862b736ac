#pragma once

// The Deployment gate's decision (mutating webhook on Deployment CREATE and
// UPDATE): whether a governed Deployment's new pod template is held
// (spec.paused: true) until its replay canary is Flat. Pure; the webhook shell
// finds the governing policy and asks the verdict store.
//
// Rules, in order (the first that applies decides):
//   1. No governing policy, mode Off, kube-system or the operator's namespace,
//      or api::kInjectAnnotation == "false" on the Deployment or on its pod
//      template: allowed untouched.
//   2. UPDATE whose template hash (TemplateHash) did not change: allowed
//      untouched. This covers scaling, `kubectl rollout restart`, edits of
//      the Deployment's own metadata, and the operator releasing a hold
//      (paused false and the held annotation removed in one update).
//   3. The new template (CREATE, or UPDATE with a changed hash) already has a
//      Flat verdict: allowed, api::kReleasedCandidateAnnotation set to the
//      hash; a hold of an earlier candidate placed by the gate is released in
//      the same admission (paused false, held annotation removed).
//   4. Audit: allowed untouched; the decision marks the hash a candidate so
//      the operator canaries it (the operator can also recompute the hash from
//      the stored Deployment with TemplateHash; nothing is written).
//   5. Enforce: held — spec.paused: true and api::kHeldCandidateAnnotation set
//      to the hash. A Deployment already held for this hash gets an empty
//      patch (reinvocation is a no-op).
// CREATE is treated like a template change: under Enforce a new Deployment
// starts paused (no ReplicaSet, no pods) until its template is Flat. Nothing
// is running yet, so holding costs only the canary's time, and letting it
// through would put an unproven allocator into production unchecked.
//
// The override annotation (api::kOverrideHoldAnnotation) does not stop the
// gate from holding a new candidate; it only lets a user unpause a held
// Deployment by hand (validation.h).

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "operator/api/object_meta.h"
#include "operator/api/types.h"

namespace allocguard::admission {

// api::PodTemplateHash (operator/api/deployment.h): the key a pod template's
// canary and verdict are stored under.
std::string TemplateHash(const nlohmann::json& pod_template);

enum class AdmissionOperation { kCreate, kUpdate };

// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct GateInput {
  AdmissionOperation operation = AdmissionOperation::kUpdate;
  nlohmann::json old_deployment;               // null on CREATE
  nlohmann::json new_deployment;               // AdmissionRequest.object
  std::optional<api::AllocatorPolicy> policy;  // the policy governing it, if any
  // Whether a template hash already has a Flat verdict; empty means none has.
  std::function<bool(const std::string& template_hash)> has_flat_verdict;
  std::string operator_namespace;
};

enum class GateAction {
  kAllow,    // let the update through (patch may record the released hash)
  kHold,     // the Deployment is (or stays) paused for this candidate
  kRelease,  // a Flat candidate replaces a held one: the patch unpauses
};

struct GateDecision {
  GateAction action = GateAction::kAllow;
  std::string reason;  // one sentence for logs and events
  // TemplateHash of the new template; empty when the Deployment is not governed.
  std::string template_hash;
  // The template is new and has no Flat verdict: the operator should run a
  // canary for it (Enforce and Audit).
  bool needs_canary = false;
  // RFC 6902 JSON Patch against new_deployment; an empty array for none.
  nlohmann::json patch = nlohmann::json::array();
};

GateDecision DecideDeploymentGate(const GateInput& input);

// Removes from a workload whose hold is released the annotations every end
// of a hold removes: the hold's mark (api::kHeldCandidateAnnotation) and the
// override annotation, spent or asked for but not acted on. Left in place, an
// override would let the next hold be lifted by anyone who may edit the
// workload: the validating webhook asks the override permission only of the
// update that sets or changes it.
void RemoveHoldMarks(nlohmann::json& workload);

// The first rule of every workload's gate: why a workload of `kind`
// ("Deployment", "StatefulSet", ...) is not gated, or nullopt when it is. Not
// gated: no governing policy, the namespace is kube-system or the operator's
// own, the policy's rollout mode is Off, or the workload or its pod template
// opted out (allocguard.io/inject: "false").
std::optional<std::string> NotGated(const std::optional<api::AllocatorPolicy>& policy,
                                    const std::string& operator_namespace, const std::string& kind,
                                    const api::ObjectMeta& metadata,
                                    const api::ObjectMeta& template_metadata);

}  // namespace allocguard::admission
