#include "controllers/policy_decision.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "controllers/canary_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/common/rfc3339.h"

namespace allocguard::controllers {
namespace {

constexpr size_t kMaxListed = 50;  // governed workloads, verdicts, drifted pods in status

std::string Join(const std::vector<std::string>& items, size_t max_items) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_items; ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  if (items.size() > max_items) out += " and " + std::to_string(items.size() - max_items) + " more";
  return out;
}

// `text` in the canonical form the CRD's date-time fields accept, or "" when
// it is no RFC 3339 time at all (absent, empty, or written by hand).
std::string CanonicalTime(const std::string& text) {
  if (text.empty()) return "";
  auto parsed = ParseRfc3339(text);
  return parsed.ok() ? FormatRfc3339(parsed.value(), false) : "";
}

// A verdict entry for status from a finished canary. Its `time` is the
// canary's completionTime, else (a canary finished by hand, or read before its
// completionTime was written) its creationTimestamp; a time that is neither is
// left empty, and the writer leaves it out, since the CRD refuses an empty or
// malformed date-time and would refuse the whole status write with it.
api::PolicyVerdict VerdictEntry(const api::ReplayCanarySummary& canary) {
  const api::ReplayCanaryStatus& status = canary.status;
  api::PolicyVerdict entry;
  entry.workload = canary.target_name;
  entry.template_hash = canary.template_hash;
  entry.canary = canary.meta.name;
  entry.verdict = status.verdict;
  entry.unknown_verdict = status.unknown_verdict;
  entry.floor_slope = status.floor_slope;
  entry.flat_variant = status.flat_variant;
  entry.explanation = status.explanation;
  entry.time = CanonicalTime(status.completion_time);
  if (entry.time.empty()) entry.time = CanonicalTime(canary.meta.creation_timestamp);
  return entry;
}

// What the rules found, for the conditions.
struct PolicyFacts {
  std::vector<std::string> governed_names;
  std::vector<std::string> held_blocked;  // "web (template h): Ratchet at ..."
  std::vector<std::string> held_waiting;  // names as governed_names
  std::vector<std::string> drifted_names;
};

// The policy's canaries by name and by (target kind, measured template
// hash), built once per status so that finding the canary of each held
// workload is a lookup, not a scan of every canary. Two canaries of one
// kind and template are those of two policy specs (before and after an
// edit, say glibc then jemalloc): the newest created is kept, the current
// spec's. The canaries must outlive the index (it points into them).
class CanaryIndex {
 public:
  explicit CanaryIndex(const std::vector<api::ReplayCanarySummary>& canaries) {
    by_name_.reserve(canaries.size());
    for (const api::ReplayCanarySummary& c : canaries) {
      by_name_.try_emplace(c.meta.name, &c);
      // RFC 3339 times as the API server writes them order as text.
      auto [it, added] = by_measured_.try_emplace({c.target_kind, c.template_hash}, &c);
      if (!added && c.meta.creation_timestamp > it->second->meta.creation_timestamp) {
        it->second = &c;
      }
    }
  }

  const api::ReplayCanarySummary* Named(std::string_view name) const {
    auto it = by_name_.find(name);
    return it != by_name_.end() ? it->second : nullptr;
  }

  const api::ReplayCanarySummary* Measuring(std::string_view kind, std::string_view hash) const {
    auto it = by_measured_.find({kind, hash});
    return it != by_measured_.end() ? it->second : nullptr;
  }

