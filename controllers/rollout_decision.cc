#include "controllers/rollout_decision.h"

#include <cstdint>

#include "controllers/canary_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::controllers {

using nlohmann::json;

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

std::string CanaryDistrust(const api::ReplayCanarySummary& canary,
                           const api::DeploymentSummary& deployment,
                           const std::string& template_hash, const api::AllocatorPolicy& policy,
                           WorkloadKind kind) {
  if (!canary.parsed.has_value()) return "it does not parse: " + canary.parse_error;
  const api::ReplayCanarySpec& spec = canary.parsed->spec;
  const std::string& name = deployment.meta.name;
  const std::string& uid = deployment.meta.uid;
  const std::string kind_name = WorkloadKindName(kind);
  if (spec.target_kind != kind_name || spec.target_name != name) {
    return "it targets " + spec.target_kind + "/" + spec.target_name + ", not " + kind_name + "/" +
           name;
  }
  bool owned = false;
  for (const api::OwnerReference& o : canary.meta.owner_references) {
    if (o.kind == kind_name && o.name == name && !uid.empty() && o.uid == uid) owned = true;
  }
  if (!owned) return "it is not owned by this " + kind_name + " (uid " + uid + ")";
  if (spec.template_hash != template_hash) {
    return "its spec.templateHash is " + spec.template_hash + ", not " + template_hash;
  }
  const std::string stored = admission::TemplateHash(canary.pod_template);
  if (stored != template_hash) {
    return "its spec.template is not template " + template_hash + " (it hashes to " + stored + ")";
  }
  if (ProofKey(spec.candidate_allocator, spec.libc, spec.canary, spec.limits) !=
      CanaryPolicyKey(policy)) {
    return "its allocator, canary or limits are not those policy " + policy.name + " asks for";
  }
  bool candidate_measured = false;
  for (const api::VariantStatus& v : canary.status.variants) {
    if (v.measurement_key.empty()) continue;
    if (v.measurement_key !=
        MeasurementKey(*canary.parsed, v.name, policy.spec.containers, RerunOf(&v))) {
      return "variant " + v.name + " was measured on another spec (the canary was edited)";
    }
    if (v.name == "candidate") candidate_measured = true;
  }
  if (!candidate_measured) return "it has no measurement of the candidate";
  return "";
}

std::string CanaryDistrust(const json& canary, const json& deployment,
                           const std::string& template_hash, const api::AllocatorPolicy& policy,
                           WorkloadKind kind) {
  return CanaryDistrust(api::ParseReplayCanarySummary(canary),
                        api::ParseDeploymentSummary(deployment), template_hash, policy, kind);
}

json BuildReplayCanary(const api::DeploymentSummary& deployment, const api::AllocatorPolicy& policy,
                       const std::string& template_hash, WorkloadKind kind) {
  const api::ObjectMeta& meta = deployment.meta;
  const std::string& name = meta.name;
  api::ReplayCanarySpec spec;
  spec.policy = policy.name;
  spec.target_kind = WorkloadKindName(kind);
  spec.target_name = name;
  spec.template_hash = template_hash;
  spec.candidate_allocator = policy.spec.allocator;
  spec.libc = policy.spec.libc;
  spec.canary = policy.spec.canary;
  spec.limits = policy.spec.limits;
  json spec_json = api::ReplayCanarySpecToJson(spec);
  spec_json["template"] = deployment.pod_template;
  json owner = {
      {"apiVersion", "apps/v1"}, {"kind", spec.target_kind}, {"name", name},
      {"uid", meta.uid},         {"controller", false},      {"blockOwnerDeletion", false}};
  return {{"apiVersion", api::kApiVersion},
          {"kind", "ReplayCanary"},
          {"metadata",
           {{"name", CanaryName(name, template_hash, CanaryPolicyKey(policy))},
            {"namespace", meta.namespace_name},
            {"labels",
             {{kPolicyLabel, policy.name},
              {kWorkloadLabel, name.substr(0, 63)},
              {api::kManagedByLabel, api::kManagedByValue}}},
            {"ownerReferences", json::array({owner})}}},
          {"spec", spec_json}};
}

