#include "controllers/gate_decision.h"

#include <map>

#include "controllers/canary_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/canary_status.h"
#include "operator/api/json_fields.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Copies what a canary's status says into the answer.
void ReadCanary(const api::ReplayCanarySummary& canary, GateAnswer& a) {
  const api::ReplayCanaryStatus& status = canary.status;
  a.canary = canary.meta.name;
  a.canary_phase = status.phase;
  a.floor_slope = status.floor_slope;
  a.flat_variant = status.flat_variant;
  a.explanation = status.explanation;
  // A verdict allocguard does not write (an edited status) is Failed: it
  // can only hold, and the explanation says why.
  a.verdict = status.verdict;
  if (!status.unknown_verdict.empty()) {
    a.explanation = "the canary's status has verdict \"" + status.unknown_verdict +
                    "\", which allocguard does not write" +
                    (a.explanation.empty() ? "" : "; " + a.explanation);
  }
}

// "found Ratchet (floor slope +0.40 GiB/h): <explanation>"
std::string Found(const GateAnswer& a) {
  std::string s = "found " + std::string(a.verdict ? VerdictName(*a.verdict) : "no verdict");
  if (!a.floor_slope.empty()) s += " (floor slope " + a.floor_slope + ")";
  if (!a.explanation.empty()) s += ": " + a.explanation;
  return s;
}

bool CanaryFailed(const GateAnswer& a) {
  return a.canary_phase == api::CanaryPhase::kFailed || a.verdict == Verdict::kFailed;
}

std::string WaitingForCanary(const GateAnswer& a) {
  if (!a.canary_phase.has_value()) return "canary " + a.canary + " has not started";
  return "canary " + a.canary + " is " + api::CanaryPhaseName(*a.canary_phase);
}

}  // namespace

std::string GateTarget::Display() const {
  switch (kind) {
    case GateKind::kDeployment:
      return "deployment/" + name;
    case GateKind::kStatefulSet:
      return "statefulset/" + name;
    case GateKind::kDaemonSet:
      return "daemonset/" + name;
    case GateKind::kReplayCanary:
      break;
  }
  return "replaycanary/" + name;
}

WorkloadKind GateTarget::Workload() const {
  if (kind == GateKind::kStatefulSet) return WorkloadKind::kStatefulSet;
  if (kind == GateKind::kDaemonSet) return WorkloadKind::kDaemonSet;
  return WorkloadKind::kDeployment;
}

Result<GateTarget> ParseGateTarget(const std::string& text) {
  GateTarget t;
  const size_t slash = text.find('/');
  if (slash == std::string::npos) {
    t.name = text;
  } else {
    const std::string kind = Lower(text.substr(0, slash));
    t.name = text.substr(slash + 1);
    if (kind == "deployment" || kind == "deployments" || kind == "deploy" ||
        kind == "deployment.apps" || kind == "deployments.apps") {
      t.kind = GateKind::kDeployment;
    } else if (kind == "statefulset" || kind == "statefulsets" || kind == "sts" ||
               kind == "statefulset.apps" || kind == "statefulsets.apps") {
      t.kind = GateKind::kStatefulSet;
    } else if (kind == "daemonset" || kind == "daemonsets" || kind == "ds" ||
               kind == "daemonset.apps" || kind == "daemonsets.apps") {
      t.kind = GateKind::kDaemonSet;
    } else if (kind == "replaycanary" || kind == "replaycanaries" || kind == "rc" ||
               kind == "replaycanary.allocguard.io" || kind == "replaycanaries.allocguard.io") {
      t.kind = GateKind::kReplayCanary;
    } else {
      return InvalidArgument("unknown kind \"" + text.substr(0, slash) +
                             "\": give deployment/NAME, statefulset/NAME, daemonset/NAME, "
                             "replaycanary/NAME or NAME");
    }
  }
  if (t.name.empty() || t.name.find('/') != std::string::npos) {
    return InvalidArgument("\"" + text + "\" is not deployment/NAME, replaycanary/NAME or NAME");
  }
  return t;
}