 private:
  std::unordered_map<std::string_view, const api::ReplayCanarySummary*> by_name_;
  std::map<std::pair<std::string_view, std::string_view>, const api::ReplayCanarySummary*>
      by_measured_;
};

// The canary of a workload's held template, when the cache shows that
// template (its measured hash is cached beside its hash); else null (not
// known yet). A StatefulSet's key also holds its claims, which the summary
// does not keep: its canary is found by kind and measured template among
// the policy's canaries instead. For the status only; trust is decided by
// CanaryDistrust where a verdict is acted on.
const api::ReplayCanarySummary* HeldCanary(const PolicyInput& input, const CanaryIndex& canaries,
                                           WorkloadKind kind,
                                           const api::DeploymentSummary& workload,
                                           const std::string& held) {
  if (!workload.cached_template_hash.empty() && workload.cached_template_hash != held) {
    return nullptr;
  }
  MeasuredTemplate measured;
  measured.kind = kind;
  measured.hash = api::MeasuredHashOf(workload);
  if (kind == WorkloadKind::kStatefulSet) {
    return canaries.Measuring(WorkloadKindName(kind), measured.hash);
  }
  return canaries.Named(CanaryName(CanaryKey(measured, input.policy)));
}

// Rule 2: the governed workloads, and the held ones by their canary.
void GovernedRule(const PolicyInput& input, api::AllocatorPolicyStatus& status,
                  PolicyFacts& facts) {
  const api::AllocatorPolicy& policy = input.policy;
  status.governed.clear();
  const CanaryIndex canaries(input.canaries);
  // Deployments by name alone, as the conditions always named them.
  const std::tuple<WorkloadKind, const std::vector<api::DeploymentSummary>*, const char*> kinds[] =
      {{WorkloadKind::kDeployment, &input.deployments, ""},
       {WorkloadKind::kStatefulSet, &input.statefulsets, "statefulset/"},
       {WorkloadKind::kDaemonSet, &input.daemonsets, "daemonset/"}};
  for (const auto& [kind, workloads, prefix] : kinds) {
    for (const api::DeploymentSummary& d : *workloads) {
      if (!api::SelectorMatches(policy.spec.selector, d.template_labels)) continue;
      const std::string& name = d.meta.name;
      if (name.empty()) continue;
      const std::string shown = prefix + name;
      facts.governed_names.push_back(shown);
      if (status.governed.size() < kMaxListed) {
        status.governed.push_back({kind, name, policy.ns});
      }
      const std::string held = d.meta.Annotation(api::kHeldCandidateAnnotation);
      if (held.empty()) continue;
      const api::ReplayCanarySummary* canary = HeldCanary(input, canaries, kind, d, held);
      const api::ReplayCanaryStatus cs =
          canary != nullptr ? canary->status : api::ReplayCanaryStatus{};
      if (!Ended(cs.phase)) {
        facts.held_waiting.push_back(shown);
        continue;
      }
      std::string why = shown;
      why.append(" (template ").append(held).append("): ");
      why += api::RecordedVerdictName(cs.verdict, cs.unknown_verdict);
      if (!cs.floor_slope.empty()) why += " at " + cs.floor_slope;
      if (!cs.flat_variant.empty()) why += "; variant " + cs.flat_variant + " was flat instead";
      facts.held_blocked.push_back(why);
    }
  }
  status.governed_count = static_cast<int64_t>(facts.governed_names.size());
}

// Rule 3: the verdicts of finished canaries, newest first.
void VerdictsRule(const PolicyInput& input, api::AllocatorPolicyStatus& status) {
  std::vector<api::PolicyVerdict> verdicts;
  for (const api::ReplayCanarySummary& c : input.canaries) {
    if (Ended(c.status.phase)) verdicts.push_back(VerdictEntry(c));
  }
  std::sort(verdicts.begin(), verdicts.end(),
            [](const api::PolicyVerdict& a, const api::PolicyVerdict& b) {
              return a.time > b.time || (a.time == b.time && a.canary < b.canary);
            });
  if (verdicts.size() > kMaxListed) verdicts.resize(kMaxListed);
  status.verdicts = std::move(verdicts);
  status.last_verdict.reset();
  if (!status.verdicts.empty()) status.last_verdict = status.verdicts.front();
}

// Rule 4: governed pods without the injection.
void DriftRule(const PolicyInput& input, api::AllocatorPolicyStatus& status, PolicyFacts& facts,
               PolicyActions& out) {
  out.drift = FindInjectionDrift(input.policy, input.pods, input.operator_namespace);
  status.injection_drift.clear();
  for (const DriftedPod& d : out.drift) {
    facts.drifted_names.push_back(d.pod);
    if (status.injection_drift.size() < kMaxListed) {
      status.injection_drift.push_back({d.pod, d.reason});
    }
  }
}

// Rule 5: the injection circuit breaker.
void BreakerRule(const PolicyInput& input, api::AllocatorPolicyStatus& status, PolicyActions& out) {
  BreakerInput breaker_input;
  breaker_input.policy = input.policy;
  breaker_input.recorded = status.injection_suspended;
  const std::pair<const char*, const std::vector<api::DeploymentSummary>*> kinds[] = {
      {"Deployment/", &input.deployments},
      {"StatefulSet/", &input.statefulsets},
      {"DaemonSet/", &input.daemonsets}};
  for (const auto& [kind, workloads] : kinds) {
    for (const api::DeploymentSummary& w : *workloads) {
      breaker_input.workload_templates[kind + w.meta.name] = DeploymentTemplateDigest(w);
    }
  }
  breaker_input.pods = input.pods;
  breaker_input.deleted_pod_uids = input.deleted_pod_uids;
  breaker_input.now_rfc3339 = input.now_rfc3339;
  BreakerDecision breaker = DecideInjectionBreaker(breaker_input);
  out.injection_failing = std::move(breaker.tripped);
  out.delete_pods = std::move(breaker.delete_pods);
  status.injection_suspended = std::move(breaker.suspended);
}

// Rule 6: the conditions, one function each.
class Conditions {
 public:
  Conditions(const PolicyInput& input, api::AllocatorPolicyStatus& status)
      : policy_(input.policy), now_(input.now_rfc3339), status_(status) {}

  void Set(const std::string& type, const std::string& value, const std::string& reason,
           const std::string& message) {
    api::SetCondition(status_.conditions, type, value, reason, message, policy_.generation, now_);
  }

  void Ready(const PolicyFacts& facts) {
    Set("Ready", "True", "Accepted",
        "governs " + std::to_string(facts.governed_names.size()) + " workload(s) with " +
            api::AllocatorName(policy_.spec.allocator.name) + "; rollout mode " +
            api::RolloutModeName(policy_.spec.rollout.mode));
  }

