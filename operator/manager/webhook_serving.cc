#include "operator/manager/webhook_serving.h"

#include <spdlog/spdlog.h>

#include "operator/admission/allocator_injection.h"
#include "operator/certs/certificate_metrics.h"
#include "operator/kube/object.h"
#include "operator/manager/webhook_configuration_writer.h"

namespace allocguard::manager {

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

WebhookServing::WebhookServing(ManagerOptions options, WebhookServingDeps deps)
    : options_(std::move(options)), deps_(deps) {}

WebhookServing::~WebhookServing() { Stop(); }

// Who the operator is, so the unpause check can tell the operator's own
// release of a hold from a user's edit; "" when it cannot be learnt.
std::string WebhookServing::LearnOwnUsername() const {
  const kube::ResourceType reviews{"authentication.k8s.io", "v1", "selfsubjectreviews",
                                   "SelfSubjectReview", false};
  auto self = deps_.client->Create(
      reviews, "", {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
  if (!self.ok()) {
    spdlog::warn(
        "cannot learn the operator's identity ({}); manual unpause checks treat "
        "every caller alike",
        self.status().message());
    return "";
  }
  std::string username = kube::StringField(
      kube::FieldOrNull(kube::FieldOrNull(*self, "status"), "userInfo"), "username");
  spdlog::info("operator identity: {}", username);
  return username;
}

Status WebhookServing::Start(kube::Canceller* /*cancel*/) {
  const std::string own_username = LearnOwnUsername();
  Clock* clock = deps_.clock != nullptr ? deps_.clock : RealClock::Get();

  AG_ASSIGN_OR_RETURN(
      certificates_,
      WebhookCertificates::Load({.cert_dir = options_.webhook_cert_dir,
                                 .secret_namespace = options_.operator_namespace,
                                 .secret_name = options_.webhook_secret_name,
                                 .service_name = options_.webhook_service_name,
                                 .extra_sans = options_.webhook_extra_sans,
                                 .mutating_webhook_config = options_.mutating_webhook_config,
                                 .validating_webhook_config = options_.validating_webhook_config,
                                 .clock = deps_.clock},
                                deps_.client));

  handlers_ = std::make_unique<admission::AdmissionHandlers>(
      admission::AdmissionHandlerOptions{
          options_.operator_namespace, options_.image, own_username, GuardLogFlags(options_),
          // The webhook runs in the image the injection installs from.
          admission::StatsAgentShipped(admission::InjectionOptions{}.allocator_dir)},
      admission::AdmissionHandlerDeps{deps_.client, deps_.policies, deps_.canaries,
                                      deps_.deployments, deps_.events, deps_.statefulsets,
                                      deps_.daemonsets});
  AG_ASSIGN_OR_RETURN(auto bind, ParseBindAddress(options_.webhook_bind_address));
  server_ = std::make_unique<WebhookServer>(WebhookServerOptions{
      .host = bind.first,
      .port = bind.second,
      .slow_request = options_.webhook_slow_request,
      .certificates = certificates_->source(),
      .routes = [this](webhook::AdmissionServer& server) { handlers_->RegisterOn(server); },
      .metrics = deps_.metrics,
      .clock = clock});
  AG_RETURN_IF_ERROR(server_->Start());
  if (deps_.metrics != nullptr) {
    certs::AddCertificateExpiryMetrics(*deps_.metrics, certificates_->source(), clock);
  }
  // URL mode: register the webhooks only once they can be answered.
  if (!options_.webhook_url.empty()) AG_RETURN_IF_ERROR(WriteConfigurations());
  return Status::Ok();
}

void WebhookServing::Stop() {
  if (server_ != nullptr) server_->Stop();
}

void WebhookServing::Tick() {
  if (certificates_ == nullptr) return;
  if (Status s = certificates_->Tick(); !s.ok()) {
    spdlog::warn("webhook certificate upkeep: {}", s.message());
  }
  if (!options_.webhook_url.empty()) {
    if (Status s = WriteConfigurations(); !s.ok()) {
      spdlog::warn("webhook configurations: {}", s.message());
    }
  }
}

Status WebhookServing::WriteConfigurations() {
  return WriteWebhookConfigurations(deps_.client, *certificates_->source(),
                                    {.base_url = options_.webhook_url,
                                     .operator_namespace = options_.operator_namespace,
                                     .mutating_name = options_.mutating_webhook_config,
                                     .validating_name = options_.validating_webhook_config});
}

bool WebhookServing::Ready(std::string* why) const {
  if (server_ == nullptr) {
    *why = "the TLS server is not serving";
    return false;
  }
  return server_->Ready(why);
}

Clock::Duration WebhookServing::StalledFor(Clock::TimePoint now) const {
  return server_ == nullptr ? Clock::Duration::zero() : server_->StalledFor(now);
}

int WebhookServing::port() const { return server_ == nullptr ? 0 : server_->port(); }

}  // namespace allocguard::manager
