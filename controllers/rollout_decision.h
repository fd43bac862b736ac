#pragma once

// What the rollout reconciler does for one governed Deployment, StatefulSet
// or DaemonSet: a pure function of the workload, the policy that governs it
// and the ReplayCanary of its current pod template. The rules are the same
// for the three kinds; what a hold pins differs (a Deployment's spec.paused;
// a StatefulSet's partition and a DaemonSet's update strategy, put back by
// admission::ReleaseStatefulSetHold / ReleaseDaemonSetHold, workload_hold.h),
// and so does the override (Deployments only, see rule 2).
//
// Enforce: the admission webhook paused the Deployment and recorded the
// candidate's template hash (api::kHeldCandidateAnnotation). The reconciler
// makes sure a canary runs for that hash under the policy as it is now, and
// when it finishes either releases the hold (Flat) or leaves it with a
// Warning that names the flat variant, if any. A Deployment that was already
// running when the policy came (never held, never released) is adopted: its
// running template becomes the released baseline without a canary, because
// holding something already in production protects nothing; its next
// template change is held. Audit: a canary runs for every new template hash and its
// verdict is reported; nothing is held. Off: nothing.
//
// A hold never outlives what placed it: when the Deployment is no longer
// governed by an Enforce policy (the policy was deleted, or set to Audit or
// Off: the validating webhook allows either only to users with the override
// permission while a hold is on), the hold is released with a HoldReleased
// event that says the template was not proven. Opting out
// (allocguard.io/inject=false) does not lift a hold: it stays, with a
// RolloutHeld event that says how to override. A hold a user overrode
// (allocguard.io/override-hold and unpaused) is cleared, the override
// annotation with it, so a later hold needs a new, deliberate override;
// allocguard.io/overridden-candidate keeps the record (HoldCleared event).
// Every other end of a hold (a Flat canary, rule 1) removes an override
// annotation that was set but not acted on, for the same reason.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/names.h"
#include "operator/api/types.h"
#include "operator/api/workload_kinds.h"
#include "operator/api/workloads.h"

namespace allocguard::controllers {

// The kinds whose rollouts are gated (operator/api/workload_kinds.h).
using api::WorkloadKind;
using api::WorkloadKindFromName;
using api::WorkloadKindName;

// What a workload's canary measures of it: the kind (the canary's Job is
// built for it), api::MeasuredTemplateHash of the candidate template (its
// labels do not count: the canary's Pods carry labels of their own), and a
// StatefulSet's volume claim templates (its Job mounts them as emptyDirs).
// Workloads whose MeasuredTemplate and policy key are equal share one
// canary (CanaryKey), whoever asked first.
struct MeasuredTemplate {
  WorkloadKind kind = WorkloadKind::kDeployment;
  std::string hash;
  std::vector<api::VolumeClaimTemplate> claims;