const char* GateStateName(GateState state) {
  switch (state) {
    case GateState::kProceed:
      return "Proceed";
    case GateState::kHeld:
      return "Held";
    case GateState::kFailed:
      return "Failed";
    case GateState::kWaiting:
      return "Waiting";
    case GateState::kTimedOut:
      return "TimedOut";
    case GateState::kNotFound:
      return "NotFound";
  }
  return "Unknown";
}

int GateExitCode(GateState state) {
  switch (state) {
    case GateState::kProceed:
      return 0;
    case GateState::kHeld:
      return 2;
    case GateState::kFailed:
      return 3;
    case GateState::kWaiting:
    case GateState::kTimedOut:
      return 4;
    case GateState::kNotFound:
      return 5;
  }
  return 1;
}

json GateAnswer::ToJson() const {
  json j = {{"state", GateStateName(state)},
            {"reason", reason},
            {"message", message},
            {"exitCode", GateExitCode(state)}};
  const std::pair<const char*, const std::string*> optional_fields[] = {
      {"policy", &policy},
      {"rolloutMode", &rollout_mode},
      {"templateHash", &template_hash},
      {"canary", &canary},
      {"floorSlope", &floor_slope},
      {"flatVariant", &flat_variant},
      {"explanation", &explanation}};
  for (const auto& [key, value] : optional_fields) {
    if (!value->empty()) j[key] = *value;
  }
  if (canary_phase.has_value()) j["canaryPhase"] = api::CanaryPhaseName(*canary_phase);
  if (verdict.has_value()) j["verdict"] = VerdictName(*verdict);
  return j;
}

GateAnswer AnswerCanaryGate(const json& object) {
  const api::ReplayCanarySummary canary = api::ParseReplayCanarySummary(object);
  GateAnswer a;
  ReadCanary(canary, a);
  a.policy = canary.policy_name;
  a.template_hash = canary.template_hash;
  if (!Ended(a.canary_phase)) {
    a.state = GateState::kWaiting;
    a.reason = std::string("Canary") +
               api::CanaryPhaseName(a.canary_phase.value_or(api::CanaryPhase::kPending));
    a.message = WaitingForCanary(a);
    return a;
  }
  if (CanaryFailed(a)) {
    a.state = GateState::kFailed;
    a.reason = "CanaryFailed";
    a.message = "canary " + a.canary + " could not judge the template: " + a.explanation;
  } else if (a.verdict == Verdict::kFlat) {
    a.state = GateState::kProceed;
    a.reason = "CanaryFlat";
    a.message = "canary " + a.canary + " " + Found(a);
  } else {
    a.state = GateState::kHeld;
    a.reason = "CanaryNotFlat";
    a.message =
        "canary " + a.canary + " " + Found(a) +
        (a.flat_variant.empty() ? ""
                                : "; variant " + a.flat_variant + " stayed flat on the same load");
  }
  return a;
}

