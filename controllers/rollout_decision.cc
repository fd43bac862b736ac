#include "controllers/rollout_decision.h"

#include <cstdint>

#include "controllers/canary_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/deployment.h"
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

MeasuredTemplate MeasuredTemplateOf(WorkloadKind kind, const json& workload) {
  MeasuredTemplate m;
  m.kind = kind;
  m.hash = api::MeasuredHashOf(api::ParseDeploymentSummary(workload));
  if (kind == WorkloadKind::kStatefulSet) {
    m.claims = api::ParseStatefulSet(workload).volume_claim_templates;
  }
  return m;
}

std::string CanaryKey(const MeasuredTemplate& measured, const std::string& policy_key) {
  // One line per part; no part can contain a newline (hex digits, a kind,
  // claim names are DNS labels), so two different inputs never join alike.
  std::string text = std::string("kind ") + WorkloadKindName(measured.kind) + "\ntemplate " +
                     measured.hash + "\npolicy " + policy_key + "\n";
  for (const api::VolumeClaimTemplate& claim : measured.claims) {
    text += "claim " + claim.name + " " +
            (claim.storage_bytes ? std::to_string(*claim.storage_bytes) : std::string("-")) + "\n";
  }
  return api::Sha256Hex(text);
}

std::string CanaryKey(const MeasuredTemplate& measured, const api::AllocatorPolicy& policy) {
  std::string policy_key = CanaryPolicyKey(policy);
  // Container names are DNS labels: no spaces.
  for (const std::string& c : policy.spec.containers) policy_key += " " + c;
  return CanaryKey(measured, policy_key);
}

bool OwnsCanary(const api::ReplayCanarySummary& canary, WorkloadKind kind,
                const api::ObjectMeta& owner) {
  if (owner.uid.empty()) return false;
  for (const api::OwnerReference& o : canary.meta.owner_references) {
    if (o.kind == WorkloadKindName(kind) && o.name == owner.name && o.uid == owner.uid) {
      return true;
    }
  }
  return false;
}

namespace {

// CanaryDistrust but for the candidate's measurement, which a running canary
// does not have yet: whether the canary is one a workload may join.
std::string CanarySpecDistrust(const api::ReplayCanarySummary& canary,
                               const MeasuredTemplate& measured,
                               const api::AllocatorPolicy& policy) {
  if (!canary.parsed.has_value()) return "it does not parse: " + canary.parse_error;
  const api::ReplayCanarySpec& spec = canary.parsed->spec;
  const std::string kind_name = WorkloadKindName(measured.kind);
  if (spec.target_kind != kind_name) {
    return "it targets a " + spec.target_kind + ", not a " + kind_name;
  }
  if (spec.template_hash != measured.hash) {
    return "its spec.templateHash is " + spec.template_hash + ", not " + measured.hash;
  }
  // The template as stored (ParseReplayCanary keeps it as text, so the
  // summary holds no copy of its tree).
  const std::string stored = api::MeasuredTemplateHash(
      json::parse(spec.pod_template_json, nullptr, /*allow_exceptions=*/false));
  if (stored != measured.hash) {
    return "its spec.template is not template " + measured.hash + " (it hashes to " + stored + ")";
  }
  if (ProofKey(spec.candidate_allocator, spec.libc, spec.canary, spec.limits) !=
      CanaryPolicyKey(policy)) {
    return "its allocator, canary or limits are not those policy " + policy.name + " asks for";
  }
  for (const api::VariantStatus& v : canary.status.variants) {
    if (v.measurement_key.empty()) continue;
    if (v.measurement_key !=
        MeasurementKey(*canary.parsed, v.name, policy.spec.containers, RerunOf(&v))) {
      return "variant " + v.name + " was measured on another spec (the canary was edited)";
    }
  }
  return "";
}

}  // namespace

std::string CanaryDistrust(const api::ReplayCanarySummary& canary, const MeasuredTemplate& measured,
                           const api::AllocatorPolicy& policy) {
  if (std::string why = CanarySpecDistrust(canary, measured, policy); !why.empty()) return why;
  for (const api::VariantStatus& v : canary.status.variants) {
    if (v.name == "candidate" && !v.measurement_key.empty()) return "";
  }
  return "it has no measurement of the candidate";
}

