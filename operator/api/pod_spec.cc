#include "operator/api/pod_spec.h"

#include <utility>

#include "operator/api/json_fields.h"
#include "operator/api/json_reader.h"

namespace allocguard::api {
namespace {

using json_fields::Reader;
using nlohmann::json;

SecurityContext ParseSecurityContext(Reader& holder, std::vector<std::string>* problems) {
  SecurityContext sc;
  const json* object = holder.Object("securityContext");
  if (object == nullptr) return sc;
  Reader r(*object, holder.PathOf("securityContext"), problems);
  r.Int("runAsUser", &sc.run_as_user);
  r.Int("runAsGroup", &sc.run_as_group);
  return sc;
}

Container ParseContainer(const json& object, const std::string& path,
                         std::vector<std::string>* problems) {
  Container c;
  Reader r(object, path, problems);
  r.String("name", &c.name);
  r.Objects("env", [&](const json& item, const std::string& item_path) {
    EnvVar var;
    Reader e(item, item_path, problems);
    e.String("name", &var.name);
    std::string value;
    if (const json* v = json_fields::Member(item, "value"); v != nullptr && v->is_string()) {
      e.String("value", &value);
      var.value = std::move(value);
    } else {
      e.String("value", &value);  // reports a value of another type
    }
    var.has_value_from = item.contains("valueFrom");
    c.env.push_back(std::move(var));
  });
  r.Objects("volumeMounts", [&](const json& item, const std::string& item_path) {
    VolumeMount mount;
    Reader m(item, item_path, problems);
    m.String("name", &mount.name);
    m.String("mountPath", &mount.mount_path);
    c.volume_mounts.push_back(std::move(mount));
  });
  if (const json* policy = json_fields::Member(object, "terminationMessagePolicy");
      policy != nullptr && policy->is_string()) {
    c.termination_message_policy = policy->get<std::string>();
  } else {
    std::string ignored;
    r.String("terminationMessagePolicy", &ignored);  // reports a member of another type
  }
  if (const json* resources = r.Object("resources")) {
    Reader res(*resources, r.PathOf("resources"), problems);
    if (const json* limits = res.Object("limits")) {
      Reader l(*limits, res.PathOf("limits"), problems);
      l.String("memory", &c.memory_limit);
    }
  }
  c.security_context = ParseSecurityContext(r, problems);
  return c;
}

// Whether spec[key] is absent, null, or a list of objects only.
bool ListOfObjects(const json& spec, const char* key) {
  const json* list = json_fields::Member(spec, key);
  if (list == nullptr) return true;
  if (!list->is_array()) return false;
  for (const json& item : *list) {
    if (!item.is_object()) return false;
  }
  return true;
}

}  // namespace

const EnvVar* Container::Env(const std::string& wanted) const {
  for (const EnvVar& var : env) {
    if (var.name == wanted) return &var;
  }
  return nullptr;
}

const Container* PodSpec::FindContainer(const std::string& wanted) const {
  for (const auto* list : {&init_containers, &containers}) {
    for (const Container& c : *list) {
      if (c.name == wanted) return &c;
    }
  }
  return nullptr;
}

std::string Pod::DisplayName() const {
  if (!metadata.name.empty()) return metadata.name;
  return generate_name.empty() ? "(unnamed pod)" : generate_name + "*";
}

PodSpec ParsePodSpec(const json& object, const std::string& path,
                     std::vector<std::string>* problems) {
  PodSpec spec;
  Reader r(object, path, problems);
  auto containers = [&](const char* key, std::vector<Container>* out) {
    r.Objects(key, [&](const json& item, const std::string& item_path) {
      out->push_back(ParseContainer(item, item_path, problems));
    });
  };
  containers("initContainers", &spec.init_containers);
  containers("containers", &spec.containers);
  r.Objects("volumes", [&](const json& item, const std::string& item_path) {
    std::string name;
    Reader(item, item_path, problems).String("name", &name);
    spec.volume_names.push_back(std::move(name));
  });
  if (const json* share = json_fields::Member(object, "shareProcessNamespace");
      share != nullptr && share->is_boolean()) {
    spec.share_process_namespace = share->get<bool>();
  } else {
    bool ignored = false;
    r.Bool("shareProcessNamespace", &ignored);  // reports a member of another type
  }
  r.Bool("hostNetwork", &spec.host_network);
  spec.security_context = ParseSecurityContext(r, problems);
  spec.malformed = !object.is_object();
  spec.init_containers_malformed = !ListOfObjects(object, "initContainers");
  spec.containers_malformed = !ListOfObjects(object, "containers");
  const json* volumes = json_fields::Member(object, "volumes");
  spec.volumes_malformed = volumes != nullptr && !volumes->is_array();
  return spec;
}

Pod ParsePod(const json& object, std::vector<std::string>* problems) {
  Pod pod;
  pod.metadata = ParseObjectMeta(object, problems);
  if (const json* metadata = json_fields::Member(object, "metadata");
      metadata != nullptr && metadata->is_object()) {
    Reader(*metadata, "metadata", problems).String("generateName", &pod.generate_name);
  }
  const json* spec = json_fields::Member(object, "spec");
  if (spec != nullptr && spec->is_object()) {
    pod.has_spec = true;
    pod.spec = ParsePodSpec(*spec, "spec", problems);
  } else if (spec != nullptr && problems != nullptr) {
    problems->push_back("spec: must be an object, got " + json_fields::Dump(*spec));
  }
  return pod;
}

}  // namespace allocguard::api
