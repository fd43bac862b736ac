#include "operator/manager/webhook_serving.h"

#include <arpa/inet.h>

#include <atomic>
#include <thread>

#include <spdlog/spdlog.h>

#include "controllers/canary_decision.h"
#include "controllers/reconcilers.h"
#include "controllers/rollout_decision.h"
#include "operator/admission/deployment_gate.h"
#include "operator/admission/pod_injection.h"
#include "operator/admission/validation.h"
#include "operator/api/names.h"
#include "operator/api/policy.h"
#include "operator/certs/certificate_manager.h"
#include "operator/certs/certificate_metrics.h"
#include "operator/certs/file_certificate_source.h"
#include "operator/common/base64.h"
#include "operator/kube/config.h"
#include "operator/manager/self_probe.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).
const auto& Field = kube::FieldOrNull;
const auto& Str = kube::StringField;
const auto& StringMap = kube::StringMap;

constexpr char kFieldManager[] = "allocguard-operator";

// AdmissionServer answers it on a worker, like a review.
constexpr char kSelfProbePath[] = "/healthz";

// The webhook port as this process reaches it: a wildcard bind is probed on
// loopback.
std::string SelfProbeUrl(const std::string& host, int port) {
  std::string h = host;
  if (h.empty() || h == "0.0.0.0") h = "127.0.0.1";
  if (h == "::") h = "::1";
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return "https://" + h + ":" + std::to_string(port);
}

