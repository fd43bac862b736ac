#include "operator/api/workloads.h"

#include <algorithm>
#include <iterator>
#include <span>
#include <string_view>

#include "operator/api/deployment.h"
#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::api {

using json_fields::Reader;
using nlohmann::json;

namespace {

void ReadState(Reader& parent, const char* key, ContainerStateSummary* out,
               std::vector<std::string>* problems) {
  const json* state = parent.Object(key);
  if (state == nullptr) return;
  Reader s(*state, parent.PathOf(key), problems);
  if (const json* waiting = s.Object("waiting")) {
    Reader w(*waiting, s.PathOf("waiting"), problems);
    w.String("reason", &out->waiting_reason);
    w.String("message", &out->waiting_message);
  }
  if (const json* terminated = s.Object("terminated")) {
    out->terminated = true;
    Reader t(*terminated, s.PathOf("terminated"), problems);
    t.String("message", &out->terminated_message);
    t.String("reason", &out->terminated_reason);
    t.Int("exitCode", &out->exit_code);
  }
}

void ReadContainerStatuses(Reader& status, const char* key,
                           std::vector<ContainerStatusSummary>* out,
                           std::vector<std::string>* problems) {
  status.Objects(key, [&](const json& item, const std::string& path) {
    ContainerStatusSummary cs;
    Reader r(item, path, problems);
    r.String("name", &cs.name);
    r.Bool("ready", &cs.ready);
    r.Int("restartCount", &cs.restart_count);
    ReadState(r, "state", &cs.state, problems);
    ReadState(r, "lastState", &cs.last_state, problems);
    out->push_back(std::move(cs));
  });
}

void ReadConditions(Reader& status, std::vector<ObjectCondition>* out,
                    std::vector<std::string>* problems) {
  status.Objects("conditions", [&](const json& item, const std::string& path) {
    ObjectCondition c;
    Reader r(item, path, problems);
    r.String("type", &c.type);
    r.String("status", &c.status);
    r.String("reason", &c.reason);
    r.String("message", &c.message);
    out->push_back(std::move(c));
  });
}

}  // namespace

JobSummary ParseJobSummary(const json& object, std::vector<std::string>* problems) {
  JobSummary job;
  job.meta = ParseObjectMeta(object, problems);
  Reader top(object, "", problems);
  const json* status = top.Object("status");
  if (status == nullptr) return job;
  Reader s(*status, "status", problems);
  ReadConditions(s, &job.conditions, problems);
  return job;
}

void SlimDeployment(json& deployment) {
  if (!deployment.is_object()) return;
  auto spec_it = deployment.find("spec");
  if (spec_it == deployment.end() || !spec_it->is_object()) return;
  json& spec = *spec_it;
  static const json kNull;
  auto tmpl_it = spec.find("template");
  const json& tmpl = tmpl_it == spec.end() ? kNull : *tmpl_it;
  json tmpl_meta = json::object();
  if (tmpl.is_object()) {
    auto meta = tmpl.find("metadata");
    if (meta != tmpl.end() && meta->is_object()) {
      for (const char* key : {"labels", "annotations"}) {
        auto it = meta->find(key);
        if (it != meta->end()) tmpl_meta[key] = *it;
      }
    }
  }
  json slim = {{"template", {{"metadata", std::move(tmpl_meta)}}}};
  auto paused = spec.find("paused");
  if (paused != spec.end()) slim["paused"] = *paused;
  deployment[kCachedTemplateHashField] = PodTemplateHash(tmpl);
  deployment[kCachedMeasuredHashField] = MeasuredTemplateHash(tmpl);
  spec = std::move(slim);
}

namespace {

using KeyList = std::span<const char* const>;

// What SlimPod keeps, level by level; KeptBySlimPod reads the same lists.
constexpr const char* kPodKeys[] = {"apiVersion", "kind", "metadata", "spec", "status"};
constexpr const char* kPodMetadataKeys[] = {"name",
                                            "namespace",
                                            "uid",
                                            "resourceVersion",
                                            "generation",
                                            "creationTimestamp",
                                            "deletionTimestamp",
                                            "labels",
                                            "annotations",
                                            "ownerReferences"};
constexpr const char* kPodSpecKeys[] = {"nodeName"};
constexpr const char* kPodStatusKeys[] = {
    "phase", "reason", "message", "conditions", "containerStatuses", "initContainerStatuses"};
constexpr const char* kConditionKeys[] = {"type", "status", "reason", "message"};
constexpr const char* kContainerStatusLists[] = {"containerStatuses", "initContainerStatuses"};
constexpr const char* kContainerStatusKeys[] = {"name", "ready", "restartCount", "state",
                                                "lastState"};
// What SlimDeployment keeps of a spec (and SlimStatefulSet besides).
constexpr const char* kWorkloadSpecKeys[] = {"template", "paused"};

bool Listed(KeyList keys, std::string_view key) {
  return std::any_of(keys.begin(), keys.end(), [key](const char* k) { return key == k; });
}

// Keeps only `keys` of an object; anything else is left alone.
void KeepMembers(json& object, KeyList keys) {
  if (!object.is_object()) return;
  json kept = json::object();
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end()) kept[key] = std::move(*it);
  }
  object = std::move(kept);
}

// KeepMembers on every element of the array object[key], if it is one.
void KeepMembersOfEach(json& object, const char* key, KeyList keys) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return;
  for (json& element : *it) KeepMembers(element, keys);
}

