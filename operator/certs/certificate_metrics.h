#pragma once

// The webhook serving certificate's expiry as metrics, read from the
// CertificateSource at every scrape (so a rotation shows at once):
//
//   allocguard_webhook_certificate_expiry_seconds  seconds from now until
//       notAfter of the certificate the server presents (negative once
//       expired)
//   allocguard_webhook_certificate_not_after_timestamp_seconds  notAfter,
//       seconds since the Unix epoch (for `... - time()` in PromQL)
//
// Both are absent while the source has no certificate.

#include <memory>

#include "operator/certs/certificate_source.h"
#include "operator/common/clock.h"
#include "operator/metrics/registry.h"

namespace allocguard::certs {

// source and clock must outlive every Render() of registry.
void AddCertificateExpiryMetrics(metrics::Registry& registry,
                                 std::shared_ptr<CertificateSource> source, Clock* clock);

}  // namespace allocguard::certs