std::string CanaryDistrust(const json& canary, const json& workload,
                           const api::AllocatorPolicy& policy, WorkloadKind kind) {
  return CanaryDistrust(api::ParseReplayCanarySummary(canary), MeasuredTemplateOf(kind, workload),
                        policy);
}

namespace {

json OwnerReferenceJson(const std::string& api_version, const std::string& kind,
                        const std::string& name, const std::string& uid, bool controller) {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"name", name},
          {"uid", uid},
          {"controller", controller},
          {"blockOwnerDeletion", false}};
}

}  // namespace

json BuildReplayCanary(const api::DeploymentSummary& deployment, const api::AllocatorPolicy& policy,
                       const MeasuredTemplate& measured) {
  const api::ObjectMeta& meta = deployment.meta;
  const std::string& name = meta.name;
  api::ReplayCanarySpec spec;
  spec.policy = policy.name;
  spec.target_kind = WorkloadKindName(measured.kind);
  spec.target_name = name;
  spec.template_hash = measured.hash;
  spec.candidate_allocator = policy.spec.allocator;
  spec.libc = policy.spec.libc;
  spec.canary = policy.spec.canary;
  spec.limits = policy.spec.limits;
  json spec_json = api::ReplayCanarySpecToJson(spec);
  spec_json["template"] = deployment.pod_template;
  return {{"apiVersion", api::kApiVersion},
          {"kind", "ReplayCanary"},
          {"metadata",
           {{"name", CanaryName(CanaryKey(measured, policy))},
            {"namespace", meta.namespace_name},
            {"labels",
             {{kPolicyLabel, policy.name},
              {kWorkloadLabel, name.substr(0, 63)},
              {api::kManagedByLabel, api::kManagedByValue}}},
            {"ownerReferences",
             json::array({OwnerReferenceJson("apps/v1", spec.target_kind, name, meta.uid,
                                             /*controller=*/false)})}}},
          {"spec", spec_json}};
}

