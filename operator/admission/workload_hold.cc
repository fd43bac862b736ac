#include "operator/admission/workload_hold.h"

#include <cstdint>
#include <utility>

#include "operator/api/deployment.h"
#include "operator/api/json_fields.h"
#include "operator/api/json_patch.h"
#include "operator/api/names.h"
#include "operator/api/workload_kinds.h"

namespace allocguard::admission {
namespace {

using api::ObjectMemberOf;
using api::RemoveAnnotation;
using api::SetAnnotation;
using nlohmann::json;

constexpr char kSpec[] = "spec";
constexpr char kUpdateStrategy[] = "updateStrategy";
constexpr char kRollingUpdate[] = "rollingUpdate";
constexpr char kPartition[] = "partition";
constexpr char kPartitionPath[] = "spec.updateStrategy.rollingUpdate.partition";

GateDecision Allow(std::string reason) {
  GateDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

// The outcome of putting back what a hold replaced (rules R2-R5).
struct Restored {
  bool released = false;
  std::string note;  // appended to the decision's reason
};

// --- StatefulSet -------------------------------------------------------------

// kUserPartitionAnnotation: "" is none; else a non-negative decimal integer.
struct UserPartition {
  std::optional<int64_t> value;
  std::string error;  // non-empty when the annotation does not parse
};

UserPartition ReadUserPartition(const api::ObjectMeta& metadata) {
  UserPartition user;
  const std::string text = metadata.Annotation(api::kUserPartitionAnnotation);
  if (text.empty()) return user;
  const bool digits =
      text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
  // A partition is an int32: a larger one could never be written back.
  if (!digits || std::stoll(text) > kHeldPartition) {
    user.error = std::string(api::kUserPartitionAnnotation) +
                 " must be a non-negative integer (at most " + std::to_string(kHeldPartition) +
                 ") or empty, got " + json(text).dump();
    return user;
  }
  user.value = std::stoll(text);
  return user;
}

std::string PartitionText(std::optional<int64_t> partition) {
  return partition ? std::to_string(*partition) : std::string();
}

json& RollingUpdateOf(json& object) {
  return ObjectMemberOf(ObjectMemberOf(ObjectMemberOf(object, kSpec), kUpdateStrategy),
                        kRollingUpdate);
}

// Rules S1 and S2: pins the partition of `mutated` (a copy of `now`) and
// remembers the user's own. `before` is the stored object on UPDATE (its
// partition is the hold's pin when it was held).
std::string PinPartition(json& mutated, const api::StatefulSet& now,
                         const api::StatefulSet* before) {
  const bool pinned = now.metadata.HasAnnotation(api::kUserPartitionAnnotation);
  const UserPartition remembered = ReadUserPartition(now.metadata);
  std::optional<int64_t> user = remembered.value;
  // A partition is the user's only when it changed against a pinned stored
  // object and is not the pin itself: on the first pin the stored object is
  // not pinned, and when the webhook is invoked again on its own patch the
  // partition is the pin.
  const bool user_wrote = before != nullptr &&
                          before->metadata.HasAnnotation(api::kUserPartitionAnnotation) &&
                          before->update_strategy.partition != now.update_strategy.partition &&
                          now.update_strategy.partition != kHeldPartition;
  if (!pinned || user_wrote) user = now.update_strategy.partition;
  if (!pinned || user_wrote) {
    SetAnnotation(mutated, api::kUserPartitionAnnotation, PartitionText(user));
  }
  if (now.update_strategy.partition != kHeldPartition) {
    RollingUpdateOf(mutated)[kPartition] = kHeldPartition;
  }
  return std::string(kPartitionPath) + " is " + std::to_string(kHeldPartition) +
         ", above any replica count (replicas " + std::to_string(now.ReplicasOrDefault()) +
         "): no pod is replaced, and pods created meanwhile (a scale-up, through /scale too, "
         "or a deleted pod) get the current revision; the StatefulSet's own partition (" +
         (user ? std::to_string(*user) : std::string("none")) + ") is restored on release";
}

Restored RestorePartition(json& mutated, const api::StatefulSet& set) {
  Restored restored;
  if (set.update_strategy.type == api::UpdateStrategyType::kOnDelete &&
      !set.metadata.HasAnnotation(api::kUserPartitionAnnotation)) {
    restored.released = true;
    restored.note =
        "OnDelete: nothing in the spec was held; each pod takes the template when it is deleted";
  } else if (!set.metadata.HasAnnotation(api::kUserPartitionAnnotation)) {
    restored.released = true;
    restored.note =
        std::string(api::kUserPartitionAnnotation) +
        " is missing, so the StatefulSet's own partition is unknown: " + kPartitionPath +
        " stays " +
        (set.update_strategy.partition ? std::to_string(*set.update_strategy.partition)
                                       : std::string("unset")) +
        "; lower it to roll the template out";
  } else if (UserPartition user = ReadUserPartition(set.metadata); !user.error.empty()) {
    restored.note = "the hold stays until this is fixed: " + user.error;
    return restored;
  } else {
    restored.released = true;
    json& rolling = RollingUpdateOf(mutated);
    if (user.value) {
      rolling[kPartition] = *user.value;
      restored.note = kPartitionPath + std::string(" restored to ") + std::to_string(*user.value);
    } else {
      rolling.erase(kPartition);
      if (rolling.empty()) mutated[kSpec][kUpdateStrategy].erase(kRollingUpdate);
      restored.note = kPartitionPath + std::string(" removed (the StatefulSet had none)");
    }
  }
  RemoveHoldMarks(mutated);
  RemoveAnnotation(mutated, api::kUserPartitionAnnotation);
  return restored;
}

// --- DaemonSet ---------------------------------------------------------------

const json& OnDeleteStrategy() {
  static const json kOnDelete = {{"type", "OnDelete"}};
  return kOnDelete;
}

// kUserUpdateStrategyAnnotation: JSON, an object or null.
std::optional<json> ReadUserStrategy(const api::ObjectMeta& metadata, std::string* error) {
  const std::string text = metadata.Annotation(api::kUserUpdateStrategyAnnotation);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !(value.is_object() || value.is_null())) {
    *error = std::string(api::kUserUpdateStrategyAnnotation) +
             " must be a JSON object or null (the DaemonSet's own spec.updateStrategy), got " +
             json(text).dump();
    return std::nullopt;
  }
  return value;
}

// What happens to the pods a held DaemonSet's controller creates (rule D4),
// in the reason of every DaemonSet hold, pinned (D1) or recorded only (D3).
constexpr char kDaemonSetNewPodsNote[] =
    "the pod a node that joins or a pod deleted while held would get is refused until the "
    "release";

// Rules D1 and D2.
std::string PinOnDelete(json& mutated, const api::DaemonSet& now, const api::DaemonSet* before) {
  const bool pinned = now.metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation);
  const bool user_wrote = before != nullptr &&
                          before->metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation) &&
                          before->update_strategy.as_written != now.update_strategy.as_written &&
                          now.update_strategy.as_written != OnDeleteStrategy();
  std::string note = "spec.updateStrategy is OnDelete";
  if (!pinned || user_wrote) {
    SetAnnotation(mutated, api::kUserUpdateStrategyAnnotation,
                  api::json_fields::Dump(now.update_strategy.as_written));
    if (pinned) note += "; the DaemonSet's new strategy is remembered and restored on release";
  }
  if (now.update_strategy.as_written != OnDeleteStrategy()) {
    ObjectMemberOf(mutated, kSpec)[kUpdateStrategy] = OnDeleteStrategy();
  }
  return note + "; running pods are not replaced, and " + kDaemonSetNewPodsNote;
}

