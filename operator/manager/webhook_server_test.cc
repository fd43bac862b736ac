// The webhook TLS server piece against the real HTTPS server: routes are the
// caller's, readiness is measured, the certificate comes from its source.

#include "operator/manager/webhook_server.h"

#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/certs/x509.h"

namespace allocguard::manager {
namespace {

using std::chrono::hours;
using ::testing::HasSubstr;

// Hands out a pair once set; nullptr before.
class FakeCertificateSource final : public certs::CertificateSource {
 public:
  std::shared_ptr<const certs::KeyPair> Current() override {
    std::lock_guard<std::mutex> lock(mu_);
    return pair_;
  }
  void SetServingPair() {
    const auto now = std::chrono::system_clock::now();
    auto ca = certs::GenerateCa("webhook-ca", now - hours(1), now + hours(24));
    ASSERT_TRUE(ca.ok());
    auto serving = certs::IssueServingCertificate(
        {"webhook.example", {"webhook.example"}, {}, now - hours(1), now + hours(12)}, ca->cert_pem,
        ca->key_pem);
    ASSERT_TRUE(serving.ok());
    auto pair = std::make_shared<certs::KeyPair>();
    pair->cert_chain_pem = serving->cert_pem;
    pair->key_pem = serving->key_pem;
    pair->ca_bundle_pem = ca->cert_pem;
    std::lock_guard<std::mutex> lock(mu_);
    pair_ = std::move(pair);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const certs::KeyPair> pair_;
};

WebhookServerOptions Options(std::shared_ptr<certs::CertificateSource> source,
                             std::vector<std::string>* routed) {
  return {.host = "127.0.0.1",
          .port = 0,
          .worker_threads = 1,
          .certificates = std::move(source),
          .routes = [routed](webhook::AdmissionServer& server) {
            server.Handle("/mutate-v1-pod", [](const webhook::AdmissionRequest&) {
              return webhook::AdmissionResponse{};
            });
            routed->push_back("/mutate-v1-pod");
          }};
}

TEST(WebhookServerTest, NotServingBeforeStartAndAfterStop) {
  auto source = std::make_shared<FakeCertificateSource>();
  source->SetServingPair();
  std::vector<std::string> routed;
  WebhookServer server(Options(source, &routed));
  std::string why;
  EXPECT_FALSE(server.Ready(&why));
  EXPECT_EQ(why, "the TLS server is not serving");
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.StalledFor(Clock::TimePoint{} + hours(1)), Clock::Duration::zero());

  ASSERT_TRUE(server.Start().ok());
  EXPECT_THAT(routed, ::testing::ElementsAre("/mutate-v1-pod")) << "routes registered once";
  EXPECT_GT(server.port(), 0) << "port 0 picks a free port";
  EXPECT_TRUE(server.Ready(&why)) << why << ": the self probe answered through TLS";

  server.Stop();
  EXPECT_FALSE(server.Ready(&why));
  EXPECT_EQ(why, "the TLS server is not serving");
}

TEST(WebhookServerTest, NotReadyWithoutACertificate) {
  auto source = std::make_shared<FakeCertificateSource>();
  std::vector<std::string> routed;
  WebhookServer server(Options(source, &routed));
  ASSERT_TRUE(server.Start().ok());
  std::string why;
  EXPECT_FALSE(server.Ready(&why));
  EXPECT_EQ(why, "no certificate");
}

TEST(WebhookServerTest, ABusyPortIsAStartError) {
  auto source = std::make_shared<FakeCertificateSource>();
  source->SetServingPair();
  std::vector<std::string> routed;
  WebhookServer first(Options(source, &routed));
  ASSERT_TRUE(first.Start().ok());
  WebhookServerOptions options = Options(source, &routed);
  options.port = first.port();
  WebhookServer second(options);
  EXPECT_FALSE(second.Start().ok());
}

TEST(SelfProbeUrlTest, AWildcardBindIsProbedOnLoopback) {
  EXPECT_EQ(SelfProbeUrl("0.0.0.0", 9443), "https://127.0.0.1:9443");
  EXPECT_EQ(SelfProbeUrl("", 9443), "https://127.0.0.1:9443");
  EXPECT_EQ(SelfProbeUrl("::", 9443), "https://[::1]:9443");
  EXPECT_EQ(SelfProbeUrl("10.0.0.5", 1), "https://10.0.0.5:1");
  EXPECT_EQ(SelfProbeUrl("fd00::1", 2), "https://[fd00::1]:2");
}

}  // namespace
}  // namespace allocguard::manager
