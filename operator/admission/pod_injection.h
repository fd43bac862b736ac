#pragma once

// The Pod injection webhook's decision (mutating, Pod CREATE): which policy
// governs a new Pod, and the JSON Patch that injects its allocator and guard.
// Pure: the webhook shell parses the AdmissionReview, lists the namespace's
// AllocatorPolicies, calls DecidePodInjection and writes the response.
//
// Rules, in order (the first that applies decides):
//   1. Pods in kube-system or in the operator's own namespace: skipped.
//   2. The annotation api::kInjectAnnotation == "false": skipped (opt-out).
//   3. Pods already carrying api::kInjectedAnnotation: skipped with an empty
//      patch. This makes reinvocation (and a re-admitted copy of an injected
//      pod) a no-op, and keeps a canary pod's variant allocator intact.
//   4. Canary pods (label api::kCanaryLabel): skipped; the canary controller
//      injects each variant itself.
//   5. No policy selects the pod's labels: skipped.
//   6. More than one policy selects it: skipped, with a conflict naming them
//      (the validating webhook refuses overlapping policies; this covers
//      policies stored before it ran).
//   7. The pod's template is suspended by the policy's circuit breaker (an
//      entry of `suspensions` for this policy at its current generation with
//      the pod's PodTemplateKey; docs/injection.md):
//      kSuspended, nothing injected, only the annotation
//      api::kInjectionSuspendedAnnotation saying why.
//   8. Otherwise: InjectAllocator with the policy's allocator and containers,
//      the guard sidecar when spec.guard.enabled, and the annotations
//      kInjectedAnnotation (allocator), kPolicyAnnotation (policy name) and
//      kPolicyGenerationAnnotation (metadata.generation); on a pod without
//      a controller also kPodTemplateDigestAnnotation (BarePodDigest).
//
// The webhook never refuses a Pod: every problem is a skip with a reason (the
// webhook must not keep workloads from starting), and what was not applied is
// listed in `conflicts` for a Warning event.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/admission/allocator_injection.h"
#include "operator/api/object_meta.h"
#include "operator/api/types.h"

namespace allocguard::admission {

// The template a pod was made from, as the circuit breaker keys its
// suspensions (docs/injection.md, "Which pods it covers"):
//   - a Deployment's pod: "Deployment/<name>" (from the controlling
//     ReplicaSet, "<deployment>-<pod-template-hash>") and its
//     pod-template-hash label;
//   - a StatefulSet's or DaemonSet's pod: "StatefulSet/<name>" or
//     "DaemonSet/<name>" and its controller-revision-hash label;
//   - a pod of any other controller (a ReplicaSet of its own, a Job, ...):
//     "<Kind>/<name>" and the controller's uid, since their pods carry no
//     revision (a new object of the same name is a new key);
//   - a pod without a controller: kBarePods and BarePodDigest, which the
//     webhook records on the pod (api::kPodTemplateDigestAnnotation) so that
//     the reconciler reads the same key from the pod as admitted.
// Empty fields when none applies (a controller without a name or uid, a
// StatefulSet pod without its revision label).
inline constexpr char kBarePods[] = "Pod";
struct PodTemplateKey {
  std::string workload;  // "Deployment/web", "StatefulSet/db", kBarePods
  std::string pod_template_hash;

  // Whether a controller replaces a deleted pod of this key (every kind but
  // a bare pod).
  bool Replaced() const { return workload != kBarePods; }

  bool operator==(const PodTemplateKey&) const = default;
};
// Of a pod's metadata as the cache keeps it.
PodTemplateKey PodTemplateKeyOf(const api::ObjectMeta& pod_metadata);
// Of a whole Pod object, as admission sees it: for a bare pod without the
// digest annotation, BarePodDigest of the object.
PodTemplateKey PodTemplateKeyOf(const nlohmann::json& pod);
// A bare pod's template digest: api::PodTemplateHash over each container's
// (init containers first) name, image, command and args. The rest of the
// spec is left out because it is not stable across re-creations of the same
// pod (the ServiceAccount admission plugin adds a token volume with a random
// name before any webhook runs), and these are what decide whether a
// preloaded library loads.
std::string BarePodDigest(const nlohmann::json& pod);

// A pod template the circuit breaker stopped injecting into: an entry of the
// policy's status.injectionSuspended.
struct InjectionSuspension {
  std::string policy;  // the AllocatorPolicy whose status holds it
  std::string workload;
  std::string pod_template_hash;
  int64_t policy_generation = 0;
  std::string message;  // the loader's words, as recorded
};

// The suspensions in an AllocatorPolicy object's status.injectionSuspended;
// malformed entries are left out.
std::vector<InjectionSuspension> SuspensionsOfPolicy(const nlohmann::json& policy_object);

struct PodInjectionInput {
  nlohmann::json pod;  // AdmissionRequest.object; metadata.name may be empty (generateName)
  std::string ns;      // AdmissionRequest.namespace
  std::vector<api::AllocatorPolicy> policies;  // the AllocatorPolicies of `ns`
  std::string operator_namespace;
  InjectionOptions options;
  bool native_sidecars = false;  // the API server supports restartPolicy: Always init containers
  std::vector<InjectionSuspension> suspensions;  // of the policies of `ns`
};

// kSuspended: nothing injected; the patch only writes
// api::kInjectionSuspendedAnnotation.
enum class PodInjectionAction { kSkip, kInject, kSuspended };

struct PodInjectionDecision {
  PodInjectionAction action = PodInjectionAction::kSkip;
  // Why the pod was skipped, or what was injected; one sentence for logs/events.
  std::string reason;
  // RFC 6902 JSON Patch against input.pod; an empty array when skipped, the
  // suspension annotation alone when suspended.
  nlohmann::json patch = nlohmann::json::array();
  // The annotations the patch writes (empty when skipped).
  std::map<std::string, std::string> annotations;
  // What a user's explicit settings kept from being applied, and policy
  // conflicts; each a sentence for a Warning event on the pod's owner.
  std::vector<std::string> conflicts;
  // The policy that governs the pod, when exactly one does.
  std::optional<api::AllocatorPolicy> policy;
};

PodInjectionDecision DecidePodInjection(const PodInjectionInput& input);

// The guard sidecar for `policy`: `allocguard guard --threshold-bytes N
// --action A --interval 2s --expected-allocator X` (the threshold flag only
// when the policy sets one), env POD_NAME, POD_NAMESPACE and POD_UID from the
// downward API, restricted security context. When injected into a pod it
// also runs as the governed containers' runAsUser/runAsGroup when they state
// one, gets --limit-bytes from a single governed container's memory limit,
// and with Backpressure the pod gets a readinessGates entry for
// api::kMemoryHeadroomCondition (docs/guard.md). With native_sidecar it carries restartPolicy:
// Always and belongs in initContainers.
nlohmann::json GuardContainer(const api::AllocatorPolicy& policy, const InjectionOptions& options,
                              bool native_sidecar);

// "web-7d9f" or, for a pod named by generateName, "web-7d9f-*"; for messages
// (api::Pod::DisplayName).
std::string PodDisplayName(const nlohmann::json& pod);

}  // namespace allocguard::admission
