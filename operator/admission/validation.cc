#include "operator/admission/validation.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "operator/api/deployment.h"
#include "operator/api/names.h"

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

ValidationDecision ValidateDeploymentUpdate(const json& old_deployment, const json& new_deployment,
                                            Requester requester) {
  return ValidateDeploymentUpdate(api::ParseDeployment(old_deployment),
                                  api::ParseDeployment(new_deployment), requester);
}

ValidationDecision ValidateDeploymentUpdate(const api::Deployment& old_deployment,
                                            const api::Deployment& new_deployment,
                                            Requester requester) {
  const api::ObjectMeta& old_meta = old_deployment.metadata;
  const api::ObjectMeta& new_meta = new_deployment.metadata;
  const std::string held = old_meta.Annotation(api::kHeldCandidateAnnotation);
  if (!old_meta.HasAnnotation(api::kHeldCandidateAnnotation) || !old_deployment.paused) {
    return {};
  }
  const std::string override_reason = new_meta.Annotation(api::kOverrideHoldAnnotation);
  const bool still_marked = new_meta.HasAnnotation(api::kHeldCandidateAnnotation);
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
  if (!still_marked) {
    lifts.push_back("removes " + std::string(api::kHeldCandidateAnnotation));
  }
  if (new_meta.Annotation(api::kInjectAnnotation) == "false" &&
      old_meta.Annotation(api::kInjectAnnotation) != "false") {
    lifts.push_back("opts out with " + std::string(api::kInjectAnnotation) + "=false");
  }
  if (!new_deployment.paused && still_marked && override_reason.empty()) {
    return Refuse("spec.paused: this Deployment is held by allocguard until its pod template " +
                  held + " has a Flat replay canary and cannot be unpaused by hand; " +
                  how_to_override);
  }
  ValidationDecision decision;
  if (!lifts.empty() && requester != Requester::kOperator) {
    std::string what;
    for (const std::string& l : lifts) what += (what.empty() ? "" : " and ") + l;
    decision.needs_override = "lifts the hold of template " + held + ": it " + what;
  }
  if (!override_reason.empty() && (!new_deployment.paused || !still_marked)) {
    decision.event_reason = "hold of template " + held + " overridden by hand: " + override_reason;
  }
  return decision;
}

ValidationDecision ValidatePolicyChange(const api::AllocatorPolicy& old_policy,
                                        const api::AllocatorPolicy* new_policy,
                                        const std::vector<std::string>& held_deployments) {
  ValidationDecision decision;
  if (held_deployments.empty() || old_policy.spec.rollout.mode != api::RolloutMode::kEnforce) {
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
  for (size_t i = 0; i < held_deployments.size() && i < 5; ++i) {
    names += (i == 0 ? "" : ", ") + held_deployments[i];
  }
  if (held_deployments.size() > 5) {
    names += " and " + std::to_string(held_deployments.size() - 5) + " more";
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
