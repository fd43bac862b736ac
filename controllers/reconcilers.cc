#include "controllers/reconcilers.h"

#include <algorithm>
#include <ctime>

#include <spdlog/spdlog.h>

#include "controllers/canary_decision.h"
#include "controllers/policy_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/admission/policies.h"
#include "operator/admission/workload_hold.h"
#include "operator/api/json_fields.h"
#include "operator/api/json_patch.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/api/policy_status.h"
#include "operator/api/workload_kinds.h"
#include "operator/api/workloads.h"
#include "operator/common/rfc3339.h"
#include "operator/replay/canary_result.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

Status ApiStatus(const kube::ApiError& error, const std::string& what) {
  return Status(error.ToStatus().code(), what + ": " + error.ToStatus().message());
}

void RecordEvent(const ControllerContext& ctx, const json& regarding, bool warning,
                 const std::string& reason, const std::string& note) {
  if (ctx.events == nullptr || reason.empty()) return;
  Status s =
      ctx.events->Record(regarding, warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                         reason, reason, note);
  if (!s.ok()) spdlog::warn("event {} on {}: {}", reason, kube::ObjectKey(regarding), s.message());
}

// Writes status when it changed, with the resourceVersion read from the
// store so a concurrent writer makes this a conflict (retried), never a
// lost update.
Status WriteStatus(const ControllerContext& ctx, const kube::ResourceType& type, json object,
                   const json& status) {
  object["status"] = status;
  auto updated = ctx.client->UpdateStatus(type, object);
  if (!updated.ok())
    return ApiStatus(updated.error(), "writing status of " + kube::ObjectKey(object));
  return Status::Ok();
}

// What a canary variant's Job and pods show (ObserveVariant).
VariantObservation Observe(const ControllerContext& ctx, const std::string& ns,
                           const std::string& variant, const std::string& job_name) {
  const std::string job_key = ns + "/" + job_name;
  kube::ObjectRef job = ctx.jobs->Get(job_key);
  if (job == nullptr) return ObserveVariant(variant, job_name, nullptr, {});
  const api::JobSummary summary = api::ParseJobSummary(*job);
  std::vector<api::PodSummary> pods;
  for (const json& pod : ctx.pods->ByIndex(kCanaryIndex, job_key)) {
    pods.push_back(api::ParsePodSummary(pod));
  }
  return ObserveVariant(variant, job_name, &summary, pods);
}

// The cache of `kind`'s objects (null when the manager runs without it).
kube::Store* WorkloadStore(const ControllerContext& ctx, WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kDeployment:
      return ctx.deployments;
    case WorkloadKind::kStatefulSet:
      return ctx.statefulsets;
    case WorkloadKind::kDaemonSet:
      return ctx.daemonsets;
  }
  return nullptr;
}

}  // namespace

void CanarySlots::SetWake(std::function<void(const std::string&)> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

namespace {

// Cached and not ended: a canary that ended or went away holds nothing.
bool LiveCanary(const kube::Store& canaries, const std::string& key) {
  return canaries.InIndex(kCanaryStateIndex, kCanaryRunning, key) ||
         canaries.InIndex(kCanaryStateIndex, kCanaryNotStarted, key);
}

}  // namespace

CanarySlots::Busy CanarySlots::BusyLocked(const kube::Store& canaries, const std::string& asking) {
  Busy busy;
  for (std::string& k : canaries.KeysByIndex(kCanaryStateIndex, kCanaryRunning)) {
    busy.keys.insert(std::move(k));
  }
  for (auto it = started_.begin(); it != started_.end();) {
    if (LiveCanary(canaries, *it)) {
      busy.keys.insert(*it);
      ++it;
    } else {
      it = started_.erase(it);
    }
  }
  busy.keys.erase(asking);
  for (const std::string& k : busy.keys) ++busy.in_namespace[SplitKey(k).first];
  return busy;
}

void CanarySlots::PruneQueueLocked(const kube::Store& canaries, const Busy& busy,
                                   const std::string& asking) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    std::erase_if(it->second, [&](const std::string& k) {
      return k != asking && (!LiveCanary(canaries, k) || busy.keys.contains(k));
    });
    it = it->second.empty() ? waiting_.erase(it) : std::next(it);
  }
}

