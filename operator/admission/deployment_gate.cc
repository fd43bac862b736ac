#include "operator/admission/deployment_gate.h"

#include <utility>

#include "operator/api/deployment.h"
#include "operator/api/json_patch.h"
#include "operator/api/names.h"

namespace allocguard::admission {

using api::RemoveAnnotation;
using api::SetAnnotation;
using api::SetPaused;

namespace {

using nlohmann::json;

GateDecision Allow(std::string reason) {
  GateDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

}  // namespace

std::string TemplateHash(const json& pod_template) { return api::PodTemplateHash(pod_template); }

std::optional<std::string> NotGated(const std::optional<api::AllocatorPolicy>& policy,
                                    const std::string& operator_namespace, const std::string& kind,
                                    const api::ObjectMeta& metadata,
                                    const api::ObjectMeta& template_metadata) {
  if (!policy) return "no AllocatorPolicy governs this " + kind;
  const std::string& ns = metadata.namespace_name.empty() ? policy->ns : metadata.namespace_name;
  if (ns == "kube-system" || (!operator_namespace.empty() && ns == operator_namespace)) {
    return kind + "s in " + ns + " are never gated";
  }
  if (policy->spec.rollout.mode == api::RolloutMode::kOff) {
    return "AllocatorPolicy " + policy->name + " has rollout mode Off";
  }
  if (metadata.Annotation(api::kInjectAnnotation) == "false" ||
      template_metadata.Annotation(api::kInjectAnnotation) == "false") {
    return "the " + kind + " opted out (" + api::kInjectAnnotation + ": \"false\")";
  }
  return std::nullopt;
}

void RemoveHoldMarks(json& workload) {
  RemoveAnnotation(workload, api::kHeldCandidateAnnotation);
  RemoveAnnotation(workload, api::kOverrideHoldAnnotation);
}

GateDecision DecideDeploymentGate(const GateInput& input) {
  const api::Deployment deployment = api::ParseDeployment(input.new_deployment);
  if (auto why = NotGated(input.policy, input.operator_namespace, "Deployment", deployment.metadata,
                          deployment.pod_template.metadata)) {
    return Allow(std::move(*why));
  }
  const api::AllocatorPolicy& policy = *input.policy;

  GateDecision decision;
  decision.template_hash = deployment.pod_template.hash;
  const std::string& hash = decision.template_hash;
  const api::Deployment old_deployment = api::ParseDeployment(input.old_deployment);
  const bool update = input.operation == AdmissionOperation::kUpdate && old_deployment.present;
  if (update && old_deployment.pod_template.hash == hash) {
    decision.reason = "the pod template did not change (template " + hash + ")";
    return decision;
  }

  json mutated = input.new_deployment;
  if (input.has_flat_verdict && input.has_flat_verdict(hash)) {
    decision.reason = "template " + hash + " already has a Flat verdict";
    if (deployment.metadata.HasAnnotation(api::kHeldCandidateAnnotation)) {
      RemoveHoldMarks(mutated);
      if (deployment.paused) SetPaused(mutated, false);
      decision.action = GateAction::kRelease;
      decision.reason += "; the hold of " +
                         deployment.metadata.Annotation(api::kHeldCandidateAnnotation) +
                         " is released";
    }
    SetAnnotation(mutated, api::kReleasedCandidateAnnotation, hash);
    decision.patch = api::JsonPatchBetween(input.new_deployment, mutated);
    return decision;
  }

  decision.needs_canary = true;
  if (policy.spec.rollout.mode == api::RolloutMode::kAudit) {
    decision.reason = "Audit: template " + hash +
                      " rolls out now and is canaried (AllocatorPolicy " + policy.name + ")";
    return decision;
  }
  decision.action = GateAction::kHold;
  decision.reason = "Enforce: template " + hash + " is held until its replay canary is Flat (" +
                    "AllocatorPolicy " + policy.name + ")";
  SetPaused(mutated, true);
  SetAnnotation(mutated, api::kHeldCandidateAnnotation, hash);
  decision.patch = api::JsonPatchBetween(input.new_deployment, mutated);
  return decision;
}

}  // namespace allocguard::admission
