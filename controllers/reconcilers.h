#pragma once

// The operator's reconcilers, one per concern. Each fetches what it needs
// from the informer stores, calls its pure Decide function and applies the
// result through the API. Reconcile() returns an error to be retried with
// backoff, or OK with an optional delay after which to look again.
//
//   PolicyReconciler   AllocatorPolicy status: governed workloads, verdicts,
//                      conditions (policy_decision.h); the injection circuit
//                      breaker's suspensions, events and pod deletions
//                      (injection_breaker.h)
//   CanaryReconciler   ReplayCanary: one Job per variant, results read from
//                      the driver's termination message (canary_decision.h)
//   RolloutReconciler  governed Deployments, StatefulSets or DaemonSets (one
//                      reconciler per kind): canary per template, hold
//                      released when Flat (rollout_decision.h)
//   DriftReconciler    governed Pods without the injection: Warning event
//                      on the Pod (the policy's condition comes from
//                      PolicyReconciler)

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controllers/canary_decision.h"
#include "controllers/policy_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/api/workloads.h"
#include "operator/canary/job_builder.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/metrics/registry.h"

namespace allocguard::controllers {

// Indexes the reconcilers use; add them before the stores fill.
inline constexpr char kNamespaceIndex[] = "namespace";
inline constexpr char kCanaryIndex[] = "canary-job";  // canary pods by "ns/job-name"
// Deployments, StatefulSets and DaemonSets by "ns/<api::MeasuredHashOf>":
// the workloads a shared canary serves.
inline constexpr char kMeasuredTemplateIndex[] = "measured-template";
// ReplayCanaries that have not ended, by where they are in their life:
// kCanaryRunning (phase Running) or kCanaryNotStarted (any other phase but
// Completed and Failed, or none yet). An ended canary is in neither, so the
// index does not grow with finished canaries. CanarySlots reads it instead
// of every canary.
inline constexpr char kCanaryStateIndex[] = "canary-state";
inline constexpr char kCanaryRunning[] = "running";
inline constexpr char kCanaryNotStarted[] = "not-started";
// ReplayCanaries by "ns/<spec.templateHash>": the canaries of one template,
// whose measurements a canary may copy (ReadCanaryInput).
inline constexpr char kCanaryTemplateIndex[] = "canary-template";
// ReplayCanaries by "ns/<allocguard.io/policy label>": a policy's canaries.
inline constexpr char kCanaryPolicyIndex[] = "canary-policy";
void AddNamespaceIndex(kube::Store& store);
void AddCanaryJobIndex(kube::Store& pods);
void AddMeasuredTemplateIndex(kube::Store& workloads);
// kCanaryStateIndex, kCanaryTemplateIndex and kCanaryPolicyIndex.
void AddCanaryIndexes(kube::Store& canaries);

// Objects in the stores carry apiVersion and kind (list items do not; the
// manager's informer transform sets them), so they can be written back and
// named in events as they are.

// The Deployment cache keeps only what the reconcilers read
// (api::SlimDeployment is its transform).
inline constexpr const char* kCachedTemplateHashField = api::kCachedTemplateHashField;

// The limits on running canaries, cluster-wide and per namespace, and the
// queue of canaries waiting for a slot. The cache alone cannot enforce the
// limits: canaries started a moment ago by another worker are not yet
// Running there. So starts are decided under one lock, counting both the
// cache's Running canaries and those this process started and the cache has
// not yet shown ended. Only the leader reconciles, so one process decides.
//
// Waiting canaries are served round-robin over namespaces, first come first
// served within one: after a canary of namespace A starts, the next slot
// goes to the first waiting canary of the next namespace that has one, so
// one team's many held rollouts cannot keep another team's waiting. A
// namespace at its own limit is passed over until one of its canaries ends.
//
// The queue does not wait to be polled: when a slot frees (Release) or a
// canary asks out of turn, the canaries that may start now are woken (the
// `wake` function: the canary reconciler's queue), so a waiting canary need
// only look again now and then to refresh its queue note. No call reads a
// canary: the slots look canaries up in the cache's kCanaryStateIndex
// (AddCanaryIndexes, REQUIRED on the store), a lookup per waiting canary
// only when the queue is pruned (every length/64 asks).
class CanarySlots {
 public:
  // Called, outside the lock, with the key of each canary that may start
  // now. Set once, before the reconcilers run.
  void SetWake(std::function<void(const std::string& key)> wake);

