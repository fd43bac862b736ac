#include "controllers/rollout_decision.h"

#include <cstdint>

#include "controllers/canary_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/json_fields.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/kube/object.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

using api::json_fields::Annotation;
using api::json_fields::Paused;

std::string ObjectName(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return "";
  }
  return object["metadata"].value("name", "");
}

}  // namespace

namespace {

// The key of what a canary proves, from its parts (CanaryPolicyKey).
std::string ProofKey(const api::AllocatorSpec& allocator, api::Libc libc,
                     const api::CanarySpec& canary, const api::LimitsSpec& limits) {
  api::ReplayCanarySpec spec;
  spec.candidate_allocator = allocator;
  spec.libc = libc;
  spec.canary = canary;
  spec.limits = limits;
  return api::ContentHash(api::ReplayCanarySpecToJson(spec).dump());
}

}  // namespace

std::string CanaryPolicyKey(const api::AllocatorPolicy& policy) {
  return ProofKey(policy.spec.allocator, policy.spec.libc, policy.spec.canary, policy.spec.limits);
}

std::string CanaryDistrust(const json& canary, const json& deployment,
                           const std::string& template_hash, const api::AllocatorPolicy& policy) {
  auto parsed = api::ParseReplayCanary(canary);
  if (!parsed.ok()) return "it does not parse: " + parsed.status().message();
  const api::ReplayCanarySpec& spec = parsed->spec;
  const json& deployment_meta = kube::FieldOrNull(deployment, "metadata");
  const std::string name = kube::StringField(deployment_meta, "name");
  const std::string uid = kube::StringField(deployment_meta, "uid");
  if (spec.target_kind != "Deployment" || spec.target_name != name) {
    return "it targets " + spec.target_kind + "/" + spec.target_name + ", not Deployment/" + name;
  }
  bool owned = false;
  const json& owners = kube::FieldOrNull(kube::FieldOrNull(canary, "metadata"), "ownerReferences");
  if (owners.is_array()) {
    for (const json& o : owners) {
      if (kube::StringField(o, "kind") == "Deployment" && kube::StringField(o, "name") == name &&
          !uid.empty() && kube::StringField(o, "uid") == uid) {
        owned = true;
      }
    }
  }
  if (!owned) return "it is not owned by this Deployment (uid " + uid + ")";
  if (spec.template_hash != template_hash) {
    return "its spec.templateHash is " + spec.template_hash + ", not " + template_hash;
  }
  const std::string stored =
      admission::TemplateHash(kube::FieldOrNull(kube::FieldOrNull(canary, "spec"), "template"));
  if (stored != template_hash) {
    return "its spec.template is not template " + template_hash + " (it hashes to " + stored + ")";
  }
  if (ProofKey(spec.candidate_allocator, spec.libc, spec.canary, spec.limits) !=
      CanaryPolicyKey(policy)) {
    return "its allocator, canary or limits are not those policy " + policy.name + " asks for";
  }
  bool candidate_measured = false;
  for (const api::VariantStatus& v : api::CanaryStatusOf(canary).variants) {
    if (v.measurement_key.empty()) continue;
    if (v.measurement_key != MeasurementKey(*parsed, v.name, policy.spec.containers, RerunOf(&v))) {
      return "variant " + v.name + " was measured on another spec (the canary was edited)";
    }
    if (v.name == "candidate") candidate_measured = true;
  }
  if (!candidate_measured) return "it has no measurement of the candidate";
  return "";
}

json BuildReplayCanary(const json& deployment, const api::AllocatorPolicy& policy,
                       const std::string& template_hash) {
  const json& meta = deployment["metadata"];
  const std::string name = meta.value("name", "");
  api::ReplayCanarySpec spec;
  spec.policy = policy.name;
  spec.target_kind = "Deployment";
  spec.target_name = name;
  spec.template_hash = template_hash;
  spec.candidate_allocator = policy.spec.allocator;
  spec.libc = policy.spec.libc;
  spec.canary = policy.spec.canary;
  spec.limits = policy.spec.limits;
  json spec_json = api::ReplayCanarySpecToJson(spec);
  spec_json["template"] = deployment["spec"]["template"];
  json owner = {
      {"apiVersion", "apps/v1"},      {"kind", "Deployment"}, {"name", name},
      {"uid", meta.value("uid", "")}, {"controller", false},  {"blockOwnerDeletion", false}};
  return {{"apiVersion", api::kApiVersion},
          {"kind", "ReplayCanary"},
          {"metadata",
           {{"name", CanaryName(name, template_hash, CanaryPolicyKey(policy))},
            {"namespace", meta.value("namespace", "")},
            {"labels",
             {{kPolicyLabel, policy.name},
              {kWorkloadLabel, name.substr(0, 63)},
              {api::kManagedByLabel, api::kManagedByValue}}},
            {"ownerReferences", json::array({owner})}}},
          {"spec", spec_json}};
}

