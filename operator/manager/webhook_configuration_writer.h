#pragma once

// URL mode (a local operator, the control-plane tests): the operator writes
// its MutatingWebhookConfiguration and ValidatingWebhookConfiguration itself,
// from the one definition (webhook/webhook_configurations.h), with
// clientConfig.url and the current CA bundle. In a chart install the chart
// creates them from the same definition and only caBundle is kept
// (certs::CertificateManager, or cert-manager's CA injector).

#include <string>

#include "operator/certs/certificate_source.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"

namespace allocguard::manager {

struct WebhookConfigurationWriterOptions {
  std::string base_url;  // "https://127.0.0.1:9443": + each webhook's path
  std::string operator_namespace;
  std::string mutating_name;
  std::string validating_name;
};

// Writes both configurations by server-side apply (field manager
// allocguard-operator), with source's current CA bundle (none while there is
// no pair), so that a restart or a rotation leaves them correct. Errors name
// the configuration's kind.
Status WriteWebhookConfigurations(kube::Client* client, certs::CertificateSource& source,
                                  const WebhookConfigurationWriterOptions& options);

}  // namespace allocguard::manager
