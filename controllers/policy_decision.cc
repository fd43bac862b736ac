#include "controllers/policy_decision.h"

#include <algorithm>
#include <map>

#include "controllers/canary_decision.h"
#include "controllers/rollout_decision.h"
#include "operator/api/canary_status.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/common/rfc3339.h"
#include "operator/kube/credentials.h"
#include "operator/kube/object.h"

namespace allocguard::controllers {
namespace {

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).
const auto& Field = kube::FieldOrNull;
const auto& Str = kube::StringField;
const auto& StringMap = kube::StringMap;

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
// left out, since the CRD refuses an empty or malformed date-time and would
// refuse the whole status write with it.
json VerdictEntry(const json& canary) {
  const json& spec = Field(canary, "spec");
  const api::ReplayCanaryStatus status = api::CanaryStatusOf(canary);
  const json& meta = Field(canary, "metadata");
  json entry = {{"workload", Str(Field(spec, "target"), "name")},
                {"templateHash", Str(spec, "templateHash")},
                {"canary", Str(meta, "name")},
                {"verdict", api::RecordedVerdictName(status.verdict, status.unknown_verdict)},
                {"floorSlope", status.floor_slope},
                {"flatVariant", status.flat_variant},
                {"explanation", status.explanation}};
  std::string time = CanonicalTime(status.completion_time);
  if (time.empty()) time = CanonicalTime(Str(meta, "creationTimestamp"));
  if (!time.empty()) entry["time"] = time;
  return entry;
}

}  // namespace

void SetCondition(json& conditions, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, int64_t generation,
                  const std::string& now_rfc3339) {
  std::vector<api::Condition> typed = api::ParseConditions(conditions, "conditions");
  api::SetCondition(typed, type, status, reason, message, generation, now_rfc3339);
  conditions = api::ConditionsToJson(typed);
}