json BuildReplayCanary(const json& deployment, const api::AllocatorPolicy& policy,
                       const std::string& template_hash, WorkloadKind kind) {
  return BuildReplayCanary(api::ParseDeploymentSummary(deployment), policy, template_hash, kind);
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

bool RolledOutByOverride(const api::DeploymentSummary& deployment) {
  return !deployment.meta.Annotation(api::kOverrideHoldAnnotation).empty() && !deployment.paused;
}

namespace {

// What every rule reads, derived once from the input.
struct RolloutFacts {
  const RolloutInput& input;
  std::string held;         // kHeldCandidateAnnotation: the held template, if any
  std::string released;     // kReleasedCandidateAnnotation
  std::string canary_name;  // for the current template under the policy ("" without one)
  bool holding() const { return !held.empty(); }
  // A StatefulSet or DaemonSet: the hold pinned a field of its spec.
  bool pinned() const { return input.kind != WorkloadKind::kDeployment; }
  const char* kind() const { return WorkloadKindName(input.kind); }
};

// How to roll a held StatefulSet or DaemonSet out without a Flat canary.
constexpr char kRollOutPinnedAnyway[] =
    "To roll out anyway, set the AllocatorPolicy's rollout mode to Audit or Off (a hold no "
    "Enforce policy stands behind is released); an override annotation does not release a "
    "StatefulSet or DaemonSet.";

using RolloutRule = std::optional<RolloutActions> (*)(const RolloutFacts&);

RolloutActions Skip(std::string reason) {
  RolloutActions out;
  out.skip_reason = std::move(reason);
  return out;
}

// Rule 1: a hold no Enforce policy stands behind any more is released.
std::optional<RolloutActions> ReleaseOrphanedHold(const RolloutFacts& f) {
  if (!f.holding()) return std::nullopt;
  const std::string why = OrphanedHoldReason(f.input);
  if (why.empty()) return std::nullopt;
  RolloutActions out;
  if (f.pinned()) {
    // The release records the held template as released; it was not proven,
    // so the annotation goes back to what it was.
    out.release_pinned_hold = true;
    out.deployment_patch = json{{"metadata",
                                 {{"annotations",
                                   {{api::kHeldCandidateAnnotation, nullptr},
                                    {api::kReleasedCandidateAnnotation,
                                     f.released.empty() ? json(nullptr) : json(f.released)}}}}}};
  } else {
    out.deployment_patch =
        json{{"metadata", {{"annotations", {{api::kHeldCandidateAnnotation, nullptr}}}}},
             {"spec", {{"paused", false}}}};
  }
  out.event_reason = "HoldReleased";
  out.event_note = "template " + f.held + " was held by allocguard; the hold is released " +
                   "because " + why + ". The template was not proven by a replay canary.";
  return out;
}

// Rule 2: the user rolled the held template out by override: the hold is
// over, and the override is consumed.
std::optional<RolloutActions> ClearOverriddenHold(const RolloutFacts& f) {
  if (!f.holding() || f.pinned() || !RolledOutByOverride(f.input.deployment)) return std::nullopt;
  const std::string override_reason =
      f.input.deployment.meta.Annotation(api::kOverrideHoldAnnotation);
  RolloutActions out;
  out.deployment_patch =
      json{{"metadata",
            {{"annotations",
              {{api::kHeldCandidateAnnotation, nullptr},
               {api::kOverrideHoldAnnotation, nullptr},
               {api::kOverriddenCandidateAnnotation, f.held + " " + override_reason},
               {api::kReleasedCandidateAnnotation, f.input.template_hash}}}}}};
  out.event_reason = "HoldCleared";
  out.event_note = "template " + f.held + " was rolled out by override (" + override_reason +
                   ") without a Flat canary; the hold and the override " +
                   "annotation are cleared, so a later hold needs a new override";
  return out;
}

// Rule 3: no policy, or one in mode Off: nothing to do.
std::optional<RolloutActions> NotGoverned(const RolloutFacts& f) {
  if (!f.input.policy.has_value()) return Skip("no policy governs it");
  const api::AllocatorPolicy& policy = *f.input.policy;
  if (policy.spec.rollout.mode == api::RolloutMode::kOff) {
    return Skip("policy " + policy.name + " has rollout mode Off");
  }
  return std::nullopt;
}

// Rule 4: opted out (allocguard.io/inject=false): nothing is canaried, and
// a hold stays. An opt-out is not an override: it would let anyone who may
// edit the Deployment lift the hold (the webhook asks the override
// permission for it, and this holds when the webhook was down).
std::optional<RolloutActions> OptedOut(const RolloutFacts& f) {
  if (f.input.deployment.meta.Annotation(api::kInjectAnnotation) != "false") return std::nullopt;
  if (!f.holding()) {
    return Skip("opted out with " + std::string(api::kInjectAnnotation) + "=false");
  }
  RolloutActions out;
  out.event_warning = true;
  out.event_reason = "RolloutHeld";
  out.event_note =
      "template " + f.held + " stays held although the " + f.kind() + " opted out " + "with " +
      api::kInjectAnnotation + "=false: an opt-out does not lift a hold. " +
      (f.pinned() ? std::string(kRollOutPinnedAnyway)
                  : "To roll out anyway, annotate " + std::string(api::kOverrideHoldAnnotation) +
                        "=<reason> (needs the override " + "permission) and unpause it.");
  return out;
}

// Rule 5: the current template was released already.
std::optional<RolloutActions> AlreadyReleased(const RolloutFacts& f) {
  if (f.holding() || f.released != f.input.template_hash) return std::nullopt;
  return Skip("template " + f.input.template_hash + " already released");
}

// Rule 6: running before the policy came (or admitted while the webhook
// was down): nothing to hold, so its template is the baseline.
std::optional<RolloutActions> AdoptRunningTemplate(const RolloutFacts& f) {
  const api::AllocatorPolicy& policy = *f.input.policy;
  if (f.holding() || !f.released.empty() ||
      policy.spec.rollout.mode != api::RolloutMode::kEnforce) {
    return std::nullopt;
  }
  const std::string& hash = f.input.template_hash;
  RolloutActions out;
  out.deployment_patch =
      json{{"metadata", {{"annotations", {{api::kReleasedCandidateAnnotation, hash}}}}}};
  out.event_reason = "TemplateAdopted";
  out.event_note = "policy " + policy.name + " now governs this " + f.kind() +
                   "; its running template " + hash +
                   " is the baseline, and the next template change is held until a " +
                   "replay canary finds it flat";
  return out;
}

// Rule 7: no canary for this template under this policy yet: start one.
std::optional<RolloutActions> StartCanary(const RolloutFacts& f) {
  if (f.input.canary.has_value()) return std::nullopt;
  const std::string& hash = f.input.template_hash;
  RolloutActions out;
  out.create_canary = BuildReplayCanary(f.input.deployment, *f.input.policy, hash, f.input.kind);
  out.event_reason = "CanaryStarted";
  out.event_note = "replay canary " + f.canary_name + " started for template " + hash +
                   (f.holding() ? "; the rollout is held until it is flat"
                                : " (audit: the rollout is not held)");
  return out;
}

// Rule 8: the canary runs: wait for it.
std::optional<RolloutActions> WaitForCanary(const RolloutFacts& f) {
  if (Ended(f.input.canary->status.phase)) return std::nullopt;
  return Skip("canary " + f.canary_name + " is running");
}

// Rule 9: whatever releases a hold or records a template as judged must
// come from a canary that proves this very template (a held template that
// is not Flat stays held whoever made the canary). Fail closed: nothing is
// released or recorded; deleting the canary lets the operator run its own.
std::optional<RolloutActions> DistrustedCanary(const RolloutFacts& f) {
  const bool flat = f.input.canary->status.verdict == Verdict::kFlat;
  if (!flat && f.holding()) return std::nullopt;
  const std::string& hash = f.input.template_hash;
  const std::string why =
      CanaryDistrust(*f.input.canary, f.input.deployment, hash, *f.input.policy, f.input.kind);
  if (why.empty()) return std::nullopt;
  RolloutActions out;
  out.event_warning = true;
  out.event_reason = f.holding() ? "RolloutHeld" : "CanaryNotTrusted";
  out.event_note = "canary " + f.canary_name + " cannot " + (f.holding() ? "release" : "judge") +
                   " template " + hash + ": " + why +
                   ". Delete it, and allocguard runs its own canary for this template.";
  return out;
}

// Rule 10: a held template whose canary is not Flat stays held; the event
// says why and what would fix it.
std::optional<RolloutActions> KeepHeld(const RolloutFacts& f) {
  const api::ReplayCanaryStatus& status = f.input.canary->status;
  if (!f.holding() || status.verdict == Verdict::kFlat) return std::nullopt;
  const std::string verdict = api::RecordedVerdictName(status.verdict, status.unknown_verdict);
  const std::string& slope = status.floor_slope;
  RolloutActions out;
  out.event_warning = true;
  out.event_reason = "RolloutHeld";
  out.event_note =
      "template " + f.input.template_hash + " is held: canary " + f.canary_name + " found " +
      (verdict.empty() ? std::string("no verdict") : verdict) +
      (slope.empty() ? "" : " (floor slope " + slope + ")") + ": " + status.explanation +
      (status.flat_variant.empty()
           ? ""
           : "; variant " + status.flat_variant +
                 " stayed flat on the same load: switch the policy's allocator") +
      (f.pinned() ? ". " + std::string(kRollOutPinnedAnyway)
                  : ". To roll out anyway, annotate the Deployment with " +
                        std::string(api::kOverrideHoldAnnotation) + "=<reason> and unpause it.");
  return out;
}

// Rule 11: record the template as judged; a held one (Flat) is released, an
// audited one reported with its verdict.
std::optional<RolloutActions> ReleaseOrRecord(const RolloutFacts& f) {
  const api::ReplayCanaryStatus& status = f.input.canary->status;
  const bool flat = status.verdict == Verdict::kFlat;
  const std::string& hash = f.input.template_hash;
  const std::string& slope = status.floor_slope;
  RolloutActions out;
  json patch = {{"metadata", {{"annotations", {{api::kReleasedCandidateAnnotation, hash}}}}}};
  if (f.holding()) {
    patch["metadata"]["annotations"][api::kHeldCandidateAnnotation] = nullptr;
    if (f.pinned()) {
      out.release_pinned_hold = true;
    } else {
      patch["spec"] = {{"paused", false}};
    }
    out.event_reason = "RolloutReleased";
    out.event_note = "canary " + f.canary_name + " is Flat" +
                     (slope.empty() ? "" : " (floor slope " + slope + ")") +
                     ": the rollout of template " + hash + " proceeds";
  } else {
    out.event_warning = !flat;
    out.event_reason = flat ? "CanaryPassed" : "CanaryFailedAudit";
    out.event_note = "audit: canary " + f.canary_name + " found " +
                     api::RecordedVerdictName(status.verdict, status.unknown_verdict) +
                     (slope.empty() ? "" : " (floor slope " + slope + ")") + ": " +
                     status.explanation + " (the rollout was not held: the policy's mode is Audit)";
  }
  out.deployment_patch = patch;
  return out;
}

}  // namespace

RolloutActions DecideRollout(const RolloutInput& input) {
  RolloutFacts facts{input, input.deployment.meta.Annotation(api::kHeldCandidateAnnotation),
                     input.deployment.meta.Annotation(api::kReleasedCandidateAnnotation), ""};
  if (input.policy.has_value()) {
    facts.canary_name =
        CanaryName(input.deployment.meta.name, input.template_hash, CanaryPolicyKey(*input.policy));
  }
  // In the order of the header's list; rules 6 on may assume a policy
  // (rule 3), rules 8 on a canary (rule 7).
  static constexpr RolloutRule kRules[] = {
      ReleaseOrphanedHold,  ClearOverriddenHold, NotGoverned,   OptedOut,         AlreadyReleased,
      AdoptRunningTemplate, StartCanary,         WaitForCanary, DistrustedCanary, KeepHeld,
      ReleaseOrRecord};
  for (RolloutRule rule : kRules) {
    if (std::optional<RolloutActions> actions = rule(facts)) return std::move(*actions);
  }
  return RolloutActions{};  // not reached: ReleaseOrRecord always decides
}

}  // namespace allocguard::controllers