namespace {

// What the rules of AnswerDeploymentGate read, derived once. Rules 2 and 3
// read the policy; rules 4 on also the template and its canary, which are
// read only when rules 2 and 3 did not answer.
struct GateFacts {
  const api::DeploymentSummary& deployment;
  const api::AllocatorPolicy& policy;
  WorkloadKind kind;
  std::string held;  // the held-candidate annotation
  // From rule 4 on.
  std::string hash;           // the pod template's
  MeasuredTemplate measured;  // what its canary measures
  std::string released;       // the released-candidate annotation
  std::string overridden;     // the overridden-candidate annotation
  std::optional<api::ReplayCanarySummary> canary;
  bool finished = false;  // the canary exists and has ended
  GateAnswer base;        // what the answer rests on so far
};

using GateRule = std::optional<GateAnswer> (*)(const GateFacts&);

// The way out of a hold without a Flat canary, for the messages.
std::string HowToRollOutAnyway(WorkloadKind kind, bool say_deployment = false) {
  if (kind == WorkloadKind::kDeployment) {
    return std::string("To roll out anyway, annotate ") +
           (say_deployment ? "the Deployment" : "it") + " with " + api::kOverrideHoldAnnotation +
           "=<reason> and unpause it";
  }
  return std::string("To roll out anyway, annotate it with ") + api::kOverrideHoldAnnotation +
         "=<reason> and set the pinned field (the partition, or the update strategy) back "
         "yourself; or set the AllocatorPolicy's rollout mode to Audit or Off (the operator "
         "then releases the hold)";
}

GateAnswer Say(const GateFacts& f, GateState state, std::string reason, std::string message) {
  GateAnswer a = f.base;
  a.state = state;
  a.reason = std::move(reason);
  a.message = std::move(message);
  return a;
}

// Rule 1: no policy, or several, select the pod template: ungoverned.
std::optional<GateAnswer> Ungoverned(size_t matching) {
  if (matching == 1) return std::nullopt;
  GateAnswer a;
  a.state = GateState::kProceed;
  a.reason = "Ungoverned";
  a.message = matching == 0
                  ? "no AllocatorPolicy in its namespace selects its pod template: allocguard "
                    "does not gate this rollout"
                  : std::to_string(matching) +
                        " AllocatorPolicies select its pod template, so none governs it: "
                        "allocguard does not gate this rollout";
  return a;
}

// Rule 2: the policy's rollout mode is Off: nothing is held.
std::optional<GateAnswer> RolloutModeOff(const GateFacts& f) {
  if (f.policy.spec.rollout.mode != api::RolloutMode::kOff) return std::nullopt;
  return Say(f, GateState::kProceed, "RolloutModeOff",
             "policy " + f.policy.name + " has rollout mode Off: nothing is held");
}

// Rule 3: opted out (allocguard.io/inject=false). As the rollout reconciler
// reads it, an opt-out is not an override: a template held before it stays
// held (and nothing releases it) unless it was rolled out by override.
std::optional<GateAnswer> OptedOut(const GateFacts& f) {
  if (f.deployment.meta.Annotation(api::kInjectAnnotation) != "false") return std::nullopt;
  if (f.held.empty()) {
    return Say(f, GateState::kProceed, "OptedOut",
               std::string("opted out with ") + api::kInjectAnnotation + "=false");
  }
  const bool deployment = f.kind == WorkloadKind::kDeployment;
  if (deployment && RolledOutByOverride(f.deployment)) return std::nullopt;
  return Say(f, GateState::kHeld, "OptedOutWhileHeld",
             "template " + f.held + " stays held although the " + WorkloadKindName(f.kind) +
                 " opted out with " + api::kInjectAnnotation +
                 "=false: an opt-out does not lift a hold. " + HowToRollOutAnyway(f.kind));
}

// Rule 4: the held template was unpaused with the override annotation.
std::optional<GateAnswer> HoldOverridden(const GateFacts& f) {
  const api::ObjectMeta& meta = f.deployment.meta;
  if (f.kind != WorkloadKind::kDeployment) return std::nullopt;
  if (f.held.empty() || f.held != f.hash || f.deployment.paused ||
      !meta.HasAnnotation(api::kOverrideHoldAnnotation)) {
    return std::nullopt;
  }
  return Say(f, GateState::kProceed, "Overridden",
             "the hold of template " + f.hash +
                 " was overridden by hand: " + meta.Annotation(api::kOverrideHoldAnnotation));
}

// Rule 5: the operator cleared a hold the user overrode.
std::optional<GateAnswer> OverriddenHoldCleared(const GateFacts& f) {
  if (!f.held.empty() || f.released != f.hash || f.overridden.rfind(f.hash + " ", 0) != 0) {
    return std::nullopt;
  }
  return Say(f, GateState::kProceed, "Overridden",
             "the hold of template " + f.hash +
                 " was overridden by hand: " + f.overridden.substr(f.hash.size() + 1));
}

// Rule 6: the template is released (by a Flat canary, by adoption, or let
// through without a hold).
std::optional<GateAnswer> AlreadyReleased(const GateFacts& f) {
  if (!f.held.empty() || f.released != f.hash) return std::nullopt;
  const GateAnswer& a = f.base;
  if (!f.finished) {
    return Say(f, GateState::kProceed, "Released",
               "template " + f.hash + " is released (adopted as the baseline, or canaried " +
                   "under an earlier version of the policy)");
  }
  if (a.verdict == Verdict::kFlat) {
    return Say(f, GateState::kProceed, "Released",
               "template " + f.hash + " was released: canary " + a.canary + " " + Found(a));
  }
  return Say(f, GateState::kProceed, "NotHeld",
             "template " + f.hash + " was let through without a hold (rollout mode " +
                 a.rollout_mode + "); canary " + a.canary + " " + Found(a));
}

// Rule 7: a candidate is held but the template changed since: the operator
// has yet to act.
std::optional<GateAnswer> TemplateChanged(const GateFacts& f) {
  if (f.held.empty() || f.held == f.hash) return std::nullopt;
  return Say(f, GateState::kWaiting, "TemplateChanged",
             "the held candidate is " + f.held + " but the template is now " + f.hash +
                 "; waiting for the operator");
}

// Rule 8: not held: Audit mode, or an Enforce Deployment not yet adopted or
// admitted while the webhook was down. The operator's canary reports.
std::optional<GateAnswer> NotHeld(const GateFacts& f) {
  if (!f.held.empty()) return std::nullopt;
  const GateAnswer& a = f.base;
  if (f.policy.spec.rollout.mode == api::RolloutMode::kEnforce && f.released.empty()) {
    return Say(f, GateState::kWaiting, "AwaitingAdoption",
               "policy " + f.policy.name + " governs it but the operator has not adopted it yet");
  }
  if (!f.finished) {
    return Say(f, GateState::kWaiting, f.canary.has_value() ? "CanaryRunning" : "CanaryPending",
               "not held (rollout mode " + a.rollout_mode + "); " + WaitingForCanary(a));
  }
  return Say(f, GateState::kProceed, "NotHeld",
             "template " + f.hash + " is not held (rollout mode " + a.rollout_mode + "); canary " +
                 a.canary + " " + Found(a));
}

// Rule 9: held for this template, its canary has not ended.
std::optional<GateAnswer> CanaryNotEnded(const GateFacts& f) {
  if (f.finished) return std::nullopt;
  return Say(f, GateState::kWaiting, f.canary.has_value() ? "CanaryRunning" : "CanaryPending",
             "template " + f.hash + " is held; " + WaitingForCanary(f.base));
}

// Rule 10: the canary could not judge the template.
std::optional<GateAnswer> CanaryCouldNotJudge(const GateFacts& f) {
  if (!CanaryFailed(f.base)) return std::nullopt;
  return Say(f, GateState::kFailed, "CanaryFailed",
             "template " + f.hash + " is held: canary " + f.base.canary +
                 " could not judge it: " + f.base.explanation);
}

// Rule 11: a Flat canary. The operator releases only on a canary that
// proves the held template (CanaryDistrust); a Flat one it does not trust
// holds the rollout, so the gate says so at once instead of waiting for a
// release that will not come.
std::optional<GateAnswer> FlatCanary(const GateFacts& f) {
  if (f.base.verdict != Verdict::kFlat) return std::nullopt;
  const std::string& canary = f.base.canary;
  if (const std::string why = CanaryDistrust(*f.canary, f.measured, f.policy); !why.empty()) {
    return Say(f, GateState::kHeld, "CanaryNotTrusted",
               "template " + f.hash + " is held: canary " + canary +
                   " is Flat but cannot release it: " + why +
                   ". Delete it, and allocguard runs its own canary for this template");
  }
  return Say(
      f, GateState::kWaiting, "Releasing",
      "canary " + canary + " is Flat; waiting for the operator to release template " + f.hash);
}

// Rule 12: any other verdict holds the template.
std::optional<GateAnswer> CanaryNotFlat(const GateFacts& f) {
  const GateAnswer& a = f.base;
  return Say(f, GateState::kHeld, "CanaryNotFlat",
             "template " + f.hash + " is held: canary " + a.canary + " " + Found(a) +
                 (a.flat_variant.empty() ? ""
                                         : "; variant " + a.flat_variant +
                                               " stayed flat on the same load: switch the "
                                               "policy's allocator") +
                 ". " + HowToRollOutAnyway(f.kind, /*say_deployment=*/true));
}

}  // namespace

