#pragma once

// What `allocguard gate` reports for a Deployment, a StatefulSet, a DaemonSet
// or a ReplayCanary: a pure
// function of the objects as the API server has them (docs/gitops.md). The
// command polls, calls AnswerDeploymentGate or AnswerCanaryGate after every
// read, and stops at the first answer that is not kWaiting. (Not to be
// confused with admission::DecideDeploymentGate, the webhook's decision to
// hold a template at admission.)
//
// A Deployment is read the way the rollout reconciler reads it
// (rollout_decision.h): the policy that governs its pod template, the
// template's hash, the held-candidate and released-candidate annotations,
// spec.paused, and the ReplayCanary keyed by (Deployment, template hash,
// policy key). A ReplayCanary is read from its status alone.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controllers/rollout_decision.h"
#include "operator/api/types.h"
#include "operator/common/status.h"
#include "operator/common/verdict.h"

namespace allocguard::controllers {

enum class GateKind { kDeployment, kReplayCanary, kStatefulSet, kDaemonSet };

struct GateTarget {
  GateKind kind = GateKind::kDeployment;
  std::string name;
  // "deployment/web", "statefulset/db" or "replaycanary/web-1a2b-3c4d", as
  // printed.
  std::string Display() const;
  // The workload kind of a Deployment, StatefulSet or DaemonSet target.
  WorkloadKind Workload() const;
};

// "NAME", "deployment/NAME" (also deploy, deployments, deployment.apps),
// "statefulset/NAME" (also sts, statefulsets, statefulset.apps),
// "daemonset/NAME" (also ds, daemonsets, daemonset.apps),
// "replaycanary/NAME" (also replaycanaries, rc, replaycanary.allocguard.io).
Result<GateTarget> ParseGateTarget(const std::string& text);

// What the rollout may do. The order is the exit codes' (GateExitCode).
enum class GateState {
  kProceed,   // the rollout may proceed (released, flat, ungoverned, not held)
  kHeld,      // the canary's verdict is not Flat: the Deployment stays paused
  kFailed,    // the canary could not judge the template (workload failed, bad canary)
  kWaiting,   // no verdict yet
  kTimedOut,  // the command waited --timeout and the answer was still kWaiting
  kNotFound,  // the Deployment or ReplayCanary does not exist
};

// "Proceed", "Held", "Failed", "Waiting", "TimedOut", "NotFound".
const char* GateStateName(GateState state);
// 0 Proceed, 2 Held, 3 Failed, 4 TimedOut, 5 NotFound; 1 is left for usage,
// configuration and API errors; Waiting is never an exit (it maps to 4).
int GateExitCode(GateState state);

struct GateAnswer {
  GateState state = GateState::kWaiting;
  std::string reason;   // CamelCase: Released, Ungoverned, CanaryNotFlat, CanaryRunning, ...
  std::string message;  // one sentence for people
  // What the answer rests on; empty when it does not apply.
  std::string policy;
  std::string rollout_mode;
  std::string template_hash;
  std::string canary;
  std::optional<api::CanaryPhase> canary_phase;  // status.phase; none when unknown
  std::optional<Verdict> verdict;  // status.verdict; one allocguard does not write is kFailed
  std::string floor_slope;
  std::string flat_variant;
  std::string explanation;

  nlohmann::json ToJson() const;
};

// Looks up a ReplayCanary in the Deployment's namespace by name.
using CanaryLookup = std::function<std::optional<nlohmann::json>(const std::string& name)>;

// object: the workload (a Deployment unless `kind` says otherwise) as the
// API server has it; policies: the parsed AllocatorPolicies of its
// namespace. For a StatefulSet or a DaemonSet, rules 4 and 5 never answer
// (the operator does not clear their override: docs/workload-kinds.md) and the messages
// say how such a hold is lifted.
// The first of these rules that applies answers:
//  1. No policy, or several, select the pod template: Proceed, Ungoverned.
//  2. The policy's rollout mode is Off: Proceed, RolloutModeOff.
//  3. Opted out (allocguard.io/inject=false): Proceed, OptedOut, when no
//     template is held; a held template that was not rolled out by override
//     stays Held, OptedOutWhileHeld (an opt-out does not lift a hold).
//     The canary is looked up (`canaries`) only past this rule.
//  4. The held template is the current one, unpaused, with the override
//     annotation: Proceed, Overridden.
//  5. Not held, the template released, and the overridden-candidate
//     annotation names it (the operator cleared an overridden hold):
//     Proceed, Overridden.
//  6. Not held and the template released: Proceed, Released (by a Flat
//     canary, or adopted) or NotHeld (let through with another verdict).
//  7. Another template is held than the current one: Waiting,
//     TemplateChanged.
//  8. Not held: Waiting, AwaitingAdoption, for an Enforce policy that has not
//     adopted the Deployment; Waiting, CanaryRunning or CanaryPending, while
//     the canary has no verdict; else Proceed, NotHeld.
//  9. Held, its canary has not ended: Waiting, CanaryRunning or
//     CanaryPending.
// 10. The canary could not judge it: Failed, CanaryFailed.
// 11. The canary is Flat: Held, CanaryNotTrusted, when it cannot release the
//     template (CanaryDistrust); else Waiting, Releasing.
// 12. Otherwise: Held, CanaryNotFlat.
GateAnswer AnswerDeploymentGate(const nlohmann::json& object,
                                const std::vector<api::AllocatorPolicy>& policies,
                                const CanaryLookup& canaries,
                                WorkloadKind kind = WorkloadKind::kDeployment);

// object: the ReplayCanary as the API server has it.
GateAnswer AnswerCanaryGate(const nlohmann::json& object);

// One line: "deployment/web Held CanaryNotFlat: <message>".
std::string FormatGateLine(const GateTarget& target, const GateAnswer& answer);

}  // namespace allocguard::controllers
