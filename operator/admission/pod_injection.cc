#include "operator/admission/pod_injection.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/api/quantity.h"

namespace allocguard::admission {
namespace {

// object[key] when it is a string, else "": never throws, whatever the types
// (a field of the wrong type is no match, not an exception).
std::string StringAt(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

using nlohmann::json;

constexpr char kGuardBinary[] = "/usr/local/bin/allocguard";

std::string MetadataString(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return "";
  auto it = metadata->find(key);
  return it != metadata->end() && it->is_string() ? it->get<std::string>() : "";
}

// metadata.<key> as a string map; entries whose values are not strings are dropped.
std::map<std::string, std::string> MetadataMap(const json& object, const char* key) {
  std::map<std::string, std::string> result;
  if (!object.is_object()) return result;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return result;
  auto it = metadata->find(key);
  if (it == metadata->end() || !it->is_object()) return result;
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    if (entry.value().is_string()) result[entry.key()] = entry.value().get<std::string>();
  }
  return result;
}

PodInjectionDecision Skip(std::string reason) {
  PodInjectionDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

json SidecarResources() {
  return {{"requests", {{"cpu", "10m"}, {"memory", "32Mi"}}},
          {"limits", {{"cpu", "200m"}, {"memory", "64Mi"}}}};
}

// The governed containers' value at `path` in their securityContext, falling
// back to the pod's; nullopt unless every governed container has the same one.
std::optional<int64_t> CommonSecurityId(const json& spec, const std::vector<std::string>& names,
                                        const char* key) {
  auto id_of = [key](const json& holder) -> std::optional<int64_t> {
    auto sc = holder.find("securityContext");
    if (sc == holder.end() || !sc->is_object()) return std::nullopt;
    auto it = sc->find(key);
    if (it == sc->end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  const std::optional<int64_t> pod_id = id_of(spec);
  std::optional<int64_t> common;
  for (const char* list : {"initContainers", "containers"}) {
    for (const json& c : spec.value(list, json::array())) {
      if (!c.is_object() ||
          std::find(names.begin(), names.end(), StringAt(c, "name")) == names.end())
        continue;
      std::optional<int64_t> id = id_of(c);
      if (!id) id = pod_id;
      if (!id || (common && *common != *id)) return std::nullopt;
      common = id;
    }
  }
  return common;
}

// Runs the guard as the workload's user when the pod states it, so it may
// read the workload's /proc/<pid>/maps and send it SIGTERM without any
// capability; and passes the memory limit of a single governed container,
// which the guard cannot read from its own cgroup.
void FitGuardToWorkload(const json& spec, const api::AllocatorPolicy& policy, json& guard) {
  const std::vector<std::string> names = SelectContainerNames(spec, policy.spec.containers);
  if (auto uid = CommonSecurityId(spec, names, "runAsUser")) {
    guard["securityContext"]["runAsUser"] = *uid;
    guard["securityContext"]["runAsNonRoot"] = *uid != 0;
    if (auto gid = CommonSecurityId(spec, names, "runAsGroup")) {
      guard["securityContext"]["runAsGroup"] = *gid;
    }
  }
  if (names.size() != 1) return;
  for (const char* list : {"initContainers", "containers"}) {
    for (const json& c : spec.value(list, json::array())) {
      if (!c.is_object() || StringAt(c, "name") != names.front()) continue;
      const json* limit = &c;
      for (const char* key : {"resources", "limits", "memory"}) {
        if (!limit->is_object() || !limit->contains(key)) return;
        limit = &(*limit)[key];
      }
      if (!limit->is_string()) return;
      auto bytes = api::ParseQuantityBytes(limit->get<std::string>());
      if (!bytes.ok()) return;
      guard["args"].push_back("--limit-bytes");
      guard["args"].push_back(std::to_string(*bytes));
      return;
    }
  }
}

// Adds the guard: a native sidecar right after allocguard-init (or first), or
// a regular container at the end, and a shared process namespace. False when
// the pod's own settings keep it out (a conflict says why).
bool AddGuard(json& spec, const api::AllocatorPolicy& policy, const PodInjectionInput& input,
              std::vector<std::string>& conflicts) {
  if (spec.contains("shareProcessNamespace") && spec["shareProcessNamespace"] == false) {
    conflicts.push_back(
        "the pod sets shareProcessNamespace: false; the guard needs to see the workload's "
        "processes, so allocguard did not add it");
    return false;
  }
  spec["shareProcessNamespace"] = true;
  json guard = GuardContainer(policy, input.options, input.native_sidecars);
  FitGuardToWorkload(spec, policy, guard);
  // On the host's network the guard's port would be the node's: a second
  // guarded pod on the node could not bind it, and a declared containerPort
  // becomes a hostPort. Such a guard serves no metrics (its conditions,
  // events and actions are unchanged).
  if (const auto host = spec.find("hostNetwork");
      host != spec.end() && host->is_boolean() && host->get<bool>()) {
    guard.erase("ports");
    guard["args"].push_back("--metrics-bind-address");
    guard["args"].push_back("0");
    conflicts.push_back(
        "the pod uses the host's network (hostNetwork: true): the guard serves no /metrics, "
        "since its port " +
        std::to_string(api::kGuardMetricsPort) + " would be the node's");
  }
  if (policy.spec.guard.action == api::GuardAction::kBackpressure) {
    json& gates = spec["readinessGates"];
    if (!gates.is_array()) gates = json::array();
    const json gate = {{"conditionType", api::kMemoryHeadroomCondition}};
    if (std::find(gates.begin(), gates.end(), gate) == gates.end()) gates.push_back(gate);
  }
  json& list = spec[input.native_sidecars ? "initContainers" : "containers"];
  if (!list.is_array()) list = json::array();
  size_t position = input.native_sidecars ? 0 : list.size();
  for (size_t i = 0; i < list.size(); ++i) {
    if (StringAt(list[i], "name") == api::kGuardContainerName) {
      list[i] = guard;
      return true;
    }
    if (input.native_sidecars && StringAt(list[i], "name") == api::kInitContainerName) {
      position = i + 1;
    }
  }
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(position), guard);
  return true;
}

// At most this much of a loader message goes into the annotation.
constexpr size_t kMaxAnnotationMessage = 512;

const InjectionSuspension* FindSuspension(const std::vector<InjectionSuspension>& suspensions,
                                          const api::AllocatorPolicy& policy,
                                          const PodTemplateKey& key) {
  if (key.pod_template_hash.empty()) return nullptr;
  for (const InjectionSuspension& s : suspensions) {
    if (s.policy == policy.name && s.policy_generation == policy.generation &&
        s.workload == key.workload && s.pod_template_hash == key.pod_template_hash) {
      return &s;
    }
  }
  return nullptr;
}

}  // namespace

PodTemplateKey PodTemplateKeyOf(const json& pod) {
  PodTemplateKey key;
  const auto labels = MetadataMap(pod, "labels");
  auto hash = labels.find(api::kPodTemplateHashLabel);
  if (hash == labels.end() || hash->second.empty()) return key;
  if (!pod.is_object() || !pod.contains("metadata") || !pod["metadata"].is_object()) return key;
  const json& owners = pod["metadata"].value("ownerReferences", json::array());
  if (!owners.is_array()) return key;
  const std::string suffix = "-" + hash->second;
  for (const json& owner : owners) {
    if (!owner.is_object() || StringAt(owner, "kind") != "ReplicaSet" ||
        owner.value("controller", json()) != true) {
      continue;
    }
    const std::string rs = StringAt(owner, "name");
    // A ReplicaSet of a Deployment is named "<deployment>-<pod-template-hash>".
    if (rs.size() <= suffix.size() ||
        rs.compare(rs.size() - suffix.size(), suffix.size(), suffix) != 0) {
      return key;
    }
    key.workload = "Deployment/" + rs.substr(0, rs.size() - suffix.size());
    key.pod_template_hash = hash->second;
    return key;
  }
  return key;
}

std::vector<InjectionSuspension> SuspensionsOfPolicy(const json& policy_object) {
  std::vector<InjectionSuspension> out;
  const std::string name = MetadataString(policy_object, "name");
  if (!policy_object.is_object() || !policy_object.contains("status")) return out;
  const json& status = policy_object["status"];
  if (!status.is_object() || !status.contains("injectionSuspended")) return out;
  const json& entries = status["injectionSuspended"];
  if (!entries.is_array()) return out;
  for (const json& e : entries) {
    if (!e.is_object()) continue;
    InjectionSuspension s;
    s.policy = name;
    s.workload = StringAt(e, "workload");
    s.pod_template_hash = StringAt(e, "podTemplateHash");
    auto gen = e.find("policyGeneration");
    if (gen == e.end() || !gen->is_number_integer()) continue;
    s.policy_generation = gen->get<int64_t>();
    s.message = StringAt(e, "message");
    if (s.workload.empty() || s.pod_template_hash.empty()) continue;
    out.push_back(std::move(s));
  }
  return out;
}

std::string PodDisplayName(const json& pod) {
  std::string name = MetadataString(pod, "name");
  if (!name.empty()) return name;
  std::string generate = MetadataString(pod, "generateName");
  return generate.empty() ? "(unnamed pod)" : generate + "*";
}

json GuardContainer(const api::AllocatorPolicy& policy, const InjectionOptions& options,
                    bool native_sidecar) {
  json args = json::array();
  if (policy.spec.guard.threshold_bytes) {
    args.push_back("--threshold-bytes");
    args.push_back(std::to_string(*policy.spec.guard.threshold_bytes));
  }
  args.push_back("--action");
  args.push_back(api::GuardActionName(policy.spec.guard.action));
  args.push_back("--interval");
  args.push_back("2s");
  args.push_back("--expected-allocator");
  args.push_back(AllocatorLabel(policy.spec.allocator.name));
  for (const std::string& flag : options.guard_log_flags) args.push_back(flag);
  json guard = {
      {"name", api::kGuardContainerName},
      {"image", options.image},
      {"imagePullPolicy", "IfNotPresent"},
      {"command", {kGuardBinary, "guard"}},
      {"args", args},
      {"env",
       {{{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
        {{"name", "POD_NAMESPACE"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
        {{"name", "POD_UID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}}}},
      {"ports",
       {{{"name", api::kGuardMetricsPortName},
         {"containerPort", api::kGuardMetricsPort},
         {"protocol", "TCP"}}}},
      {"resources", SidecarResources()},
      {"securityContext", RestrictedSecurityContext()}};
  if (native_sidecar) guard["restartPolicy"] = "Always";
  return guard;
}

PodInjectionDecision DecidePodInjection(const PodInjectionInput& input) {
  const json& pod = input.pod;
  const std::string pod_name = PodDisplayName(pod);
  if (input.ns == "kube-system") return Skip("pods in kube-system are never injected");
  if (!input.operator_namespace.empty() && input.ns == input.operator_namespace) {
    return Skip("pods in allocguard's own namespace " + input.ns + " are never injected");
  }
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) {
    return Skip("the admitted object is not a pod with a spec");
  }
  const auto annotations = MetadataMap(pod, "annotations");
  if (auto it = annotations.find(api::kInjectAnnotation);
      it != annotations.end() && it->second == "false") {
    return Skip(std::string("pod ") + pod_name + " opted out (" + api::kInjectAnnotation +
                ": \"false\")");
  }
  if (auto it = annotations.find(api::kInjectedAnnotation); it != annotations.end()) {
    return Skip("pod " + pod_name + " is already injected (" + it->second + ")");
  }
  const auto labels = MetadataMap(pod, "labels");
  if (labels.count(api::kCanaryLabel) != 0) {
    return Skip("pod " + pod_name + " is a canary pod; its variant is injected by the canary");
  }

  std::vector<const api::AllocatorPolicy*> matching;
  for (const api::AllocatorPolicy& policy : input.policies) {
    if (api::SelectorMatches(policy.spec.selector, labels)) matching.push_back(&policy);
  }
  if (matching.empty())
    return Skip("no AllocatorPolicy in " + input.ns + " selects pod " + pod_name);
  if (matching.size() > 1) {
    std::sort(matching.begin(), matching.end(),
              [](const auto* a, const auto* b) { return a->name < b->name; });
    std::string names;
    for (const auto* policy : matching) names += (names.empty() ? "" : ", ") + policy->name;
    PodInjectionDecision decision =
        Skip("AllocatorPolicies " + names + " all select pod " + pod_name +
             "; allocguard injects nothing until only one does");
    decision.conflicts.push_back(decision.reason);
    return decision;
  }
  const api::AllocatorPolicy& policy = *matching.front();

  PodInjectionDecision decision;
  decision.policy = policy;
  json mutated = pod;
  const PodTemplateKey template_key = PodTemplateKeyOf(pod);
  if (const InjectionSuspension* s = FindSuspension(input.suspensions, policy, template_key)) {
    std::string why = "AllocatorPolicy " + policy.name + " (generation " +
                      std::to_string(policy.generation) + ") suspended injection for " +
                      template_key.workload + " pod-template-hash " +
                      template_key.pod_template_hash + ": its pods failed to start with " +
                      AllocatorLabel(policy.spec.allocator.name) + " preloaded";
    if (!s->message.empty()) why += " (" + s->message.substr(0, kMaxAnnotationMessage) + ")";
    decision.annotations = {{api::kInjectionSuspendedAnnotation, why}};
    json& metadata = mutated["metadata"];
    if (!metadata.is_object()) metadata = json::object();
    json& written = metadata["annotations"];
    if (!written.is_object()) written = json::object();
    written[api::kInjectionSuspendedAnnotation] = why;
    decision.action = PodInjectionAction::kSuspended;
    decision.patch = json::diff(pod, mutated);
    decision.reason = "pod " + pod_name + " was not injected: " + why;
    return decision;
  }
  InjectionOptions options = input.options;
  options.libc = ResolveLibc(policy.spec.libc, pod.contains("metadata") ? pod["metadata"] : json(),
                             &decision.conflicts);
  Status status = InjectAllocator(mutated["spec"], policy.spec.allocator, policy.spec.containers,
                                  options, &decision.conflicts);
  if (!status.ok()) {
    decision.reason = "pod " + pod_name + " was not injected: " + status.message();
    decision.conflicts.push_back(decision.reason);
    return decision;
  }
  if (SelectContainerNames(mutated["spec"], policy.spec.containers).empty()) {
    decision.reason = "AllocatorPolicy " + policy.name + " selects pod " + pod_name +
                      " but none of its containers";
    return decision;
  }
  const bool guarded =
      policy.spec.guard.enabled && AddGuard(mutated["spec"], policy, input, decision.conflicts);

  decision.annotations = {{api::kInjectedAnnotation, AllocatorLabel(policy.spec.allocator.name)},
                          {api::kPolicyAnnotation, policy.name},
                          {api::kPolicyGenerationAnnotation, std::to_string(policy.generation)}};
  json& metadata = mutated["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  json& written = metadata["annotations"];
  if (!written.is_object()) written = json::object();
  for (const auto& [key, value] : decision.annotations) written[key] = value;
  if (guarded) {
    // What a PodMonitor selects the guards' pods by (the chart's podMonitor).
    json& written_labels = metadata["labels"];
    if (!written_labels.is_object()) written_labels = json::object();
    written_labels[api::kGuardLabel] = "true";
  }

  decision.action = PodInjectionAction::kInject;
  decision.patch = json::diff(pod, mutated);
  decision.reason = "injected " + AllocatorLabel(policy.spec.allocator.name) + " (libc " +
                    api::LibcName(options.libc) + ") into pod " + pod_name + " (AllocatorPolicy " +
                    policy.name + ", generation " + std::to_string(policy.generation) + ")";
  if (guarded) decision.reason += " with the guard sidecar";
  return decision;
}

}  // namespace allocguard::admission
