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

GateDecision DecideDeploymentGate(const GateInput& input) {
  if (!input.policy) return Allow("no AllocatorPolicy governs this Deployment");
  const api::AllocatorPolicy& policy = *input.policy;
  const api::Deployment deployment = api::ParseDeployment(input.new_deployment);
  const std::string& ns =
      deployment.metadata.namespace_name.empty() ? policy.ns : deployment.metadata.namespace_name;
  if (ns == "kube-system" ||
      (!input.operator_namespace.empty() && ns == input.operator_namespace)) {
    return Allow("Deployments in " + ns + " are never gated");
  }
  if (policy.spec.rollout.mode == api::RolloutMode::kOff) {
    return Allow("AllocatorPolicy " + policy.name + " has rollout mode Off");
  }
  if (deployment.metadata.Annotation(api::kInjectAnnotation) == "false" ||
      deployment.pod_template.metadata.Annotation(api::kInjectAnnotation) == "false") {
    return Allow(std::string("the Deployment opted out (") + api::kInjectAnnotation +
                 ": \"false\")");
  }

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
      RemoveAnnotation(mutated, api::kHeldCandidateAnnotation);
      if (deployment.paused) SetPaused(mutated, false);
      decision.action = GateAction::kRelease;
      decision.reason += "; the hold of " +
                         deployment.metadata.Annotation(api::kHeldCandidateAnnotation) +
                         " is released";
    }
    SetAnnotation(mutated, api::kReleasedCandidateAnnotation, hash);
    decision.patch = json::diff(input.new_deployment, mutated);
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
  decision.patch = json::diff(input.new_deployment, mutated);
  return decision;
}

}  // namespace allocguard::admission
