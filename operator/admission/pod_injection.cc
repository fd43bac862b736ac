#include "operator/admission/pod_injection.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "operator/api/deployment.h"
#include "operator/api/json_patch.h"
#include "operator/api/json_reader.h"
#include "operator/api/names.h"
#include "operator/api/pod_spec.h"
#include "operator/api/policy.h"
#include "operator/api/quantity.h"

namespace allocguard::admission {

using api::IndexOfNamed;
using api::ListMemberOf;
using api::MemberOf;
using api::ObjectMemberOf;
using api::SetAnnotation;
using api::SetLabel;

namespace {

using nlohmann::json;

constexpr char kGuardBinary[] = "/usr/local/bin/allocguard";

PodInjectionDecision Skip(std::string reason) {
  PodInjectionDecision decision;
  decision.reason = std::move(reason);
  return decision;
}

json SidecarResources() {
  return {{"requests", {{"cpu", "10m"}, {"memory", "32Mi"}}},
          {"limits", {{"cpu", "200m"}, {"memory", "64Mi"}}}};
}

// The governed containers' runAsUser (or runAsGroup) in their
// securityContext, falling back to the pod's; nullopt unless every governed
// container has the same one.
std::optional<int64_t> CommonSecurityId(const api::PodSpec& spec,
                                        const std::vector<std::string>& names,
                                        std::optional<int64_t> api::SecurityContext::*id_of) {
  const std::optional<int64_t> pod_id = spec.security_context.*id_of;
  std::optional<int64_t> common;
  for (const auto* list : {&spec.init_containers, &spec.containers}) {
    for (const api::Container& c : *list) {
      if (std::find(names.begin(), names.end(), c.name) == names.end()) continue;
      std::optional<int64_t> id = c.security_context.*id_of;
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
void FitGuardToWorkload(const api::PodSpec& spec, const api::AllocatorPolicy& policy, json& guard) {
  const std::vector<std::string> names = SelectContainerNames(spec, policy.spec.containers);
  if (auto uid = CommonSecurityId(spec, names, &api::SecurityContext::run_as_user)) {
    json& security_context = ObjectMemberOf(guard, "securityContext");
    MemberOf(security_context, "runAsUser") = *uid;
    MemberOf(security_context, "runAsNonRoot") = *uid != 0;
    if (auto gid = CommonSecurityId(spec, names, &api::SecurityContext::run_as_group)) {
      MemberOf(security_context, "runAsGroup") = *gid;
    }
  }
  if (names.size() != 1) return;
  const api::Container* governed = spec.FindContainer(names.front());
  if (governed == nullptr || governed->memory_limit.empty()) return;
  auto bytes = api::ParseQuantityBytes(governed->memory_limit);
  if (!bytes.ok()) return;
  json& args = ListMemberOf(guard, "args");
  args.push_back("--limit-bytes");
  args.push_back(std::to_string(*bytes));
}

// Adds the guard: a native sidecar right after allocguard-init (or first), or
// a regular container at the end, and a shared process namespace. False when
// the pod's own settings keep it out (a conflict says why).
bool AddGuard(json& spec, const api::PodSpec& pod_spec, const api::AllocatorPolicy& policy,
              const PodInjectionInput& input, bool books, std::vector<std::string>& conflicts) {
  if (pod_spec.share_process_namespace == false) {
    conflicts.emplace_back(
        "the pod sets shareProcessNamespace: false; the guard needs to see the workload's "
        "processes, so allocguard did not add it");
    return false;
  }
  MemberOf(spec, "shareProcessNamespace") = true;
  json guard = GuardContainer(policy, input.options, input.native_sidecars);
  FitGuardToWorkload(pod_spec, policy, guard);
  // The stats agent's books: the whole volume, read-only, one directory per
  // governed container.
  if (books) {
    ListMemberOf(guard, "volumeMounts")
        .push_back({{"name", api::kBooksVolumeName},
                    {"mountPath", api::kBooksMountPath},
                    {"readOnly", true}});
    json& args = ListMemberOf(guard, "args");
    args.push_back("--books-dir");
    args.push_back(api::kBooksMountPath);
  }
  // On the host's network the guard's port would be the node's: a second
  // guarded pod on the node could not bind it, and a declared containerPort
  // becomes a hostPort. Such a guard serves no metrics (its conditions,
  // events and actions are unchanged).
  if (pod_spec.host_network) {
    guard.erase("ports");
    json& args = ListMemberOf(guard, "args");
    args.push_back("--metrics-bind-address");
    args.push_back("0");
    conflicts.push_back(
        "the pod uses the host's network (hostNetwork: true): the guard serves no /metrics, "
        "since its port " +
        std::to_string(api::kGuardMetricsPort) + " would be the node's");
  }
  if (policy.spec.guard.action == api::GuardAction::kBackpressure) {
    json& gates = ListMemberOf(spec, "readinessGates");
    const json gate = {{"conditionType", api::kMemoryHeadroomCondition}};
    if (std::find(gates.begin(), gates.end(), gate) == gates.end()) gates.push_back(gate);
  }
  json& list = ListMemberOf(spec, input.native_sidecars ? "initContainers" : "containers");
  if (auto guard_at = IndexOfNamed(list, api::kGuardContainerName)) {
    list[*guard_at] = guard;
    return true;
  }
  size_t position = list.size();
  if (input.native_sidecars) {
    auto init_at = IndexOfNamed(list, api::kInitContainerName);
    position = init_at ? *init_at + 1 : 0;
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

namespace {

// The label's value in `labels`, empty when absent.
std::string LabelOf(const std::map<std::string, std::string>& labels, const char* name) {
  auto it = labels.find(name);
  return it == labels.end() ? "" : it->second;
}

}  // namespace

PodTemplateKey PodTemplateKeyOf(const api::ObjectMeta& pod_metadata) {
  PodTemplateKey key;
  const api::OwnerReference* owner = pod_metadata.ControllerRef();
  if (owner == nullptr) {
    const std::string digest = pod_metadata.Annotation(api::kPodTemplateDigestAnnotation);
    if (digest.empty()) return key;
    key.workload = kBarePods;
    key.pod_template_hash = digest;
    return key;
  }
  if (owner->kind == "ReplicaSet") {
    // A ReplicaSet of a Deployment is named "<deployment>-<pod-template-hash>".
    const std::string hash = LabelOf(pod_metadata.labels, api::kPodTemplateHashLabel);
    const std::string suffix = "-" + hash;
    const std::string& rs = owner->name;
    if (!hash.empty() && rs.size() > suffix.size() &&
        rs.compare(rs.size() - suffix.size(), suffix.size(), suffix) == 0) {
      key.workload = "Deployment/" + rs.substr(0, rs.size() - suffix.size());
      key.pod_template_hash = hash;
      return key;
    }
  }
  if (owner->kind == "StatefulSet" || owner->kind == "DaemonSet") {
    key.pod_template_hash = LabelOf(pod_metadata.labels, api::kControllerRevisionHashLabel);
  } else {
    // A ReplicaSet of its own, a Job or any other controller: its pods carry
    // no revision, so the controller object itself (its uid) is the key.
    key.pod_template_hash = owner->uid;
  }
  if (key.pod_template_hash.empty() || owner->name.empty() || owner->kind.empty()) return {};
  key.workload = owner->kind + "/" + owner->name;
  return key;
}

namespace {

// What a key's pod_template_hash is, for messages: the label or the digest
// PodTemplateKeyOf read it from.
std::string KeyLabel(const PodTemplateKey& key) {
  if (!key.Replaced()) return "template digest";
  for (std::string_view kind : {"StatefulSet/", "DaemonSet/"}) {
    if (key.workload.starts_with(kind)) return api::kControllerRevisionHashLabel;
  }
  return key.workload.starts_with("Deployment/") ? "pod-template-hash" : "controller uid";
}

}  // namespace

PodTemplateKey PodTemplateKeyOf(const json& pod) {
  const api::ObjectMeta meta = api::ParseObjectMeta(pod);
  if (meta.ControllerRef() != nullptr || meta.HasAnnotation(api::kPodTemplateDigestAnnotation)) {
    return PodTemplateKeyOf(meta);
  }
  PodTemplateKey key;
  key.workload = kBarePods;
  key.pod_template_hash = BarePodDigest(pod);
  return key;
}

std::string BarePodDigest(const json& pod) {
  // What decides whether a library loads: each container's name, image,
  // command and arguments. The rest of the spec is not stable across
  // re-creations of "the same" pod (the ServiceAccount admission plugin adds a
  // token volume with a random name before any webhook runs).
  json containers = json::array();
  const json* spec = api::json_fields::Member(pod, "spec");
  for (const char* list : {"initContainers", "containers"}) {
    const json* items = spec == nullptr ? nullptr : api::json_fields::Member(*spec, list);
    if (items == nullptr || !items->is_array()) continue;
    for (const json& c : *items) {
      if (!c.is_object()) continue;
      json kept = json::object();
      for (const char* field : {"name", "image", "command", "args"}) {
        if (const json* v = api::json_fields::Member(c, field)) kept[field] = *v;
      }
      containers.push_back(std::move(kept));
    }
  }
  return api::PodTemplateHash(json{{"spec", {{"containers", std::move(containers)}}}});
}

std::vector<InjectionSuspension> SuspensionsOfPolicy(const json& policy_object) {
  std::vector<InjectionSuspension> out;
  const std::string name = api::ParseObjectMeta(policy_object).name;
  const json* status = api::json_fields::Member(policy_object, "status");
  if (status == nullptr) return out;
  api::json_fields::Reader r(*status, "status", nullptr);
  r.Objects("injectionSuspended", [&](const json& entry, const std::string& path) {
    InjectionSuspension s;
    s.policy = name;
    api::json_fields::Reader e(entry, path, nullptr);
    e.String("workload", &s.workload);
    e.String("podTemplateHash", &s.pod_template_hash);
    std::optional<int64_t> generation;
    e.Int("policyGeneration", &generation);
    e.String("message", &s.message);
    if (!generation || s.workload.empty() || s.pod_template_hash.empty()) return;
    s.policy_generation = *generation;
    out.push_back(std::move(s));
  });
  return out;
}

std::string PodDisplayName(const json& pod) { return api::ParsePod(pod).DisplayName(); }

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
  if (native_sidecar) MemberOf(guard, "restartPolicy") = "Always";
  return guard;
}

PodInjectionDecision DecidePodInjection(const PodInjectionInput& input) {
  const json& pod = input.pod;
  const api::Pod typed = api::ParsePod(pod);
  const std::string pod_name = typed.DisplayName();
  if (input.ns == "kube-system") return Skip("pods in kube-system are never injected");
  if (!input.operator_namespace.empty() && input.ns == input.operator_namespace) {
    return Skip("pods in allocguard's own namespace " + input.ns + " are never injected");
  }
  if (!typed.has_spec) return Skip("the admitted object is not a pod with a spec");
  const auto& annotations = typed.metadata.annotations;
  if (auto it = annotations.find(api::kInjectAnnotation);
      it != annotations.end() && it->second == "false") {
    return Skip(std::string("pod ") + pod_name + " opted out (" + api::kInjectAnnotation +
                ": \"false\")");
  }
  if (auto it = annotations.find(api::kInjectedAnnotation); it != annotations.end()) {
    return Skip("pod " + pod_name + " is already injected (" + it->second + ")");
  }
  const auto& labels = typed.metadata.labels;
  if (labels.contains(api::kCanaryLabel)) {
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
                      template_key.workload + " " + KeyLabel(template_key) + " " +
                      template_key.pod_template_hash + ": its pods failed to start with " +
                      AllocatorLabel(policy.spec.allocator.name) + " preloaded";
    if (!s->message.empty()) why += " (" + s->message.substr(0, kMaxAnnotationMessage) + ")";
    decision.annotations = {{api::kInjectionSuspendedAnnotation, why}};
    // A bare pod keeps its key, so that the suspension lasts while it runs.
    if (!template_key.Replaced()) {
      decision.annotations[api::kPodTemplateDigestAnnotation] = template_key.pod_template_hash;
    }
    for (const auto& [key, value] : decision.annotations) SetAnnotation(mutated, key, value);
    decision.action = PodInjectionAction::kSuspended;
    decision.patch = api::JsonPatchBetween(pod, mutated);
    decision.reason = "pod " + pod_name + " was not injected: " + why;
    return decision;
  }
  InjectionOptions options = input.options;
  options.stats_agent = input.options.stats_agent && policy.spec.StatsEnabled();
  options.libc = ResolveLibc(policy.spec.libc, typed.metadata.annotations, &decision.conflicts);
  json& spec = MemberOf(mutated, "spec");
  Status status = InjectAllocator(spec, policy.spec.allocator, policy.spec.containers, options,
                                  &decision.conflicts);
  if (!status.ok()) {
    decision.reason = "pod " + pod_name + " was not injected: " + status.message();
    decision.conflicts.push_back(decision.reason);
    return decision;
  }
  // InjectAllocator adds only allocguard's own containers, which are never
  // selected: the pod as admitted has the same selection.
  if (SelectContainerNames(typed.spec, policy.spec.containers).empty()) {
    decision.reason = "AllocatorPolicy " + policy.name + " selects pod " + pod_name +
                      " but none of its containers";
    return decision;
  }
  const json* volumes = api::json_fields::Member(spec, "volumes");
  const bool books =
      volumes != nullptr && volumes->is_array() && IndexOfNamed(*volumes, api::kBooksVolumeName);
  const bool guarded = policy.spec.guard.enabled &&
                       AddGuard(spec, typed.spec, policy, input, books, decision.conflicts);

  decision.annotations = {{api::kInjectedAnnotation, AllocatorLabel(policy.spec.allocator.name)},
                          {api::kPolicyAnnotation, policy.name},
                          {api::kPolicyGenerationAnnotation, std::to_string(policy.generation)}};
  if (!template_key.Replaced()) {
    decision.annotations[api::kPodTemplateDigestAnnotation] = template_key.pod_template_hash;
  }
  for (const auto& [key, value] : decision.annotations) SetAnnotation(mutated, key, value);
  // What a PodMonitor selects the guards' pods by (the chart's podMonitor).
  if (guarded) SetLabel(mutated, api::kGuardLabel, "true");

  decision.action = PodInjectionAction::kInject;
  decision.patch = api::JsonPatchBetween(pod, mutated);
  decision.reason = "injected " + AllocatorLabel(policy.spec.allocator.name) + " (libc " +
                    api::LibcName(options.libc) + ") into pod " + pod_name + " (AllocatorPolicy " +
                    policy.name + ", generation " + std::to_string(policy.generation) + ")";
  if (guarded) decision.reason += " with the guard sidecar";
  if (books) decision.reason += " and the stats agent";
  return decision;
}

}  // namespace allocguard::admission
