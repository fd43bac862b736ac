#pragma once

// A Deployment (apps/v1) as the admission webhooks read it: its metadata,
// spec.paused, spec.replicas and its pod template, read once at the edge
// (the AdmissionReview's object and oldObject). ParseDeployment never
// throws: a member of the wrong type reads as absent and is reported with
// its path ("spec.paused: must be a boolean, got \"yes\"").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/object_meta.h"

namespace allocguard::api {

// A stable key of the rollout-relevant parts of a pod template
// (Deployment.spec.template): the whole template spec, the template's labels,
// and its annotations whose keys start with "allocguard.io/". Other
// annotations (kubectl.kubernetes.io/restartedAt and any other) do not count,
// so a bare `kubectl rollout restart` is not a new candidate. Absent and
// empty labels hash alike. The first 16 hex digits of a SHA-256 over the
// canonical JSON (keys sorted). Never throws: members of the wrong type are
// hashed as they are.
std::string PodTemplateHash(const nlohmann::json& pod_template);

// The key of what a replay canary measures of a pod template: PodTemplateHash
// without the template's labels, which the canary's Pods never carry (their
// labels are replaced so that no Service selects them). Two workloads whose
// templates differ only in labels (say, app=web-a and app=web-b) measure
// alike and share one canary. Same format as PodTemplateHash.
std::string MeasuredTemplateHash(const nlohmann::json& pod_template);

// SHA-256 of `text` as 64 hex digits: for names derived from content that
// someone else might try to collide (api::ContentHash is FNV-1a, fast but
// easy to collide on purpose).
std::string Sha256Hex(std::string_view text);

// spec.template: what admission reads of it.
struct DeploymentTemplate {
  ObjectMeta metadata;
  // PodTemplateHash of the template as written.
  std::string hash;

  bool operator==(const DeploymentTemplate&) const = default;
};

struct Deployment {
  // Whether the document was anything but null (an AdmissionReview has no
  // oldObject on CREATE).
  bool present = false;
  ObjectMeta metadata;
  // spec.paused; true only when it is the boolean true.
  bool paused = false;
  std::optional<int64_t> replicas;  // spec.replicas
  DeploymentTemplate pod_template;  // spec.template

  bool operator==(const Deployment&) const = default;
};

// Whether allocguard holds a workload's rollout now: its metadata carries a
// non-empty api::kHeldCandidateAnnotation (the template hash it holds). The
// one meaning of "held" for the webhooks and the metrics; the validating
// webhook's refusal to unpause by hand also requires spec.paused (see
// admission/validation.h).
bool HoldsRollout(const ObjectMeta& metadata);

// Reads a whole Deployment; a non-object gives an empty Deployment (with
// `present` set unless it is null). Problems are appended to `problems`
// (may be null).
Deployment ParseDeployment(const nlohmann::json& object,
                           std::vector<std::string>* problems = nullptr);

}  // namespace allocguard::api