// For the workload filters: metadata.managedFields (which the caches'
// kube::StripManagedFields drops) and the members of spec other than
// `spec_keys` are dropped, anything else kept.
bool KeptByWorkloadFilter(const MemberPath& path, KeyList spec_keys) {
  if (path.size() != 2 || path[0].element || path[1].element) return true;
  if (path[0].key == "metadata") return path[1].key != "managedFields";
  if (path[0].key == "spec") return Listed(spec_keys, path[1].key);
  return true;
}

}  // namespace

void SlimPod(json& pod) {
  if (!pod.is_object()) return;
  KeepMembers(pod, kPodKeys);
  if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object()) {
    KeepMembers(*meta, kPodMetadataKeys);
    if (auto annotations = meta->find("annotations");
        annotations != meta->end() && annotations->is_object()) {
      for (auto it = annotations->begin(); it != annotations->end();) {
        it = it.key().rfind(kAnnotationPrefix, 0) == 0 ? std::next(it) : annotations->erase(it);
      }
    }
  }
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    KeepMembers(*spec, kPodSpecKeys);
  }
  if (auto status = pod.find("status"); status != pod.end() && status->is_object()) {
    KeepMembers(*status, kPodStatusKeys);
    KeepMembersOfEach(*status, "conditions", kConditionKeys);
    for (const char* key : kContainerStatusLists) {
      KeepMembersOfEach(*status, key, kContainerStatusKeys);
    }
  }
}

bool KeptBySlimPod(const MemberPath& path) {
  if (path.empty() || path[0].element) return true;
  const std::string_view top = path[0].key;
  if (path.size() == 1) return Listed(kPodKeys, top);
  if (path[1].element) return true;
  if (path.size() == 2) {
    if (top == "metadata") return Listed(kPodMetadataKeys, path[1].key);
    if (top == "spec") return Listed(kPodSpecKeys, path[1].key);
    if (top == "status") return Listed(kPodStatusKeys, path[1].key);
    return true;
  }
  if (path.size() == 3 && top == "metadata" && path[1].key == "annotations" && !path[2].element) {
    return path[2].key.rfind(kAnnotationPrefix, 0) == 0;
  }
  // status.<list>[i].<key>: an element of the list, and a member of it.
  if (path.size() == 4 && top == "status" && path[2].element && !path[3].element) {
    if (path[1].key == "conditions") return Listed(kConditionKeys, path[3].key);
    if (Listed(kContainerStatusLists, path[1].key)) {
      return Listed(kContainerStatusKeys, path[3].key);
    }
  }
  return true;
}

bool KeptBySlimDeployment(const MemberPath& path) {
  return KeptByWorkloadFilter(path, kWorkloadSpecKeys);
}

DeploymentSummary ParseDeploymentSummary(const json& object, std::vector<std::string>* problems) {
  DeploymentSummary d;
  d.meta = ParseObjectMeta(object, problems);
  Reader top(object, "", problems);
  top.String(kCachedTemplateHashField, &d.cached_template_hash);
  top.String(kCachedMeasuredHashField, &d.cached_measured_hash);
  const json* spec = top.Object("spec");
  if (spec == nullptr) return d;
  Reader s(*spec, "spec", problems);
  s.Bool("paused", &d.paused);
  if (const json* raw = json_fields::Member(*spec, "template")) d.pod_template = *raw;
  const json* tmpl = s.Object("template");
  if (tmpl == nullptr) return d;
  Reader t(*tmpl, "spec.template", problems);
  if (const json* meta = t.Object("metadata")) {
    Reader m(*meta, "spec.template.metadata", problems);
    m.StringMap("labels", &d.template_labels);
    m.StringMap("annotations", &d.template_annotations);
  }
  return d;
}

std::string MeasuredHashOf(const DeploymentSummary& workload) {
  if (!workload.cached_measured_hash.empty()) return workload.cached_measured_hash;
  return MeasuredTemplateHash(workload.pod_template);
}

PodSummary ParsePodSummary(const json& object, std::vector<std::string>* problems) {
  PodSummary pod;
  pod.meta = ParseObjectMeta(object, problems);
  Reader top(object, "", problems);
  const json* status = top.Object("status");
  if (status == nullptr) return pod;
  Reader s(*status, "status", problems);
  s.String("phase", &pod.phase);
  s.String("reason", &pod.reason);
  s.String("message", &pod.message);
  ReadConditions(s, &pod.conditions, problems);
  ReadContainerStatuses(s, "initContainerStatuses", &pod.init_container_statuses, problems);
  ReadContainerStatuses(s, "containerStatuses", &pod.container_statuses, problems);
  return pod;
}

ReplayCanarySummary ParseReplayCanarySummary(const json& object,
                                             std::vector<std::string>* problems) {
  ReplayCanarySummary c;
  c.meta = ParseObjectMeta(object, problems);
  c.status = CanaryStatusOf(object, problems);
  auto parsed = ParseReplayCanary(object);
  if (parsed.ok()) {
    c.parsed = std::move(parsed).value();
  } else {
    c.parse_error = parsed.status().message();
  }
  Reader top(object, "", problems);
  const json* spec = top.Object("spec");
  if (spec == nullptr) return c;
  Reader s(*spec, "spec", problems);
  s.String("templateHash", &c.template_hash);
  if (const json* policy = s.Object("policyRef")) {
    Reader(*policy, "spec.policyRef", problems).String("name", &c.policy_name);
  }
  if (const json* target = s.Object("target")) {
    Reader t(*target, "spec.target", problems);
    t.String("name", &c.target_name);
    t.String("kind", &c.target_kind);
    if (c.target_kind.empty()) c.target_kind = "Deployment";
  }
  return c;
}

}  // namespace allocguard::api
