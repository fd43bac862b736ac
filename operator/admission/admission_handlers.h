#pragma once

// The handlers behind the admission webhooks' paths: each turns one parsed
// AdmissionRequest into the pure decisions of operator/admission and answers.
// No TLS and no sockets here: WebhookServing registers them on its server;
// the fuzz targets (fuzz/) call them directly.
//
// Thread-safe: the handlers only read the stores, and the client and the
// event recorder are thread-safe.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/admission/policy_cache.h"
#include "operator/admission/validation.h"
#include "operator/api/types.h"
#include "operator/kube/client.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::admission {

inline constexpr char kPodMutationPath[] = "/mutate-v1-pod";
inline constexpr char kDeploymentMutationPath[] = "/mutate-apps-v1-deployment";
inline constexpr char kDeploymentValidationPath[] = "/validate-apps-v1-deployment";
inline constexpr char kStatefulSetMutationPath[] = "/mutate-apps-v1-statefulset";
inline constexpr char kDaemonSetMutationPath[] = "/mutate-apps-v1-daemonset";
inline constexpr char kStatefulSetValidationPath[] = "/validate-apps-v1-statefulset";
inline constexpr char kDaemonSetValidationPath[] = "/validate-apps-v1-daemonset";
inline constexpr char kPolicyValidationPath[] = "/validate-allocguard-io-v1alpha1-allocatorpolicy";
inline constexpr char kCanaryValidationPath[] = "/validate-allocguard-io-v1alpha1-replaycanary";

struct AdmissionHandlerOptions {
  std::string operator_namespace;
  std::string image;  // the allocguard image the Pod injection adds
  // The operator's own user name ("" when unknown), to tell its own release
  // of a hold from a user's edit.
  std::string own_username;
  // Flags the injected guard gets so that it logs as the operator does
  // ("--log-format json", ...; empty with the defaults).
  std::vector<std::string> guard_log_flags;
  // The image ships the stats agent (StatsAgentShipped): policies with
  // spec.stats on get it preloaded (InjectionOptions::stats_agent).
  bool stats_agent = false;
};

// All must outlive the handlers; none may be null except events,
// statefulsets and daemonsets (without them, a policy change is checked
// against held Deployments only).
struct AdmissionHandlerDeps {
  kube::Client* client = nullptr;  // SubjectAccessReviews for hold overrides
  kube::Store* policies = nullptr;
  kube::Store* canaries = nullptr;
  kube::Store* deployments = nullptr;  // slim (api::SlimDeployment)
  kube::EventRecorder* events = nullptr;
  kube::Store* statefulsets = nullptr;  // slim (api::SlimStatefulSet)
  kube::Store* daemonsets = nullptr;    // slim (api::SlimDeployment)
};

class AdmissionHandlers {
 public:
  AdmissionHandlers(AdmissionHandlerOptions options, AdmissionHandlerDeps deps)
      : options_(std::move(options)), deps_(deps), policy_cache_(deps_.policies) {}

  // Serves each handler below on its path. This object must outlive server.
  void RegisterOn(webhook::AdmissionServer& server) const;

  // kPodMutationPath, Pod CREATE: allocator injection; a pod a held
  // DaemonSet's controller creates is refused (rule D4, workload_hold.h).
  webhook::AdmissionResponse MutatePod(const webhook::AdmissionRequest& request) const;
  // kDeploymentMutationPath, Deployment CREATE/UPDATE: the gate.
  webhook::AdmissionResponse MutateDeployment(const webhook::AdmissionRequest& request) const;
  // kStatefulSetMutationPath, StatefulSet CREATE/UPDATE: the hold
  // (DecideStatefulSetGate, workload_hold.h).
  webhook::AdmissionResponse MutateStatefulSet(const webhook::AdmissionRequest& request) const;
  // kDaemonSetMutationPath, DaemonSet CREATE/UPDATE: the hold
  // (DecideDaemonSetGate).
  webhook::AdmissionResponse MutateDaemonSet(const webhook::AdmissionRequest& request) const;
  // kDeploymentValidationPath, Deployment UPDATE: no manual unpause, and
  // lifting a hold needs the override permission (ValidateDeploymentUpdate).
  webhook::AdmissionResponse ValidateDeployment(const webhook::AdmissionRequest& request) const;
  // kStatefulSetValidationPath, kDaemonSetValidationPath, UPDATE: the same
  // for a held StatefulSet or DaemonSet (ValidateStatefulSetUpdate,
  // ValidateDaemonSetUpdate), answered by the same shell.
  webhook::AdmissionResponse ValidateStatefulSet(const webhook::AdmissionRequest& request) const;
  webhook::AdmissionResponse ValidateDaemonSet(const webhook::AdmissionRequest& request) const;
  // kPolicyValidationPath: overlapping policies, hold-lifting changes.
  webhook::AdmissionResponse ValidatePolicy(const webhook::AdmissionRequest& request) const;
  // kCanaryValidationPath: unreadable canaries, creators' rights.
  webhook::AdmissionResponse ValidateCanary(const webhook::AdmissionRequest& request) const;

 private:
  std::vector<api::AllocatorPolicy> Policies(const std::string& ns) const;
  // Rule D4 for a Pod CREATE: why it must be refused, or nullopt. Reads the
  // DaemonSet its controller reference names only when an Enforce policy is
  // in the namespace: by a GET (a hold a moment old is not yet in the cache),
  // or from the cache when the GET fails.
  std::optional<std::string> RefusedAsHeldDaemonSetPod(
      const webhook::AdmissionRequest& request) const;
  void Event(const nlohmann::json& regarding, bool warning, const std::string& reason,
             const std::string& note) const;
  Requester RequesterOf(const webhook::AdmissionRequest& request) const;
  std::string AccessDenial(const webhook::AdmissionRequest& request, const std::string& verb,
                           const std::string& group, const std::string& resource) const;
  std::string OverrideDenial(const webhook::AdmissionRequest& request,
                             const std::string& needs_override) const;
  // Answers a workload UPDATE with the hold-lifting decision `d`: refused,
  // refused for want of the override permission, or allowed (an override
  // recorded as a HoldOverridden event on the object, of `kind`).
  webhook::AdmissionResponse AnswerHoldLift(const webhook::AdmissionRequest& request,
                                            const ValidationDecision& d, const char* kind) const;
  // The workloads of the policy's namespace that it holds now, as
  // ValidatePolicyChange names them.
  std::vector<std::string> HeldBy(const api::AllocatorPolicy& policy) const;
  // Whether `hash`, the template of the workload `object` (of `kind`, in
  // `ns`), has a Flat canary that proves it (controllers::CanaryDistrust):
  // never by the canary's name alone.
  bool HasTrustedFlatVerdict(const std::string& ns, const nlohmann::json& object,
                             const api::AllocatorPolicy& policy, const std::string& kind,
                             const std::string& hash) const;

  AdmissionHandlerOptions options_;
  AdmissionHandlerDeps deps_;
  // The policies are parsed once per version, not on every review.
  PolicyCache policy_cache_;
};

}  // namespace allocguard::admission