  // Whether the canary `key` ("ns/name") may start now; when it may, its slot
  // is taken (a canary that holds one keeps it). limit, namespace_limit <= 0:
  // no limit. The answer carries the limits it was asked under, for
  // DecideCanaryStart's queue note. When another canary is next, it is woken.
  CanarySlotAnswer TryAcquire(const std::string& key, const kube::Store& canaries, int limit,
                              int namespace_limit);
  // The canary `key` ended or went away: its slot (if it held one) and its
  // place in the queue are given up, and the canaries that may start now
  // are woken, at most as many as there are free slots.
  void Release(const std::string& key, const kube::Store& canaries, int limit, int namespace_limit);

 private:
  struct Busy {
    std::set<std::string> keys;
    std::map<std::string, int> in_namespace;
  };
  // The canaries holding slots but `asking`: the cache's Running ones and
  // those this process started (forgotten once they ended or went away).
  // REQUIRES: mu_ held.
  Busy BusyLocked(const kube::Store& canaries, const std::string& asking);
  // Clears the queue of canaries that ended, started or went away
  // (`asking` stays). REQUIRES: mu_ held.
  void PruneQueueLocked(const kube::Store& canaries, const Busy& busy, const std::string& asking);
  // The waiting canaries in order of service. REQUIRES: mu_ held.
  std::vector<std::string> OrderLocked() const;
  // The waiting canaries of `order` that may start now under the limits,
  // given `busy`, in order.
  static std::vector<std::string> Startable(const std::vector<std::string>& order, Busy busy,
                                            int limit, int namespace_limit);

  std::mutex mu_;
  std::set<std::string> started_;
  std::map<std::string, std::vector<std::string>> waiting_;  // namespace -> keys, oldest first
  std::string last_served_namespace_;
  // Asks since the queue was last pruned: a long queue is pruned every
  // length/64 asks, not at each (Release keeps it clean as canaries end).
  size_t asks_since_prune_ = 0;
  std::function<void(const std::string&)> wake_;
};

// How long a canary waiting for a slot goes before it looks again, with
// `waiting` canaries in the queue: 15 s, longer for long queues so that the
// queue as a whole looks about 10 times a second at most, and 5 minutes at
// the longest. Looking again only refreshes the queue note; a slot that
// frees wakes the next canary at once (CanarySlots).
Clock::Duration WaitingCanaryLookAgain(int waiting);

struct ControllerContext {
  kube::Client* client = nullptr;
  kube::Store* policies = nullptr;
  kube::Store* canaries = nullptr;
  kube::Store* deployments = nullptr;
  // Slim like deployments (api::SlimStatefulSet, api::SlimDeployment); null
  // when the operator does not watch the kind.
  kube::Store* statefulsets = nullptr;
  kube::Store* daemonsets = nullptr;
  kube::Store* pods = nullptr;
  kube::Store* jobs = nullptr;
  kube::EventRecorder* events = nullptr;
  Clock* clock = nullptr;
  metrics::Registry* metrics = nullptr;  // may be null
  std::string operator_namespace;
  canary::CanaryJobOptions job_options;
  // Canaries with running Jobs, cluster-wide and in one namespace; a canary
  // that would start another waits in phase Pending (CanarySlots). 0: no
  // limit.
  int max_concurrent_canaries = 0;
  int max_concurrent_canaries_per_namespace = 0;
  std::shared_ptr<CanarySlots> canary_slots = std::make_shared<CanarySlots>();
};

struct ReconcileResult {
  std::optional<Clock::Duration> requeue_after;
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual const char* name() const = 0;
  // key: "namespace/name" of the object the reconciler is keyed by.
  virtual Result<ReconcileResult> Reconcile(const std::string& key) = 0;
};

class PolicyReconciler : public Reconciler {
 public:
  explicit PolicyReconciler(ControllerContext ctx) : ctx_(std::move(ctx)) {}
  const char* name() const override { return "policy"; }
  Result<ReconcileResult> Reconcile(const std::string& key) override;

