#include "operator/api/workloads.h"

#include <initializer_list>
#include <iterator>

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

// Keeps only `keys` of an object; anything else is left alone.
void KeepMembers(json& object, std::initializer_list<const char*> keys) {
  if (!object.is_object()) return;
  json kept = json::object();
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end()) kept[key] = std::move(*it);
  }
  object = std::move(kept);
}

// KeepMembers on every element of the array object[key], if it is one.
void KeepMembersOfEach(json& object, const char* key, std::initializer_list<const char*> keys) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_array()) return;
  for (json& element : *it) KeepMembers(element, keys);
}

}  // namespace

void SlimPod(json& pod) {
  if (!pod.is_object()) return;
  KeepMembers(pod, {"apiVersion", "kind", "metadata", "spec", "status"});
  if (auto meta = pod.find("metadata"); meta != pod.end() && meta->is_object()) {
    KeepMembers(*meta,
                {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "labels", "annotations", "ownerReferences"});
    if (auto annotations = meta->find("annotations");
        annotations != meta->end() && annotations->is_object()) {
      for (auto it = annotations->begin(); it != annotations->end();) {
        it = it.key().rfind(kAnnotationPrefix, 0) == 0 ? std::next(it) : annotations->erase(it);
      }
    }
  }
  if (auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    KeepMembers(*spec, {"nodeName"});
  }
  if (auto status = pod.find("status"); status != pod.end() && status->is_object()) {
    KeepMembers(*status, {"phase", "reason", "message", "conditions", "containerStatuses",
                          "initContainerStatuses"});
    KeepMembersOfEach(*status, "conditions", {"type", "status", "reason", "message"});
    for (const char* key : {"containerStatuses", "initContainerStatuses"}) {
      KeepMembersOfEach(*status, key, {"name", "ready", "restartCount", "state", "lastState"});
    }
  }
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
  if (const json* tmpl = json_fields::Member(*spec, "template")) c.pod_template = *tmpl;
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
