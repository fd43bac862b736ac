#include "operator/api/workload_kinds.h"

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"
#include "operator/api/quantity.h"
#include "operator/api/workloads.h"

namespace allocguard::api {

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kDeployment:
      return "Deployment";
    case WorkloadKind::kStatefulSet:
      return "StatefulSet";
    case WorkloadKind::kDaemonSet:
      return "DaemonSet";
  }
  return "Deployment";
}

std::optional<WorkloadKind> WorkloadKindFromName(const std::string& name) {
  for (WorkloadKind kind :
       {WorkloadKind::kDeployment, WorkloadKind::kStatefulSet, WorkloadKind::kDaemonSet}) {
    if (name == WorkloadKindName(kind)) return kind;
  }
  return std::nullopt;
}

namespace {

using json_fields::Reader;
using nlohmann::json;

// Which members of rollingUpdate a kind has.
enum class Kind { kStatefulSet, kDaemonSet };

void ReadIntOrPercent(const json& holder, const char* key, const std::string& holder_path,
                      IntOrPercent* out, std::vector<std::string>* problems) {
  const json* v = json_fields::Member(holder, key);
  if (v == nullptr) return;
  const std::string path = json_fields::Path(holder_path, key);
  if (v->is_string()) {
    const auto& s = v->get_ref<const std::string&>();
    const std::string digits = s.empty() ? s : s.substr(0, s.size() - 1);
    if (!s.empty() && s.back() == '%' && !digits.empty() &&
        digits.find_first_not_of("0123456789") == std::string::npos) {
      out->percent = s;
    } else if (problems != nullptr) {
      problems->push_back(path + ": must be an integer or a percentage such as \"25%\", got " +
                          json_fields::Dump(*v));
    }
    return;
  }
  auto n = json_fields::AsInt(*v, path);
  if (n.ok() && n.value() >= 0) {
    out->count = n.value();
  } else if (problems != nullptr) {
    problems->push_back(path + ": must be an integer or a percentage such as \"25%\", got " +
                        json_fields::Dump(*v));
  }
}

UpdateStrategy ReadUpdateStrategy(const json& spec, Kind kind, std::vector<std::string>* problems) {
  UpdateStrategy strategy;
  Reader spec_reader(spec, "spec", problems);
  const json* member = json_fields::Member(spec, "updateStrategy");
  if (member != nullptr) strategy.as_written = *member;
  const json* object = spec_reader.Object("updateStrategy");
  if (object == nullptr) return strategy;
  const std::string path = "spec.updateStrategy";
  Reader r(*object, path, problems);
  std::string type;
  r.String("type", &type);
  if (type == "RollingUpdate" || type == "OnDelete") {
    strategy.type =
        type == "OnDelete" ? UpdateStrategyType::kOnDelete : UpdateStrategyType::kRollingUpdate;
    strategy.type_written = true;
  } else if (!type.empty()) {
    r.Problem("type", "must be RollingUpdate or OnDelete, got " + json_fields::Dump(type));
  }
  const json* rolling = r.Object("rollingUpdate");
  if (rolling == nullptr) return strategy;
  const std::string rolling_path = path + ".rollingUpdate";
  ReadIntOrPercent(*rolling, "maxUnavailable", rolling_path, &strategy.max_unavailable, problems);
  if (kind == Kind::kDaemonSet) {
    ReadIntOrPercent(*rolling, "maxSurge", rolling_path, &strategy.max_surge, problems);
    return strategy;
  }
  Reader rr(*rolling, rolling_path, problems);
  std::optional<int64_t> partition;
  rr.Int("partition", &partition);
  if (partition.has_value() && *partition < 0) {
    rr.Problem("partition", "must not be negative, got " + std::to_string(*partition));
  } else {
    strategy.partition = partition;
  }
  return strategy;
}

// Reads metadata, the template and the update strategy shared by both kinds
// into the out-parameters; returns the spec object, or nullptr.
const json* ReadCommon(const json& object, Kind kind, ObjectMeta* metadata,
                       UpdateStrategy* strategy, DeploymentTemplate* pod_template,
                       std::vector<std::string>* problems) {
  *metadata = ParseObjectMeta(object, problems);
  const json* spec = json_fields::Member(object, "spec");
  if (spec == nullptr || !spec->is_object()) {
    if (spec != nullptr && problems != nullptr) {
      problems->push_back("spec: must be an object, got " + json_fields::Dump(*spec));
    }
    pod_template->hash = PodTemplateHash(json());
    return nullptr;
  }
  *strategy = ReadUpdateStrategy(*spec, kind, problems);
  static const json kNull;
  const json* tmpl_member = json_fields::Member(*spec, "template");
  const json& tmpl = tmpl_member == nullptr ? kNull : *tmpl_member;
  if (!tmpl.is_null() && !tmpl.is_object() && problems != nullptr) {
    problems->push_back("spec.template: must be an object, got " + json_fields::Dump(tmpl));
  }
  std::vector<std::string> template_problems;
  pod_template->metadata = ParseObjectMeta(tmpl, &template_problems);
  if (problems != nullptr) {
    for (const std::string& p : template_problems) problems->push_back("spec.template." + p);
  }
  pod_template->hash = PodTemplateHash(tmpl);
  return spec;
}

// spec.volumeClaimTemplates: each claim's name and storage request.
std::vector<VolumeClaimTemplate> ReadClaims(const json& spec, std::vector<std::string>* problems) {
  std::vector<VolumeClaimTemplate> claims;
  const json* list = json_fields::Member(spec, "volumeClaimTemplates");
  if (list == nullptr) return claims;
  if (!list->is_array()) {
    if (problems != nullptr) {
      problems->push_back("spec.volumeClaimTemplates: must be a list, got " +
                          json_fields::Dump(*list));
    }
    return claims;
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "spec.volumeClaimTemplates[" + std::to_string(i) + "]";
    const json& entry = (*list)[i];
    VolumeClaimTemplate claim;
    Reader r(entry, path, problems);
    if (const json* meta = r.Object("metadata")) {
      Reader(*meta, path + ".metadata", problems).String("name", &claim.name);
    }
    if (claim.name.empty()) continue;
    std::string storage;
    if (const json* claim_spec = r.Object("spec")) {
      if (const json* resources =
              Reader(*claim_spec, path + ".spec", problems).Object("resources")) {
        if (const json* requests =
                Reader(*resources, path + ".spec.resources", problems).Object("requests")) {
          const json* value = json_fields::Member(*requests, "storage");
          if (value != nullptr && value->is_string()) {
            storage = value->get<std::string>();
          } else if (value != nullptr && problems != nullptr) {
            problems->push_back(path +
                                ".spec.resources.requests.storage: must be a quantity, got " +
                                json_fields::Dump(*value));
          }
        }
      }
    }
    if (!storage.empty()) {
      auto bytes = ParseQuantityBytes(storage);
      if (bytes.ok()) {
        claim.storage_bytes = *bytes;
      } else if (problems != nullptr) {
        problems->push_back(path + ".spec.resources.requests.storage: " + bytes.status().message());
      }
    }
    claims.push_back(std::move(claim));
  }
  return claims;
}

}  // namespace

