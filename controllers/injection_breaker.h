#pragma once

// The injection circuit breaker: governed pods whose container cannot start
// with the injected allocator (the dynamic loader refuses the preloaded
// library) make the policy stop injecting into their pod template, so the
// workload runs on its system allocator instead of not at all. Pure
// functions; the policy reconciler writes the result into the policy's
// status (injectionSuspended, condition InjectionFailing), records the
// events and deletes the failing pods (docs/injection.md).
//
// A pod trips the breaker when all of these hold:
//   - it is governed by the policy and was injected by it at the policy's
//     current generation (annotations kInjectedAnnotation, kPolicyAnnotation,
//     kPolicyGenerationAnnotation);
//   - it has a PodTemplateKey (admission/pod_injection.h): a Deployment's,
//     StatefulSet's or DaemonSet's pod by its revision, a pod of another
//     controller (a ReplicaSet of its own, a Job) by that controller's uid,
//     a bare pod by the digest of its containers;
//   - a governed container keeps failing: it waits in CrashLoopBackOff or has
//     restartCount >= 2 (one failure can be a node hiccup; a loader error
//     repeats on every start);
//   - that container's termination message (state.terminated, else
//     lastState.terminated) holds a loader error (FindLoaderError). The
//     injection sets terminationMessagePolicy FallbackToLogsOnError, so the
//     loader's stderr lands there.
//
// The suspension is keyed on (PodTemplateKey, policy generation). For a
// Deployment, StatefulSet or DaemonSet it is recorded with the workload's
// template digest and ends, and injection resumes for new pods, when the
// policy's generation moves on, the workload's template changes (a new
// revision) or the workload is gone. For the other kinds it ends with the
// policy's generation or when no pod of its key is left.
//
// Pods are deleted only for suspensions already present in the status the
// decision read (the status the webhook reads from its cache), so that the
// controller's replacement is admitted without the allocator. Only injected
// pods that are not ready are deleted, each once; a bare pod is never
// deleted (nothing would replace it): the event says to re-create it.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "operator/admission/pod_injection.h"
#include "operator/api/policy_status.h"
#include "operator/api/types.h"
#include "operator/api/workloads.h"

namespace allocguard::controllers {

// The loader's line in `text` (a termination message, often the tail of a
// container's log) when it shows glibc's ld.so or musl's loader refusing a
// library: "error while loading shared libraries", "version `GLIBC_2.34' not
// found (required by ...)", "symbol lookup error", "cannot be preloaded",
// "invalid ELF header", "wrong ELF class", "Error relocating", "Error loading
// shared library", ... Trimmed and at most 512 bytes (cut on a UTF-8
// boundary). nullopt when no line is one.
std::optional<std::string> FindLoaderError(std::string_view text);

// A pod that trips the breaker (see the rules above).
struct InjectionFailure {
  std::string pod;
  std::string uid;
  std::string container;
  admission::PodTemplateKey key;
  std::string loader_message;
  int64_t restart_count = 0;
  std::string waiting_reason;
};

std::optional<InjectionFailure> DetectInjectionFailure(const api::AllocatorPolicy& policy,
                                                       const api::PodSummary& pod);

struct BreakerInput {
  api::AllocatorPolicy policy;
  // status.injectionSuspended as the cache holds it.
  std::vector<api::InjectionSuspendedStatus> recorded;
  // The template digest (DeploymentTemplateDigest) of each Deployment,
  // StatefulSet and DaemonSet of the policy's namespace, by "Kind/name".
  std::map<std::string, std::string> workload_templates;
  std::vector<api::PodSummary> pods;       // of the policy's namespace
  std::set<std::string> deleted_pod_uids;  // pods this operator already deleted
  std::string now_rfc3339;
};

// A template suspended by this decision: a Warning event InjectionFailing on
// the policy and on the workload.
struct SuspendedTemplate {
  std::string workload;  // "Deployment/web", "Job/migrate", "Pod"
  std::string note;
};

struct PodDeletion {
  std::string pod;
  std::string uid;   // delete precondition: this pod, not a namesake
  std::string note;  // for the Warning event on the pod
};

struct BreakerDecision {
  std::vector<api::InjectionSuspendedStatus> suspended;  // the new status.injectionSuspended
  std::vector<SuspendedTemplate> tripped;
  std::vector<PodDeletion> delete_pods;
};

BreakerDecision DecideInjectionBreaker(const BreakerInput& input);

// The digest of a workload's pod template that a suspension records (a
// Deployment, StatefulSet or DaemonSet as the cache keeps it): the informer
// cache's precomputed one, else computed from spec.template.
std::string DeploymentTemplateDigest(const api::DeploymentSummary& deployment);

}  // namespace allocguard::controllers
