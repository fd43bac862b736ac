#include "operator/api/pod_template.h"

#include <vector>

namespace allocguard::api {
namespace {

using nlohmann::json;

std::string Dump(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

Status Err(const std::string& path, const std::string& what) {
  return InvalidArgument(path + ": " + what);
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string At(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// The readers call json::value(key, default) on scalars, which throws on a
// present value of another type, null included; so a scalar that is present
// must have its type. Objects and arrays may be null (read as absent).
enum class Kind { kString, kBool, kInteger, kQuantity, kObject, kArray };

Status CheckKind(const json& v, Kind kind, const std::string& path) {
  switch (kind) {
    case Kind::kString:
      if (!v.is_string()) return Err(path, "must be a string, got " + Dump(v));
      break;
    case Kind::kBool:
      if (!v.is_boolean()) return Err(path, "must be true or false, got " + Dump(v));
      break;
    case Kind::kInteger:
      if (!v.is_number_integer()) return Err(path, "must be an integer, got " + Dump(v));
      break;
    case Kind::kQuantity:
      if (!v.is_string() && !v.is_number()) {
        return Err(path,
                   "must be a quantity (a string such as 512Mi, or a number), got " + Dump(v));
      }
      break;
    case Kind::kObject:
      if (!v.is_null() && !v.is_object()) return Err(path, "must be an object, got " + Dump(v));
      break;
    case Kind::kArray:
      if (!v.is_null() && !v.is_array()) return Err(path, "must be a list, got " + Dump(v));
      break;
  }
  return Status::Ok();
}

struct FieldKind {
  const char* key;
  Kind kind;
};

// Each listed key of `obj` that is present has its kind.
Status CheckFields(const json& obj, const std::string& path, std::initializer_list<FieldKind> f) {
  for (const FieldKind& field : f) {
    auto it = obj.find(field.key);
    if (it == obj.end()) continue;
    if (Status s = CheckKind(*it, field.kind, Join(path, field.key)); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Required(const json& obj, const char* key, const std::string& path) {
  if (!obj.contains(key)) return Err(Join(path, key), "is required");
  return Status::Ok();
}

// A map whose values are strings (labels, annotations, nodeSelector).
Status CheckStringMap(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  const std::string p = Join(path, key);
  if (!it->is_object()) return Err(p, "must be a map of strings, got " + Dump(*it));
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string()) {
      return Err(p + "[\"" + e.key() + "\"]", "must be a string, got " + Dump(e.value()));
    }
  }
  return Status::Ok();
}

// `obj[key]`, when present and not null, is a list of objects; `each` checks
// every item.
template <typename Each>
Status CheckObjectList(const json& obj, const char* key, const std::string& path, Each each) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  const std::string p = Join(path, key);
  if (!it->is_array()) return Err(p, "must be a list, got " + Dump(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    if (!item.is_object()) return Err(At(p, i), "must be an object, got " + Dump(item));
    if (Status s = each(item, At(p, i)); !s.ok()) return s;
  }
  return Status::Ok();
}

Status CheckStringList(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  const std::string p = Join(path, key);
  if (!it->is_array()) return Err(p, "must be a list of strings, got " + Dump(*it));
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return Err(At(p, i), "must be a string, got " + Dump((*it)[i]));
  }
  return Status::Ok();
}

Status CheckResources(const json& container, const std::string& path) {
  auto it = container.find("resources");
  if (it == container.end() || it->is_null()) return Status::Ok();
  const std::string p = Join(path, "resources");
  if (!it->is_object()) return Err(p, "must be an object, got " + Dump(*it));
  for (const char* key : {"limits", "requests"}) {
    auto m = it->find(key);
    if (m == it->end() || m->is_null()) continue;
    const std::string mp = Join(p, key);
    if (!m->is_object()) return Err(mp, "must be a map of quantities, got " + Dump(*m));
    for (auto e = m->begin(); e != m->end(); ++e) {
      if (Status s = CheckKind(e.value(), Kind::kQuantity, mp + "." + e.key()); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Status CheckSecurityContext(const json& obj, const std::string& path) {
  AG_RETURN_IF_ERROR(CheckFields(obj, path, {{"securityContext", Kind::kObject}}));
  auto it = obj.find("securityContext");
  if (it == obj.end() || !it->is_object()) return Status::Ok();
  const std::string p = Join(path, "securityContext");
  AG_RETURN_IF_ERROR(CheckFields(*it, p,
                                 {{"privileged", Kind::kBool},
                                  {"allowPrivilegeEscalation", Kind::kBool},
                                  {"readOnlyRootFilesystem", Kind::kBool},
                                  {"runAsNonRoot", Kind::kBool},
                                  {"runAsUser", Kind::kInteger},
                                  {"runAsGroup", Kind::kInteger},
                                  {"fsGroup", Kind::kInteger},
                                  {"capabilities", Kind::kObject},
                                  {"seccompProfile", Kind::kObject}}));
  auto caps = it->find("capabilities");
  if (caps != it->end() && caps->is_object()) {
    AG_RETURN_IF_ERROR(CheckStringList(*caps, "add", Join(p, "capabilities")));
    AG_RETURN_IF_ERROR(CheckStringList(*caps, "drop", Join(p, "capabilities")));
  }
  auto seccomp = it->find("seccompProfile");
  if (seccomp != it->end() && seccomp->is_object()) {
    AG_RETURN_IF_ERROR(CheckFields(*seccomp, Join(p, "seccompProfile"),
                                   {{"type", Kind::kString}, {"localhostProfile", Kind::kString}}));
  }
  return Status::Ok();
}

Status CheckEnvVar(const json& e, const std::string& p) {
  AG_RETURN_IF_ERROR(Required(e, "name", p));
  return CheckFields(
      e, p, {{"name", Kind::kString}, {"value", Kind::kString}, {"valueFrom", Kind::kObject}});
}

Status CheckEnvFrom(const json& e, const std::string& p) {
  return CheckFields(
      e, p,
      {{"prefix", Kind::kString}, {"configMapRef", Kind::kObject}, {"secretRef", Kind::kObject}});
}

Status CheckVolumeMount(const json& m, const std::string& p) {
  AG_RETURN_IF_ERROR(Required(m, "name", p));
  AG_RETURN_IF_ERROR(Required(m, "mountPath", p));
  return CheckFields(m, p,
                     {{"name", Kind::kString},
                      {"mountPath", Kind::kString},
                      {"subPath", Kind::kString},
                      {"readOnly", Kind::kBool}});
}

Status CheckPort(const json& port, const std::string& p) {
  return CheckFields(
      port, p,
      {{"name", Kind::kString}, {"containerPort", Kind::kInteger}, {"protocol", Kind::kString}});
}

Status CheckToleration(const json& t, const std::string& p) {
  return CheckFields(t, p,
                     {{"key", Kind::kString},
                      {"operator", Kind::kString},
                      {"value", Kind::kString},
                      {"effect", Kind::kString}});
}

Status CheckContainer(const json& c, const std::string& path) {
  AG_RETURN_IF_ERROR(Required(c, "name", path));
  AG_RETURN_IF_ERROR(CheckFields(c, path,
                                 {{"name", Kind::kString},
                                  {"image", Kind::kString},
                                  {"imagePullPolicy", Kind::kString},
                                  {"terminationMessagePolicy", Kind::kString},
                                  {"terminationMessagePath", Kind::kString},
                                  {"workingDir", Kind::kString},
                                  {"restartPolicy", Kind::kString},
                                  {"stdin", Kind::kBool},
                                  {"tty", Kind::kBool},
                                  {"readinessProbe", Kind::kObject},
                                  {"livenessProbe", Kind::kObject},
                                  {"startupProbe", Kind::kObject},
                                  {"lifecycle", Kind::kObject}}));
  AG_RETURN_IF_ERROR(CheckStringList(c, "command", path));
  AG_RETURN_IF_ERROR(CheckStringList(c, "args", path));
  AG_RETURN_IF_ERROR(CheckObjectList(c, "env", path, CheckEnvVar));
  AG_RETURN_IF_ERROR(CheckObjectList(c, "envFrom", path, CheckEnvFrom));
  AG_RETURN_IF_ERROR(CheckObjectList(c, "volumeMounts", path, CheckVolumeMount));
  AG_RETURN_IF_ERROR(CheckObjectList(c, "ports", path, CheckPort));
  AG_RETURN_IF_ERROR(CheckResources(c, path));
  return CheckSecurityContext(c, path);
}

Status CheckVolume(const json& v, const std::string& path) {
  AG_RETURN_IF_ERROR(Required(v, "name", path));
  AG_RETURN_IF_ERROR(CheckFields(v, path,
                                 {{"name", Kind::kString},
                                  {"emptyDir", Kind::kObject},
                                  {"hostPath", Kind::kObject},
                                  {"persistentVolumeClaim", Kind::kObject},
                                  {"configMap", Kind::kObject},
                                  {"secret", Kind::kObject}}));
  for (const char* key : {"hostPath", "persistentVolumeClaim", "emptyDir"}) {
    auto it = v.find(key);
    if (it == v.end() || !it->is_object()) continue;
    AG_RETURN_IF_ERROR(CheckFields(*it, Join(path, key),
                                   {{"path", Kind::kString},
                                    {"type", Kind::kString},
                                    {"claimName", Kind::kString},
                                    {"readOnly", Kind::kBool},
                                    {"medium", Kind::kString},
                                    {"sizeLimit", Kind::kQuantity}}));
  }
  return Status::Ok();
}

}  // namespace

Status CheckPodTemplate(const json& pod_template, const std::string& path) {
  if (!pod_template.is_object()) return Err(path, "must be an object, got " + Dump(pod_template));
  AG_RETURN_IF_ERROR(
      CheckFields(pod_template, path, {{"metadata", Kind::kObject}, {"spec", Kind::kObject}}));
  auto meta = pod_template.find("metadata");
  if (meta != pod_template.end() && meta->is_object()) {
    const std::string mp = Join(path, "metadata");
    AG_RETURN_IF_ERROR(CheckStringMap(*meta, "labels", mp));
    AG_RETURN_IF_ERROR(CheckStringMap(*meta, "annotations", mp));
    AG_RETURN_IF_ERROR(CheckFields(*meta, mp, {{"name", Kind::kString}}));
  }
  auto spec_it = pod_template.find("spec");
  if (spec_it == pod_template.end() || !spec_it->is_object()) {
    return Err(Join(path, "spec"), "is required");
  }
  const json& spec = *spec_it;
  const std::string sp = Join(path, "spec");
  auto containers = spec.find("containers");
  if (containers == spec.end() || !containers->is_array() || containers->empty()) {
    return Err(Join(sp, "containers"), containers == spec.end()
                                           ? "is required"
                                           : "must be a non-empty list, got " + Dump(*containers));
  }
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    AG_RETURN_IF_ERROR(CheckObjectList(spec, list, sp, CheckContainer));
  }
  AG_RETURN_IF_ERROR(CheckObjectList(spec, "volumes", sp, CheckVolume));
  AG_RETURN_IF_ERROR(CheckStringMap(spec, "nodeSelector", sp));
  AG_RETURN_IF_ERROR(CheckFields(spec, sp,
                                 {{"nodeName", Kind::kString},
                                  {"serviceAccountName", Kind::kString},
                                  {"serviceAccount", Kind::kString},
                                  {"restartPolicy", Kind::kString},
                                  {"schedulerName", Kind::kString},
                                  {"priorityClassName", Kind::kString},
                                  {"runtimeClassName", Kind::kString},
                                  {"hostPID", Kind::kBool},
                                  {"hostNetwork", Kind::kBool},
                                  {"hostIPC", Kind::kBool},
                                  {"hostUsers", Kind::kBool},
                                  {"shareProcessNamespace", Kind::kBool},
                                  {"automountServiceAccountToken", Kind::kBool},
                                  {"terminationGracePeriodSeconds", Kind::kInteger},
                                  {"activeDeadlineSeconds", Kind::kInteger},
                                  {"affinity", Kind::kObject},
                                  {"tolerations", Kind::kArray},
                                  {"imagePullSecrets", Kind::kArray}}));
  AG_RETURN_IF_ERROR(CheckObjectList(spec, "tolerations", sp, CheckToleration));
  return CheckSecurityContext(spec, sp);
}

std::vector<std::string> HostAccessFields(const json& pod_template) {
  std::vector<std::string> out;
  if (!pod_template.is_object()) return out;
  auto spec_it = pod_template.find("spec");
  if (spec_it == pod_template.end() || !spec_it->is_object()) return out;
  const json& spec = *spec_it;
  for (const char* key : {"hostPID", "hostNetwork", "hostIPC"}) {
    auto it = spec.find(key);
    if (it != spec.end() && it->is_boolean() && it->get<bool>()) {
      out.push_back(std::string("spec.") + key);
    }
  }
  auto node_name = spec.find("nodeName");
  if (node_name != spec.end() && node_name->is_string() && !node_name->get<std::string>().empty()) {
    out.emplace_back("spec.nodeName");
  }
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    auto it = spec.find(list);
    if (it == spec.end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      const json& c = (*it)[i];
      if (!c.is_object()) continue;
      auto sc = c.find("securityContext");
      if (sc == c.end() || !sc->is_object()) continue;
      auto priv = sc->find("privileged");
      if (priv != sc->end() && priv->is_boolean() && priv->get<bool>()) {
        out.push_back("spec." + std::string(list) + "[" + std::to_string(i) +
                      "].securityContext.privileged");
      }
      auto caps = sc->find("capabilities");
      if (caps != sc->end() && caps->is_object()) {
        auto add = caps->find("add");
        if (add != caps->end() && add->is_array() && !add->empty()) {
          out.push_back("spec." + std::string(list) + "[" + std::to_string(i) +
                        "].securityContext.capabilities.add");
        }
      }
    }
  }
  auto volumes = spec.find("volumes");
  if (volumes != spec.end() && volumes->is_array()) {
    for (size_t i = 0; i < volumes->size(); ++i) {
      const json& v = (*volumes)[i];
      if (v.is_object() && v.contains("hostPath") && !v["hostPath"].is_null()) {
        out.push_back("spec.volumes[" + std::to_string(i) + "].hostPath");
      }
    }
  }
  return out;
}

std::vector<std::string> RightsBeyondAnOrdinaryPod(const json& pod_template) {
  std::vector<std::string> out = HostAccessFields(pod_template);
  if (!pod_template.is_object()) return out;
  auto spec = pod_template.find("spec");
  if (spec == pod_template.end() || !spec->is_object()) return out;
  for (const char* key : {"serviceAccountName", "serviceAccount"}) {
    auto it = spec->find(key);
    if (it == spec->end() || !it->is_string()) continue;
    const auto& account = it->get_ref<const std::string&>();
    if (!account.empty() && account != "default") {
      out.push_back("spec." + std::string(key) + " (" + account + ")");
    }
  }
  return out;
}

}  // namespace allocguard::api
