#pragma once

// A StatefulSet and a DaemonSet (apps/v1) as a rollout hold reads them: the
// metadata, spec.replicas, spec.updateStrategy and the pod template, read
// once at the edge (an AdmissionReview's object and oldObject, or a GET).
// Like ParseDeployment, the parsers never throw: a member of the wrong type
// reads as absent and is reported with its path in `problems` (may be null),
// e.g. "spec.updateStrategy.rollingUpdate.partition: must be an integer,
// got \"2\"".
//
// The hold decisions of operator/admission/workload_hold.h, the
// StatefulSet and DaemonSet webhooks and the rollout reconciler's release
// read them (docs/workload-kinds.md).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/deployment.h"
#include "operator/api/object_meta.h"
#include "operator/common/member_path.h"

namespace allocguard::api {

// The kinds whose rollouts allocguard gates (holds, canaries, releases),
// as the reconcilers, the gate and the policy status name them.
enum class WorkloadKind { kDeployment, kStatefulSet, kDaemonSet };
// "Deployment", "StatefulSet", "DaemonSet".
const char* WorkloadKindName(WorkloadKind kind);
// The kind of that name; nullopt for any other.
std::optional<WorkloadKind> WorkloadKindFromName(const std::string& name);

// An intstr.IntOrString as rolling updates use it (maxUnavailable,
// maxSurge): a count or a percentage such as "25%".
struct IntOrPercent {
  std::optional<int64_t> count;  // set when it is an integer
  std::string percent;           // the string as written ("25%") otherwise

  bool Present() const { return count.has_value() || !percent.empty(); }
  // The value as the API writes it; null when absent.
  nlohmann::json ToJson() const;

  bool operator==(const IntOrPercent&) const = default;
};

// spec.updateStrategy.type. An absent type is RollingUpdate (the API
// server's default for both kinds).
enum class UpdateStrategyType { kRollingUpdate, kOnDelete };

// spec.updateStrategy of a StatefulSet or a DaemonSet; each kind reads the
// members it has.
// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct UpdateStrategy {
  UpdateStrategyType type = UpdateStrategyType::kRollingUpdate;
  bool type_written = false;         // spec.updateStrategy.type was a known value
  std::optional<int64_t> partition;  // rollingUpdate.partition (StatefulSet)
  IntOrPercent max_unavailable;      // rollingUpdate.maxUnavailable
  IntOrPercent max_surge;            // rollingUpdate.maxSurge (DaemonSet)
  // spec.updateStrategy exactly as stored (null when absent), so that a hold
  // can remember and later restore what the user wrote, members allocguard
  // does not model included.
  nlohmann::json as_written;

  bool operator==(const UpdateStrategy&) const = default;
};

// An entry of a StatefulSet's spec.volumeClaimTemplates as its canary reads
// it: the claim's name (the volume its pods mount) and its storage request
// in bytes, absent when unset or not a quantity.
struct VolumeClaimTemplate {
  std::string name;                      // metadata.name
  std::optional<int64_t> storage_bytes;  // spec.resources.requests.storage

  bool operator==(const VolumeClaimTemplate&) const = default;
};

// clang-tidy 14: see above.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct StatefulSet {
  // Whether the document was anything but null.
  bool present = false;
  ObjectMeta metadata;
  std::optional<int64_t> replicas;  // spec.replicas (absent means 1)
  UpdateStrategy update_strategy;   // spec.updateStrategy
  DeploymentTemplate pod_template;  // spec.template (metadata and hash)
  // spec.volumeClaimTemplates; an entry without a name is left out.
  std::vector<VolumeClaimTemplate> volume_claim_templates;

  // spec.replicas, or 1 when absent (the API server's default).
  int64_t ReplicasOrDefault() const { return replicas.value_or(1); }

  bool operator==(const StatefulSet&) const = default;
};

// clang-tidy 14: see above.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct DaemonSet {
  bool present = false;
  ObjectMeta metadata;
  UpdateStrategy update_strategy;   // spec.updateStrategy
  DeploymentTemplate pod_template;  // spec.template (metadata and hash)

  bool operator==(const DaemonSet&) const = default;
};

// Read a whole object; a non-object gives an empty value (with `present`
// set unless it is null). The template hash is api::PodTemplateHash of
// spec.template, the same key a Deployment's canary and verdict use.
StatefulSet ParseStatefulSet(const nlohmann::json& object,
                             std::vector<std::string>* problems = nullptr);
DaemonSet ParseDaemonSet(const nlohmann::json& object,
                         std::vector<std::string>* problems = nullptr);

// The transform of the operator's StatefulSet cache: SlimDeployment (the
// metadata, the template's labels and annotations, the template's digest)
// plus spec.volumeClaimTemplates reduced to what ParseStatefulSet reads
// (each claim's name and storage request), which the canary Job builder
// turns into emptyDirs. Never throws. The DaemonSet cache uses
// SlimDeployment itself.
void SlimStatefulSet(nlohmann::json& statefulset);

// The MemberFilter of the StatefulSet cache: KeptBySlimDeployment, keeping
// spec.volumeClaimTemplates, which SlimStatefulSet reads.
bool KeptBySlimStatefulSet(const MemberPath& path);

}  // namespace allocguard::api
