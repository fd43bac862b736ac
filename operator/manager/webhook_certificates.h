#pragma once

// Where the webhook server's certificate comes from, chosen once at start:
// cert-manager's files (tls.crt, tls.key, ca.crt in a directory, re-read as
// they change) or a self-managed CA and serving certificate kept in a Secret
// (certs::CertificateManager, rotated by Tick). Either way the server reads
// the current pair through source(), as cert-manager's pkg/server/tls source
// does, so a rotation needs no restart.

#include <memory>
#include <string>
#include <vector>

#include "operator/certs/certificate_manager.h"
#include "operator/certs/certificate_source.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"

namespace allocguard::manager {

struct WebhookCertificateOptions {
  // Set: cert-manager's files in this directory; the rest is unused.
  std::string cert_dir;
  // Self-managed: the Secret, the Service the certificate names, extra
  // names (DNS names or IP addresses) and the webhook configurations whose
  // caBundle is kept current.
  std::string secret_namespace;
  std::string secret_name;
  std::string service_name;
  std::vector<std::string> extra_sans;
  std::string mutating_webhook_config;
  std::string validating_webhook_config;
  // The first round creates or adopts the Secret; it is tried this many
  // times more, retry_interval apart, while the API server may still be
  // coming up with the operator.
  int first_round_retries = 10;
  Clock::Duration retry_interval = std::chrono::seconds(1);
  Clock* clock = nullptr;  // nullptr: the real clock
};

class WebhookCertificates {
 public:
  // Loads the files, or runs the first self-managed round; kUnavailable when
  // no pair could be had.
  static Result<std::unique_ptr<WebhookCertificates>> Load(const WebhookCertificateOptions& options,
                                                           kube::Client* client);

  // The source the TLS server and the expiry metrics read.
  const std::shared_ptr<certs::CertificateSource>& source() const { return source_; }
  // Self-managed: one rotation and caBundle round; files: nothing (the
  // source re-reads them itself).
  Status Tick();

 private:
  WebhookCertificates() = default;

  std::shared_ptr<certs::CertificateSource> source_;
  std::shared_ptr<certs::CertificateManager> manager_;  // self-managed only
};

}  // namespace allocguard::manager
