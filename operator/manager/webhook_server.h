#pragma once

// The admission webhooks' TLS server: an HTTPS server presenting the
// certificate source's current pair, an AdmissionServer routing reviews by
// path, its event loop's heartbeat (liveness) and a probe of its own port
// (readiness). What is served is the caller's: `routes` registers the
// handlers before the port is bound.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "operator/certs/certificate_source.h"
#include "operator/common/clock.h"
#include "operator/common/heartbeat.h"
#include "operator/common/status.h"
#include "operator/manager/self_probe.h"
#include "operator/metrics/registry.h"
#include "operator/net/http.h"
#include "operator/webhook/admission_server.h"

namespace allocguard::manager {

struct WebhookServerOptions {
  std::string host;  // "0.0.0.0", "::" or an address
  int port = 9443;   // 0 picks a free one (see port())
  int worker_threads = 4;
  // AdmissionServer::set_slow_request_threshold.
  Clock::Duration slow_request = std::chrono::milliseconds(100);
  std::shared_ptr<certs::CertificateSource> certificates;  // required
  std::function<void(webhook::AdmissionServer&)> routes;   // required
  metrics::Registry* metrics = nullptr;                    // optional; must outlive the server
  Clock* clock = nullptr;                                  // nullptr: the real clock
};

class WebhookServer {
 public:
  explicit WebhookServer(WebhookServerOptions options);
  ~WebhookServer();  // stops

  // Builds the server, registers the routes, binds and serves on a thread.
  // REQUIRES: called once.
  Status Start();
  void Stop();

  // Serving, with a certificate, and the server answered a request to its
  // own port through TLS within a second (SelfProbe; cached for 2 s).
  bool Ready(std::string* why) const;
  // How long the event loop has gone without a turn (it turns at least once
  // a second); zero while not serving.
  Clock::Duration StalledFor(Clock::TimePoint now) const;
  int port() const;

 private:
  WebhookServerOptions options_;
  Heartbeat loop_heartbeat_;  // outlives server_, whose event loop beats it
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<webhook::AdmissionServer> admission_;
  std::unique_ptr<SelfProbe> probe_;
  std::thread thread_;
  std::atomic<bool> serving_{false};
};

// The webhook port as this process reaches it: a wildcard bind is probed on
// loopback ("https://127.0.0.1:9443").
std::string SelfProbeUrl(const std::string& host, int port);

}  // namespace allocguard::manager