std::vector<DriftedPod> FindInjectionDrift(const api::AllocatorPolicy& policy,
                                           const std::vector<json>& pods,
                                           const std::string& operator_namespace) {
  std::vector<DriftedPod> drift;
  for (const json& pod : pods) {
    const json& meta = Field(pod, "metadata");
    const std::string ns = Str(meta, "namespace");
    if (ns == "kube-system" || ns == operator_namespace) continue;
    if (!Field(meta, "deletionTimestamp").is_null()) continue;
    const std::string phase = Str(Field(pod, "status"), "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    const auto labels = StringMap(Field(meta, "labels"));
    if (labels.count(api::kCanaryLabel) > 0) continue;  // canary pods carry their own injection
    if (!api::SelectorMatches(policy.spec.selector, labels)) continue;
    const auto annotations = StringMap(Field(meta, "annotations"));
    auto opt = annotations.find(api::kInjectAnnotation);
    if (opt != annotations.end() && opt->second == "false") continue;
    if (annotations.count(api::kInjectedAnnotation) > 0) continue;
    if (annotations.count(api::kInjectionSuspendedAnnotation) > 0) continue;  // circuit breaker
    drift.push_back({Str(meta, "name"),
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
  const api::AllocatorPolicy& policy = input.policy;
  json status = input.status.is_object() ? input.status : json::object();
  const json before = status;
  const int64_t gen = policy.generation;
  status["observedGeneration"] = gen;

  // Governed Deployments: their pod template's labels match the selector.
  std::vector<std::string> governed_names;
  json governed = json::array();
  std::vector<std::string> held_blocked;
  std::vector<std::string> held_waiting;
  const std::string policy_key = CanaryPolicyKey(policy);
  std::map<std::string, const json*> canary_by_name;
  for (const json& c : input.canaries) canary_by_name[Str(Field(c, "metadata"), "name")] = &c;
  for (const json& d : input.deployments) {
    const json& tmpl_meta = Field(Field(Field(d, "spec"), "template"), "metadata");
    if (!api::SelectorMatches(policy.spec.selector, StringMap(Field(tmpl_meta, "labels")))) {
      continue;
    }
    const json& meta = Field(d, "metadata");
    const std::string name = Str(meta, "name");
    governed_names.push_back(name);
    if (governed.size() < kMaxListed) {
      governed.push_back({{"kind", "Deployment"}, {"name", name}, {"namespace", policy.ns}});
    }
    const std::string held = Str(Field(meta, "annotations"), api::kHeldCandidateAnnotation);
    if (held.empty()) continue;
    auto it = canary_by_name.find(CanaryName(name, held, policy_key));
    const api::ReplayCanaryStatus cs =
        it != canary_by_name.end() ? api::CanaryStatusOf(*it->second) : api::ReplayCanaryStatus{};
    if (Ended(cs.phase)) {
      std::string why = name + " (template " + held +
                        "): " + api::RecordedVerdictName(cs.verdict, cs.unknown_verdict);
      if (!cs.floor_slope.empty()) why += " at " + cs.floor_slope;
      if (!cs.flat_variant.empty()) why += "; variant " + cs.flat_variant + " was flat instead";
      held_blocked.push_back(why);
    } else {
      held_waiting.push_back(name);
    }
  }
  status["governedCount"] = static_cast<int64_t>(governed_names.size());
  status["governed"] = governed;

  // Verdicts of finished canaries, newest first.
  std::vector<json> verdicts;
  for (const json& c : input.canaries) {
    if (Ended(api::CanaryPhaseOf(c))) verdicts.push_back(VerdictEntry(c));
  }
  std::sort(verdicts.begin(), verdicts.end(), [](const json& a, const json& b) {
    return Str(a, "time") > Str(b, "time") ||
           (Str(a, "time") == Str(b, "time") && Str(a, "canary") < Str(b, "canary"));
  });
  if (verdicts.size() > kMaxListed) verdicts.resize(kMaxListed);
  status["verdicts"] = verdicts;
  if (verdicts.empty()) {
    status.erase("lastVerdict");
  } else {
    status["lastVerdict"] = verdicts.front();
  }

  out.drift = FindInjectionDrift(policy, input.pods, input.operator_namespace);
  json drift = json::array();
  std::vector<std::string> drifted_names;
  for (const DriftedPod& d : out.drift) {
    drifted_names.push_back(d.pod);
    if (drift.size() < kMaxListed) drift.push_back({{"pod", d.pod}, {"reason", d.reason}});
  }
  status["injectionDrift"] = drift;

  BreakerInput breaker_input;
  breaker_input.policy = policy;
  breaker_input.recorded = Field(status, "injectionSuspended");
  breaker_input.deployments = input.deployments;
  breaker_input.pods = input.pods;
  breaker_input.deleted_pod_uids = input.deleted_pod_uids;
  breaker_input.now_rfc3339 = input.now_rfc3339;
  BreakerDecision breaker = DecideInjectionBreaker(breaker_input);
  out.injection_failing = std::move(breaker.tripped);
  out.delete_pods = std::move(breaker.delete_pods);
  status["injectionSuspended"] = breaker.suspended;

  json& conditions = status["conditions"];
  SetCondition(conditions, "Ready", "True", "Accepted",
               "governs " + std::to_string(governed_names.size()) + " Deployment(s) with " +
                   api::AllocatorName(policy.spec.allocator.name) + "; rollout mode " +
                   api::RolloutModeName(policy.spec.rollout.mode),
               gen, input.now_rfc3339);
  if (verdicts.empty()) {
    SetCondition(conditions, "CanaryPassed", "Unknown", "NoCanaryYet",
                 "no replay canary has finished for a governed workload yet", gen,
                 input.now_rfc3339);
  } else {
    const json& last = verdicts.front();
    const bool flat = RecordedVerdict(last) == Verdict::kFlat;
    SetCondition(conditions, "CanaryPassed", flat ? "True" : "False",
                 Str(last, "verdict").empty() ? "NoVerdict" : Str(last, "verdict"),
                 "canary " + Str(last, "canary") + " of " + Str(last, "workload") + ": " +
                     Str(last, "explanation"),
                 gen, input.now_rfc3339);
  }
  if (!held_blocked.empty()) {
    SetCondition(conditions, "RolloutBlocked", "True", "CanaryNotFlat",
                 "held: " + Join(held_blocked, 5), gen, input.now_rfc3339);
  } else if (!held_waiting.empty()) {
    SetCondition(conditions, "RolloutBlocked", "False", "CanaryRunning",
                 "waiting for canaries of " + Join(held_waiting, 5), gen, input.now_rfc3339);
  } else {
    SetCondition(conditions, "RolloutBlocked", "False", "NothingHeld",
                 "no governed rollout is held", gen, input.now_rfc3339);
  }
  if (!drifted_names.empty()) {
    SetCondition(conditions, "InjectionDrift", "True", "PodsNotInjected",
                 std::to_string(drifted_names.size()) +
                     " governed Pod(s) run without the allocator injection: " +
                     Join(drifted_names, 5) + "; delete them to have them recreated injected",
                 gen, input.now_rfc3339);
  } else {
    SetCondition(conditions, "InjectionDrift", "False", "AllInjected",
                 "every governed Pod runs with the injection", gen, input.now_rfc3339);
  }

  if (!breaker.suspended.empty()) {
    std::vector<std::string> failing;
    for (const json& e : breaker.suspended) {
      failing.push_back(Str(e, "workload") + " (pod-template-hash " + Str(e, "podTemplateHash") +
                        "): " + Str(e, "message"));
    }
    SetCondition(
        conditions, "InjectionFailing", "True", "LoaderError",
        "injection suspended for " + std::to_string(failing.size()) +
            " pod template(s) whose pods failed to start with " +
            api::AllocatorName(policy.spec.allocator.name) + " preloaded; they run on " +
            "the system allocator until the template or the policy changes: " + Join(failing, 3),
        gen, input.now_rfc3339);
  } else {
    SetCondition(conditions, "InjectionFailing", "False", "NoFailures",
                 "no governed pod failed to start with the injected allocator", gen,
                 input.now_rfc3339);
  }

  out.status = status;
  out.status_changed = status != before;
  return out;
}

}  // namespace allocguard::controllers
