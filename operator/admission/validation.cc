#include "operator/admission/validation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "operator/api/deployment.h"
#include "operator/api/names.h"
#include "operator/api/workload_kinds.h"

namespace allocguard::admission {
namespace {

using nlohmann::json;

ValidationDecision Refuse(std::string message) {
  ValidationDecision decision;
  decision.allowed = false;
  decision.message = std::move(message);
  return decision;
}

// Every requirement the two selectors place on one label key.
struct KeyConstraints {
  std::vector<std::set<std::string>> in;  // the value must be in each set
  std::set<std::string> not_in;           // the value, if any, must be in none
  bool exists = false;
  bool does_not_exist = false;
};

void AddSelector(const api::LabelSelector& selector, std::map<std::string, KeyConstraints>& keys) {
  for (const auto& [key, value] : selector.match_labels) keys[key].in.push_back({value});
  for (const api::LabelSelectorRequirement& r : selector.match_expressions) {
    KeyConstraints& k = keys[r.key];
    if (r.op == "In") {
      k.in.emplace_back(r.values.begin(), r.values.end());
    } else if (r.op == "NotIn") {
      k.not_in.insert(r.values.begin(), r.values.end());
    } else if (r.op == "Exists") {
      k.exists = true;
    } else if (r.op == "DoesNotExist") {
      k.does_not_exist = true;
    }
    // An unknown operator (refused by the parser) constrains nothing here, so
    // the check errs toward reporting an overlap.
  }
}

// A value of the key satisfying `k`, if one exists (the key then present).
std::optional<std::string> SatisfyingValue(const KeyConstraints& k) {
  if (k.does_not_exist) return std::nullopt;
  if (!k.in.empty()) {
    for (const std::string& v : k.in.front()) {
      bool ok = !k.not_in.contains(v);
      for (const auto& set : k.in) ok = ok && set.contains(v);
      if (ok) return v;
    }
    return std::nullopt;
  }
  std::string value = "x";
  for (int i = 1; k.not_in.contains(value); ++i) value = "x" + std::to_string(i);
  return value;
}

}  // namespace

bool SelectorsOverlap(const api::LabelSelector& a, const api::LabelSelector& b,
                      std::string* example) {
  std::map<std::string, KeyConstraints> keys;
  AddSelector(a, keys);
  AddSelector(b, keys);
  std::string labels;
  for (const auto& [key, k] : keys) {
    const bool absent_ok = k.in.empty() && !k.exists;
    if (absent_ok) continue;
    std::optional<std::string> value = SatisfyingValue(k);
    if (!value) return false;
    labels += (labels.empty() ? "" : ",") + key + "=" + *value;
  }
  if (example != nullptr) *example = labels;
  return true;
}

namespace {

// One version of a workload as the hold-lifting check reads it.
struct HoldView {
  const api::ObjectMeta& metadata;
  const std::string& template_hash;
  bool pinned;  // the field the hold pins (spec.paused, a partition, a strategy) holds it
};

// What differs between the kinds in the check and its messages.
struct HoldKind {
  const char* kind;        // "Deployment"
  const char* pin_field;   // the field a refusal names
  const char* unpin_what;  // "cannot be unpaused by hand"
};

// The one check behind ValidateDeploymentUpdate, ValidateStatefulSetUpdate
// and ValidateDaemonSetUpdate (validation.h). `held`: the stored object is
// under a hold this check guards.
ValidationDecision ValidateHoldLift(const HoldKind& kind, bool held, const HoldView& before,
                                    const HoldView& now, Requester requester) {
  if (!held) return {};
  const api::ObjectMeta& old_meta = before.metadata;
  const api::ObjectMeta& new_meta = now.metadata;
  const std::string held_hash = old_meta.Annotation(api::kHeldCandidateAnnotation);
  const std::string override_reason = new_meta.Annotation(api::kOverrideHoldAnnotation);
  const bool still_marked = new_meta.HasAnnotation(api::kHeldCandidateAnnotation);
  // The mutating webhook released the hold because the new template is Flat.
  const bool released_as_flat =
      !still_marked && !now.template_hash.empty() && now.template_hash != before.template_hash &&
      new_meta.Annotation(api::kReleasedCandidateAnnotation) == now.template_hash;
  const std::string how_to_override =
      std::string("wait for its ReplayCanary to be Flat, or set the annotation ") +
      api::kOverrideHoldAnnotation + " to your reason (recorded in an event)";
  // What in this update lifts the hold (each needs the override permission
  // unless the operator itself sends it).
  std::vector<std::string> lifts;
  if (!override_reason.empty() &&
      override_reason != old_meta.Annotation(api::kOverrideHoldAnnotation)) {
    lifts.push_back("sets " + std::string(api::kOverrideHoldAnnotation) + "=\"" + override_reason +
                    "\"");
  }
  if (!still_marked && !released_as_flat) {
    lifts.push_back("removes " + std::string(api::kHeldCandidateAnnotation));
  }
  if (new_meta.Annotation(api::kInjectAnnotation) == "false" &&
      old_meta.Annotation(api::kInjectAnnotation) != "false") {
    lifts.push_back("opts out with " + std::string(api::kInjectAnnotation) + "=false");
  }
  if (before.pinned && !now.pinned && still_marked && override_reason.empty()) {
    return Refuse(std::string(kind.pin_field) + ": this " + kind.kind +
                  " is held by allocguard until its pod template " + held_hash +
                  " has a Flat replay canary and " + kind.unpin_what + "; " + how_to_override);
  }
  ValidationDecision decision;
  if (!lifts.empty() && requester != Requester::kOperator) {
    std::string what;
    for (const std::string& l : lifts) what += (what.empty() ? "" : " and ") + l;
    decision.needs_override = "lifts the hold of template " + held_hash + ": it " + what;
  }
  if (!override_reason.empty() && (!now.pinned || !still_marked)) {
    decision.event_reason =
        "hold of template " + held_hash + " overridden by hand: " + override_reason;
  }
  return decision;
}

// A StatefulSet's partition as the hold pins it (rule S1 of workload_hold.h).
bool PartitionPinned(const api::StatefulSet& set) {
  return set.metadata.HasAnnotation(api::kUserPartitionAnnotation) &&
         set.update_strategy.type == api::UpdateStrategyType::kRollingUpdate;
}

// A DaemonSet's strategy as the hold pins it (rule D1).
bool StrategyPinned(const api::DaemonSet& set) {
  return set.metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation) &&
         set.update_strategy.type == api::UpdateStrategyType::kOnDelete;
}

}  // namespace