Restored RestoreStrategy(json& mutated, const api::DaemonSet& set) {
  Restored restored;
  if (!set.metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation)) {
    restored.released = true;
    restored.note =
        set.update_strategy.type == api::UpdateStrategyType::kOnDelete
            ? "OnDelete: nothing in the spec was held (or the DaemonSet's own strategy was "
              "not recorded); spec.updateStrategy stays OnDelete and each pod takes the "
              "template when it is deleted"
            : "nothing in the spec was held";
  } else {
    std::string error;
    std::optional<json> user = ReadUserStrategy(set.metadata, &error);
    if (!user) {
      restored.note = "the hold stays until this is fixed: " + error;
      return restored;
    }
    restored.released = true;
    if (user->is_null()) {
      ObjectMemberOf(mutated, kSpec).erase(kUpdateStrategy);
      restored.note = "spec.updateStrategy removed (the DaemonSet had none)";
    } else {
      ObjectMemberOf(mutated, kSpec)[kUpdateStrategy] = *user;
      restored.note = "spec.updateStrategy restored to " + api::json_fields::Dump(*user);
    }
  }
  RemoveHoldMarks(mutated);
  RemoveAnnotation(mutated, api::kUserUpdateStrategyAnnotation);
  return restored;
}

// --- shared ------------------------------------------------------------------

// What differs between the kinds, for DecideGate.
template <typename Workload>
struct Kind {
  std::string name;
  Workload (*parse)(const json&, std::vector<std::string>*);
  // Whether the hold can pin a field of this object (S1, D1) rather than
  // only record itself (S3, D3).
  bool (*can_pin)(const Workload& now);
  std::string (*pin)(json& mutated, const Workload& now, const Workload* before);
  Restored (*restore)(json& mutated, const Workload& workload);
  // What a recorded-only hold (S3, D3) does about a pod deleted while held.
  const char* deleted_pod_note;
};