namespace {

// Why a held Deployment is no longer under an Enforce policy's hold, or ""
// when it still is (or when that cannot be told: several policies match).
std::string OrphanedHoldReason(const RolloutInput& input) {
  if (!input.policy.has_value()) {
    return input.policy_ambiguous ? "" : "no AllocatorPolicy governs it any more";
  }
  const api::AllocatorPolicy& policy = *input.policy;
  if (policy.spec.rollout.mode != api::RolloutMode::kEnforce) {
    return "policy " + policy.name + " has rollout mode " +
           api::RolloutModeName(policy.spec.rollout.mode) + ", which never holds";
  }
  return "";
}

}  // namespace

bool RolledOutByOverride(const json& deployment) {
  return !Annotation(deployment, api::kOverrideHoldAnnotation).empty() && !Paused(deployment);
}

RolloutActions DecideRollout(const RolloutInput& input) {
  RolloutActions out;
  const std::string held_hash = Annotation(input.deployment, api::kHeldCandidateAnnotation);
  if (!held_hash.empty()) {
    if (const std::string why = OrphanedHoldReason(input); !why.empty()) {
      out.deployment_patch =
          json{{"metadata", {{"annotations", {{api::kHeldCandidateAnnotation, nullptr}}}}},
               {"spec", {{"paused", false}}}};
      out.event_reason = "HoldReleased";
      out.event_note = "template " + held_hash + " was held by allocguard; the hold is released " +
                       "because " + why + ". The template was not proven by a replay canary.";
      return out;
    }
    if (RolledOutByOverride(input.deployment)) {
      const std::string override_reason =
          Annotation(input.deployment, api::kOverrideHoldAnnotation);
      // The user rolled the held template out by override: the hold is over.
      out.deployment_patch =
          json{{"metadata",
                {{"annotations",
                  {{api::kHeldCandidateAnnotation, nullptr},
                   {api::kOverrideHoldAnnotation, nullptr},
                   {api::kOverriddenCandidateAnnotation, held_hash + " " + override_reason},
                   {api::kReleasedCandidateAnnotation, input.template_hash}}}}}};
      out.event_reason = "HoldCleared";
      out.event_note = "template " + held_hash + " was rolled out by override (" + override_reason +
                       ") without a Flat canary; the hold and the override " +
                       "annotation are cleared, so a later hold needs a new override";
      return out;
    }
  }
  if (!input.policy.has_value()) {
    out.skip_reason = "no policy governs it";
    return out;
  }
  const api::AllocatorPolicy& policy = *input.policy;
  if (policy.spec.rollout.mode == api::RolloutMode::kOff) {
    out.skip_reason = "policy " + policy.name + " has rollout mode Off";
    return out;
  }
  if (Annotation(input.deployment, api::kInjectAnnotation) == "false") {
    if (!held_hash.empty()) {
      // An opt-out is not an override: it would let anyone who may edit the
      // Deployment lift the hold (the webhook asks the override permission
      // for it, and this holds when the webhook was down).
      out.event_warning = true;
      out.event_reason = "RolloutHeld";
      out.event_note = "template " + held_hash + " stays held although the Deployment opted out " +
                       "with " + api::kInjectAnnotation +
                       "=false: an opt-out does not lift a hold. To roll out anyway, annotate " +
                       api::kOverrideHoldAnnotation + "=<reason> (needs the override " +
                       "permission) and unpause it.";
      return out;
    }
    out.skip_reason = "opted out with " + std::string(api::kInjectAnnotation) + "=false";
    return out;
  }
  const std::string& hash = input.template_hash;
  const std::string held = Annotation(input.deployment, api::kHeldCandidateAnnotation);
  const std::string released = Annotation(input.deployment, api::kReleasedCandidateAnnotation);
  const bool holding = !held.empty();
  if (!holding && released == hash) {
    out.skip_reason = "template " + hash + " already released";
    return out;
  }
  const std::string canary_name =
      CanaryName(ObjectName(input.deployment), hash, CanaryPolicyKey(policy));
  if (!holding && released.empty() && policy.spec.rollout.mode == api::RolloutMode::kEnforce) {
    // Running before the policy came (or admitted while the webhook was
    // down): nothing to hold, so its template is the baseline.
    out.deployment_patch =
        json{{"metadata", {{"annotations", {{api::kReleasedCandidateAnnotation, hash}}}}}};
    out.event_reason = "TemplateAdopted";
    out.event_note = "policy " + policy.name +
                     " now governs this Deployment; its running template " + hash +
                     " is the baseline, and the next template change is held until a " +
                     "replay canary finds it flat";
    return out;
  }
  if (!input.canary.has_value()) {
    out.create_canary = BuildReplayCanary(input.deployment, policy, hash);
    out.event_reason = "CanaryStarted";
    out.event_note =
        "replay canary " + canary_name + " started for template " + hash +
        (holding ? "; the rollout is held until it is flat" : " (audit: the rollout is not held)");
    return out;
  }
  const json& canary = *input.canary;
  const api::ReplayCanaryStatus status = api::CanaryStatusOf(canary);
  if (!Ended(status.phase)) {
    out.skip_reason = "canary " + canary_name + " is running";
    return out;
  }
  const std::string verdict = api::RecordedVerdictName(status.verdict, status.unknown_verdict);
  const std::string& explanation = status.explanation;
  const std::string& flat_variant = status.flat_variant;
  const std::string& slope = status.floor_slope;
  const bool flat = status.verdict == Verdict::kFlat;

  // Whatever releases a hold or records a template as judged must come from
  // a canary that proves this very template (a held template that is not
  // Flat stays held whoever made the canary).
  if (flat || !holding) {
    if (const std::string why = CanaryDistrust(canary, input.deployment, hash, policy);
        !why.empty()) {
      // Fail closed: nothing is released or recorded; deleting the canary
      // lets the operator run its own.
      out.event_warning = true;
      out.event_reason = holding ? "RolloutHeld" : "CanaryNotTrusted";
      out.event_note = "canary " + canary_name + " cannot " + (holding ? "release" : "judge") +
                       " template " + hash + ": " + why +
                       ". Delete it, and allocguard runs its own canary for this template.";
      return out;
    }
  }

  if (holding && !flat) {
    // Stay held; say why and what would fix it.
    out.event_warning = true;
    out.event_reason = "RolloutHeld";
    out.event_note = "template " + hash + " is held: canary " + canary_name + " found " +
                     (verdict.empty() ? std::string("no verdict") : verdict) +
                     (slope.empty() ? "" : " (floor slope " + slope + ")") + ": " + explanation +
                     (flat_variant.empty()
                          ? ""
                          : "; variant " + flat_variant +
                                " stayed flat on the same load: switch the policy's allocator") +
                     ". To roll out anyway, annotate the Deployment with " +
                     api::kOverrideHoldAnnotation + "=<reason> and unpause it.";
    return out;
  }
  json annotations = {{api::kReleasedCandidateAnnotation, hash}};
  json patch = {{"metadata", {{"annotations", annotations}}}};
  if (holding) {
    patch["metadata"]["annotations"][api::kHeldCandidateAnnotation] = nullptr;
    patch["spec"] = {{"paused", false}};
    out.event_reason = "RolloutReleased";
    out.event_note = "canary " + canary_name + " is Flat" +
                     (slope.empty() ? "" : " (floor slope " + slope + ")") +
                     ": the rollout of template " + hash + " proceeds";
  } else {
    out.event_warning = !flat;
    out.event_reason = flat ? "CanaryPassed" : "CanaryFailedAudit";
    out.event_note = "audit: canary " + canary_name + " found " + verdict +
                     (slope.empty() ? "" : " (floor slope " + slope + ")") + ": " + explanation +
                     " (the rollout was not held: the policy's mode is Audit)";
  }
  out.deployment_patch = patch;
  return out;
}

}  // namespace allocguard::controllers