ValidationDecision ValidateDeploymentUpdate(const json& old_deployment, const json& new_deployment,
                                            Requester requester) {
  return ValidateDeploymentUpdate(api::ParseDeployment(old_deployment),
                                  api::ParseDeployment(new_deployment), requester);
}

ValidationDecision ValidateDeploymentUpdate(const api::Deployment& old_deployment,
                                            const api::Deployment& new_deployment,
                                            Requester requester) {
  static constexpr HoldKind kDeployment{"Deployment", "spec.paused", "cannot be unpaused by hand"};
  const bool held =
      old_deployment.metadata.HasAnnotation(api::kHeldCandidateAnnotation) && old_deployment.paused;
  return ValidateHoldLift(
      kDeployment, held,
      {old_deployment.metadata, old_deployment.pod_template.hash, old_deployment.paused},
      {new_deployment.metadata, new_deployment.pod_template.hash, new_deployment.paused},
      requester);
}

ValidationDecision ValidateStatefulSetUpdate(const json& old_statefulset,
                                             const json& new_statefulset, Requester requester) {
  static constexpr HoldKind kStatefulSet{
      "StatefulSet", "spec.updateStrategy",
      "its partition cannot be lowered, nor its update strategy switched to OnDelete, by hand"};
  const api::StatefulSet before = api::ParseStatefulSet(old_statefulset);
  const api::StatefulSet now = api::ParseStatefulSet(new_statefulset);
  const bool pinned_before = PartitionPinned(before);
  // Lowered: below the stored pin (an absent partition is 0), or not RollingUpdate.
  const bool still_pinned =
      PartitionPinned(now) &&
      now.update_strategy.partition.value_or(0) >= before.update_strategy.partition.value_or(0);
  return ValidateHoldLift(
      kStatefulSet, before.metadata.HasAnnotation(api::kHeldCandidateAnnotation),
      {before.metadata, before.pod_template.hash, pinned_before},
      {now.metadata, now.pod_template.hash, pinned_before && still_pinned}, requester);
}