template <typename Workload>
GateDecision DecideGate(const WorkloadGateInput& input, const Kind<Workload>& kind) {
  const Workload now = kind.parse(input.new_object, nullptr);
  if (auto why = NotGated(input.policy, input.operator_namespace, kind.name, now.metadata,
                          now.pod_template.metadata)) {
    return Allow(std::move(*why));
  }
  const api::AllocatorPolicy& policy = *input.policy;
  GateDecision decision;
  decision.template_hash = now.pod_template.hash;
  const std::string& hash = decision.template_hash;
  const Workload before = kind.parse(input.old_object, nullptr);
  const bool update = input.operation == AdmissionOperation::kUpdate && before.present;
  const bool held = api::HoldsRollout(now.metadata);
  json mutated = input.new_object;

  if (update && before.pod_template.hash == hash) {  // rule 2
    decision.reason = "the pod template did not change (template " + hash + ")";
    if (!held) return decision;
    if (now.metadata.HasAnnotation(api::kOverrideHoldAnnotation)) {
      decision.reason +=
          "; the hold is being overridden (" + std::string(api::kOverrideHoldAnnotation) + ")";
      return decision;
    }
    decision.action = GateAction::kHold;
    const std::string held_hash = now.metadata.Annotation(api::kHeldCandidateAnnotation);
    if (!kind.can_pin(now)) {
      decision.reason += "; the hold of " + held_hash + " stays recorded";
      return decision;
    }
    decision.reason += "; " + held_hash + " stays held: " + kind.pin(mutated, now, &before);
    decision.patch = api::JsonPatchBetween(input.new_object, mutated);
    return decision;
  }

  if (input.has_flat_verdict && input.has_flat_verdict(hash)) {  // rule 4
    decision.reason = "template " + hash + " already has a Flat verdict";
    if (held) {
      const std::string held_hash = now.metadata.Annotation(api::kHeldCandidateAnnotation);
      Restored restored = kind.restore(mutated, now);
      if (!restored.released) {
        decision.action = GateAction::kHold;
        decision.reason += "; the hold of " + held_hash + " is not released: " + restored.note;
        return decision;
      }
      decision.action = GateAction::kRelease;
      decision.reason += "; the hold of " + held_hash + " is released: " + restored.note;
    }
    SetAnnotation(mutated, api::kReleasedCandidateAnnotation, hash);
    decision.patch = api::JsonPatchBetween(input.new_object, mutated);
    return decision;
  }

  decision.needs_canary = true;
  if (!update) {  // rule 3
    decision.reason = "a new " + kind.name + " cannot be held (its first revision is the one " +
                      "its pods are created from); template " + hash + " is canaried";
    return decision;
  }
  if (policy.spec.rollout.mode == api::RolloutMode::kAudit) {  // rule 5
    decision.reason = "Audit: template " + hash +
                      " rolls out now and is canaried (AllocatorPolicy " + policy.name + ")";
    return decision;
  }
  decision.action = GateAction::kHold;  // rule 6
  decision.reason = "Enforce: template " + hash + " is held until its replay canary is Flat " +
                    "(AllocatorPolicy " + policy.name + "): ";
  if (kind.can_pin(now)) {
    decision.reason += kind.pin(mutated, now, &before);
  } else {
    decision.reason += std::string("OnDelete: no pod is replaced until it is deleted, and ") +
                       kind.deleted_pod_note;
  }
  SetAnnotation(mutated, api::kHeldCandidateAnnotation, hash);
  decision.patch = api::JsonPatchBetween(input.new_object, mutated);
  return decision;
}

template <typename Workload>
GateDecision Release(const json& object, const Kind<Workload>& kind) {
  const Workload workload = kind.parse(object, nullptr);
  if (!api::HoldsRollout(workload.metadata)) return Allow("the " + kind.name + " is not held");
  const std::string held_hash = workload.metadata.Annotation(api::kHeldCandidateAnnotation);
  GateDecision decision;
  decision.template_hash = held_hash;
  json mutated = object;
  Restored restored = kind.restore(mutated, workload);
  if (!restored.released) {
    decision.action = GateAction::kHold;
    decision.reason = "template " + held_hash + " is Flat but not released: " + restored.note;
    return decision;
  }
  decision.action = GateAction::kRelease;
  decision.reason = "template " + held_hash + " is Flat and released: " + restored.note;
  SetAnnotation(mutated, api::kReleasedCandidateAnnotation, held_hash);
  decision.patch = api::JsonPatchBetween(object, mutated);
  return decision;
}

