#include "operator/manager/webhook_certificates.h"

#include <arpa/inet.h>

#include <spdlog/spdlog.h>

#include "operator/certs/file_certificate_source.h"

namespace allocguard::manager {
namespace {

bool IsIpAddress(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

Result<std::unique_ptr<WebhookCertificates>> WebhookCertificates::Load(
    const WebhookCertificateOptions& options, kube::Client* client) {
  Clock* clock = options.clock != nullptr ? options.clock : RealClock::Get();
  std::unique_ptr<WebhookCertificates> certificates(new WebhookCertificates());
  if (!options.cert_dir.empty()) {
    certs::FileCertificateSourceOptions fo;
    fo.cert_file = options.cert_dir + "/tls.crt";
    fo.key_file = options.cert_dir + "/tls.key";
    fo.ca_file = options.cert_dir + "/ca.crt";
    fo.clock = options.clock;
    AG_ASSIGN_OR_RETURN(auto files, certs::FileCertificateSource::Create(fo));
    certificates->source_ = std::shared_ptr<certs::CertificateSource>(std::move(files));
    return certificates;
  }
  certs::CertificateManagerOptions co;
  co.secret_namespace = options.secret_namespace;
  co.secret_name = options.secret_name;
  co.dns_names = certs::ServiceDnsNames(options.service_name, options.secret_namespace);
  for (const std::string& san : options.extra_sans) {
    (IsIpAddress(san) ? co.ip_addresses : co.dns_names).push_back(san);
  }
  co.mutating_webhook_configurations = {options.mutating_webhook_config};
  co.validating_webhook_configurations = {options.validating_webhook_config};
  co.clock = options.clock;
  auto manager = std::make_shared<certs::CertificateManager>(client, co);
  certificates->manager_ = manager;
  certificates->source_ = manager;
  Status first = manager->Tick();
  for (int i = 0; i < options.first_round_retries && manager->Current() == nullptr; ++i) {
    spdlog::warn("webhook certificate: {} (retrying)", first.message());
    clock->SleepUntil(clock->Now() + options.retry_interval);
    first = manager->Tick();
  }
  if (manager->Current() == nullptr) {
    return Unavailable("no webhook certificate: " + first.message());
  }
  return certificates;
}

Status WebhookCertificates::Tick() { return manager_ == nullptr ? Status::Ok() : manager_->Tick(); }

}  // namespace allocguard::manager
