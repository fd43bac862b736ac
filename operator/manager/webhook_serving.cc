#include "operator/manager/webhook_serving.h"

#include <arpa/inet.h>

#include <atomic>
#include <thread>

#include <spdlog/spdlog.h>

#include "operator/api/names.h"
#include "operator/certs/certificate_manager.h"
#include "operator/certs/certificate_metrics.h"
#include "operator/certs/file_certificate_source.h"
#include "operator/common/base64.h"
#include "operator/kube/config.h"
#include "operator/kube/object.h"
#include "operator/manager/self_probe.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::manager {
namespace {

// The flags that make an injected guard log as this operator does; none with
// the defaults, so a default install's injected pods stay as they were.
std::vector<std::string> GuardLogFlags(const ManagerOptions& options) {
  const ManagerOptions defaults;
  std::vector<std::string> flags;
  if (options.log_level != defaults.log_level) {
    flags.insert(flags.end(), {"--log-level", options.log_level});
  }
  if (options.log_format != defaults.log_format) {
    flags.insert(flags.end(), {"--log-format", options.log_format});
  }
  return flags;
}

using nlohmann::json;

// JSON accessors that never throw (operator/kube/object.h).
const auto& Field = kube::FieldOrNull;
const auto& Str = kube::StringField;

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
    handlers_ = std::make_unique<AdmissionHandlers>(
        AdmissionHandlerOptions{options_.operator_namespace, options_.image, own_username_,
                                GuardLogFlags(options_)},
        AdmissionHandlerDeps{deps_.client, deps_.policies, deps_.canaries, deps_.deployments,
                             deps_.events});
    handlers_->RegisterOn(*admission_);
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

  ManagerOptions options_;
  WebhookServingDeps deps_;
  std::shared_ptr<certs::CertificateSource> source_;
  std::shared_ptr<certs::CertificateManager> manager_;
  Heartbeat loop_heartbeat_;  // outlives server_, whose event loop beats it
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<SelfProbe> probe_;
  std::unique_ptr<webhook::AdmissionServer> admission_;
  std::unique_ptr<AdmissionHandlers> handlers_;  // referred to by admission_'s routes
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