GateAnswer AnswerDeploymentGate(const json& object,
                                const std::vector<api::AllocatorPolicy>& policies,
                                const CanaryLookup& canaries, WorkloadKind kind) {
  const api::DeploymentSummary deployment = api::ParseDeploymentSummary(object);
  const api::ObjectMeta& meta = deployment.meta;
  // The policy that governs it, as the rollout reconciler finds it: the one
  // whose selector matches the pod template's labels.
  const std::vector<const api::AllocatorPolicy*> matching =
      api::PoliciesSelecting(policies, deployment.template_labels);
  if (std::optional<GateAnswer> a = Ungoverned(matching.size())) return std::move(*a);
  const api::AllocatorPolicy& policy = *matching.front();
  GateFacts facts{deployment, policy, kind, meta.Annotation(api::kHeldCandidateAnnotation)};
  facts.base.policy = policy.name;
  facts.base.rollout_mode = api::RolloutModeName(policy.spec.rollout.mode);
  static constexpr GateRule kPolicyRules[] = {RolloutModeOff, OptedOut};
  for (GateRule rule : kPolicyRules) {
    if (std::optional<GateAnswer> a = rule(facts)) return std::move(*a);
  }

  // Rules 4 on: the template and its canary.
  facts.hash = admission::TemplateHash(deployment.pod_template);
  facts.released = meta.Annotation(api::kReleasedCandidateAnnotation);
  facts.overridden = meta.Annotation(api::kOverriddenCandidateAnnotation);
  facts.base.template_hash = facts.hash;
  facts.measured = MeasuredTemplateOf(kind, object);
  facts.base.canary = CanaryName(CanaryKey(facts.measured, policy));
  if (canaries) {
    if (std::optional<json> found = canaries(facts.base.canary)) {
      facts.canary = api::ParseReplayCanarySummary(*found);
    }
  }
  if (facts.canary.has_value()) ReadCanary(*facts.canary, facts.base);
  facts.finished = facts.canary.has_value() && Ended(facts.base.canary_phase);
  // In the order of the header's list; rules 9 on may assume the template is
  // held (rules 7 and 8), rules 10 on a canary that ended (rule 9).
  static constexpr GateRule kTemplateRules[] = {
      HoldOverridden, OverriddenHoldCleared, AlreadyReleased, TemplateChanged, NotHeld,
      CanaryNotEnded, CanaryCouldNotJudge,   FlatCanary,      CanaryNotFlat};
  for (GateRule rule : kTemplateRules) {
    if (std::optional<GateAnswer> a = rule(facts)) return std::move(*a);
  }
  return GateAnswer{};  // not reached: CanaryNotFlat always answers
}

std::string FormatGateLine(const GateTarget& target, const GateAnswer& answer) {
  return target.Display() + " " + GateStateName(answer.state) + " " + answer.reason + ": " +
         answer.message;
}

}  // namespace allocguard::controllers