 private:
  // The uids of pods this reconciler deleted in `ns` that `pods` (the
  // cache) still lists; the others are forgotten.
  std::set<std::string> DeletedPodsStillCached(const std::string& ns,
                                               const std::vector<api::PodSummary>& pods);
  // Writes the status, records the events and deletes the pods `actions`
  // asks for (`object` is the policy as cached).
  Status ApplyPolicyActions(const nlohmann::json& object, const api::AllocatorPolicy& policy,
                            const PolicyActions& actions);

  ControllerContext ctx_;
  // Pods the circuit breaker deleted (uid -> namespace), so each is deleted
  // once even before the cache shows its deletionTimestamp; forgotten when
  // the pod leaves the cache.
  std::mutex deleted_mu_;
  std::map<std::string, std::string> deleted_pod_uids_;
};

class CanaryReconciler : public Reconciler {
 public:
  explicit CanaryReconciler(ControllerContext ctx) : ctx_(std::move(ctx)) {}
  const char* name() const override { return "canary"; }
  Result<ReconcileResult> Reconcile(const std::string& key) override;

 private:
  ControllerContext ctx_;
};

// The reconciler name of the rollouts of `kind` (RolloutReconciler::name()).
const char* RolloutControllerName(WorkloadKind kind);
// The API resource of `kind` (apps/v1).
kube::ResourceType WorkloadResource(WorkloadKind kind);

// The rollouts of one workload kind, keyed by the workload.
class RolloutReconciler : public Reconciler {
 public:
  explicit RolloutReconciler(ControllerContext ctx, WorkloadKind kind = WorkloadKind::kDeployment)
      : ctx_(std::move(ctx)), kind_(kind) {}
  // "rollout" (Deployments), "statefulset-rollout", "daemonset-rollout".
  const char* name() const override { return RolloutControllerName(kind_); }
  Result<ReconcileResult> Reconcile(const std::string& key) override;

 private:
  // Creates or joins the canary, patches the workload (conditional on the
  // resourceVersion `input` was read at) and records the event `actions`
  // asks for; `deployment` is the workload as cached.
  Result<ReconcileResult> ApplyRolloutActions(const nlohmann::json& deployment,
                                              const RolloutInput& input,
                                              const RolloutActions& actions);
  // actions.release_pinned_hold: reads the StatefulSet or DaemonSet whole,
  // puts back what its hold pinned and writes it, only while it still holds
  // the template `input` saw.
  Result<ReconcileResult> ReleasePinnedHold(const nlohmann::json& cached, const RolloutInput& input,
                                            const RolloutActions& actions);
  // actions.consume_pinned_override: reads the StatefulSet or DaemonSet
  // whole and clears its overridden hold once the user has put the pinned
  // field back; until then a RolloutHeld event names the field.
  Result<ReconcileResult> ConsumePinnedOverride(const nlohmann::json& cached,
                                                const RolloutInput& input,
                                                const RolloutActions& actions);
  // The StatefulSet or DaemonSet read whole into `full` (with `read` its
  // summary), while it still holds the template `input` saw; else what
  // Reconcile returns (gone, or the cache is behind: look again).
  std::optional<Result<ReconcileResult>> ReadHeldWhole(const RolloutInput& input,
                                                       nlohmann::json* full,
                                                       api::DeploymentSummary* read) const;
  // Writes the merge patch `patch` to the workload `seen` describes, with
  // the resourceVersion it was read at, so that the API server refuses it
  // (409) when anything changed since; the decision is then made again.
  // nullopt when written; else what Reconcile returns.
  std::optional<Result<ReconcileResult>> PatchUnchanged(nlohmann::json patch,
                                                        const api::ObjectMeta& seen) const;
  kube::Store* Workloads() const;

  ControllerContext ctx_;
  WorkloadKind kind_;
};

class DriftReconciler : public Reconciler {
 public:
  explicit DriftReconciler(ControllerContext ctx) : ctx_(std::move(ctx)) {}
  const char* name() const override { return "drift"; }
  Result<ReconcileResult> Reconcile(const std::string& key) override;

 private:
  ControllerContext ctx_;
};

// The one policy whose selector matches labels; nullopt when none or when
// several match (an ambiguity the validating webhook refuses to create).
std::optional<api::AllocatorPolicy> GoverningPolicy(
    const std::vector<api::AllocatorPolicy>& policies,
    const std::map<std::string, std::string>& labels);

}  // namespace allocguard::controllers
