// The readiness self-probe against the real HTTPS server.

#include "operator/manager/self_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "operator/certs/x509.h"
#include "operator/net/http.h"

namespace allocguard::manager {
namespace {

using std::chrono::hours;

std::shared_ptr<const net::TlsKeyPair> ServingPair() {
  const auto now = std::chrono::system_clock::now();
  auto ca = certs::GenerateCa("probe-ca", now - hours(1), now + hours(24));
  EXPECT_TRUE(ca.ok());
  auto serving = certs::IssueServingCertificate(
      {"webhook.example", {"webhook.example"}, {}, now - hours(1), now + hours(12)}, ca->cert_pem,
      ca->key_pem);
  EXPECT_TRUE(serving.ok());
  auto pair = std::make_shared<net::TlsKeyPair>();
  pair->cert_chain_pem = serving->cert_pem;
  pair->key_pem = serving->key_pem;
  return pair;
}

// A one-worker server whose /healthz blocks while `wedged` is set, as a
// server whose workers are all stuck would.
class ProbedServer {
 public:
  ProbedServer() {
    auto pair = ServingPair();
    auto made = net::NewHttpsServer({.worker_threads = 1, .key_pair = [pair] { return pair; }});
    EXPECT_TRUE(made.ok());
    server_ = std::move(*made);
    server_->Handle("GET", "/healthz", [this](const net::HttpRequest&) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !wedged_; });
      return net::HttpResponse{200, {}, "ok\n"};
    });
    EXPECT_TRUE(server_->Bind().ok());
    thread_ = std::thread([this] { server_->Serve(); });
  }
  ~ProbedServer() {
    SetWedged(false);
    server_->Stop();
    thread_.join();
  }
  void SetWedged(bool wedged) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wedged_ = wedged;
    }
    cv_.notify_all();
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(server_->port()); }

 private:
  std::unique_ptr<net::HttpServer> server_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wedged_ = false;
};

TEST(SelfProbeTest, PassesWhenTheServerAnswersAndFailsWhenItsWorkersAreStuck) {
  ProbedServer server;
  FakeClock clock;
  SelfProbe probe({.base_url = server.url(),
                   .timeout = std::chrono::milliseconds(300),
                   .cache_for = std::chrono::seconds(2),
                   .clock = &clock});
  Status ok = probe.Check();
  EXPECT_TRUE(ok.ok()) << ok.ToString();

  server.SetWedged(true);
  EXPECT_TRUE(probe.Check().ok()) << "within cache_for, the last result is reused";
  clock.Advance(std::chrono::seconds(3));
  Status stuck = probe.Check();
  EXPECT_EQ(stuck.code(), StatusCode::kUnavailable);
  EXPECT_THAT(stuck.message(), ::testing::HasSubstr("did not answer its own probe"));

  server.SetWedged(false);
  clock.Advance(std::chrono::seconds(3));
  EXPECT_TRUE(probe.Check().ok()) << "ready again once the server answers";
}

TEST(SelfProbeTest, FailsWhenNothingListens) {
  int port = 0;
  {
    ProbedServer gone;
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  FakeClock clock;
  SelfProbe probe({.base_url = "https://127.0.0.1:" + std::to_string(port),
                   .timeout = std::chrono::milliseconds(300),
                   .clock = &clock});
  EXPECT_EQ(probe.Check().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace allocguard::manager