json BuildReplayCanary(const json& deployment, const api::AllocatorPolicy& policy,
                       WorkloadKind kind) {
  return BuildReplayCanary(api::ParseDeploymentSummary(deployment), policy,
                           MeasuredTemplateOf(kind, deployment));
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
    "To roll out anyway, annotate allocguard.io/override-hold=<reason> (needs the override "
    "permission) and set the pinned field (the partition, or the update strategy) back "
    "yourself; or set the AllocatorPolicy's rollout mode to Audit or Off.";

using RolloutRule = std::optional<RolloutActions> (*)(const RolloutFacts&);

RolloutActions Skip(std::string reason) {
  RolloutActions out;
  out.skip_reason = std::move(reason);
  return out;
}

// The annotations every end of a hold removes (a merge patch's nulls): the
// hold's mark, and the override annotation, spent or asked for but not acted
// on. Left in place, an override would let the next hold be lifted by anyone
// who may edit the workload: the validating webhook asks the override
// permission only of the update that sets or changes it.
json HoldEndAnnotations() {
  return {{api::kHeldCandidateAnnotation, nullptr}, {api::kOverrideHoldAnnotation, nullptr}};
}

// Rule 1: a hold no Enforce policy stands behind any more is released.
std::optional<RolloutActions> ReleaseOrphanedHold(const RolloutFacts& f) {
  if (!f.holding()) return std::nullopt;
  const std::string why = OrphanedHoldReason(f.input);
  if (why.empty()) return std::nullopt;
  RolloutActions out;
  json annotations = HoldEndAnnotations();
  if (f.pinned()) {
    // The release records the held template as released; it was not proven,
    // so the annotation goes back to what it was.
    out.release_pinned_hold = true;
    annotations[api::kReleasedCandidateAnnotation] =
        f.released.empty() ? json(nullptr) : json(f.released);
    out.deployment_patch = json{{"metadata", {{"annotations", std::move(annotations)}}}};
  } else {
    out.deployment_patch = json{{"metadata", {{"annotations", std::move(annotations)}}},
                                {"spec", {{"paused", false}}}};
  }
  out.event_reason = "HoldReleased";
  out.event_note = "template " + f.held + " was held by allocguard; the hold is released " +
                   "because " + why + ". The template was not proven by a replay canary.";
  return out;
}

// Rule 2: the user rolled the held template out by override: the hold is
// over, and the override is consumed. A Deployment is rolled out when the
// user unpaused it; a StatefulSet or DaemonSet when the user put its pinned
// field back, which only the object read whole tells
// (consume_pinned_override).
std::optional<RolloutActions> ClearOverriddenHold(const RolloutFacts& f) {
  const std::string override_reason =
      f.input.deployment.meta.Annotation(api::kOverrideHoldAnnotation);
  if (!f.holding() || override_reason.empty()) return std::nullopt;
  if (!f.pinned() && !RolledOutByOverride(f.input.deployment)) return std::nullopt;
  if (f.pinned() && f.input.pin_in_place) return std::nullopt;  // not rolled out yet
  RolloutActions out;
  json annotations = HoldEndAnnotations();
  annotations[api::kOverriddenCandidateAnnotation] = f.held + " " + override_reason;
  annotations[api::kReleasedCandidateAnnotation] = f.input.template_hash;
  if (f.pinned()) {
    out.consume_pinned_override = true;
    // What the hold remembered goes with it: the user has set the field.
    annotations[api::kUserPartitionAnnotation] = nullptr;
    annotations[api::kUserUpdateStrategyAnnotation] = nullptr;
  }
  out.deployment_patch = json{{"metadata", {{"annotations", std::move(annotations)}}}};
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
  out.create_canary = BuildReplayCanary(f.input.deployment, *f.input.policy, f.input.measured);
  out.event_reason = "CanaryStarted";
  out.event_note = "replay canary " + f.canary_name + " started for template " + hash +
                   (f.holding() ? "; the rollout is held until it is flat"
                                : " (audit: the rollout is not held)");
  return out;
}

// Rule 7a: the canary of this measured template and policy key was started
// for another workload (or for this one's earlier self): record this one as
// an owner, so the canary lives while any of them does, and tell the user
// whose verdict will be theirs. Only a canary that proves this template is
// joined; any other is left to rule 9.
std::optional<RolloutActions> JoinSharedCanary(const RolloutFacts& f) {
  const api::ReplayCanarySummary& canary = *f.input.canary;
  const api::ObjectMeta& meta = f.input.deployment.meta;
  if (meta.uid.empty() || OwnsCanary(canary, f.input.kind, meta)) return std::nullopt;
  if (canary.meta.owner_references.size() >= kMaxCanaryOwners) return std::nullopt;
  if (!CanarySpecDistrust(canary, f.input.measured, *f.input.policy).empty()) return std::nullopt;
  json owners = json::array();
  for (const api::OwnerReference& o : canary.meta.owner_references) {
    owners.push_back(OwnerReferenceJson(o.api_version, o.kind, o.name, o.uid, o.controller));
  }
  owners.push_back(OwnerReferenceJson("apps/v1", f.kind(), meta.name, meta.uid, false));
  json patch = {{"metadata", {{"ownerReferences", std::move(owners)}}}};
  if (!canary.meta.resource_version.empty()) {
    patch["metadata"]["resourceVersion"] = canary.meta.resource_version;
  }
  RolloutActions out;
  out.join_canary = std::move(patch);
  out.event_reason = "CanaryShared";
  const std::string& first = canary.parsed->spec.target_name;
  out.event_note = "template " + f.input.template_hash + " measures alike with the template " +
                   "replay canary " + f.canary_name + " runs (started for " + f.kind() + " " +
                   first + "; labels do not count): its verdict is this " + f.kind() + "'s too" +
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
  const std::string why = CanaryDistrust(*f.input.canary, f.input.measured, *f.input.policy);
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
    patch["metadata"]["annotations"].update(HoldEndAnnotations());
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
    facts.canary_name = CanaryName(CanaryKey(input.measured, *input.policy));
  }
  // In the order of the header's list; rules 6 on may assume a policy
  // (rule 3), rules 8 on a canary (rule 7).
  static constexpr RolloutRule kRules[] = {
      ReleaseOrphanedHold, ClearOverriddenHold,  NotGoverned, OptedOut,
      AlreadyReleased,     AdoptRunningTemplate, StartCanary, JoinSharedCanary,
      WaitForCanary,       DistrustedCanary,     KeepHeld,    ReleaseOrRecord};
  for (RolloutRule rule : kRules) {
    if (std::optional<RolloutActions> actions = rule(facts)) return std::move(*actions);
  }
  return RolloutActions{};  // not reached: ReleaseOrRecord always decides
}

}  // namespace allocguard::controllers
