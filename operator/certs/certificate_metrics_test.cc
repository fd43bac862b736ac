#include "operator/certs/certificate_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

namespace allocguard::certs {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SwappableSource final : public CertificateSource {
 public:
  std::shared_ptr<const KeyPair> Current() override {
    std::lock_guard<std::mutex> lock(mu_);
    return pair_;
  }
  void Set(std::shared_ptr<const KeyPair> pair) {
    std::lock_guard<std::mutex> lock(mu_);
    pair_ = std::move(pair);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const KeyPair> pair_;
};

std::shared_ptr<const KeyPair> PairExpiringAt(std::chrono::system_clock::time_point not_after) {
  auto pair = std::make_shared<KeyPair>();
  pair->not_after = not_after;
  return pair;
}

TEST(CertificateMetricsTest, ExpiryFollowsTheCertificateInUseAndTheClock) {
  FakeClock clock;
  auto source = std::make_shared<SwappableSource>();
  metrics::Registry registry;
  AddCertificateExpiryMetrics(registry, source, &clock);
  EXPECT_THAT(registry.Render(), Not(HasSubstr("certificate"))) << "no certificate yet";

  source->Set(PairExpiringAt(clock.WallNow() + std::chrono::hours(24)));
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE allocguard_webhook_certificate_expiry_seconds gauge\n"
                              "allocguard_webhook_certificate_expiry_seconds 86400\n"));
  const double epoch =
      std::chrono::duration<double>((clock.WallNow() + std::chrono::hours(24)).time_since_epoch())
          .count();
  EXPECT_THAT(text, HasSubstr("allocguard_webhook_certificate_not_after_timestamp_seconds " +
                              metrics::FormatValue(epoch) + "\n"));

  clock.Advance(std::chrono::hours(1));
  EXPECT_THAT(registry.Render(),
              HasSubstr("allocguard_webhook_certificate_expiry_seconds 82800\n"));

  // A rotation: the new certificate's notAfter from the next scrape on.
  source->Set(PairExpiringAt(clock.WallNow() + std::chrono::hours(48)));
  EXPECT_THAT(registry.Render(),
              HasSubstr("allocguard_webhook_certificate_expiry_seconds 172800\n"));

  clock.Advance(std::chrono::hours(49));
  EXPECT_THAT(registry.Render(),
              HasSubstr("allocguard_webhook_certificate_expiry_seconds -3600\n"));
}

}  // namespace
}  // namespace allocguard::certs