  void CanaryPassed() {
    if (!status_.last_verdict.has_value()) {
      Set("CanaryPassed", "Unknown", "NoCanaryYet",
          "no replay canary has finished for a governed workload yet");
      return;
    }
    const api::PolicyVerdict& last = *status_.last_verdict;
    const bool flat = last.verdict == Verdict::kFlat;
    const std::string name = last.VerdictName();
    Set("CanaryPassed", flat ? "True" : "False", name.empty() ? "NoVerdict" : name,
        "canary " + last.canary + " of " + last.workload + ": " + last.explanation);
  }

  void RolloutBlocked(const PolicyFacts& facts) {
    if (!facts.held_blocked.empty()) {
      Set("RolloutBlocked", "True", "CanaryNotFlat", "held: " + Join(facts.held_blocked, 5));
    } else if (!facts.held_waiting.empty()) {
      Set("RolloutBlocked", "False", "CanaryRunning",
          "waiting for canaries of " + Join(facts.held_waiting, 5));
    } else {
      Set("RolloutBlocked", "False", "NothingHeld", "no governed rollout is held");
    }
  }

  void InjectionDrift(const PolicyFacts& facts) {
    if (facts.drifted_names.empty()) {
      Set("InjectionDrift", "False", "AllInjected", "every governed Pod runs with the injection");
      return;
    }
    Set("InjectionDrift", "True", "PodsNotInjected",
        std::to_string(facts.drifted_names.size()) +
            " governed Pod(s) run without the allocator injection: " +
            Join(facts.drifted_names, 5) + "; delete them to have them recreated injected");
  }

  void InjectionFailing() {
    if (status_.injection_suspended.empty()) {
      Set("InjectionFailing", "False", "NoFailures",
          "no governed pod failed to start with the injected allocator");
      return;
    }
    std::vector<std::string> failing;
    for (const api::InjectionSuspendedStatus& e : status_.injection_suspended) {
      failing.push_back(e.workload + " (template " + e.pod_template_hash + "): " + e.message);
    }
    Set("InjectionFailing", "True", "LoaderError",
        "injection suspended for " + std::to_string(failing.size()) +
            " pod template(s) whose pods failed to start with " +
            api::AllocatorName(policy_.spec.allocator.name) + " preloaded; they run on " +
            "the system allocator until the template or the policy changes: " + Join(failing, 3));
  }

 private:
  const api::AllocatorPolicy& policy_;
  const std::string& now_;
  api::AllocatorPolicyStatus& status_;
};

}  // namespace

std::vector<DriftedPod> FindInjectionDrift(const api::AllocatorPolicy& policy,
                                           const std::vector<api::PodSummary>& pods,
                                           const std::string& operator_namespace) {
  std::vector<DriftedPod> drift;
  for (const api::PodSummary& pod : pods) {
    const api::ObjectMeta& meta = pod.meta;
    if (meta.namespace_name == "kube-system" || meta.namespace_name == operator_namespace) {
      continue;
    }
    if (meta.Terminating() || pod.Finished()) continue;
    if (meta.labels.contains(api::kCanaryLabel)) continue;  // canaries carry their own injection
    if (!api::SelectorMatches(policy.spec.selector, meta.labels)) continue;
    if (meta.HasAnnotation(api::kInjectAnnotation) &&
        meta.Annotation(api::kInjectAnnotation) == "false") {
      continue;
    }
    if (meta.HasAnnotation(api::kInjectedAnnotation)) continue;
    if (meta.HasAnnotation(api::kInjectionSuspendedAnnotation)) continue;  // circuit breaker
    drift.push_back({meta.name,
                     "runs without allocguard's injection (created while the webhook was "
                     "unavailable, or before policy " +
                         policy.name +
                         " existed); delete the Pod so that its controller recreates it "
                         "injected"});
  }
  return drift;
}

PolicyActions DecidePolicyStatus(const PolicyInput& input) {
  PolicyActions out;
  api::AllocatorPolicyStatus status = input.status;
  PolicyFacts facts;
  status.observed_generation = input.policy.generation;  // rule 1
  GovernedRule(input, status, facts);
  VerdictsRule(input, status);
  DriftRule(input, status, facts, out);
  BreakerRule(input, status, out);
  Conditions conditions(input, status);
  conditions.Ready(facts);
  conditions.CanaryPassed();
  conditions.RolloutBlocked(facts);
  conditions.InjectionDrift(facts);
  conditions.InjectionFailing();
  out.status_changed = status != input.status;
  out.status = std::move(status);
  return out;
}

api::AllocatorPolicyStatus InvalidPolicyStatus(const api::AllocatorPolicyStatus& current,
                                               int64_t generation, const std::string& error,
                                               const std::string& now_rfc3339) {
  api::AllocatorPolicyStatus status = current;
  status.observed_generation = generation;
  api::SetCondition(status.conditions, "Ready", "False", "InvalidSpec", error, generation,
                    now_rfc3339);
  return status;
}

}  // namespace allocguard::controllers
