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
  return (kind == GateKind::kDeployment ? "deployment/" : "replaycanary/") + name;
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
    } else if (kind == "replaycanary" || kind == "replaycanaries" || kind == "rc" ||
               kind == "replaycanary.allocguard.io" || kind == "replaycanaries.allocguard.io") {
      t.kind = GateKind::kReplayCanary;
    } else {
      return InvalidArgument("unknown kind \"" + text.substr(0, slash) +
                             "\": give deployment/NAME, replaycanary/NAME or NAME");
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

GateAnswer AnswerDeploymentGate(const json& object,
                                const std::vector<api::AllocatorPolicy>& policies,
                                const CanaryLookup& canaries) {
  const api::DeploymentSummary deployment = api::ParseDeploymentSummary(object);
  const api::ObjectMeta& meta = deployment.meta;
  GateAnswer a;
  // The policy that governs it, as the rollout reconciler finds it: the one
  // whose selector matches the pod template's labels.
  const std::map<std::string, std::string>& labels = deployment.template_labels;
  const std::vector<const api::AllocatorPolicy*> matching =
      api::PoliciesSelecting(policies, labels);
  if (matching.size() != 1) {
    a.state = GateState::kProceed;
    a.reason = "Ungoverned";
    a.message = matching.empty()
                    ? "no AllocatorPolicy in its namespace selects its pod template: allocguard "
                      "does not gate this rollout"
                    : std::to_string(matching.size()) +
                          " AllocatorPolicies select its pod template, so none governs it: "
                          "allocguard does not gate this rollout";
    return a;
  }
  const api::AllocatorPolicy& policy = *matching.front();
  a.policy = policy.name;
  a.rollout_mode = api::RolloutModeName(policy.spec.rollout.mode);
  if (policy.spec.rollout.mode == api::RolloutMode::kOff) {
    a.state = GateState::kProceed;
    a.reason = "RolloutModeOff";
    a.message = "policy " + policy.name + " has rollout mode Off: nothing is held";
    return a;
  }
  const std::string held = meta.Annotation(api::kHeldCandidateAnnotation);
  if (meta.Annotation(api::kInjectAnnotation) == "false") {
    // As the rollout reconciler reads it: an opt-out is not an override, so
    // a template held before it stays held (and nothing releases it).
    if (!held.empty() && !RolledOutByOverride(deployment)) {
      a.state = GateState::kHeld;
      a.reason = "OptedOutWhileHeld";
      a.message = "template " + held + " stays held although the Deployment opted out with " +
                  api::kInjectAnnotation + "=false: an opt-out does not lift a hold. To roll " +
                  "out anyway, annotate it with " + api::kOverrideHoldAnnotation +
                  "=<reason> and unpause it";
      return a;
    }
    if (held.empty()) {
      a.state = GateState::kProceed;
      a.reason = "OptedOut";
      a.message = std::string("opted out with ") + api::kInjectAnnotation + "=false";
      return a;
    }
  }
  const std::string hash = admission::TemplateHash(deployment.pod_template);
  a.template_hash = hash;
  const std::string released = meta.Annotation(api::kReleasedCandidateAnnotation);
  const bool paused = deployment.paused;
  a.canary = CanaryName(meta.name, hash, CanaryPolicyKey(policy));
  std::optional<api::ReplayCanarySummary> canary;
  if (canaries) {
    if (std::optional<json> found = canaries(a.canary)) {
      canary = api::ParseReplayCanarySummary(*found);
    }
  }
  if (canary.has_value()) ReadCanary(*canary, a);
  const bool finished = canary.has_value() && Ended(a.canary_phase);

  if (!held.empty() && held == hash && !paused &&
      meta.HasAnnotation(api::kOverrideHoldAnnotation)) {
    a.state = GateState::kProceed;
    a.reason = "Overridden";
    a.message = "the hold of template " + hash +
                " was overridden by hand: " + meta.Annotation(api::kOverrideHoldAnnotation);
    return a;
  }
  const std::string overridden = meta.Annotation(api::kOverriddenCandidateAnnotation);
  if (held.empty() && released == hash && overridden.rfind(hash + " ", 0) == 0) {
    // The operator cleared a hold the user overrode.
    a.state = GateState::kProceed;
    a.reason = "Overridden";
    a.message = "the hold of template " + hash +
                " was overridden by hand: " + overridden.substr(hash.size() + 1);
    return a;
  }
  if (held.empty() && released == hash) {
    a.state = GateState::kProceed;
    if (!finished) {
      a.reason = "Released";
      a.message = "template " + hash + " is released (adopted as the baseline, or canaried " +
                  "under an earlier version of the policy)";
    } else if (a.verdict == Verdict::kFlat) {
      a.reason = "Released";
      a.message = "template " + hash + " was released: canary " + a.canary + " " + Found(a);
    } else {
      a.reason = "NotHeld";
      a.message = "template " + hash + " was let through without a hold (rollout mode " +
                  a.rollout_mode + "); canary " + a.canary + " " + Found(a);
    }
    return a;
  }
  if (!held.empty() && held != hash) {
    a.state = GateState::kWaiting;
    a.reason = "TemplateChanged";
    a.message = "the held candidate is " + held + " but the template is now " + hash +
                "; waiting for the operator";
    return a;
  }
  if (held.empty()) {
    // Not held: Audit mode, or an Enforce Deployment not yet adopted or
    // admitted while the webhook was down. The operator's canary reports.
    if (policy.spec.rollout.mode == api::RolloutMode::kEnforce && released.empty()) {
      a.state = GateState::kWaiting;
      a.reason = "AwaitingAdoption";
      a.message = "policy " + policy.name + " governs it but the operator has not adopted it yet";
      return a;
    }
    if (!finished) {
      a.state = GateState::kWaiting;
      a.reason = canary.has_value() ? "CanaryRunning" : "CanaryPending";
      a.message = "not held (rollout mode " + a.rollout_mode + "); " + WaitingForCanary(a);
      return a;
    }
    a.state = GateState::kProceed;
    a.reason = "NotHeld";
    a.message = "template " + hash + " is not held (rollout mode " + a.rollout_mode + "); canary " +
                a.canary + " " + Found(a);
    return a;
  }
  // Held for this template.
  if (!finished) {
    a.state = GateState::kWaiting;
    a.reason = canary.has_value() ? "CanaryRunning" : "CanaryPending";
    a.message = "template " + hash + " is held; " + WaitingForCanary(a);
    return a;
  }
  if (CanaryFailed(a)) {
    a.state = GateState::kFailed;
    a.reason = "CanaryFailed";
    a.message = "template " + hash + " is held: canary " + a.canary +
                " could not judge it: " + a.explanation;
    return a;
  }
  if (a.verdict == Verdict::kFlat) {
    // The operator releases only on a canary that proves the held template
    // (CanaryDistrust); a Flat one it does not trust holds the rollout, so
    // the gate says so at once instead of waiting for a release that will
    // not come.
    if (const std::string why = CanaryDistrust(*canary, deployment, hash, policy); !why.empty()) {
      a.state = GateState::kHeld;
      a.reason = "CanaryNotTrusted";
      a.message = "template " + hash + " is held: canary " + a.canary +
                  " is Flat but cannot release it: " + why +
                  ". Delete it, and allocguard runs its own canary for this template";
      return a;
    }
    a.state = GateState::kWaiting;
    a.reason = "Releasing";
    a.message =
        "canary " + a.canary + " is Flat; waiting for the operator to release template " + hash;
    return a;
  }
  a.state = GateState::kHeld;
  a.reason = "CanaryNotFlat";
  a.message = "template " + hash + " is held: canary " + a.canary + " " + Found(a) +
              (a.flat_variant.empty() ? ""
                                      : "; variant " + a.flat_variant +
                                            " stayed flat on the same load: switch the "
                                            "policy's allocator") +
              ". To roll out anyway, annotate the Deployment with " + api::kOverrideHoldAnnotation +
              "=<reason> and unpause it";
  return a;
}

std::string FormatGateLine(const GateTarget& target, const GateAnswer& answer) {
  return target.Display() + " " + GateStateName(answer.state) + " " + answer.reason + ": " +
         answer.message;
}

}  // namespace allocguard::controllers