ValidationDecision ValidateDaemonSetUpdate(const json& old_daemonset, const json& new_daemonset,
                                           Requester requester) {
  static constexpr HoldKind kDaemonSet{
      "DaemonSet", "spec.updateStrategy",
      "its update strategy cannot be switched back from OnDelete by hand"};
  const api::DaemonSet before = api::ParseDaemonSet(old_daemonset);
  const api::DaemonSet now = api::ParseDaemonSet(new_daemonset);
  const bool pinned_before = StrategyPinned(before);
  return ValidateHoldLift(
      kDaemonSet, before.metadata.HasAnnotation(api::kHeldCandidateAnnotation),
      {before.metadata, before.pod_template.hash, pinned_before},
      {now.metadata, now.pod_template.hash, pinned_before && StrategyPinned(now)}, requester);
}

ValidationDecision ValidatePolicyChange(const api::AllocatorPolicy& old_policy,
                                        const api::AllocatorPolicy* new_policy,
                                        const std::vector<std::string>& held) {
  ValidationDecision decision;
  if (held.empty() || old_policy.spec.rollout.mode != api::RolloutMode::kEnforce) {
    return decision;
  }
  std::string why;
  if (new_policy == nullptr) {
    why = "deletes policy " + old_policy.name;
  } else if (new_policy->spec.rollout.mode != api::RolloutMode::kEnforce) {
    why = "sets spec.rollout.mode of policy " + old_policy.name + " to " +
          api::RolloutModeName(new_policy->spec.rollout.mode);
  } else {
    return decision;
  }
  std::string names;
  for (size_t i = 0; i < held.size() && i < 5; ++i) {
    names += (i == 0 ? "" : ", ") + held[i];
  }
  if (held.size() > 5) {
    names += " and " + std::to_string(held.size() - 5) + " more";
  }
  decision.needs_override = "lifts the hold of " + names + ": it " + why;
  return decision;
}

ValidationDecision ValidatePolicy(const api::AllocatorPolicy& candidate,
                                  const std::vector<api::AllocatorPolicy>& others_in_namespace) {
  if (!SelectorsOverlap(candidate.spec.selector, api::LabelSelector{}, nullptr)) {
    return Refuse(
        "spec.selector: no pod can satisfy it (its requirements on one label contradict each "
        "other)");
  }
  std::vector<const api::AllocatorPolicy*> others;
  for (const api::AllocatorPolicy& other : others_in_namespace) {
    if (other.name != candidate.name) others.push_back(&other);
  }
  std::sort(others.begin(), others.end(),
            [](const auto* x, const auto* y) { return x->name < y->name; });
  for (const api::AllocatorPolicy* other : others) {
    std::string example;
    if (!SelectorsOverlap(candidate.spec.selector, other->spec.selector, &example)) continue;
    return Refuse("spec.selector overlaps AllocatorPolicy \"" + other->name +
                  "\": both would select " +
                  (example.empty() ? std::string("a pod without labels")
                                   : "a pod labelled {" + example + "}") +
                  ", and a pod selected by two policies gets neither; make the selectors "
                  "exclusive (e.g. a label one requires and the other excludes)");
  }
  return {};
}

}  // namespace allocguard::admission
