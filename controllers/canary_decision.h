#pragma once

// What the canary reconciler does next for one ReplayCanary: a pure function
// of the canary, its current status and what its Jobs' pods show.
//
// Variants run one at a time, in order: the candidate first, then the
// policy's comparison variants (parallel variants on a small node slow each
// other and blur the comparison). A variant's result is written into status
// before its Job is deleted, and Job names are derived from the canary and
// variant names, so a reconciler that restarts at any point neither loses a
// result nor starts a second Job for the same variant.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/canary_status.h"
#include "operator/api/types.h"
#include "operator/api/workloads.h"
#include "operator/canary/job_builder.h"
#include "operator/common/verdict.h"
#include "operator/replay/canary_result.h"

namespace allocguard::controllers {

// Completed or Failed: a canary or variant that has ended.
bool Ended(std::optional<api::CanaryPhase> phase);

// One variant's Job as seen through the API.
struct VariantObservation {
  std::string variant;
  bool job_exists = false;
  std::string job_name;
  // The Job failed (deadline exceeded, pod failed) — set from its conditions.
  std::optional<std::string> job_failure;
  // The driver's termination message, decoded.
  std::optional<replay::CanaryResult> result;
  // The driver terminated but its message did not decode.
  std::optional<std::string> result_error;
  // A workload container of the variant's pod was OOM-killed.
  bool workload_oom_killed = false;
  // A workload container could not start under the injected allocator: the
  // loader's message from its termination message ("app: <loader line>",
  // FindLoaderError). The variant ends Failed with it.
  std::optional<std::string> workload_start_failure;
  // A pod-level problem a person should see (unschedulable, image pull).
  std::optional<std::string> pod_problem;
};

// What a variant's Job (null when it does not exist) and its pods show: the
// Job's Failed condition, the driver's decoded termination message, an
// OOM-killed workload container, a workload container whose termination
// message holds a loader error (FindLoaderError), and pod problems
// (unschedulable, image pull, config error, crash loop).
VariantObservation ObserveVariant(const std::string& variant, const std::string& job_name,
                                  const api::JobSummary* job,
                                  const std::vector<api::PodSummary>& pods);

// A variant result recorded in another ReplayCanary's status.
struct EarlierMeasurement {
  std::string canary;          // the ReplayCanary that ran it
  api::VariantStatus variant;  // its status.variants entry, with its measurement key
  std::optional<api::ArenaLimitStatus> arena_limit;  // that canary's status.arenaLimit
};

struct CanaryInput {
  api::ReplayCanary canary;
  // The object's current .status, read by api::ParseReplayCanaryStatus
  // (empty for a new canary).
  api::ReplayCanaryStatus status;
  std::vector<VariantObservation> observations;
  std::string now_rfc3339;
  // The policy's containers (which ones get the allocator and are measured).
  std::vector<std::string> containers;
  // Results other canaries of the namespace recorded; see MeasurementKey.
  std::vector<EarlierMeasurement> earlier;
};

struct CanaryEvent {
  bool warning = false;
  std::string reason;
  std::string note;
};

struct CanaryActions {
  // Create the Job of this variant (none runs and it has no result yet).
  std::optional<std::string> create_job_for_variant;
  // Jobs whose results are recorded (or that failed): delete them after the
  // status write succeeded.
  std::vector<std::string> delete_jobs;
  api::ReplayCanaryStatus status;  // the status to write
  bool status_changed = false;
  std::vector<CanaryEvent> events;
  bool finished = false;  // a verdict is in status
  // Set by DecideCanaryStart: the canary waits for a slot (requeue soon).
  bool queued = false;
  // Set by DecideCanaryStart: events to record before the status write.
  std::vector<CanaryEvent> start_events;
};

// The variant names in run order: "candidate" first, then spec variants.
std::vector<std::string> VariantOrder(const api::ReplayCanary& canary);

// The allocator a variant runs ("candidate" resolves to the candidate's).
api::AllocatorSpec VariantAllocator(const api::ReplayCanary& canary, const std::string& variant);

// What a variant's result depends on, as a digest: the candidate pod
// template (its labels aside: the canary's Pods carry their own), a
// StatefulSet target's name (its pod identity and claims), the variant's allocator with its
// tunables, the canary's load (with the seed of rerun `rerun`, api::RerunSeed), duration, sampling,
// node selector and production CPUs, the limits the verdict is judged against, and the measured
// containers. Two variants with the same key measure the same thing; the key is recorded in each
// finished variant's status as `measurementKey`, computed for the rerun that entry describes (the
// number of its earlierRuns).
std::string MeasurementKey(const api::ReplayCanary& canary, const std::string& variant,
                           const std::vector<std::string>& containers, int rerun = 0);

// Which run of the variant a status entry describes: the number of its
// earlier runs (0 when there is no entry).
int RerunOf(const api::VariantStatus* variant_status);

// What would decide a candidate that ended Inconclusive, for the canary's
// explanation (which the held Deployment's RolloutHeld event quotes): how
// many runs it had and with which seeds; when the workload fell behind the
// load (more than 1 % of requests late), a lower canary.load.rate; when the
// floor was still falling faster than the limit, that the workload had not
// settled (a longer canary.duration); otherwise the minutes that at the
// measured noise would have decided it
// (memory::MoreFloorsNeeded on the last run's interval) as the
// canary.maxDuration to set, or, when the slope sits at the limit itself,
// that only quieter floors or far more minutes would.
std::string InconclusiveAdvice(const api::ReplayCanary& canary,
                               const api::VariantStatus& candidate);

// Whether a recorded variant may stand in for a new run: it carries a
// measurement key and a verdict the judge reached (Flat, Ratchet, OOMKilled,
// Errors). Failed and Inconclusive runs are never reused: a new run may well
// settle them.
bool ReusableMeasurement(const api::VariantStatus& variant_status);

// The recommendation of a bake-off canary (spec.canary.bakeOff) whose
// variants are recorded: replay::RankBakeOff over status.variants in run
// order, so every cost is against the candidate (the policy's allocator),
// each variant's environment being its allocator's tunables. A variant
// recorded before floorLevelMiB existed ranks by the median of its floors.
api::RecommendationStatus RecommendBakeOff(const api::ReplayCanary& canary,
                                           const api::ReplayCanaryStatus& status);

// The rules, in order:
//  1. A canary that has ended (Completed or Failed) only deletes the Jobs a
//     crash may have left behind.
// Otherwise its startTime and observedGeneration are set, and each variant,
// in run order, is decided by the first of rules 2 to 7 that applies, until
// one runs or starts (later variants wait for it):
//  2. A variant with a recorded result: its leftover Job is deleted (also
//     behind a running variant).
//  3. No Job, and another canary of the namespace recorded a reusable result
//     with the same MeasurementKey: it is copied (VariantReused), and a
//     glibc variant's arena limit with it when none is recorded. For the
//     candidate, a result of a later rerun counts too (one within this
//     canary's inconclusiveReruns): it is copied with the Inconclusive runs
//     before it that this canary has not run itself.
//  4. The candidate's Job ended Inconclusive with reruns left: it runs again
//     with the next seed (VariantRerun).
//  5. Its Job ended: the result is recorded and the Job deleted
//     (VariantFinished).
//  6. Its Job runs: Running, with a pod problem as its message.
//  7. Otherwise: Pending, and its Job is created (VariantStarted).
//  8. When every variant has a result: the canary is Completed with the
//     overall verdict of memory::ClassifyVariants (CanaryFinished). A
//     bake-off canary also gets status.recommendation (RecommendBakeOff) and
//     a BakeOffRanked event; its verdict is computed exactly as without the
//     bake-off, so the hold stays the candidate's.
// Every status written carries the conditions of SetCanaryConditions.
//
// A variant whose workload could not start under its allocator is recorded
// Failed with the loader's message in its `message` and `startFailure`, and
// the canary's explanation (which the held Deployment's RolloutHeld event
// quotes) names it.
//
// A candidate whose run ends Inconclusive is run again, up to
// spec.canary.inconclusiveReruns times, each time with the next load seed:
// the ended run moves to the entry's earlierRuns (so the count survives a
// restart), the entry goes back to Pending and the Job of the rerun
// (CanaryJobName(..., rerun)) is created. Only the candidate is rerun: the
// overall verdict, and so the hold, is the candidate's; the comparison
// variants only classify a candidate that ratchets. A candidate still
// Inconclusive after its reruns ends the canary Inconclusive with
// InconclusiveAdvice in the explanation.
CanaryActions DecideCanary(const CanaryInput& input);

// The status of a canary whose spec does not parse (`error`, the parser's
// message naming the field): Failed with verdict Failed, the error in its
// explanation, completionTime now, and the conditions Ready=False and
// Stalled=True with reason InvalidSpec (nothing runs until the spec is
// fixed). nullopt when `current` is Failed already: nothing to write.
std::optional<api::ReplayCanaryStatus> DecideInvalidCanary(const api::ReplayCanaryStatus& current,
                                                           int64_t generation,
                                                           const std::string& error,
                                                           const std::string& now_rfc3339);

// CanarySlots' answer (CanarySlots::TryAcquire, controllers/reconcilers.h)
// for a canary that would start its first Job, with the limits it was asked
// under. The reconciler asks (CanarySlots holds the state); the decision
// words the queue note from the answer.
struct CanarySlotAnswer {
  bool start = true;
  int running = 0;               // others running, cluster-wide
  int running_in_namespace = 0;  // others running in the canary's namespace
  int position = 0;              // 1 = next to start; 0 when starting
  int waiting = 0;               // canaries waiting, cluster-wide
  int limit = 0;                 // --max-concurrent-canaries
  int namespace_limit = 0;       // --max-concurrent-canaries-per-namespace; <= 0: none
};

// The Job DecideCanary asked for, as the reconciler built it.
struct CanaryJobBuild {
  // Why the Job cannot be built (the builder's error, or RefuseTemplateRights'
  // refusal); nullopt when it was built.
  std::optional<std::string> error;
  canary::ArenaLimit arena_limit;      // how the Job reproduces production's arena limit
  std::vector<std::string> conflicts;  // user settings InjectAllocator left alone
};

// What the reconciler learned while starting the Job DecideCanary asked for.
struct CanaryStart {
  // CanarySlots' answer; asked only when NeedsCanarySlot.
  std::optional<CanarySlotAnswer> slot;
  // The Job, built only when a Job is to be created and the canary does not
  // wait for a slot (WaitsForSlot).
  std::optional<CanaryJobBuild> job;
};

// Whether the reconciler must ask CanarySlots before it creates the Job
// `actions` asks for: a Job is to be created and the canary (input.status) is
// not Running yet. A canary that runs keeps its slot.
bool NeedsCanarySlot(const CanaryInput& input, const CanaryActions& actions);

// Whether the slot answer in `start` says the canary waits (nothing is built).
bool WaitsForSlot(const CanaryStart& start);

// The actions of DecideCanary completed with what the reconciler learned
// while starting the Job, by these rules in order:
//  1. Queued: a canary that waits for a slot writes only its queue note
//     (phase Pending, explanation "queued: position P of W waiting; ...",
//     status.queuePosition) onto its current status, when any of these
//     changed; no Job is created or deleted, no event is recorded, and the
//     reconciler requeues it soon (`queued`).
//  2. A canary that runs (phase Running) without a verdict drops the queue
//     note: its explanation and queue position are cleared.
//  3. A Job that cannot be built: the variant ends Failed with
//     "cannot build the canary Job: <error>", no Job is created, and a
//     CanaryJobInvalid warning is recorded.
//  4. A built Job: each injection conflict is an InjectionConflict warning,
//     and the arena limit it reproduces is recorded in status.arenaLimit
//     unless one is recorded already; a reproduced limit (node selector or
//     MALLOC_ARENA_MAX) replaces a recorded CanaryNode one.
// Events of rules 3 and 4 are in `start_events`, recorded before the status
// write, as the Job is built before the write.
CanaryActions DecideCanaryStart(const CanaryInput& input, CanaryActions actions,
                                const CanaryStart& start);

// The kstatus conditions of a canary, from status.phase and status.verdict
// (docs/gitops.md): while Pending or Running, Ready=False and
// Reconciling=True; Completed with a verdict the judge reached (Flat,
// Ratchet, ...), Ready=True with the verdict as reason; a canary that could
// not judge (phase Failed, or verdict Failed), Ready=False and Stalled=True.
// `kubectl wait --for=condition=Ready replaycanary/NAME` thus waits for a
// verdict. DecideCanary calls it on every status it writes.
void SetCanaryConditions(api::ReplayCanaryStatus& status, int64_t generation,
                         const std::string& now_rfc3339);

// Why the operator may not run `canary`'s template in a Job of its own, or ""
// when it may. Canary Jobs are created with the operator's account, which may
// create Jobs in every namespace, so a template is run as it stands only when
// it is the current template of a workload of the target's kind in the
// canary's namespace (api::MeasuredTemplateHash equal to
// `target_template_hash`, that workload's as the cache shows it: the target's,
// or another's that measures alike when the canary is shared; "" when there
// is no such workload). Any other template (a hand-made canary's)
// may not ask for more than an ordinary pod of the namespace: no host
// namespaces, privileged containers, added capabilities, hostPath volumes or
// fixed nodeName, and no ServiceAccount other than "default"
// (api::RightsBeyondAnOrdinaryPod). The message names the fields.
std::string RefuseTemplateRights(const api::ReplayCanary& canary,
                                 const std::string& target_template_hash);

}  // namespace allocguard::controllers