json IntOrPercent::ToJson() const {
  if (count.has_value()) return *count;
  if (!percent.empty()) return percent;
  return nullptr;
}

StatefulSet ParseStatefulSet(const json& object, std::vector<std::string>* problems) {
  StatefulSet s;
  s.present = !object.is_null();
  const json* spec = ReadCommon(object, Kind::kStatefulSet, &s.metadata, &s.update_strategy,
                                &s.pod_template, problems);
  if (spec == nullptr) return s;
  s.volume_claim_templates = ReadClaims(*spec, problems);
  Reader r(*spec, "spec", problems);
  r.Int("replicas", &s.replicas);
  if (s.replicas.has_value() && *s.replicas < 0) {
    r.Problem("replicas", "must not be negative, got " + std::to_string(*s.replicas));
    s.replicas.reset();
  }
  return s;
}

DaemonSet ParseDaemonSet(const json& object, std::vector<std::string>* problems) {
  DaemonSet d;
  d.present = !object.is_null();
  ReadCommon(object, Kind::kDaemonSet, &d.metadata, &d.update_strategy, &d.pod_template, problems);
  return d;
}

void SlimStatefulSet(json& statefulset) {
  const std::vector<VolumeClaimTemplate> claims =
      statefulset.is_object() && statefulset.contains("spec") && statefulset["spec"].is_object()
          ? ReadClaims(statefulset["spec"], nullptr)
          : std::vector<VolumeClaimTemplate>{};
  SlimDeployment(statefulset);
  if (claims.empty() || !statefulset.is_object()) return;
  auto spec = statefulset.find("spec");
  if (spec == statefulset.end() || !spec->is_object()) return;
  json slim = json::array();
  for (const VolumeClaimTemplate& claim : claims) {
    json entry = {{"metadata", {{"name", claim.name}}}};
    if (claim.storage_bytes) {
      entry["spec"] = {
          {"resources", {{"requests", {{"storage", FormatQuantityBytes(*claim.storage_bytes)}}}}}};
    }
    slim.push_back(std::move(entry));
  }
  (*spec)["volumeClaimTemplates"] = std::move(slim);
}

bool KeptBySlimStatefulSet(const MemberPath& path) {
  // ReadClaims reads spec.volumeClaimTemplates whole before SlimDeployment.
  if (path.size() == 2 && !path[0].element && !path[1].element && path[0].key == "spec" &&
      path[1].key == "volumeClaimTemplates") {
    return true;
  }
  return KeptBySlimDeployment(path);
}

}  // namespace allocguard::api
