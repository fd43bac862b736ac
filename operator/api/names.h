#pragma once

// Annotation and label names allocguard reads and writes, in one place so the
// webhook, the controllers, the chart and the docs agree.

#include <algorithm>
#include <string>
#include <string_view>

namespace allocguard::api {

// Every annotation allocguard reads or writes starts with this.
inline constexpr char kAnnotationPrefix[] = "allocguard.io/";

// --- on Pods ---------------------------------------------------------------
// Set to "false" by a user to keep allocguard's hands off a Pod (or on a
// Deployment's template, off its Pods).
inline constexpr char kInjectAnnotation[] = "allocguard.io/inject";
// Written by the injection webhook: which allocator, from which policy and
// policy generation. Its presence makes injection idempotent.
inline constexpr char kInjectedAnnotation[] = "allocguard.io/injected";  // allocator name
inline constexpr char kPolicyAnnotation[] = "allocguard.io/policy";
inline constexpr char kPolicyGenerationAnnotation[] = "allocguard.io/policy-generation";
// Written by the injection webhook instead of kInjectedAnnotation when the
// pod's template is suspended by the injection circuit breaker (its pods
// failed to start with the allocator preloaded; docs/injection.md). The
// value says which policy suspended it and the loader's message.
inline constexpr char kInjectionSuspendedAnnotation[] = "allocguard.io/injection-suspended";
// On an injected pod without a controller: the digest of its template as
// the circuit breaker keys it (admission::BarePodDigest).
inline constexpr char kPodTemplateDigestAnnotation[] = "allocguard.io/pod-template-digest";
// Set by a user on a Pod (or a Deployment's pod template): which build of the
// allocator its containers preload, auto, glibc or musl (docs/injection.md).
// Overrides the policy's spec.libc.
inline constexpr char kLibcAnnotation[] = "allocguard.io/libc";
// Set by the ReplicaSet controller on the pods of a Deployment: the key of
// the pod template. The circuit breaker suspends injection per value.
inline constexpr char kPodTemplateHashLabel[] = "pod-template-hash";
// The revision label StatefulSet and DaemonSet controllers put on their pods.
inline constexpr char kControllerRevisionHashLabel[] = "controller-revision-hash";

// Pod conditions the guard sidecar writes (docs/guard.md). With the
// Backpressure action the injection adds a readinessGates entry for
// kMemoryHeadroomCondition: True while the workload is below its guard
// threshold, False while the guard holds traffic back.
inline constexpr char kMemoryHeadroomCondition[] = "allocguard.io/MemoryHeadroom";
// True when every workload process loaded the policy's allocator.
inline constexpr char kAllocatorLoadedCondition[] = "allocguard.io/AllocatorLoaded";
// From the allocator's books (docs/allocator-books.md), per container: True
// when the retained memory's floor rises while the in-use floor stays flat
// (the allocator keeps what the program freed), and when the in-use floor
// itself rises (the program holds more and more).
inline constexpr char kAllocatorRetainingCondition[] = "allocguard.io/AllocatorRetaining";
inline constexpr char kHeapGrowingCondition[] = "allocguard.io/HeapGrowing";

// --- on Deployments ----------------------------------------------------------
// The template hash of the candidate held by the gate (set with spec.paused).
inline constexpr char kHeldCandidateAnnotation[] = "allocguard.io/held-candidate";
// The template hash last let through (Flat, Audit or override).
inline constexpr char kReleasedCandidateAnnotation[] = "allocguard.io/released-candidate";
// A user's explicit override of a hold; its value is the reason, recorded in
// an event. Without it a held Deployment cannot be unpaused by hand.
inline constexpr char kOverrideHoldAnnotation[] = "allocguard.io/override-hold";
// Written by the operator when it clears a hold a user overrode (and removes
// the override annotation, which is spent): "<template hash> <reason>", so
// `allocguard gate` still answers Overridden for that template.
inline constexpr char kOverriddenCandidateAnnotation[] = "allocguard.io/overridden-candidate";

// --- on StatefulSets and DaemonSets (operator/admission/workload_hold.h; not
// written by any webhook yet, docs/workload-kinds.md) -------------------------
// The same held-candidate / released-candidate annotations as on Deployments,
// and what a hold replaced, so that its release restores it:
// the StatefulSet's own spec.updateStrategy.rollingUpdate.partition before the
// hold pinned it, as a decimal integer, or "" when it had none.
inline constexpr char kUserPartitionAnnotation[] = "allocguard.io/user-partition";
// The DaemonSet's own spec.updateStrategy before the hold switched it to
// OnDelete, as JSON ("null" when it had none).
inline constexpr char kUserUpdateStrategyAnnotation[] = "allocguard.io/user-update-strategy";

// --- on canary Jobs and Pods ------------------------------------------------
inline constexpr char kCanaryLabel[] = "allocguard.io/canary";    // ReplayCanary name
inline constexpr char kVariantLabel[] = "allocguard.io/variant";  // variant name
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kManagedByValue[] = "allocguard";

// Name of the injected containers and volume.
inline constexpr char kInitContainerName[] = "allocguard-init";
inline constexpr char kGuardContainerName[] = "allocguard-guard";
inline constexpr char kDriverContainerName[] = "allocguard-replay";
inline constexpr char kLibraryVolumeName[] = "allocguard-lib";
inline constexpr char kLibraryMountPath[] = "/opt/allocguard/inject";
// The stats agent (docs/allocator-books.md): its library, installed into the
// library volume beside the allocator, and the volume its books go to. Each
// governed container mounts the books volume at kBooksMountPath with subPath
// <container name>; the guard mounts the whole volume read-only at the same
// path and reads <kBooksMountPath>/<container>/books-<pid>.
inline constexpr char kStatsAgentLibrary[] = "liballocguard_stats.so";
inline constexpr char kBooksVolumeName[] = "allocguard-books";
inline constexpr char kBooksMountPath[] = "/var/run/allocguard/books";
// The guard sidecar's /metrics: the container port it declares (named, so a
// PodMonitor or a scrape config can find it) and the label the injection
// puts on pods that run a guard.
inline constexpr char kGuardMetricsPortName[] = "guard-metrics";
inline constexpr int kGuardMetricsPort = 9464;
inline constexpr char kGuardLabel[] = "allocguard.io/guard";

// --- object names ------------------------------------------------------------
// Kubernetes' name rules (apimachinery's validation.IsDNS1123Label and
// IsDNS1123Subdomain), for names read from objects before the operator puts
// them into a request or a spec of its own.

// Lowercase letters and digits.
inline bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A DNS-1123 label of at most `max` characters (63 by the RFC; less where a
// suffix is added): lowercase letters, digits and '-', starting and ending
// with a letter or digit. Namespaces, a pod's spec.hostname, container names.
inline bool IsDnsLabel(std::string_view s, size_t max = 63) {
  return !s.empty() && s.size() <= max && IsLowerAlnum(s.front()) && IsLowerAlnum(s.back()) &&
         std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

// A DNS-1123 subdomain: at most 253 characters, labels as above (of any
// length) joined by '.'. Most objects' names (Deployments, DaemonSets,
// StatefulSets, ReplayCanaries).
inline bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (size_t start = 0;;) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start), 253)) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// The name of the canary of `canary_key` (controllers::CanaryKey: what is
// measured, never who asked): derived from the key alone, so every workload
// that asks the same finds the same canary, a restarted operator finds the
// canary it created before, and the webhooks find it by name. "replay-" and
// 32 hex digits of a SHA-256: a DNS label, with room for the Job names
// derived from it (which the job builder shortens). The name is only where
// to look: what a canary proves is checked on its content
// (controllers::CanaryDistrust).
inline std::string CanaryName(const std::string& canary_key) {
  return "replay-" + canary_key.substr(0, 32);
}

}  // namespace allocguard::api
