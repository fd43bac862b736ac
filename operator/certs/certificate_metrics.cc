#include "operator/certs/certificate_metrics.h"

#include <chrono>
#include <utility>
#include <vector>

namespace allocguard::certs {

void AddCertificateExpiryMetrics(metrics::Registry& registry,
                                 std::shared_ptr<CertificateSource> source, Clock* clock) {
  registry.AddCollector([source = std::move(source), clock] {
    std::vector<metrics::CollectedFamily> out;
    std::shared_ptr<const KeyPair> pair = source->Current();
    if (pair == nullptr) return out;
    using Seconds = std::chrono::duration<double>;
    out.push_back({"allocguard_webhook_certificate_expiry_seconds",
                   "Seconds until notAfter of the webhook serving certificate in use.",
                   metrics::MetricType::kGauge,
                   {{{}, Seconds(pair->not_after - clock->WallNow()).count()}}});
    out.push_back({"allocguard_webhook_certificate_not_after_timestamp_seconds",
                   "notAfter of the webhook serving certificate in use, seconds since the epoch.",
                   metrics::MetricType::kGauge,
                   {{{}, Seconds(pair->not_after.time_since_epoch()).count()}}});
    return out;
  });
}

}  // namespace allocguard::certs