bool IsIpAddress(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// The namespaces no webhook is ever called for.
json NamespaceSelector(const std::string& operator_namespace) {
  return {{"matchExpressions",
           {{{"key", "kubernetes.io/metadata.name"},
             {"operator", "NotIn"},
             {"values", {"kube-system", operator_namespace}}}}}};
}

json Webhook(const std::string& name, const std::string& url, const std::string& ca_bundle_b64,
             json rules, const std::string& operator_namespace) {
  json client_config = {{"url", url}};
  if (!ca_bundle_b64.empty()) client_config["caBundle"] = ca_bundle_b64;
  return {{"name", name},
          {"clientConfig", client_config},
          {"rules", std::move(rules)},
          // Fail open: an operator outage must never stop Pods or rollouts;
          // what was admitted meanwhile shows up as drift.
          {"failurePolicy", "Ignore"},
          {"sideEffects", "NoneOnDryRun"},
          {"admissionReviewVersions", {"v1"}},
          {"timeoutSeconds", 5},
          {"matchPolicy", "Equivalent"},
          {"namespaceSelector", NamespaceSelector(operator_namespace)}};
}

json Rule(std::vector<std::string> operations, const std::string& group, const std::string& version,
          const std::string& resource) {
  return {{"operations", operations},
          {"apiGroups", {group}},
          {"apiVersions", {version}},
          {"resources", {resource}},
          {"scope", "Namespaced"}};
}

class WebhookServingImpl final : public WebhookServing {
 public:
  WebhookServingImpl(const ManagerOptions& options, const WebhookServingDeps& deps)
      : options_(options), deps_(deps) {}
  ~WebhookServingImpl() override { Stop(); }

  Status Init() {
    // Who the operator is, so the unpause check can tell the operator's own
    // release of a hold from a user's edit.
    const kube::ResourceType reviews{"authentication.k8s.io", "v1", "selfsubjectreviews",
                                     "SelfSubjectReview", false};
    auto self = deps_.client->Create(
        reviews, "", {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
    if (self.ok()) {
      own_username_ = Str(Field(Field(*self, "status"), "userInfo"), "username");
      spdlog::info("operator identity: {}", own_username_);
    } else {
      spdlog::warn(
          "cannot learn the operator's identity ({}); manual unpause checks treat "
          "every caller alike",
          self.status().message());
    }
    // --- certificate ---
    if (!options_.webhook_cert_dir.empty()) {
      certs::FileCertificateSourceOptions fo;
      fo.cert_file = options_.webhook_cert_dir + "/tls.crt";
      fo.key_file = options_.webhook_cert_dir + "/tls.key";
      fo.ca_file = options_.webhook_cert_dir + "/ca.crt";
      fo.clock = deps_.clock;
      AG_ASSIGN_OR_RETURN(auto files, certs::FileCertificateSource::Create(fo));
      source_ = std::shared_ptr<certs::CertificateSource>(std::move(files));
    } else {
      certs::CertificateManagerOptions co;
      co.secret_namespace = options_.operator_namespace;
      co.secret_name = options_.webhook_secret_name;
      co.dns_names =
          certs::ServiceDnsNames(options_.webhook_service_name, options_.operator_namespace);
      for (const std::string& san : options_.webhook_extra_sans) {
        (IsIpAddress(san) ? co.ip_addresses : co.dns_names).push_back(san);
      }
      co.mutating_webhook_configurations = {options_.mutating_webhook_config};
      co.validating_webhook_configurations = {options_.validating_webhook_config};
      co.clock = deps_.clock;
      manager_ = std::make_shared<certs::CertificateManager>(deps_.client, co);
      source_ = manager_;
      // The first round creates (or adopts) the Secret; retry briefly, as
      // the API server may still be coming up with the operator.
      Status first = manager_->Tick();
      for (int i = 0; i < 10 && source_->Current() == nullptr; ++i) {
        spdlog::warn("webhook certificate: {} (retrying)", first.message());
        std::this_thread::sleep_for(std::chrono::seconds(1));
        first = manager_->Tick();
      }
      if (source_->Current() == nullptr) {
        return Unavailable("no webhook certificate: " + first.message());
      }
    }

    // --- TLS server and routes ---
    AG_ASSIGN_OR_RETURN(auto hp, ParseBindAddress(options_.webhook_bind_address));
    net::HttpsServerOptions so;
    so.host = hp.first;
    so.port = hp.second;
    so.worker_threads = 4;
    so.key_pair = certs::TlsKeyPairProviderOf(source_);
    so.heartbeat = &loop_heartbeat_;
    AG_ASSIGN_OR_RETURN(server_, net::NewHttpsServer(so));
    admission_ =
        std::make_unique<webhook::AdmissionServer>(server_.get(), deps_.clock, deps_.metrics);
    admission_->Handle(kPodMutationPath,
                       [this](const webhook::AdmissionRequest& r) { return MutatePod(r); });
    admission_->Handle(kDeploymentMutationPath,
                       [this](const webhook::AdmissionRequest& r) { return MutateDeployment(r); });
    admission_->Handle(kDeploymentValidationPath, [this](const webhook::AdmissionRequest& r) {
      return ValidateDeployment(r);
    });
    admission_->Handle(kPolicyValidationPath,
                       [this](const webhook::AdmissionRequest& r) { return ValidatePolicy(r); });
    admission_->Handle(kCanaryValidationPath,
                       [this](const webhook::AdmissionRequest& r) { return ValidateCanary(r); });
    AG_RETURN_IF_ERROR(server_->Bind());
    probe_ = std::make_unique<SelfProbe>(
        SelfProbeOptions{.base_url = SelfProbeUrl(hp.first, server_->port()),
                         .path = kSelfProbePath,
                         .clock = deps_.clock != nullptr ? deps_.clock : RealClock::Get()});
    thread_ = std::thread([this] { server_->Serve(); });
    serving_ = true;
    if (deps_.metrics != nullptr) {
      certs::AddCertificateExpiryMetrics(*deps_.metrics, source_,
                                         deps_.clock != nullptr ? deps_.clock : RealClock::Get());
    }
    // URL mode: register the webhooks only once they can be answered.
    if (!options_.webhook_url.empty()) AG_RETURN_IF_ERROR(ApplyConfigurations());
    return Status::Ok();
  }

  void Tick() override {
    if (manager_ != nullptr) {
      Status s = manager_->Tick();
      if (!s.ok()) spdlog::warn("webhook certificate upkeep: {}", s.message());
    }
    if (!options_.webhook_url.empty()) {
      Status s = ApplyConfigurations();
      if (!s.ok()) spdlog::warn("webhook configurations: {}", s.message());
    }
  }

  bool Ready(std::string* why) const override {
    if (!serving_) {
      *why = "the TLS server is not serving";
      return false;
    }
    if (source_->Current() == nullptr) {
      *why = "no certificate";
      return false;
    }
    Status answered = probe_->Check();
    if (!answered.ok()) {
      *why = answered.message();
      return false;
    }
    return true;
  }

  Clock::Duration StalledFor(Clock::TimePoint now) const override {
    return serving_ ? loop_heartbeat_.StalledFor(now) : Clock::Duration::zero();
  }

  int port() const override { return server_ == nullptr ? 0 : server_->port(); }

  void Stop() override {
    if (server_ != nullptr) server_->Stop();
    if (thread_.joinable()) thread_.join();
    serving_ = false;
  }

 private:
  // Writes both webhook configurations (server-side apply), with the current
  // CA bundle, so that a restart or a rotation leaves them correct.
  Status ApplyConfigurations() {
    std::shared_ptr<const certs::KeyPair> pair = source_->Current();
    const std::string ca = pair == nullptr ? "" : EncodeBase64(pair->ca_bundle_pem);
    const std::string& base = options_.webhook_url;
    const std::string& opns = options_.operator_namespace;
    json pods_rule = json::array({Rule({"CREATE"}, "", "v1", "pods")});
    json deploy_rules = json::array({Rule({"CREATE", "UPDATE"}, "apps", "v1", "deployments")});
    json pod_hook = Webhook("pods.allocguard.io", base + kPodMutationPath, ca, pods_rule, opns);
    pod_hook["reinvocationPolicy"] = "IfNeeded";
    json mutating = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                     {"kind", "MutatingWebhookConfiguration"},
                     {"metadata", {{"name", options_.mutating_webhook_config}}},
                     {"webhooks",
                      {pod_hook, Webhook("deployments.allocguard.io",
                                         base + kDeploymentMutationPath, ca, deploy_rules, opns)}}};
    json validating = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "ValidatingWebhookConfiguration"},
        {"metadata", {{"name", options_.validating_webhook_config}}},
        {"webhooks",
         {Webhook("deployments.validate.allocguard.io", base + kDeploymentValidationPath, ca,
                  json::array({Rule({"UPDATE"}, "apps", "v1", "deployments")}), opns),
          Webhook("allocatorpolicies.validate.allocguard.io", base + kPolicyValidationPath, ca,
                  json::array({Rule({"CREATE", "UPDATE", "DELETE"}, api::kGroup, api::kVersion,
                                    "allocatorpolicies")}),
                  opns),
          Webhook("replaycanaries.validate.allocguard.io", base + kCanaryValidationPath, ca,
                  json::array(
                      {Rule({"CREATE", "UPDATE"}, api::kGroup, api::kVersion, "replaycanaries")}),
                  opns)}}};
    auto m = deps_.client->Apply(kube::MutatingWebhookConfigurations(), mutating, kFieldManager);
    if (!m.ok()) return m.status().WithContext("MutatingWebhookConfiguration");
    auto v =
        deps_.client->Apply(kube::ValidatingWebhookConfigurations(), validating, kFieldManager);
    if (!v.ok()) return v.status().WithContext("ValidatingWebhookConfiguration");
    return Status::Ok();
  }

  std::vector<api::AllocatorPolicy> Policies(const std::string& ns) const {
    return controllers::PoliciesInNamespace(*deps_.policies, ns);
  }

  void Event(const json& regarding, bool warning, const std::string& reason,
             const std::string& note) const {
    if (deps_.events == nullptr) return;
    Status s = deps_.events->Record(regarding,
                                    warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                                    reason, reason, note);
    if (!s.ok()) spdlog::warn("event {}: {}", reason, s.message());
  }

  webhook::AdmissionResponse MutatePod(const webhook::AdmissionRequest& request) const {
    admission::PodInjectionInput in;
    in.pod = request.object;
    in.ns = request.namespace_;
    in.policies = Policies(request.namespace_);
    in.operator_namespace = options_.operator_namespace;
    in.options.image = options_.image;
    in.native_sidecars = true;  // Kubernetes >= 1.29 (beta, on by default); GA in 1.33
    // The circuit breaker's suspensions, from the policies' status.
    for (const json& p :
         deps_.policies->ByIndex(controllers::kNamespaceIndex, request.namespace_)) {
      for (admission::InjectionSuspension& s : admission::SuspensionsOfPolicy(p)) {
        in.suspensions.push_back(std::move(s));
      }
    }
    admission::PodInjectionDecision d = admission::DecidePodInjection(in);
    webhook::AdmissionResponse response;
    if (d.action != admission::PodInjectionAction::kSkip) response.patch = d.patch;
    if (d.action == admission::PodInjectionAction::kSuspended) {
      response.warnings.push_back("allocguard: " + d.reason);
    }
    for (const std::string& c : d.conflicts) response.warnings.push_back("allocguard: " + c);
    if (!d.conflicts.empty() && d.policy.has_value() && !request.dry_run) {
      if (auto policy = deps_.policies->Get(d.policy->ns + "/" + d.policy->name)) {
        std::string note = "Pod " + admission::PodDisplayName(request.object) + ": ";
        for (const std::string& c : d.conflicts) note += c + " ";
        Event(*policy, true, "InjectionConflict", note);
      }
    }
    return response;
  }

  webhook::AdmissionResponse MutateDeployment(const webhook::AdmissionRequest& request) const {
    if (request.operation != "CREATE" && request.operation != "UPDATE") {
      return webhook::AdmissionResponse::Allow();
    }
    const json& tmpl = Field(Field(request.object, "spec"), "template");
    admission::GateInput in;
    in.operation = request.operation == "CREATE" ? admission::AdmissionOperation::kCreate
                                                 : admission::AdmissionOperation::kUpdate;
    in.old_deployment = request.old_object;
    in.new_deployment = request.object;
    in.policy = controllers::GoverningPolicy(Policies(request.namespace_),
                                             StringMap(Field(Field(tmpl, "metadata"), "labels")));
    in.operator_namespace = options_.operator_namespace;
    const std::string ns = request.namespace_;
    const std::string name = request.name;
    const std::string policy_key =
        in.policy.has_value() ? controllers::CanaryPolicyKey(*in.policy) : "";
    // A Flat verdict lets a template through only from a canary that proves
    // it (controllers::CanaryDistrust): never by the canary's name alone.
    // (Called only within DecideDeploymentGate below: the request and the
    // policy outlive it, so they are referred to, not copied.)
    const json& deployment = request.object;
    const std::optional<api::AllocatorPolicy>& policy = in.policy;
    in.has_flat_verdict = [this, &ns, &name, &policy_key, &deployment,
                           &policy](const std::string& hash) {
      if (!policy.has_value()) return false;
      auto canary = deps_.canaries->Get(ns + "/" + controllers::CanaryName(name, hash, policy_key));
      return canary.has_value() && Str(Field(*canary, "status"), "verdict") == "Flat" &&
             controllers::CanaryDistrust(*canary, deployment, hash, *policy).empty();
    };
    admission::GateDecision d = admission::DecideDeploymentGate(in);
    webhook::AdmissionResponse response;
    response.patch = d.patch;
    if (d.action == admission::GateAction::kHold) {
      response.warnings.push_back("allocguard: " + d.reason);
    }
    return response;
  }

  // Kubernetes' own controllers act for the cluster, not for a user: the
  // namespace controller deletes every policy of a namespace being deleted,
  // the garbage collector updates owned canaries. They are not asked for
  // allocguard's permissions (a refusal would leave a namespace stuck
  // Terminating).
  static bool IsClusterController(const webhook::UserInfo& user) {
    return user.username.rfind("system:serviceaccount:kube-system:", 0) == 0 ||
           user.username == "system:kube-controller-manager";
  }

  admission::Requester RequesterOf(const webhook::AdmissionRequest& request) const {
    if (IsClusterController(request.user_info)) return admission::Requester::kOperator;
    if (own_username_.empty()) return admission::Requester::kUnknown;
    return request.user_info.username == own_username_ ? admission::Requester::kOperator
                                                       : admission::Requester::kOther;
  }

  // Whether the request's user may `verb` `resource` (of `group`) in the
  // request's namespace, asked of the API server with a SubjectAccessReview
  // for the identity the API server authenticated (user, uid, groups,
  // extra). "" when allowed; otherwise why not. An error of the review
  // itself refuses (fail closed): acting without knowing would lend the
  // operator's rights.
  std::string AccessDenial(const webhook::AdmissionRequest& request, const std::string& verb,
                           const std::string& group, const std::string& resource) const {
    const webhook::UserInfo& user = request.user_info;
    json spec = {{"user", user.username},
                 {"groups", user.groups},
                 {"resourceAttributes",
                  {{"namespace", request.namespace_},
                   {"verb", verb},
                   {"group", group},
                   {"resource", resource}}}};
    if (!user.uid.empty()) spec["uid"] = user.uid;
    if (!user.extra.empty()) spec["extra"] = user.extra;
    const kube::ResourceType reviews{"authorization.k8s.io", "v1", "subjectaccessreviews",
                                     "SubjectAccessReview", false};
    auto review = deps_.client->Create(reviews, "",
                                       {{"apiVersion", "authorization.k8s.io/v1"},
                                        {"kind", "SubjectAccessReview"},
                                        {"spec", spec}});
    const std::string who = "user \"" + user.username + "\"";
    const std::string what = verb + " " + resource + (group.empty() ? "" : "." + group) +
                             " in namespace " + request.namespace_;
    if (!review.ok()) {
      return "cannot check whether " + who + " may " + what + ": " + review.status().message();
    }
    const json& status = Field(*review, "status");
    if (Field(status, "allowed") == true) return "";
    std::string reason = Str(status, "reason");
    return who + " may not " + what + (reason.empty() ? "" : " (" + reason + ")");
  }

  // "" when the request may lift a hold (decision.needs_override), else the
  // denial: it names the user, what the update does and the permission.
  std::string OverrideDenial(const webhook::AdmissionRequest& request,
                             const std::string& needs_override) const {
    const std::string denial =
        AccessDenial(request, admission::kOverrideVerb, api::kGroup, "allocatorpolicies");
    if (denial.empty()) return "";
    return "this update " + needs_override + ", which allocguard allows only to users with the " +
           std::string(admission::kOverrideVerb) +
           " verb on allocatorpolicies.allocguard.io in this namespace (the chart's "
           "allocguard-override ClusterRole, aggregated into admin): " +
           denial;
  }

  webhook::AdmissionResponse ValidateDeployment(const webhook::AdmissionRequest& request) const {
    if (request.operation != "UPDATE") return webhook::AdmissionResponse::Allow();
    admission::ValidationDecision d = admission::ValidateDeploymentUpdate(
        request.old_object, request.object, RequesterOf(request));
    if (!d.allowed) return webhook::AdmissionResponse::Deny(d.message);
    if (!d.needs_override.empty()) {
      if (std::string denial = OverrideDenial(request, d.needs_override); !denial.empty()) {
        return webhook::AdmissionResponse::Deny(denial);
      }
    }
    if ((!d.event_reason.empty() || !d.needs_override.empty()) && !request.dry_run) {
      json regarding = request.object;
      regarding["apiVersion"] = "apps/v1";
      regarding["kind"] = "Deployment";
      std::string note = d.event_reason.empty() ? d.needs_override : d.event_reason;
      Event(regarding, true, "HoldOverridden",
            note + " (by " + request.user_info.username + ", who may override holds here)");
    }
    return webhook::AdmissionResponse::Allow();
  }

  // The names of the Deployments in the namespace that `policy` holds now.
  std::vector<std::string> HeldBy(const api::AllocatorPolicy& policy) const {
    std::vector<std::string> held;
    for (const json& d : deps_.deployments->ByIndex(controllers::kNamespaceIndex, policy.ns)) {
      const json& meta = Field(d, "metadata");
      if (Str(Field(meta, "annotations"), api::kHeldCandidateAnnotation).empty()) continue;
      const json& tmpl_meta = Field(Field(Field(d, "spec"), "template"), "metadata");
      if (!api::SelectorMatches(policy.spec.selector, StringMap(Field(tmpl_meta, "labels")))) {
        continue;
      }
      held.push_back(Str(meta, "name"));
    }
    return held;
  }

  webhook::AdmissionResponse ValidatePolicy(const webhook::AdmissionRequest& request) const {
    // Deleting an Enforce policy, or relaxing its mode, lifts its holds.
    if (request.operation == "DELETE" || request.operation == "UPDATE") {
      auto old_policy = api::ParseAllocatorPolicy(request.old_object);
      std::optional<api::AllocatorPolicy> new_policy;
      if (request.operation == "UPDATE") {
        auto parsed = api::ParseAllocatorPolicy(request.object);
        if (parsed.ok()) new_policy = std::move(parsed).value();
      }
      if (old_policy.ok() && (request.operation == "DELETE" || new_policy.has_value()) &&
          RequesterOf(request) != admission::Requester::kOperator) {
        admission::ValidationDecision change = admission::ValidatePolicyChange(
            *old_policy, new_policy.has_value() ? &*new_policy : nullptr, HeldBy(*old_policy));
        if (!change.needs_override.empty()) {
          if (std::string denial = OverrideDenial(request, change.needs_override);
              !denial.empty()) {
            return webhook::AdmissionResponse::Deny(denial);
          }
          if (!request.dry_run) {
            json regarding = request.old_object;
            regarding["apiVersion"] = api::kApiVersion;
            regarding["kind"] = "AllocatorPolicy";
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
    admission::ValidationDecision d = admission::ValidatePolicy(*candidate, others);
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
  webhook::AdmissionResponse ValidateCanary(const webhook::AdmissionRequest& request) const {
    // An update that leaves the spec alone (labels, finalizers, the garbage
    // collector's owner references, a deletion in progress) changes nothing
    // the operator would run.
    if (request.operation == "UPDATE" &&
        Field(request.object, "spec") == Field(request.old_object, "spec")) {
      return webhook::AdmissionResponse::Allow();
    }
    auto canary = api::ParseReplayCanary(request.object);
    if (!canary.ok()) return webhook::AdmissionResponse::Deny(canary.status().message());
    if (RequesterOf(request) == admission::Requester::kOperator) {
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
      if (auto target =
              deps_.deployments->Get(request.namespace_ + "/" + canary->spec.target_name)) {
        target_hash = Str(*target, controllers::kCachedTemplateHashField);
      }
    }
    if (std::string refused = controllers::RefuseTemplateRights(*canary, target_hash);
        !refused.empty()) {
      return webhook::AdmissionResponse::Deny(refused);
    }
    return webhook::AdmissionResponse::Allow();
  }

  ManagerOptions options_;
  WebhookServingDeps deps_;
  std::shared_ptr<certs::CertificateSource> source_;
  std::shared_ptr<certs::CertificateManager> manager_;
  Heartbeat loop_heartbeat_;  // outlives server_, whose event loop beats it
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<SelfProbe> probe_;
  std::unique_ptr<webhook::AdmissionServer> admission_;
  std::thread thread_;
  std::atomic<bool> serving_{false};
  std::string own_username_;
};

}  // namespace

Result<std::unique_ptr<WebhookServing>> WebhookServing::Start(const ManagerOptions& options,
                                                              const WebhookServingDeps& deps) {
  auto serving = std::make_unique<WebhookServingImpl>(options, deps);
  AG_RETURN_IF_ERROR(serving->Init());
  return std::unique_ptr<WebhookServing>(std::move(serving));
}

}  // namespace allocguard::manager
