#include "operator/admission/admission_handlers.h"

#include <functional>
#include <optional>

#include <spdlog/spdlog.h>

#include "controllers/canary_decision.h"
#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/admission/pod_injection.h"
#include "operator/admission/policies.h"
#include "operator/admission/validation.h"
#include "operator/admission/workload_hold.h"
#include "operator/api/canary_status.h"
#include "operator/api/deployment.h"
#include "operator/api/json_fields.h"
#include "operator/api/json_patch.h"
#include "operator/api/json_reader.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/api/workload_kinds.h"

namespace allocguard::admission {

using api::MemberOf;

namespace {

using nlohmann::json;

// A SubjectAccessReview's status: whether the user is allowed, and why not.
struct AccessReviewStatus {
  bool allowed = false;
  std::string reason;
};

AccessReviewStatus ParseAccessReviewStatus(const json& review) {
  AccessReviewStatus status;
  const json* object = api::json_fields::Member(review, "status");
  if (object == nullptr) return status;
  api::json_fields::Reader r(*object, "status", nullptr);
  r.Bool("allowed", &status.allowed);
  r.String("reason", &status.reason);
  return status;
}

// Whether the two objects have equal `key` members (absent and null alike).
bool SameMember(const json& a, const json& b, const char* key) {
  const json* x = api::json_fields::Member(a, key);
  const json* y = api::json_fields::Member(b, key);
  return x == nullptr || y == nullptr ? x == y : *x == *y;
}

// Kubernetes' own controllers act for the cluster, not for a user: the
// namespace controller deletes every policy of a namespace being deleted,
// the garbage collector updates owned canaries. They are not asked for
// allocguard's permissions (a refusal would leave a namespace stuck
// Terminating).
bool IsClusterController(const webhook::UserInfo& user) {
  return user.username.rfind("system:serviceaccount:kube-system:", 0) == 0 ||
         user.username == "system:kube-controller-manager";
}

}  // namespace

void AdmissionHandlers::RegisterOn(webhook::AdmissionServer& server) const {
  server.Handle(kPodMutationPath,
                [this](const webhook::AdmissionRequest& r) { return MutatePod(r); });
  server.Handle(kDeploymentMutationPath,
                [this](const webhook::AdmissionRequest& r) { return MutateDeployment(r); });
  server.Handle(kStatefulSetMutationPath,
                [this](const webhook::AdmissionRequest& r) { return MutateStatefulSet(r); });
  server.Handle(kDaemonSetMutationPath,
                [this](const webhook::AdmissionRequest& r) { return MutateDaemonSet(r); });
  server.Handle(kDeploymentValidationPath,
                [this](const webhook::AdmissionRequest& r) { return ValidateDeployment(r); });
  server.Handle(kStatefulSetValidationPath,
                [this](const webhook::AdmissionRequest& r) { return ValidateStatefulSet(r); });
  server.Handle(kDaemonSetValidationPath,
                [this](const webhook::AdmissionRequest& r) { return ValidateDaemonSet(r); });
  server.Handle(kPolicyValidationPath,
                [this](const webhook::AdmissionRequest& r) { return ValidatePolicy(r); });
  server.Handle(kCanaryValidationPath,
                [this](const webhook::AdmissionRequest& r) { return ValidateCanary(r); });
}

std::vector<api::AllocatorPolicy> AdmissionHandlers::Policies(const std::string& ns) const {
  return policy_cache_.InNamespace(ns);
}

void AdmissionHandlers::Event(const json& regarding, bool warning, const std::string& reason,
                              const std::string& note) const {
  if (deps_.events == nullptr) return;
  Status s = deps_.events->Record(regarding,
                                  warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                                  reason, reason, note);
  if (!s.ok()) spdlog::warn("event {}: {}", reason, s.message());
}

std::optional<std::string> AdmissionHandlers::RefusedAsHeldDaemonSetPod(
    const webhook::AdmissionRequest& request) const {
  if (request.operation != "CREATE") return std::nullopt;
  HeldDaemonSetPodInput in;
  in.pod = api::ParseObjectMeta(request.object);
  const api::OwnerReference* owner = in.pod.ControllerRef();
  // A pod's owner reference may hold anything: only a name a DaemonSet can
  // have is ever put into a request the operator makes.
  if (owner == nullptr || owner->kind != "DaemonSet" || !api::IsDnsSubdomain(owner->name)) {
    return std::nullopt;
  }
  const std::vector<api::AllocatorPolicy> policies = Policies(request.namespace_);
  if (std::none_of(policies.begin(), policies.end(), [](const api::AllocatorPolicy& p) {
        return p.spec.rollout.mode == api::RolloutMode::kEnforce;
      })) {
    return std::nullopt;
  }
  kube::ApiResult<kube::Object> read =
      deps_.client->Get(kube::DaemonSets(), request.namespace_, owner->name);
  if (read.ok()) {
    in.daemonset = api::ParseDeploymentSummary(read.value());
  } else if (!read.error().IsNotFound()) {
    spdlog::warn(
        "pod of DaemonSet {}/{}: reading the DaemonSet failed ({}); judging its hold "
        "from the cache",
        request.namespace_, owner->name, read.error().message);
    if (deps_.daemonsets != nullptr) {
      if (kube::ObjectRef cached = deps_.daemonsets->Get(request.namespace_ + "/" + owner->name)) {
        in.daemonset = api::ParseDeploymentSummary(*cached);
      }
    }
  }
  if (!in.daemonset.has_value()) return std::nullopt;
  in.policy = controllers::GoverningPolicy(policies, in.daemonset->template_labels);
  in.operator_namespace = options_.operator_namespace;
  return RefusePodOfHeldDaemonSet(in);
}

webhook::AdmissionResponse AdmissionHandlers::MutatePod(
    const webhook::AdmissionRequest& request) const {
  if (std::optional<std::string> refused = RefusedAsHeldDaemonSetPod(request)) {
    return webhook::AdmissionResponse::Deny("allocguard: " + *refused);
  }
  PodInjectionInput in;
  in.pod = request.object;
  in.ns = request.namespace_;
  in.policies = Policies(request.namespace_);
  in.operator_namespace = options_.operator_namespace;
  in.options.image = options_.image;
  in.options.guard_log_flags = options_.guard_log_flags;
  in.options.stats_agent = options_.stats_agent;
  in.native_sidecars = true;  // Kubernetes >= 1.29 (beta, on by default); GA in 1.33
  // The circuit breaker's suspensions, from the policies' status.
  for (const json& p : deps_.policies->ByIndex(controllers::kNamespaceIndex, request.namespace_)) {
    for (InjectionSuspension& s : SuspensionsOfPolicy(p)) {
      in.suspensions.push_back(std::move(s));
    }
  }
  PodInjectionDecision d = DecidePodInjection(in);
  webhook::AdmissionResponse response;
  if (d.action != PodInjectionAction::kSkip) response.patch = std::move(d.patch);
  if (d.action == PodInjectionAction::kSuspended) {
    response.warnings.push_back("allocguard: " + d.reason);
  }
  for (const std::string& c : d.conflicts) response.warnings.push_back("allocguard: " + c);
  if (!d.conflicts.empty() && d.policy.has_value() && !request.dry_run) {
    if (auto policy = deps_.policies->Get(d.policy->ns + "/" + d.policy->name)) {
      std::string note = "Pod " + PodDisplayName(request.object) + ": ";
      for (const std::string& c : d.conflicts) note += c + " ";
      Event(*policy, true, "InjectionConflict", note);
    }
  }
  return response;
}

webhook::AdmissionResponse AdmissionHandlers::MutateDeployment(
    const webhook::AdmissionRequest& request) const {
  if (request.operation != "CREATE" && request.operation != "UPDATE") {
    return webhook::AdmissionResponse::Allow();
  }
  const api::Deployment deployment_read = api::ParseDeployment(request.object);
  GateInput in;
  in.operation =
      request.operation == "CREATE" ? AdmissionOperation::kCreate : AdmissionOperation::kUpdate;
  in.old_deployment = request.old_object;
  in.new_deployment = request.object;
  in.policy = controllers::GoverningPolicy(Policies(request.namespace_),
                                           deployment_read.pod_template.metadata.labels);
  in.operator_namespace = options_.operator_namespace;
  // A Flat verdict lets a template through only from a canary that proves
  // it (controllers::CanaryDistrust): never by the canary's name alone.
  // (Called only within DecideDeploymentGate below: the request and the
  // policy outlive it, so they are referred to, not copied.)
  in.has_flat_verdict = [this, &request, &in](const std::string& hash) {
    return in.policy.has_value() && HasTrustedFlatVerdict(request.namespace_, request.object,
                                                          *in.policy, "Deployment", hash);
  };
  GateDecision d = DecideDeploymentGate(in);
  webhook::AdmissionResponse response;
  response.patch = std::move(d.patch);
  if (d.action == GateAction::kHold) {
    response.warnings.push_back("allocguard: " + d.reason);
  }
  return response;
}

bool AdmissionHandlers::HasTrustedFlatVerdict(const std::string& ns, const json& object,
                                              const api::AllocatorPolicy& policy,
                                              const std::string& kind,
                                              const std::string& hash) const {
  const std::optional<controllers::WorkloadKind> workload_kind =
      controllers::WorkloadKindFromName(kind);
  if (!workload_kind.has_value()) return false;
  // The canary is shared by every workload whose template measures alike;
  // `hash` is the object's own template's (DecideDeploymentGate asks for no
  // other).
  if (hash != api::PodTemplateHash(api::ParseDeploymentSummary(object).pod_template)) return false;
  const controllers::MeasuredTemplate measured =
      controllers::MeasuredTemplateOf(*workload_kind, object);
  auto canary =
      deps_.canaries->Get(ns + "/" + api::CanaryName(controllers::CanaryKey(measured, policy)));
  return canary != nullptr && api::CanaryStatusOf(*canary).verdict == Verdict::kFlat &&
         controllers::CanaryDistrust(api::ParseReplayCanarySummary(*canary), measured, policy)
             .empty();
}

namespace {

// Whether a template hash has a Flat canary that proves it for the policy.
using FlatVerdictOf =
    std::function<bool(const api::AllocatorPolicy& policy, const std::string& hash)>;

// A StatefulSet's or DaemonSet's CREATE or UPDATE, governed by `policy`:
// `decide` (DecideStatefulSetGate, DecideDaemonSetGate) and its answer.
webhook::AdmissionResponse HoldWorkload(const webhook::AdmissionRequest& request,
                                        std::optional<api::AllocatorPolicy> policy,
                                        const std::string& operator_namespace,
                                        const FlatVerdictOf& flat,
                                        GateDecision (*decide)(const WorkloadGateInput&)) {
  WorkloadGateInput in;
  in.operation =
      request.operation == "CREATE" ? AdmissionOperation::kCreate : AdmissionOperation::kUpdate;
  in.old_object = request.old_object;
  in.new_object = request.object;
  in.policy = std::move(policy);
  in.operator_namespace = operator_namespace;
  // Called only within `decide`: `in` outlives it.
  in.has_flat_verdict = [&in, &flat](const std::string& hash) {
    return in.policy.has_value() && flat(*in.policy, hash);
  };
  GateDecision d = decide(in);
  webhook::AdmissionResponse response;
  response.patch = std::move(d.patch);
  if (d.action == GateAction::kHold) response.warnings.push_back("allocguard: " + d.reason);
  return response;
}

bool CreateOrUpdate(const webhook::AdmissionRequest& request) {
  return request.operation == "CREATE" || request.operation == "UPDATE";
}

}  // namespace

webhook::AdmissionResponse AdmissionHandlers::MutateStatefulSet(
    const webhook::AdmissionRequest& request) const {
  if (!CreateOrUpdate(request)) return webhook::AdmissionResponse::Allow();
  const api::StatefulSet set = api::ParseStatefulSet(request.object);
  return HoldWorkload(
      request,
      controllers::GoverningPolicy(Policies(request.namespace_), set.pod_template.metadata.labels),
      options_.operator_namespace,
      [this, &request](const api::AllocatorPolicy& policy, const std::string& hash) {
        return HasTrustedFlatVerdict(request.namespace_, request.object, policy, "StatefulSet",
                                     hash);
      },
      DecideStatefulSetGate);
}

webhook::AdmissionResponse AdmissionHandlers::MutateDaemonSet(
    const webhook::AdmissionRequest& request) const {
  if (!CreateOrUpdate(request)) return webhook::AdmissionResponse::Allow();
  const api::DaemonSet set = api::ParseDaemonSet(request.object);
  return HoldWorkload(
      request,
      controllers::GoverningPolicy(Policies(request.namespace_), set.pod_template.metadata.labels),
      options_.operator_namespace,
      [this, &request](const api::AllocatorPolicy& policy, const std::string& hash) {
        return HasTrustedFlatVerdict(request.namespace_, request.object, policy, "DaemonSet", hash);
      },
      DecideDaemonSetGate);
}

Requester AdmissionHandlers::RequesterOf(const webhook::AdmissionRequest& request) const {
  if (IsClusterController(request.user_info)) return Requester::kOperator;
  if (options_.own_username.empty()) return Requester::kUnknown;
  return request.user_info.username == options_.own_username ? Requester::kOperator
                                                             : Requester::kOther;
}

// Whether the request's user may `verb` `resource` (of `group`) in the
// request's namespace, asked of the API server with a SubjectAccessReview
// for the identity the API server authenticated (user, uid, groups,
// extra). "" when allowed; otherwise why not. An error of the review
// itself refuses (fail closed): acting without knowing would lend the
// operator's rights.
std::string AdmissionHandlers::AccessDenial(const webhook::AdmissionRequest& request,
                                            const std::string& verb, const std::string& group,
                                            const std::string& resource) const {
  const webhook::UserInfo& user = request.user_info;
  json spec = {{"user", user.username},
               {"groups", user.groups},
               {"resourceAttributes",
                {{"namespace", request.namespace_},
                 {"verb", verb},
                 {"group", group},
                 {"resource", resource}}}};
  if (!user.uid.empty()) MemberOf(spec, "uid") = user.uid;
  if (!user.extra.empty()) MemberOf(spec, "extra") = user.extra;
  const kube::ResourceType reviews{"authorization.k8s.io", "v1", "subjectaccessreviews",
                                   "SubjectAccessReview", false};
  auto review = deps_.client->Create(
      reviews, "",
      {{"apiVersion", "authorization.k8s.io/v1"}, {"kind", "SubjectAccessReview"}, {"spec", spec}});
  const std::string who = "user \"" + user.username + "\"";
  const std::string what = verb + " " + resource + (group.empty() ? "" : "." + group) +
                           " in namespace " + request.namespace_;
  if (!review.ok()) {
    return "cannot check whether " + who + " may " + what + ": " + review.status().message();
  }
  const AccessReviewStatus status = ParseAccessReviewStatus(*review);
  if (status.allowed) return "";
  const std::string& reason = status.reason;
  return who + " may not " + what + (reason.empty() ? "" : " (" + reason + ")");
}

// "" when the request may lift a hold (decision.needs_override), else the
// denial: it names the user, what the update does and the permission.
std::string AdmissionHandlers::OverrideDenial(const webhook::AdmissionRequest& request,
                                              const std::string& needs_override) const {
  const std::string denial = AccessDenial(request, kOverrideVerb, api::kGroup, "allocatorpolicies");
  if (denial.empty()) return "";
  return "this update " + needs_override + ", which allocguard allows only to users with the " +
         std::string(kOverrideVerb) +
         " verb on allocatorpolicies.allocguard.io in this namespace (the chart's "
         "allocguard-override ClusterRole, aggregated into admin): " +
         denial;
}

webhook::AdmissionResponse AdmissionHandlers::AnswerHoldLift(
    const webhook::AdmissionRequest& request, const ValidationDecision& d, const char* kind) const {
  if (!d.allowed) return webhook::AdmissionResponse::Deny(d.message);
  if (!d.needs_override.empty()) {
    if (std::string denial = OverrideDenial(request, d.needs_override); !denial.empty()) {
      return webhook::AdmissionResponse::Deny(denial);
    }
  }
  if ((!d.event_reason.empty() || !d.needs_override.empty()) && !request.dry_run) {
    json regarding = request.object;
    MemberOf(regarding, "apiVersion") = "apps/v1";
    MemberOf(regarding, "kind") = kind;
    std::string note = d.event_reason.empty() ? d.needs_override : d.event_reason;
    Event(regarding, true, "HoldOverridden",
          note + " (by " + request.user_info.username + ", who may override holds here)");
  }
  return webhook::AdmissionResponse::Allow();
}

webhook::AdmissionResponse AdmissionHandlers::ValidateDeployment(
    const webhook::AdmissionRequest& request) const {
  if (request.operation != "UPDATE") return webhook::AdmissionResponse::Allow();
  return AnswerHoldLift(
      request, ValidateDeploymentUpdate(request.old_object, request.object, RequesterOf(request)),
      "Deployment");
}

webhook::AdmissionResponse AdmissionHandlers::ValidateStatefulSet(
    const webhook::AdmissionRequest& request) const {
  if (request.operation != "UPDATE") return webhook::AdmissionResponse::Allow();
  return AnswerHoldLift(
      request, ValidateStatefulSetUpdate(request.old_object, request.object, RequesterOf(request)),
      "StatefulSet");
}

webhook::AdmissionResponse AdmissionHandlers::ValidateDaemonSet(
    const webhook::AdmissionRequest& request) const {
  if (request.operation != "UPDATE") return webhook::AdmissionResponse::Allow();
  return AnswerHoldLift(
      request, ValidateDaemonSetUpdate(request.old_object, request.object, RequesterOf(request)),
      "DaemonSet");
}

std::vector<std::string> AdmissionHandlers::HeldBy(const api::AllocatorPolicy& policy) const {
  std::vector<std::string> held;
  // Deployments by name alone (as the messages always named them), the
  // other kinds as `allocguard gate` takes them.
  const std::pair<kube::Store*, const char*> kinds[] = {{deps_.deployments, ""},
                                                        {deps_.statefulsets, "statefulset/"},
                                                        {deps_.daemonsets, "daemonset/"}};
  for (const auto& [store, prefix] : kinds) {
    if (store == nullptr) continue;
    for (const json& object : store->ByIndex(controllers::kNamespaceIndex, policy.ns)) {
      // Read as a Deployment: the metadata and the template's labels, which
      // every kind's cache keeps alike.
      const api::Deployment w = api::ParseDeployment(object);
      if (!api::HoldsRollout(w.metadata)) continue;
      if (!api::SelectorMatches(policy.spec.selector, w.pod_template.metadata.labels)) continue;
      held.push_back(prefix + w.metadata.name);
    }
  }
  return held;
}

webhook::AdmissionResponse AdmissionHandlers::ValidatePolicy(
    const webhook::AdmissionRequest& request) const {
  // Deleting an Enforce policy, or relaxing its mode, lifts its holds.
  if (request.operation == "DELETE" || request.operation == "UPDATE") {
    auto old_policy = api::ParseAllocatorPolicy(request.old_object);
    std::optional<api::AllocatorPolicy> new_policy;
    if (request.operation == "UPDATE") {
      auto parsed = api::ParseAllocatorPolicy(request.object);
      if (parsed.ok()) new_policy = std::move(*parsed);
    }
    if (old_policy.ok() && (request.operation == "DELETE" || new_policy.has_value()) &&
        RequesterOf(request) != Requester::kOperator) {
      ValidationDecision change = ValidatePolicyChange(
          *old_policy, new_policy.has_value() ? &*new_policy : nullptr, HeldBy(*old_policy));
      if (!change.needs_override.empty()) {
        if (std::string denial = OverrideDenial(request, change.needs_override); !denial.empty()) {
          return webhook::AdmissionResponse::Deny(denial);
        }
        if (!request.dry_run) {
          json regarding = request.old_object;
          MemberOf(regarding, "apiVersion") = api::kApiVersion;
          MemberOf(regarding, "kind") = "AllocatorPolicy";
          Event(regarding, true, "HoldOverridden",
                "this change " + change.needs_override + " (by " + request.user_info.username +
                    ", who may override holds here)");
        }
      }
    }
    if (request.operation == "DELETE") return webhook::AdmissionResponse::Allow();
  }
  auto candidate = api::ParseAllocatorPolicy(request.object);
  if (!candidate.ok()) {
    // The schema's own validation answers for malformed specs.
    return webhook::AdmissionResponse::Allow();
  }
  std::vector<api::AllocatorPolicy> others;
  for (api::AllocatorPolicy& p : Policies(request.namespace_)) {
    if (p.name != candidate->name) others.push_back(std::move(p));
  }
  ValidationDecision d = admission::ValidatePolicy(*candidate, others);
  if (!d.allowed) return webhook::AdmissionResponse::Deny(d.message);
  return webhook::AdmissionResponse::Allow();
}

// A ReplayCanary is refused when the operator could not read it (the
// message names the field), and a hand-made one when its creator could not
// run its template themselves: they must be allowed to create Jobs in the
// namespace (the operator creates the canary's Jobs with its own account),
// and a template that is not the target Deployment's own may not ask for
// host access or another ServiceAccount (controllers::RefuseTemplateRights).
// The operator checks both again itself, so a canary admitted while the
// webhook was down gains nothing.
webhook::AdmissionResponse AdmissionHandlers::ValidateCanary(
    const webhook::AdmissionRequest& request) const {
  // An update that leaves the spec alone (labels, finalizers, the garbage
  // collector's owner references, a deletion in progress) changes nothing
  // the operator would run.
  if (request.operation == "UPDATE" && SameMember(request.object, request.old_object, "spec")) {
    return webhook::AdmissionResponse::Allow();
  }
  auto canary = api::ParseReplayCanary(request.object);
  if (!canary.ok()) return webhook::AdmissionResponse::Deny(canary.status().message());
  if (RequesterOf(request) == Requester::kOperator) {
    return webhook::AdmissionResponse::Allow();
  }
  if (std::string denial = AccessDenial(request, "create", "batch", "jobs"); !denial.empty()) {
    return webhook::AdmissionResponse::Deny(
        "a ReplayCanary runs its template as Jobs, which allocguard creates with its own "
        "account; " +
        denial);
  }
  std::string target_hash;
  if (canary->spec.target_kind == "Deployment") {
    if (auto target = deps_.deployments->Get(request.namespace_ + "/" + canary->spec.target_name)) {
      api::json_fields::Reader(*target, "", nullptr)
          .String(controllers::kCachedTemplateHashField, &target_hash);
    }
  }
  if (std::string refused = controllers::RefuseTemplateRights(*canary, target_hash);
      !refused.empty()) {
    return webhook::AdmissionResponse::Deny(refused);
  }
  return webhook::AdmissionResponse::Allow();
}

}  // namespace allocguard::admission