  bool operator==(const MeasuredTemplate&) const = default;
};

// The MeasuredTemplate of a workload of `kind`, read whole or as the slim
// cache keeps it (api::MeasuredHashOf; the StatefulSet cache keeps the
// claims' names and sizes).
MeasuredTemplate MeasuredTemplateOf(WorkloadKind kind, const nlohmann::json& workload);

// The key a canary is shared by: a SHA-256 over the MeasuredTemplate and the
// policy key (CanaryPolicyKey: allocator, libc, canary settings with the
// load, durations and variants, limits with the thresholds). The namespace
// is not in it because canaries are namespaced: the canary runs in the
// namespace of the workloads it serves, and only they find it.
// api::CanaryName(key) is the canary's name.
std::string CanaryKey(const MeasuredTemplate& measured, const std::string& policy_key);
// The same with the policy's key and the containers it measures
// (spec.containers: which containers get the allocator and are sampled),
// which the policy key leaves out because a canary's spec does not carry
// them. What every workload's canary is looked up by.
std::string CanaryKey(const MeasuredTemplate& measured, const api::AllocatorPolicy& policy);

// The most workloads a canary records as its owners. Garbage collection
// deletes a canary when its last recorded owner is gone; a workload beyond
// this many still gets the canary's verdict (trust is by content, see
// CanaryDistrust) but is not recorded, so that a canary shared by
// thousands stays a small object (an ownerReference is ~130 bytes).
inline constexpr size_t kMaxCanaryOwners = 100;

// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct RolloutInput {
  WorkloadKind kind = WorkloadKind::kDeployment;
  // The workload, of `kind`, as api::ParseDeploymentSummary reads any of the
  // three kinds (a StatefulSet or DaemonSet is never `paused`).
  api::DeploymentSummary deployment;
  std::optional<api::AllocatorPolicy> policy;  // the governing policy, if any
  // The ReplayCanary named for CanaryKey(measured, the policy's key), if it
  // exists (whoever created it: DecideRollout checks what it proves).
  std::optional<api::ReplayCanarySummary> canary;
  std::string template_hash;  // PodTemplateHash of the deployment's current template
  MeasuredTemplate measured;  // of the current template
  // More than one policy's selector matches the template (the validating
  // webhook refuses to create such an overlap; one may predate it).
  bool policy_ambiguous = false;
  // A StatefulSet or DaemonSet read whole still has the hold's pin in place
  // (its partition, its OnDelete strategy). Set only by the reconciler after
  // that read: the cache keeps no update strategy. An override annotation is
  // then only a request the user has not acted on, so rule 2 does not apply
  // and the hold goes on as without it (its canary runs, a Flat releases it).
  bool pin_in_place = false;
};

struct RolloutActions {
  // Create this ReplayCanary (a complete object).
  std::optional<nlohmann::json> create_canary;
  // Record the workload as an owner of the canary it shares: a merge patch
  // of the canary, conditional on the resourceVersion it was read at.
  std::optional<nlohmann::json> join_canary;
  // Merge patch for the workload: release the hold and/or record the
  // template hash that was let through.
  std::optional<nlohmann::json> deployment_patch;
  // A StatefulSet or DaemonSet: put back what the hold pinned (its partition,
  // its update strategy) with admission::ReleaseStatefulSetHold /
  // ReleaseDaemonSetHold on the object read whole, then apply
  // deployment_patch (annotations only) on top, in one conditional write.
  bool release_pinned_hold = false;
  // A held StatefulSet or DaemonSet carrying the override annotation: on the
  // object read whole, apply deployment_patch (annotations only) once the
  // user has put the pinned field back (admission::StatefulSetPinInPlace /
  // DaemonSetPinInPlace say nothing is pinned); until then, a RolloutHeld
  // event names the field. The operator lifts no pin for an override.
  bool consume_pinned_override = false;
  // An event on the Deployment.
  bool event_warning = false;
  std::string event_reason;
  std::string event_note;
  std::string skip_reason;  // why nothing happens, for logs
};

// A short fingerprint of what a policy asks a canary to prove: the candidate
// allocator, the canary (load, duration, variants, arena limit) and the
// limits. A policy edit that changes any of them (say, switching a held
// Deployment's policy from glibc to jemalloc) keys a new canary; an edit of
// anything else (the selector, the guard) does not.
std::string CanaryPolicyKey(const api::AllocatorPolicy& policy);

// The canary's name, from its key (operator/api/names.h).
using api::CanaryName;

// The first of these rules that applies decides:
//   1. a hold without an Enforce policy behind it is released (HoldReleased);
//   2. a hold the user overrode and unpaused is cleared (HoldCleared;
//      Deployments only: a StatefulSet's or DaemonSet's override, which
//      the validating webhook allows only with the override permission,
//      is the admin's own edit of the pinned field, and its annotations
//      stay until a Flat canary releases it);
//   3. no policy, or mode Off: nothing;
//   4. opted out: nothing, and a hold stays (RolloutHeld);
//   5. the current template was released already: nothing;
//   6. Enforce, never held nor released: the template is adopted as the
//      baseline (TemplateAdopted);
//   7. no canary for (measured template, policy key): create it
//      (CanaryStarted);
//   7a. a canary for the same measured template and policy key exists that
//      this workload does not own yet: when its spec proves this template
//      (CanaryDistrust, but a running canary need not have measured the
//      candidate yet) and it records fewer than kMaxCanaryOwners owners,
//      record this workload as an owner (CanaryShared; its verdict will be
//      this workload's too);
//   8. the canary runs: wait;
//   9. a canary that would release or be recorded but cannot prove this
//      template (CanaryDistrust): nothing, a Warning (RolloutHeld or
//      CanaryNotTrusted);
//  10. held and not Flat: stays held (RolloutHeld, naming the flat variant);
//  11. released when held (RolloutReleased), else recorded with its verdict
//      (CanaryPassed or CanaryFailedAudit).
RolloutActions DecideRollout(const RolloutInput& input);

