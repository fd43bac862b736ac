#include "operator/manager/webhook_configuration_writer.h"

#include "operator/common/base64.h"
#include "operator/webhook/webhook_configurations.h"

namespace allocguard::manager {
namespace {

constexpr char kFieldManager[] = "allocguard-operator";

}  // namespace

Status WriteWebhookConfigurations(kube::Client* client, certs::CertificateSource& source,
                                  const WebhookConfigurationWriterOptions& options) {
  std::shared_ptr<const certs::KeyPair> pair = source.Current();
  webhook::WebhookConfigurations configs = webhook::BuildWebhookConfigurations(
      {.base_url = options.base_url,
       .ca_bundle_base64 = pair == nullptr ? "" : EncodeBase64(pair->ca_bundle_pem),
       .operator_namespace = options.operator_namespace,
       .mutating_name = options.mutating_name,
       .validating_name = options.validating_name});
  auto m = client->Apply(kube::MutatingWebhookConfigurations(), configs.mutating, kFieldManager);
  if (!m.ok()) return m.status().WithContext("MutatingWebhookConfiguration");
  auto v =
      client->Apply(kube::ValidatingWebhookConfigurations(), configs.validating, kFieldManager);
  if (!v.ok()) return v.status().WithContext("ValidatingWebhookConfiguration");
  return Status::Ok();
}

}  // namespace allocguard::manager