std::vector<std::string> CanarySlots::OrderLocked() const {
  // Round-robin over namespaces, starting after the one served last.
  std::vector<std::string> namespaces;
  for (const auto& [n, keys] : waiting_) namespaces.push_back(n);
  auto first = std::upper_bound(namespaces.begin(), namespaces.end(), last_served_namespace_);
  std::rotate(namespaces.begin(), first, namespaces.end());
  std::vector<std::string> order;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (const std::string& n : namespaces) {
      const std::vector<std::string>& keys = waiting_.at(n);
      if (round < keys.size()) {
        order.push_back(keys[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  return order;
}

std::vector<std::string> CanarySlots::Startable(const std::vector<std::string>& order, Busy busy,
                                                int limit, int namespace_limit) {
  std::vector<std::string> out;
  int running = static_cast<int>(busy.keys.size());
  for (const std::string& k : order) {
    if (limit > 0 && running >= limit) break;
    int& in_namespace = busy.in_namespace[SplitKey(k).first];
    if (namespace_limit > 0 && in_namespace >= namespace_limit) continue;
    out.push_back(k);
    ++in_namespace;
    ++running;
  }
  return out;
}

CanarySlotAnswer CanarySlots::TryAcquire(const std::string& key, const kube::Store& canaries,
                                         int limit, int namespace_limit) {
  CanarySlotAnswer d;
  d.limit = limit;
  d.namespace_limit = namespace_limit;
  std::vector<std::string> wake;
  std::function<void(const std::string&)> wake_fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string ns = SplitKey(key).first;
    const Busy busy = BusyLocked(canaries, key);
    // A stale key left in the queue (a canary gone without a Release) is
    // at worst woken: its reconcile then finds it gone and releases it.
    size_t queued = 0;
    for (const auto& [n, keys] : waiting_) queued += keys.size();
    if (++asks_since_prune_ >= std::max<size_t>(1, queued / 64)) {
      PruneQueueLocked(canaries, busy, key);
      asks_since_prune_ = 0;
    }
    d.running = static_cast<int>(busy.keys.size());
    auto in_namespace = busy.in_namespace.find(ns);
    d.running_in_namespace = in_namespace == busy.in_namespace.end() ? 0 : in_namespace->second;
    // A canary that took its slot and asks again (its Job could not be
    // created yet) keeps it.
    if (started_.contains(key)) return d;
    std::vector<std::string>& mine = waiting_[ns];
    if (std::find(mine.begin(), mine.end(), key) == mine.end()) mine.push_back(key);
    const std::vector<std::string> order = OrderLocked();
    d.waiting = static_cast<int>(order.size());
    const std::vector<std::string> startable = Startable(order, busy, limit, namespace_limit);
    if (std::find(startable.begin(), startable.end(), key) != startable.end()) {
      mine.erase(std::find(mine.begin(), mine.end(), key));
      if (mine.empty()) waiting_.erase(ns);
      started_.insert(key);
      last_served_namespace_ = ns;
      d.waiting -= 1;
    } else {
      d.start = false;
      d.position = static_cast<int>(std::find(order.begin(), order.end(), key) - order.begin()) + 1;
    }
    // The canaries that may start now, if they are not the one asking: a
    // slot freed that no Release announced, or they were woken and another
    // asked first.
    for (const std::string& k : startable) {
      if (k != key) wake.push_back(k);
    }
    wake_fn = wake_;
  }
  if (wake_fn) {
    for (const std::string& k : wake) wake_fn(k);
  }
  return d;
}

void CanarySlots::Release(const std::string& key, const kube::Store& canaries, int limit,
                          int namespace_limit) {
  std::vector<std::string> wake;
  std::function<void(const std::string&)> wake_fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_.erase(key);
    const std::string ns = SplitKey(key).first;
    if (auto it = waiting_.find(ns); it != waiting_.end()) {
      std::erase(it->second, key);
      if (it->second.empty()) waiting_.erase(it);
    }
    if (waiting_.empty()) return;
    // Every slot still taken (as in a long queue): nothing to wake, and the
    // queue need not be walked.
    const Busy busy = BusyLocked(canaries, "");
    if (limit > 0 && static_cast<int>(busy.keys.size()) >= limit) return;
    PruneQueueLocked(canaries, busy, "");
    wake = Startable(OrderLocked(), busy, limit, namespace_limit);
    wake_fn = wake_;
  }
  if (wake_fn) {
    for (const std::string& k : wake) wake_fn(k);
  }
}

Clock::Duration WaitingCanaryLookAgain(int waiting) {
  constexpr auto kShortest = std::chrono::seconds(15);
  constexpr auto kLongest = std::chrono::minutes(5);
  const Clock::Duration spread = std::chrono::milliseconds(100) * std::max(waiting, 0);
  return std::clamp<Clock::Duration>(spread, kShortest, kLongest);
}

void AddNamespaceIndex(kube::Store& store) {
  store.AddIndex(kNamespaceIndex, [](const json& object) {
    return std::vector<std::string>{api::ParseObjectMeta(object).namespace_name};
  });
}

void AddCanaryJobIndex(kube::Store& pods) {
  pods.AddIndex(kCanaryIndex, [](const json& object) {
    const api::ObjectMeta meta = api::ParseObjectMeta(object);
    const std::map<std::string, std::string>& labels = meta.labels;
    if (!labels.contains(api::kCanaryLabel)) return std::vector<std::string>{};
    auto job = labels.find("batch.kubernetes.io/job-name");
    if (job == labels.end()) job = labels.find("job-name");
    if (job == labels.end()) return std::vector<std::string>{};
    return std::vector<std::string>{meta.namespace_name + "/" + job->second};
  });
}

void AddCanaryIndexes(kube::Store& canaries) {
  canaries.AddIndex(kCanaryStateIndex, [](const json& object) {
    const std::optional<api::CanaryPhase> phase = api::CanaryPhaseOf(object);
    if (phase == api::CanaryPhase::kRunning) return std::vector<std::string>{kCanaryRunning};
    if (Ended(phase)) return std::vector<std::string>{};
    return std::vector<std::string>{kCanaryNotStarted};
  });
  canaries.AddIndex(kCanaryTemplateIndex, [](const json& object) {
    const json* spec = api::json_fields::Member(object, "spec");
    const json* hash = spec == nullptr ? nullptr : api::json_fields::Member(*spec, "templateHash");
    if (hash == nullptr || !hash->is_string() || hash->get_ref<const std::string&>().empty()) {
      return std::vector<std::string>{};
    }
    return std::vector<std::string>{api::ParseObjectMeta(object).namespace_name + "/" +
                                    hash->get_ref<const std::string&>()};
  });
  canaries.AddIndex(kCanaryPolicyIndex, [](const json& object) {
    const api::ObjectMeta meta = api::ParseObjectMeta(object);
    auto label = meta.labels.find(kPolicyLabel);
    if (label == meta.labels.end()) return std::vector<std::string>{};
    return std::vector<std::string>{meta.namespace_name + "/" + label->second};
  });
}

void AddMeasuredTemplateIndex(kube::Store& workloads) {
  workloads.AddIndex(kMeasuredTemplateIndex, [](const json& object) {
    const api::DeploymentSummary summary = api::ParseDeploymentSummary(object);
    if (summary.cached_measured_hash.empty()) return std::vector<std::string>{};
    return std::vector<std::string>{summary.meta.namespace_name + "/" +
                                    summary.cached_measured_hash};
  });
}

std::optional<api::AllocatorPolicy> GoverningPolicy(
    const std::vector<api::AllocatorPolicy>& policies,
    const std::map<std::string, std::string>& labels) {
  const std::vector<const api::AllocatorPolicy*> matching =
      api::PoliciesSelecting(policies, labels);
  if (matching.size() != 1) return std::nullopt;  // none, or ambiguous
  return *matching.front();
}

// ---------------------------------------------------------------------------

namespace {

// What DecidePolicyStatus reads besides the policy: the namespace's
// Deployments, StatefulSets, DaemonSets, Pods and the policy's canaries from
// the caches.
PolicyInput ReadPolicyInput(const ControllerContext& ctx, const api::AllocatorPolicy& policy,
                            api::AllocatorPolicyStatus current, const std::string& now) {
  PolicyInput input;
  input.policy = policy;
  input.status = std::move(current);
  for (const json& d : ctx.deployments->ByIndex(kNamespaceIndex, policy.ns)) {
    input.deployments.push_back(api::ParseDeploymentSummary(d));
  }
  for (auto [store, out] : {std::pair{ctx.statefulsets, &input.statefulsets},
                            std::pair{ctx.daemonsets, &input.daemonsets}}) {
    if (store == nullptr) continue;
    for (const json& w : store->ByIndex(kNamespaceIndex, policy.ns)) {
      out->push_back(api::ParseDeploymentSummary(w));
    }
  }
  for (const json& p : ctx.pods->ByIndex(kNamespaceIndex, policy.ns)) {
    input.pods.push_back(api::ParsePodSummary(p));
  }
  for (const json& c : ctx.canaries->ByIndex(kCanaryPolicyIndex, policy.ns + "/" + policy.name)) {
    input.canaries.push_back(api::ParseReplayCanarySummary(c));
  }
  input.operator_namespace = ctx.operator_namespace;
  input.now_rfc3339 = now;
  return input;
}

}  // namespace

Result<ReconcileResult> PolicyReconciler::Reconcile(const std::string& key) {
  kube::ObjectRef object = ctx_.policies->Get(key);
  if (object == nullptr) return ReconcileResult{};
  const std::string now = FormatRfc3339(ctx_.clock->WallNow(), /*micros=*/false);
  auto parsed = api::ParseAllocatorPolicy(*object);
  std::vector<std::string> unreadable;
  api::AllocatorPolicyStatus current = api::PolicyStatusOf(*object, &unreadable);
  for (const std::string& problem : unreadable) spdlog::warn("{}: {}", key, problem);
  if (!parsed.ok()) {
    // Stored before the schema refused it, or written around it: say so.
    const api::AllocatorPolicyStatus status = InvalidPolicyStatus(
        current, api::ParseObjectMeta(*object).generation, parsed.status().message(), now);
    if (status == current) return ReconcileResult{};
    AG_RETURN_IF_ERROR(WriteStatus(ctx_, kube::AllocatorPolicies(), *object,
                                   api::AllocatorPolicyStatusToJson(status)));
    return ReconcileResult{};
  }
  PolicyInput input = ReadPolicyInput(ctx_, parsed.value(), std::move(current), now);
  input.deleted_pod_uids = DeletedPodsStillCached(input.policy.ns, input.pods);
  AG_RETURN_IF_ERROR(ApplyPolicyActions(*object, input.policy, DecidePolicyStatus(input)));
  return ReconcileResult{};
}

std::set<std::string> PolicyReconciler::DeletedPodsStillCached(
    const std::string& ns, const std::vector<api::PodSummary>& pods) {
  std::set<std::string> present;
  for (const api::PodSummary& pod : pods) present.insert(pod.meta.uid);
  std::set<std::string> deleted;
  std::lock_guard<std::mutex> lock(deleted_mu_);
  for (auto it = deleted_pod_uids_.begin(); it != deleted_pod_uids_.end();) {
    if (it->second == ns && !present.contains(it->first)) {
      it = deleted_pod_uids_.erase(it);
    } else {
      deleted.insert(it->first);
      ++it;
    }
  }
  return deleted;
}

Status PolicyReconciler::ApplyPolicyActions(const json& object, const api::AllocatorPolicy& policy,
                                            const PolicyActions& actions) {
  if (actions.status_changed) {
    AG_RETURN_IF_ERROR(WriteStatus(ctx_, kube::AllocatorPolicies(), object,
                                   api::AllocatorPolicyStatusToJson(actions.status)));
  }
  for (const SuspendedTemplate& t : actions.injection_failing) {
    RecordEvent(ctx_, object, true, "InjectionFailing", t.note);
    const size_t slash = t.workload.find('/');
    const std::optional<WorkloadKind> kind =
        slash == std::string::npos ? std::nullopt
                                   : WorkloadKindFromName(t.workload.substr(0, slash));
    if (kube::Store* store = kind ? WorkloadStore(ctx_, *kind) : nullptr) {
      if (auto workload = store->Get(policy.ns + "/" + t.workload.substr(slash + 1))) {
        RecordEvent(ctx_, *workload, true, "InjectionFailing", t.note);
      }
    }
  }
  // Only suspensions the cache already showed (so the webhook knows them)
  // lead to deletions; see DecideInjectionBreaker.
  for (const PodDeletion& d : actions.delete_pods) {
    kube::ObjectRef pod = ctx_.pods->Get(policy.ns + "/" + d.pod);
    kube::DeleteOptions options;
    options.precondition_uid = d.uid;
    auto deleted = ctx_.client->Delete(kube::Pods(), policy.ns, d.pod, options);
    // NotFound, or Conflict on the uid precondition: that pod is gone already.
    if (!deleted.ok() && !deleted.error().IsNotFound() && !deleted.error().IsConflict()) {
      return ApiStatus(deleted.error(),
                       "deleting pod " + policy.ns + "/" + d.pod + " whose injection failed");
    }
    {
      std::lock_guard<std::mutex> lock(deleted_mu_);
      deleted_pod_uids_[d.uid] = policy.ns;
    }
    if (deleted.ok() && pod != nullptr) RecordEvent(ctx_, *pod, true, "InjectionFailing", d.note);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------

namespace {

// What the canary decisions read besides the canary and its status: the
// policy's containers, what other canaries of its template recorded, and
// what each variant's Job and pods show.
CanaryInput ReadCanaryInput(const ControllerContext& ctx, const api::ReplayCanary& canary,
                            const api::ReplayCanaryStatus& current, const std::string& now) {
  CanaryInput input;
  input.canary = canary;
  input.status = current;
  input.now_rfc3339 = now;
  // The policy's container list (not part of the canary's snapshot) says
  // which containers get the allocator and are measured.
  if (!canary.spec.policy.empty()) {
    if (auto p = ctx.policies->Get(canary.ns + "/" + canary.spec.policy)) {
      auto policy = api::ParseAllocatorPolicy(*p);
      if (policy.ok()) input.containers = policy->spec.containers;
    }
  }
  // What other canaries of this template recorded: a variant measured with
  // identical inputs is copied instead of run again (MeasurementKey).
  for (const json& cached :
       ctx.canaries->ByIndex(kCanaryTemplateIndex, canary.ns + "/" + canary.spec.template_hash)) {
    const api::ReplayCanarySummary other = api::ParseReplayCanarySummary(cached);
    if (other.meta.name == canary.name) continue;
    for (const api::VariantStatus& v : other.status.variants) {
      input.earlier.push_back({other.meta.name, v, other.status.arena_limit});
    }
  }
  for (const std::string& variant : VariantOrder(canary)) {
    // The Job of the run the status is at (a rerun has a Job of its own).
    const std::string job_name =
        canary::CanaryJobName(canary.name, variant, RerunOf(current.FindVariant(variant)));
    input.observations.push_back(Observe(ctx, canary.ns, variant, job_name));
  }
  return input;
}

// CanarySlots' answer for `key` with the context's limits.
CanarySlotAnswer AskForSlot(const ControllerContext& ctx, const std::string& key) {
  return ctx.canary_slots->TryAcquire(key, *ctx.canaries, ctx.max_concurrent_canaries,
                                      ctx.max_concurrent_canaries_per_namespace);
}

// The canary `key` ended or went away: CanarySlots gives up what it held and
// wakes the canaries that may start.
void ReleaseSlot(const ControllerContext& ctx, const std::string& key) {
  ctx.canary_slots->Release(key, *ctx.canaries, ctx.max_concurrent_canaries,
                            ctx.max_concurrent_canaries_per_namespace);
}

// Builds the Job of `variant` (its run as `status` records it) into `*job`,
// and says how it went. The Job runs with the operator's rights: a template
// that is not the target's own may not ask for more than an ordinary pod
// (RefuseTemplateRights).
CanaryJobBuild BuildVariantJob(const ControllerContext& ctx, const CanaryInput& input,
                               const api::ReplayCanaryStatus& status, const std::string& variant,
                               std::optional<json>* job) {
  const api::ReplayCanary& canary = input.canary;
  api::VariantSpec spec{variant, VariantAllocator(canary, variant)};
  canary::CanaryJobOptions job_options = ctx.job_options;
  job_options.containers = input.containers;
  job_options.rerun = RerunOf(status.FindVariant(variant));
  canary::CanaryJobInfo info;
  // The workload whose template this is: the target when it still has it,
  // else any workload of the kind in the namespace that does (a shared
  // canary outlives its first asker's template).
  std::string target_hash;
  const std::optional<WorkloadKind> kind = WorkloadKindFromName(canary.spec.target_kind);
  kube::Store* targets = kind ? WorkloadStore(ctx, *kind) : nullptr;
  if (targets != nullptr) {
    const std::string measured = api::MeasuredTemplateHash(
        json::parse(canary.spec.pod_template_json, nullptr, /*allow_exceptions=*/false));
    kube::ObjectRef target = targets->Get(canary.ns + "/" + canary.spec.target_name);
    if (target == nullptr ||
        api::ParseDeploymentSummary(*target).cached_measured_hash != measured) {
      const kube::ObjectRefs alike =
          targets->ByIndex(kMeasuredTemplateIndex, canary.ns + "/" + measured);
      target = alike.empty() ? nullptr : alike.refs().front();
    }
    if (target != nullptr) {
      target_hash = api::ParseDeploymentSummary(*target).cached_measured_hash;
      // A StatefulSet's template mounts its claims, which the Job gets as
      // emptyDirs (its cache keeps their names and sizes).
      if (*kind == WorkloadKind::kStatefulSet) {
        job_options.pod_identity = canary.spec.target_name + "-0";
        for (const api::VolumeClaimTemplate& claim :
             api::ParseStatefulSet(*target).volume_claim_templates) {
          job_options.claim_volumes.push_back({claim.name, claim.storage_bytes});
        }
      }
    }
  }
  const std::string refused = RefuseTemplateRights(canary, target_hash);
  auto built = refused.empty() ? canary::BuildCanaryJob(canary, spec, job_options, &info)
                               : Result<json>(PermissionDenied(refused));
  CanaryJobBuild out;
  if (!built.ok()) {
    out.error = built.status().message();
    return out;
  }
  *job = std::move(built.value());
  out.arena_limit = info.arena_limit;
  out.conflicts = info.conflicts;
  return out;
}

// Writes what the decisions say: the Job build's events, the status
// (results first: a variant's result is in status before its Job goes), the
// events, the Jobs to delete, and the Job to create.
Status ApplyCanaryActions(const ControllerContext& ctx, const json& object,
                          const api::ReplayCanary& canary, const CanaryActions& actions,
                          const std::optional<json>& job) {
  for (const CanaryEvent& e : actions.start_events)
    RecordEvent(ctx, object, e.warning, e.reason, e.note);
  if (actions.status_changed) {
    AG_RETURN_IF_ERROR(WriteStatus(ctx, kube::ReplayCanaries(), object,
                                   api::ReplayCanaryStatusToJson(actions.status)));
  }
  for (const CanaryEvent& e : actions.events) RecordEvent(ctx, object, e.warning, e.reason, e.note);
  for (const std::string& name : actions.delete_jobs) {
    kube::DeleteOptions options;
    options.propagation = kube::Propagation::kBackground;
    auto deleted = ctx.client->Delete(kube::Jobs(), canary.ns, name, options);
    if (!deleted.ok() && !deleted.error().IsNotFound()) {
      return ApiStatus(deleted.error(), "deleting canary Job " + canary.ns + "/" + name);
    }
  }
  if (actions.create_job_for_variant.has_value() && job.has_value()) {
    auto created = ctx.client->Create(kube::Jobs(), canary.ns, *job);
    if (!created.ok() && !created.error().IsAlreadyExists()) {
      return ApiStatus(created.error(), "creating canary Job " + api::ParseObjectMeta(*job).name);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ReconcileResult> CanaryReconciler::Reconcile(const std::string& key) {
  kube::ObjectRef object = ctx_.canaries->Get(key);
  if (object == nullptr) {
    ReleaseSlot(ctx_, key);
    return ReconcileResult{};
  }
  const std::string now = FormatRfc3339(ctx_.clock->WallNow(), /*micros=*/false);
  // The status, read once here; everything below works on typed values.
  std::vector<std::string> unreadable;
  api::ReplayCanaryStatus current = api::CanaryStatusOf(*object, &unreadable);
  if (Ended(current.phase)) ReleaseSlot(ctx_, key);
  for (const std::string& problem : unreadable) {
    // Another writer's (or another version's) status: what is unreadable is
    // driven as absent, and a verdict allocguard does not write as Failed.
    spdlog::warn("{}: {}", key, problem);
  }
  auto parsed = api::ParseReplayCanary(*object);
  if (!parsed.ok()) {
    const std::string& error = parsed.status().message();
    std::optional<api::ReplayCanaryStatus> failed =
        DecideInvalidCanary(current, api::ParseObjectMeta(*object).generation, error, now);
    if (!failed.has_value()) return ReconcileResult{};
    AG_RETURN_IF_ERROR(
        WriteStatus(ctx_, kube::ReplayCanaries(), *object, api::ReplayCanaryStatusToJson(*failed)));
    RecordEvent(ctx_, *object, true, "InvalidSpec", error);
    return ReconcileResult{};
  }
  const api::ReplayCanary& canary = parsed.value();

  const CanaryInput input = ReadCanaryInput(ctx_, canary, current, now);
  CanaryActions decided = DecideCanary(input);
  // A canary that has no Job running yet waits while the cluster-wide limit
  // of running canaries is reached; CanarySlots keeps the queue.
  CanaryStart start;
  if (NeedsCanarySlot(input, decided)) start.slot = AskForSlot(ctx_, key);
  std::optional<json> job;
  if (decided.create_job_for_variant.has_value() && !WaitsForSlot(start)) {
    start.job = BuildVariantJob(ctx_, input, decided.status, *decided.create_job_for_variant, &job);
  }
  const CanaryActions actions = DecideCanaryStart(input, std::move(decided), start);
  if (actions.queued) {
    if (actions.status_changed) {
      AG_RETURN_IF_ERROR(WriteStatus(ctx_, kube::ReplayCanaries(), *object,
                                     api::ReplayCanaryStatusToJson(actions.status)));
    }
    return ReconcileResult{WaitingCanaryLookAgain(start.slot->waiting)};
  }
  AG_RETURN_IF_ERROR(ApplyCanaryActions(ctx_, *object, canary, actions, job));
  ReconcileResult result;
  if (!actions.finished) result.requeue_after = std::chrono::seconds(30);
  return result;
}

// ---------------------------------------------------------------------------

namespace {

// What DecideRollout reads: the cached Deployment, the namespace's policies
// and the canary of its current template. nullopt when no policy governs
// the Deployment and no hold is left on it (nothing to decide).
std::optional<RolloutInput> ReadRolloutInput(const ControllerContext& ctx, WorkloadKind kind,
                                             const json& deployment, const std::string& ns) {
  RolloutInput input;
  input.kind = kind;
  input.deployment = api::ParseDeploymentSummary(deployment);
  const std::vector<api::AllocatorPolicy> policies =
      admission::ParsePolicies(ctx.policies->ByIndex(kNamespaceIndex, ns));
  const std::vector<const api::AllocatorPolicy*> matching =
      api::PoliciesSelecting(policies, input.deployment.template_labels);
  if (matching.size() == 1) input.policy = *matching.front();
  input.policy_ambiguous = matching.size() > 1;
  const bool held = !input.deployment.meta.Annotation(api::kHeldCandidateAnnotation).empty();
  if (!input.policy.has_value() && !held) return std::nullopt;
  input.template_hash = input.deployment.cached_template_hash;
  if (input.template_hash.empty()) {
    input.template_hash = admission::TemplateHash(input.deployment.pod_template);
  }
  input.measured = MeasuredTemplateOf(kind, deployment);
  if (input.policy.has_value()) {
    if (kube::ObjectRef canary =
            ctx.canaries->Get(ns + "/" + CanaryName(CanaryKey(input.measured, *input.policy)))) {
      input.canary = api::ParseReplayCanarySummary(*canary);
    }
  }
  return input;
}

// admission::ReleaseStatefulSetHold or ReleaseDaemonSetHold.
admission::GateDecision ReleaseHoldOf(WorkloadKind kind, const json& workload) {
  return kind == WorkloadKind::kDaemonSet ? admission::ReleaseDaemonSetHold(workload)
                                          : admission::ReleaseStatefulSetHold(workload);
}

}  // namespace

const char* RolloutControllerName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kDeployment:
      return "rollout";
    case WorkloadKind::kStatefulSet:
      return "statefulset-rollout";
    case WorkloadKind::kDaemonSet:
      return "daemonset-rollout";
  }
  return "rollout";
}

kube::ResourceType WorkloadResource(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kDeployment:
      return kube::Deployments();
    case WorkloadKind::kStatefulSet:
      return kube::StatefulSets();
    case WorkloadKind::kDaemonSet:
      return kube::DaemonSets();
  }
  return kube::Deployments();
}

kube::Store* RolloutReconciler::Workloads() const { return WorkloadStore(ctx_, kind_); }

Result<ReconcileResult> RolloutReconciler::Reconcile(const std::string& key) {
  kube::Store* workloads = Workloads();
  if (workloads == nullptr) return ReconcileResult{};
  kube::ObjectRef deployment = workloads->Get(key);
  if (deployment == nullptr) return ReconcileResult{};
  auto [ns, name] = SplitKey(key);
  std::optional<RolloutInput> input = ReadRolloutInput(ctx_, kind_, *deployment, ns);
  if (!input.has_value()) return ReconcileResult{};
  RolloutActions actions = DecideRollout(*input);
  if (actions.create_canary.has_value()) {
    // The cache holds no full template: read the Deployment, and snapshot
    // it only if it is still the template the cache saw. The decision is
    // made again on what was read: it is newer than the cache (its
    // annotations, its pause may have changed since), and the canary built
    // from it must carry the template read, not the cache's slim one.
    auto full = ctx_.client->Get(WorkloadResource(kind_), ns, name);
    if (!full.ok()) {
      if (full.error().IsNotFound()) return ReconcileResult{};
      return ApiStatus(full.error(), "reading " + key);
    }
    api::DeploymentSummary read = api::ParseDeploymentSummary(*full);
    if (admission::TemplateHash(read.pod_template) != input->template_hash) {
      return ReconcileResult{std::chrono::seconds(1)};  // the cache is behind; look again
    }
    input->deployment = std::move(read);
    actions = DecideRollout(*input);
  }
  return ApplyRolloutActions(*deployment, *input, actions);
}

Result<ReconcileResult> RolloutReconciler::ApplyRolloutActions(const json& deployment,
                                                               const RolloutInput& input,
                                                               const RolloutActions& actions) {
  const std::string& ns = input.deployment.meta.namespace_name;
  const std::string key = input.deployment.meta.Key();
  if (actions.create_canary.has_value()) {
    auto created = ctx_.client->Create(kube::ReplayCanaries(), ns, *actions.create_canary);
    if (!created.ok() && !created.error().IsAlreadyExists()) {
      return ApiStatus(created.error(), "creating ReplayCanary for " + key);
    }
    if (created.ok()) {
      RecordEvent(ctx_, deployment, false, actions.event_reason, actions.event_note);
    } else {
      // Another worker created it a moment ago for a workload that
      // measures alike: join it once the cache shows it.
      return ReconcileResult{std::chrono::seconds(1)};
    }
    return ReconcileResult{};
  }
  if (actions.join_canary.has_value()) {
    // Conditional on the canary's resourceVersion (in the patch): two
    // workloads joining at once must not drop each other's reference.
    auto patched = ctx_.client->Patch(kube::ReplayCanaries(), ns, input.canary->meta.name,
                                      kube::PatchType::kMerge, *actions.join_canary);
    if (!patched.ok() && (patched.error().IsConflict() || patched.error().IsNotFound())) {
      return ReconcileResult{std::chrono::seconds(1)};  // look again
    }
    if (!patched.ok()) {
      return ApiStatus(patched.error(), "joining ReplayCanary " + ns + "/" +
                                            input.canary->meta.name + " for " + key);
    }
    RecordEvent(ctx_, deployment, false, actions.event_reason, actions.event_note);
    return ReconcileResult{};
  }
  if (actions.release_pinned_hold) return ReleasePinnedHold(deployment, input, actions);
  if (actions.consume_pinned_override) return ConsumePinnedOverride(deployment, input, actions);
  if (actions.deployment_patch.has_value()) {
    // Conditional on the Deployment being what this decision saw: the
    // resourceVersion it was read at goes into the patch, so the API server
    // refuses it (409) when anything changed since, such as a new template
    // the webhook has held while the cache still showed the old one. The
    // decision is then made again from a fresh view.
    if (auto stop = PatchUnchanged(*actions.deployment_patch, input.deployment.meta)) {
      return *stop;
    }
  }
  RecordEvent(ctx_, deployment, actions.event_warning, actions.event_reason, actions.event_note);
  return ReconcileResult{};
}

std::optional<Result<ReconcileResult>> RolloutReconciler::PatchUnchanged(
    json patch, const api::ObjectMeta& seen) const {
  const std::string key = seen.Key();
  if (!seen.resource_version.empty()) patch["metadata"]["resourceVersion"] = seen.resource_version;
  auto patched = ctx_.client->Patch(WorkloadResource(kind_), seen.namespace_name, seen.name,
                                    kube::PatchType::kMerge, patch);
  if (!patched.ok() && patched.error().IsConflict()) {
    spdlog::info("{}: changed since it was read ({}); deciding again", key,
                 patched.error().ToStatus().message());
    return ReconcileResult{std::chrono::seconds(1)};
  }
  if (!patched.ok()) return ApiStatus(patched.error(), "releasing " + key);
  return std::nullopt;
}

std::optional<Result<ReconcileResult>> RolloutReconciler::ReadHeldWhole(
    const RolloutInput& input, json* full, api::DeploymentSummary* read) const {
  const std::string key = input.deployment.meta.Key();
  // The cache keeps no update strategy: what a pin needs is decided on the
  // object read whole, and only while it still holds what `input` saw.
  auto got = ctx_.client->Get(WorkloadResource(kind_), input.deployment.meta.namespace_name,
                              input.deployment.meta.name);
  if (!got.ok()) {
    if (got.error().IsNotFound()) return ReconcileResult{};
    return ApiStatus(got.error(), "reading " + key);
  }
  *full = std::move(*got);
  *read = api::ParseDeploymentSummary(*full);
  const std::string held = input.deployment.meta.Annotation(api::kHeldCandidateAnnotation);
  if (read->meta.uid != input.deployment.meta.uid ||
      read->meta.Annotation(api::kHeldCandidateAnnotation) != held ||
      admission::TemplateHash(read->pod_template) != input.template_hash) {
    return ReconcileResult{std::chrono::seconds(1)};  // the cache is behind; look again
  }
  return std::nullopt;
}

Result<ReconcileResult> RolloutReconciler::ConsumePinnedOverride(const json& cached,
                                                                 const RolloutInput& input,
                                                                 const RolloutActions& actions) {
  json full;
  api::DeploymentSummary read;
  if (auto stop = ReadHeldWhole(input, &full, &read)) return std::move(*stop);
  const std::optional<std::string> pin = kind_ == WorkloadKind::kDaemonSet
                                             ? admission::DaemonSetPinInPlace(full)
                                             : admission::StatefulSetPinInPlace(full);
  if (pin.has_value()) {
    // The override is asked for, not acted on: the hold goes on as without
    // it, decided again on the object read (its canary is created or
    // waited for; a Flat one releases the hold and the annotation with it).
    RolloutInput pinned = input;
    pinned.deployment = std::move(read);
    pinned.pin_in_place = true;
    RolloutActions held = DecideRollout(pinned);
    const std::string why_held = std::string(api::kOverrideHoldAnnotation) + " is set but " + *pin +
                                 " (allocguard lifts no pin for an override: the one who may "
                                 "override does)";
    if (held.event_reason.empty() || held.event_reason == "RolloutHeld") {
      held.event_warning = true;
      held.event_note =
          (held.event_reason.empty()
               ? "template " + pinned.deployment.meta.Annotation(api::kHeldCandidateAnnotation) +
                     " stays held: "
               : held.event_note + "; ") +
          why_held;
      held.event_reason = "RolloutHeld";
    }
    return ApplyRolloutActions(cached, pinned, held);
  }
  if (actions.deployment_patch.has_value()) {
    if (auto stop = PatchUnchanged(*actions.deployment_patch, read.meta)) return *stop;
  }
  RecordEvent(ctx_, cached, actions.event_warning, actions.event_reason, actions.event_note);
  return ReconcileResult{};
}

Result<ReconcileResult> RolloutReconciler::ReleasePinnedHold(const json& cached,
                                                             const RolloutInput& input,
                                                             const RolloutActions& actions) {
  const std::string key = input.deployment.meta.Key();
  json full;
  api::DeploymentSummary read;
  if (auto stop = ReadHeldWhole(input, &full, &read)) return std::move(*stop);
  const std::string held = input.deployment.meta.Annotation(api::kHeldCandidateAnnotation);
  const admission::GateDecision release = ReleaseHoldOf(kind_, full);
  if (release.action != admission::GateAction::kRelease) {
    // R5: what the hold remembered does not parse; the reason names it.
    RecordEvent(ctx_, cached, true, "RolloutHeld",
                "template " + held + " stays held: " + release.reason);
    return ReconcileResult{};
  }
  json released = full;
  try {
    released = released.patch(release.patch);
  } catch (const json::exception& e) {  // not expected: the patch was made from this object
    return Internal("releasing " + key + ": " + e.what());
  }
  if (actions.deployment_patch.has_value()) released.merge_patch(*actions.deployment_patch);
  // Conditional on the object read: a change since makes this a conflict.
  if (auto stop = PatchUnchanged(api::MergePatchBetween(full, released), read.meta)) {
    return *stop;
  }
  RecordEvent(ctx_, cached, actions.event_warning, actions.event_reason,
              actions.event_note + " (" + release.reason + ")");
  return ReconcileResult{};
}

// ---------------------------------------------------------------------------

Result<ReconcileResult> DriftReconciler::Reconcile(const std::string& key) {
  kube::ObjectRef pod = ctx_.pods->Get(key);
  if (pod == nullptr) return ReconcileResult{};
  auto [ns, name] = SplitKey(key);
  const api::PodSummary summary = api::ParsePodSummary(*pod);
  auto policy = GoverningPolicy(
      admission::ParsePolicies(ctx_.policies->ByIndex(kNamespaceIndex, ns)), summary.meta.labels);
  if (!policy.has_value()) return ReconcileResult{};
  for (const DriftedPod& d : FindInjectionDrift(*policy, {summary}, ctx_.operator_namespace)) {
    RecordEvent(
        ctx_, *pod, true, "InjectionMissing",
        "Pod " + d.pod + " is governed by AllocatorPolicy " + policy->name + " but " + d.reason);
  }
  return ReconcileResult{};
}

}  // namespace allocguard::controllers
