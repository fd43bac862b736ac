#pragma once

// The parts of the built-in workload objects the controllers read, as C++
// values parsed once at the edge (where a reconciler takes an object from
// its cache or from a GET). Anyone who may write these objects may have put
// anything in them: the parsers never throw; a member of the wrong type
// reads as absent and is reported with its path in `problems` (may be null),
// e.g. "status.containerStatuses[0].restartCount: must be an integer, got
// \"x\"".

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/canary_status.h"
#include "operator/api/object_meta.h"
#include "operator/api/types.h"
#include "operator/common/member_path.h"

namespace allocguard::api {

// The member under which the operator's Deployment cache keeps the digest of
// the pod template it dropped (SlimDeployment).
inline constexpr char kCachedTemplateHashField[] = "allocguardTemplateHash";
// ... and its MeasuredTemplateHash, the key its canary is shared by.
inline constexpr char kCachedMeasuredHashField[] = "allocguardMeasuredHash";

// The transform of the operator's Deployment cache: keeps only what the
// reconcilers read (metadata, spec.paused, the template's labels and
// annotations) and puts PodTemplateHash of the dropped template under
// kCachedTemplateHashField, its MeasuredTemplateHash under
// kCachedMeasuredHashField. The rollout reconciler fetches the full template
// when it creates a canary. A whole Deployment is ~10 KB of JSON; the slim
// one a fraction of that. Never throws: a spec that is not an object is left
// as it is (ParseDeploymentSummary reports it).
void SlimDeployment(nlohmann::json& deployment);

// The MemberFilter (kube::ParsePruned) of the Deployment and DaemonSet
// caches: drops, while an object is parsed, members that
// kube::StripManagedFields and SlimDeployment would drop right after it
// (metadata.managedFields, and the members of spec other than template and
// paused), so that they are never built as a tree. Slimming the pruned
// object gives what slimming the whole one gives.
bool KeptBySlimDeployment(const MemberPath& path);

// A Deployment as the controllers read it: what the slim cache keeps
// (metadata, spec.paused, the template's labels and annotations, the cached
// template digest) and, when the object was read whole, the template itself.
// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct DeploymentSummary {
  ObjectMeta meta;
  bool paused = false;                                      // spec.paused
  std::map<std::string, std::string> template_labels;       // spec.template.metadata.labels
  std::map<std::string, std::string> template_annotations;  // ...metadata.annotations
  // kCachedTemplateHashField, or "" when the object was not slimmed.
  std::string cached_template_hash;
  // kCachedMeasuredHashField, or "" when the object was not slimmed.
  std::string cached_measured_hash;
  // spec.template as stored, whatever its type (null when absent): the slim
  // cache keeps only its metadata; a GET gives the whole template.
  nlohmann::json pod_template;

  bool operator==(const DeploymentSummary&) const = default;
};

DeploymentSummary ParseDeploymentSummary(const nlohmann::json& object,
                                         std::vector<std::string>* problems = nullptr);

// The MeasuredTemplateHash of a workload's template: the cached one, or the
// template's own when the object was read whole.
std::string MeasuredHashOf(const DeploymentSummary& workload);

// ContainerStatus.state / lastState, the parts read.
struct ContainerStateSummary {
  bool terminated = false;           // terminated is set (an object)
  std::string waiting_reason;        // waiting.reason
  std::string waiting_message;       // waiting.message
  std::string terminated_message;    // terminated.message
  std::string terminated_reason;     // terminated.reason
  std::optional<int64_t> exit_code;  // terminated.exitCode

  bool operator==(const ContainerStateSummary&) const = default;
};

struct ContainerStatusSummary {
  std::string name;
  bool ready = false;
  int64_t restart_count = 0;  // restartCount
  ContainerStateSummary state;
  ContainerStateSummary last_state;  // lastState

  bool operator==(const ContainerStatusSummary&) const = default;
};

// An entry of a built-in object's status.conditions (Pod, Job).
struct ObjectCondition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;

  bool operator==(const ObjectCondition&) const = default;
};

// The transform of the operator's Pod cache, which holds every Pod of the
// cluster: keeps what ParsePodSummary and an event about the Pod read
// (apiVersion, kind; metadata's name, namespace, uid, resourceVersion,
// generation, timestamps, labels, ownerReferences and its allocguard.io/
// annotations, the only ones a controller reads of a Pod; spec.nodeName;
// status.phase, reason, message, conditions' type, status, reason and
// message, and each container status' name, ready, restartCount, state and
// lastState) and drops the rest: the spec, other annotations, IPs, images
// and timestamps of the status. ParsePodSummary reads the same from the slim
// Pod as from the whole one, apart from the annotations dropped. Never
// throws: a member of an unexpected type is left as it is, for the reader
// to report.
void SlimPod(nlohmann::json& pod);

// The MemberFilter of the Pod cache: drops, while a Pod is parsed, every
// member that SlimPod would drop (read from the same lists), so that
// SlimPod of the pruned Pod is SlimPod of the whole one.
bool KeptBySlimPod(const MemberPath& path);

// A Pod as the controllers read it: metadata, status (phase, reason,
// message, conditions) and the containers' statuses (the spec is
// admission's; operator/api/pod_spec.h).
struct PodSummary {
  ObjectMeta meta;
  std::string phase;                                            // status.phase
  std::string reason;                                           // status.reason
  std::string message;                                          // status.message
  std::vector<ObjectCondition> conditions;                      // status.conditions
  std::vector<ContainerStatusSummary> init_container_statuses;  // initContainerStatuses
  std::vector<ContainerStatusSummary> container_statuses;       // containerStatuses

  // Succeeded or Failed: its containers will not run again.
  bool Finished() const { return phase == "Succeeded" || phase == "Failed"; }

  bool operator==(const PodSummary&) const = default;
};

PodSummary ParsePodSummary(const nlohmann::json& object,
                           std::vector<std::string>* problems = nullptr);

// A Job as the controllers read it: metadata and status.conditions.
struct JobSummary {
  ObjectMeta meta;
  std::vector<ObjectCondition> conditions;  // status.conditions

  bool operator==(const JobSummary&) const = default;
};

JobSummary ParseJobSummary(const nlohmann::json& object,
                           std::vector<std::string>* problems = nullptr);

// A ReplayCanary as the controllers that do not run it read it (the policy
// status, the rollout): its metadata, target, template hash and status. A
// canary whose spec does not parse (api::ParseReplayCanary) still has these.
// clang-tidy 14 reports the implicit special members of a struct holding
// nlohmann::json as throwing (bugprone-exception-escape); they throw nothing here.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ReplayCanarySummary {
  ObjectMeta meta;
  std::string target_name;    // spec.target.name
  std::string target_kind;    // spec.target.kind; "Deployment" when absent
  std::string template_hash;  // spec.templateHash
  std::string policy_name;    // spec.policyRef.name
  ReplayCanaryStatus status;
  // The whole canary when ParseReplayCanary accepts it; else why not.
  std::optional<ReplayCanary> parsed;
  std::string parse_error;

  bool operator==(const ReplayCanarySummary&) const = default;
};

ReplayCanarySummary ParseReplayCanarySummary(const nlohmann::json& object,
                                             std::vector<std::string>* problems = nullptr);

}  // namespace allocguard::api