bool StatefulSetCanPin(const api::StatefulSet& set) {
  // A hold that pinned the partition keeps pinning it even if the type is
  // missing from a later update (the API server defaults it); one that
  // began on OnDelete never pins.
  return set.update_strategy.type == api::UpdateStrategyType::kRollingUpdate;
}

bool DaemonSetCanPin(const api::DaemonSet& set) {
  return set.metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation) ||
         set.update_strategy.type == api::UpdateStrategyType::kRollingUpdate;
}

const Kind<api::StatefulSet>& StatefulSetKind() {
  static const Kind<api::StatefulSet> kKind{
      "StatefulSet",
      api::ParseStatefulSet,
      StatefulSetCanPin,
      PinPartition,
      RestorePartition,
      "a pod deleted while held comes back with the candidate; allocguard records the hold but "
      "cannot prevent that"};
  return kKind;
}

const Kind<api::DaemonSet>& DaemonSetKind() {
  static const Kind<api::DaemonSet> kKind{"DaemonSet", api::ParseDaemonSet, DaemonSetCanPin,
                                          PinOnDelete, RestoreStrategy,     kDaemonSetNewPodsNote};
  return kKind;
}

}  // namespace

GateDecision DecideStatefulSetGate(const WorkloadGateInput& input) {
  return DecideGate(input, StatefulSetKind());
}

GateDecision DecideDaemonSetGate(const WorkloadGateInput& input) {
  return DecideGate(input, DaemonSetKind());
}

GateDecision ReleaseStatefulSetHold(const json& statefulset) {
  return Release(statefulset, StatefulSetKind());
}

GateDecision ReleaseDaemonSetHold(const json& daemonset) {
  return Release(daemonset, DaemonSetKind());
}

std::optional<std::string> StatefulSetPinInPlace(const json& statefulset) {
  const api::StatefulSet set = api::ParseStatefulSet(statefulset, nullptr);
  if (set.update_strategy.type == api::UpdateStrategyType::kOnDelete ||
      set.update_strategy.partition != kHeldPartition) {
    return std::nullopt;
  }
  return std::string(kPartitionPath) + " is still " + std::to_string(kHeldPartition) +
         ", the hold's pin: set it to the partition you want (" +
         std::string(api::kUserPartitionAnnotation) + " says what it was: '" +
         set.metadata.Annotation(api::kUserPartitionAnnotation) + "')";
}

std::optional<std::string> DaemonSetPinInPlace(const json& daemonset) {
  const api::DaemonSet set = api::ParseDaemonSet(daemonset, nullptr);
  if (!set.metadata.HasAnnotation(api::kUserUpdateStrategyAnnotation) ||
      set.update_strategy.as_written != OnDeleteStrategy()) {
    return std::nullopt;
  }
  return "spec.updateStrategy is still the hold's OnDelete: set it to the strategy you want (" +
         std::string(api::kUserUpdateStrategyAnnotation) +
         " says what it was: " + set.metadata.Annotation(api::kUserUpdateStrategyAnnotation) + ")";
}

std::optional<std::string> RefusePodOfHeldDaemonSet(const HeldDaemonSetPodInput& input) {
  const api::OwnerReference* owner = input.pod.ControllerRef();
  if (owner == nullptr || owner->kind != "DaemonSet" || owner->api_version != "apps/v1" ||
      !input.daemonset.has_value() || owner->uid.empty() ||
      owner->uid != input.daemonset->meta.uid) {
    return std::nullopt;
  }
  const api::DeploymentSummary& set = *input.daemonset;
  api::ObjectMeta template_meta;
  template_meta.labels = set.template_labels;
  template_meta.annotations = set.template_annotations;
  if (NotGated(input.policy, input.operator_namespace, "DaemonSet", set.meta, template_meta) ||
      input.policy->spec.rollout.mode != api::RolloutMode::kEnforce) {
    return std::nullopt;
  }
  const std::string held = set.meta.Annotation(api::kHeldCandidateAnnotation);
  if (held.empty() || set.meta.HasAnnotation(api::kOverrideHoldAnnotation)) return std::nullopt;
  return "DaemonSet " + set.meta.Key() + " is held by AllocatorPolicy " + input.policy->name +
         ": its new pod template (" + api::kHeldCandidateAnnotation + " " + held +
         ") waits for its replay canary, and every pod the DaemonSet creates now would run it. "
         "Its controller creates this pod again once the hold is released (a Flat verdict, the "
         "policy in Audit or Off, or an override; docs/workload-kinds.md)";
}

}  // namespace allocguard::admission
