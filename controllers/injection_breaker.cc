#include "controllers/injection_breaker.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>

#include "controllers/reconcilers.h"
#include "operator/admission/deployment_gate.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"

namespace allocguard::controllers {
namespace {

constexpr size_t kMaxLoaderMessage = 512;
constexpr size_t kMaxSuspended = 50;

// What the loaders print when they refuse a library, as measured
// (docs/allocators.md) and as their sources word it:
//   glibc ld.so (elf/dl-load.c, dl-version.c, rtld.c, dl-lookup.c):
//     "<prog>: error while loading shared libraries: <lib>: cannot open shared object file"
//     "<prog>: <libc>: version `GLIBC_2.34' not found (required by <lib>)"
//     "<prog>: symbol lookup error: <lib>: undefined symbol: <sym>"
//     "ERROR: ld.so: object '<lib>' from LD_PRELOAD cannot be preloaded (...): ignored."
//     "... invalid ELF header", "... wrong ELF class: ELFCLASS32"
//   musl (ldso/dynlink.c):
//     "Error relocating <lib>: <sym>: symbol not found"
//     "Error loading shared library <lib>: <errno text> (needed by <lib>)"
// glibc's "cannot be preloaded ... ignored" is a warning, not fatal: the
// program runs without the allocator. It is listed because a crash-looping
// pod that shows it runs without the allocator anyway; suspending the
// injection takes nothing away and says what happened.
constexpr std::array<std::string_view, 12> kLoaderPatterns = {
    "error while loading shared libraries",
    "not found (required by",
    "version `GLIBC_",
    "version 'GLIBC_",
    "symbol lookup error",
    "cannot be preloaded",
    "invalid ELF header",
    "wrong ELF class",
    "cannot open shared object file",
    "Error relocating",
    "Error loading shared library",
    "undefined symbol:",
};

bool IsOwnContainer(const std::string& name) {
  return name == api::kInitContainerName || name == api::kGuardContainerName ||
         name == api::kDriverContainerName;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

// Cuts to at most max bytes without splitting a UTF-8 sequence (status
// strings must stay valid UTF-8).
std::string CutUtf8(std::string s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s + "...";
}

// Whether suspensions of `workload` are checked against the workload's
// template (a kind the operator caches), rather than against its pods.
bool HasCachedTemplate(const std::string& workload) {
  for (std::string_view kind : {"Deployment/", "StatefulSet/", "DaemonSet/"}) {
    if (workload.rfind(kind, 0) == 0) return true;
  }
  return false;
}

// The workload's template digest, or null when it is not in the cache.
const std::string* TemplateOf(const BreakerInput& input, const std::string& workload) {
  auto it = input.workload_templates.find(workload);
  return it == input.workload_templates.end() ? nullptr : &it->second;
}

struct EntryKey {
  std::string workload;
  std::string hash;
  int64_t generation;
  bool operator<(const EntryKey& o) const {
    return std::tie(workload, hash, generation) < std::tie(o.workload, o.hash, o.generation);
  }
};

EntryKey KeyOf(const api::InjectionSuspendedStatus& entry) {
  return {entry.workload, entry.pod_template_hash, entry.policy_generation.value_or(-1)};
}

// Whether the policy governs the container of this status: as
// InjectAllocator selects (its own containers never; init containers only
// when named).
bool Governs(const api::AllocatorPolicy& policy, const std::string& name, bool init) {
  if (IsOwnContainer(name)) return false;
  const auto& wanted = policy.spec.containers;
  if (wanted.empty()) return !init;
  return std::find(wanted.begin(), wanted.end(), name) != wanted.end();
}

// The pod's container statuses, init containers first, each with whether
// it is an init container's.
std::vector<std::pair<const api::ContainerStatusSummary*, bool>> ContainerStatuses(
    const api::PodSummary& pod) {
  std::vector<std::pair<const api::ContainerStatusSummary*, bool>> out;
  for (const api::ContainerStatusSummary& cs : pod.init_container_statuses)
    out.emplace_back(&cs, true);
  for (const api::ContainerStatusSummary& cs : pod.container_statuses) out.emplace_back(&cs, false);
  return out;
}

// Every governed container of the pod reports ready.
bool GovernedContainersReady(const api::AllocatorPolicy& policy, const api::PodSummary& pod) {
  bool any = false;
  for (const auto& [cs, init] : ContainerStatuses(pod)) {
    if (!Governs(policy, cs->name, init)) continue;
    any = true;
    if (!cs->ready) return false;
  }
  return any;
}

}  // namespace

std::optional<std::string> FindLoaderError(std::string_view text) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    for (std::string_view pattern : kLoaderPatterns) {
      if (line.find(pattern) != std::string_view::npos) {
        return CutUtf8(Trim(line), kMaxLoaderMessage);
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::string DeploymentTemplateDigest(const api::DeploymentSummary& deployment) {
  std::string digest = deployment.cached_template_hash;
  if (digest.empty()) digest = admission::TemplateHash(deployment.pod_template);
  return digest;
}

std::optional<InjectionFailure> DetectInjectionFailure(const api::AllocatorPolicy& policy,
                                                       const api::PodSummary& pod) {
  const api::ObjectMeta& meta = pod.meta;
  if (meta.Terminating()) return std::nullopt;
  if (meta.labels.contains(api::kCanaryLabel)) return std::nullopt;
  if (!api::SelectorMatches(policy.spec.selector, meta.labels)) return std::nullopt;
  if (meta.Annotation(api::kInjectedAnnotation).empty() ||
      meta.Annotation(api::kPolicyAnnotation) != policy.name ||
      meta.Annotation(api::kPolicyGenerationAnnotation) != std::to_string(policy.generation)) {
    return std::nullopt;
  }
  const admission::PodTemplateKey key = admission::PodTemplateKeyOf(pod.meta);
  if (key.pod_template_hash.empty()) return std::nullopt;

  for (const auto& [cs, init] : ContainerStatuses(pod)) {
    if (!Governs(policy, cs->name, init)) continue;
    const std::string& waiting = cs->state.waiting_reason;
    const int64_t restarts = cs->restart_count;
    if (waiting != "CrashLoopBackOff" && restarts < 2) continue;
    std::optional<std::string> loader = FindLoaderError(cs->state.terminated_message);
    if (!loader.has_value()) loader = FindLoaderError(cs->last_state.terminated_message);
    if (!loader.has_value()) continue;
    InjectionFailure failure;
    failure.pod = meta.name;
    failure.uid = meta.uid;
    failure.container = cs->name;
    failure.key = key;
    failure.loader_message = *loader;
    failure.restart_count = restarts;
    failure.waiting_reason = waiting;
    return failure;
  }
  return std::nullopt;
}

BreakerDecision DecideInjectionBreaker(const BreakerInput& input) {
  BreakerDecision out;
  const api::AllocatorPolicy& policy = input.policy;

  // The keys of the namespace's live pods: what keeps a suspension of a kind
  // whose template the operator does not cache.
  std::set<EntryKey> live_keys;
  for (const api::PodSummary& pod : input.pods) {
    if (pod.meta.Terminating()) continue;
    const admission::PodTemplateKey key = admission::PodTemplateKeyOf(pod.meta);
    if (!key.pod_template_hash.empty()) {
      live_keys.insert({key.workload, key.pod_template_hash, policy.generation});
    }
  }

  // Entries that still hold: same policy generation, and the workload still
  // there with the template it had when its pods failed (or, for the other
  // kinds, a pod of the key still there).
  std::set<EntryKey> recorded_keys;
  std::set<EntryKey> kept_keys;
  for (const api::InjectionSuspendedStatus& entry : input.recorded) {
    const EntryKey key = KeyOf(entry);
    recorded_keys.insert(key);
    if (key.generation != policy.generation || key.hash.empty()) continue;
    if (HasCachedTemplate(key.workload)) {
      const std::string* digest = TemplateOf(input, key.workload);
      if (digest == nullptr || *digest != entry.template_hash) continue;
    } else if (!live_keys.contains(key)) {
      continue;
    }
    if (kept_keys.insert(key).second && out.suspended.size() < kMaxSuspended) {
      out.suspended.push_back(entry);
    }
  }

  // New failures.
  for (const api::PodSummary& pod : input.pods) {
    std::optional<InjectionFailure> failure = DetectInjectionFailure(policy, pod);
    if (!failure.has_value()) continue;
    const EntryKey key{failure->key.workload, failure->key.pod_template_hash, policy.generation};
    if (kept_keys.contains(key)) continue;
    std::string template_digest = key.hash;
    if (HasCachedTemplate(key.workload)) {
      const std::string* digest = TemplateOf(input, key.workload);
      if (digest == nullptr) continue;  // a resumption could not be told apart: leave it
      template_digest = *digest;
    }
    if (out.suspended.size() >= kMaxSuspended) break;
    kept_keys.insert(key);
    const std::string allocator = api::AllocatorName(policy.spec.allocator.name);
    const std::string message =
        "container " + failure->container + " of pod " + failure->pod + " failed to start with " +
        allocator + " preloaded (" +
        (failure->waiting_reason.empty() ? std::to_string(failure->restart_count) + " restarts"
                                         : failure->waiting_reason) +
        "): " + failure->loader_message;
    api::InjectionSuspendedStatus entry;
    entry.workload = key.workload;
    entry.pod_template_hash = key.hash;
    entry.template_hash = template_digest;
    entry.policy_generation = policy.generation;
    entry.pod = failure->pod;
    entry.container = failure->container;
    entry.reason = "LoaderError";
    entry.message = message;
    entry.since = input.now_rfc3339;
    out.suspended.push_back(std::move(entry));
    std::string tripped = "AllocatorPolicy " + policy.name;
    tripped.append(" stopped injecting ").append(allocator).append(" into ").append(key.workload);
    tripped.append(" (template ").append(key.hash).append("): ").append(message);
    tripped.append(failure->key.Replaced()
                       ? ". Its failing pods are deleted and come back on the system allocator; "
                         "injection resumes when the pod template or the policy changes."
                       : ". A bare pod is not deleted (nothing would replace it): re-create it "
                         "and it runs on the system allocator until the policy changes.");
    out.tripped.push_back({key.workload, std::move(tripped)});
  }

  // Failing pods of suspensions the webhook already knows about.
  for (const api::PodSummary& pod : input.pods) {
    const api::ObjectMeta& meta = pod.meta;
    if (meta.Terminating()) continue;
    const std::string& uid = meta.uid;
    if (input.deleted_pod_uids.contains(uid)) continue;
    if (pod.Finished()) continue;
    if (!meta.HasAnnotation(api::kInjectedAnnotation)) continue;
    const admission::PodTemplateKey key = admission::PodTemplateKeyOf(pod.meta);
    if (key.pod_template_hash.empty() || !key.Replaced()) continue;
    const EntryKey entry_key{key.workload, key.pod_template_hash, policy.generation};
    if (!kept_keys.contains(entry_key) || !recorded_keys.contains(entry_key)) continue;
    if (GovernedContainersReady(policy, pod)) continue;
    out.delete_pods.push_back(
        {meta.name, uid,
         "deleted by allocguard: injection of AllocatorPolicy " + policy.name +
             " is suspended for " + key.workload + " (template " + key.pod_template_hash +
             ") because its pods failed to start with the allocator; its controller recreates "
             "this pod without it"});
  }
  return out;
}

}  // namespace allocguard::controllers