// Why `canary` cannot prove the template `measured` describes under
// `policy`, or "" when it can. A canary is shared by every workload whose
// template measures alike, so what it proves is read from its content,
// never from its name, its target or its owners (anyone who may create a
// ReplayCanary may pick the name and the owners). It proves a template only
// when all of these hold:
//   - it parses (api::ParseReplayCanary) and targets a workload of the
//     same kind (its Job is built for that kind);
//   - its spec.template is the candidate itself: api::MeasuredTemplateHash
//     of the stored template equals measured.hash (and so does
//     spec.templateHash);
//   - it asks what the policy asks now: the allocator, libc, canary and
//     limits give the policy's CanaryPolicyKey;
//   - every finished variant was measured on this spec: its recorded
//     measurementKey is MeasurementKey of the canary as it is now (for the
//     rerun the entry describes, RerunOf), so a spec
//     edited during the run and edited back proves nothing, and the candidate
//     variant has one.
// A ReplayCanary anyone creates by hand with the expected name and another
// template (or settings) is thus never taken for the operator's. One with
// exactly the content the operator would have written is measured by the
// operator's own Jobs, and its verdict is a true statement about the
// template. The validating webhook keeps users from writing status, which
// only the operator's account may (the chart's RBAC).
// True when the user rolls the held template out by override: the
// override annotation is set and the Deployment is unpaused. DecideRollout
// then clears the hold (even after an opt-out, which alone never lifts it).
bool RolledOutByOverride(const api::DeploymentSummary& deployment);

std::string CanaryDistrust(const api::ReplayCanarySummary& canary, const MeasuredTemplate& measured,
                           const api::AllocatorPolicy& policy);
// The same for objects as the API gives them (parsed here; the workload
// read whole or from the slim cache, of `kind`).
std::string CanaryDistrust(const nlohmann::json& canary, const nlohmann::json& workload,
                           const api::AllocatorPolicy& policy,
                           WorkloadKind kind = WorkloadKind::kDeployment);

// Whether `owner` (kind, name, uid) is among the canary's ownerReferences.
bool OwnsCanary(const api::ReplayCanarySummary& canary, WorkloadKind kind,
                const api::ObjectMeta& owner);

// The ReplayCanary object for a workload's current template: named for
// CanaryKey(measured, the policy's key), a snapshot of the template and of
// the policy's allocator, canary and limits, spec.templateHash the measured
// hash, targeting and owned by the workload that asked first (other
// workloads join as owners, rule 7a; garbage collection deletes it with the
// last), labelled with the policy's name. The workload must have been read
// whole (its pod_template).
nlohmann::json BuildReplayCanary(const api::DeploymentSummary& deployment,
                                 const api::AllocatorPolicy& policy,
                                 const MeasuredTemplate& measured);
// The same for a workload of `kind` as the API gives it (parsed here).
nlohmann::json BuildReplayCanary(const nlohmann::json& deployment,
                                 const api::AllocatorPolicy& policy,
                                 WorkloadKind kind = WorkloadKind::kDeployment);

// Labels on operator-created canaries.
inline constexpr char kPolicyLabel[] = "allocguard.io/policy";
// The workload that asked first (a shared canary serves others too).
inline constexpr char kWorkloadLabel[] = "allocguard.io/workload";

}  // namespace allocguard::controllers
