#pragma once

// The admission webhooks of one operator replica, as a Runnable of the
// manager (every replica serves them: they read the informer caches and need
// no leadership). Made of four pieces:
//   - WebhookCertificates (webhook_certificates.h): the certificate source,
//     self-managed or cert-manager's files;
//   - WebhookServer (webhook_server.h): the TLS server, its heartbeat and
//     self probe;
//   - admission::AdmissionHandlers (operator/admission/admission_handlers.h): the handlers, routed
//   by path;
//   - WriteWebhookConfigurations (webhook_configuration_writer.h): in URL
//     mode, the webhook configurations, from the one definition in
//     webhook/webhook_configurations.h.
//
// Paths:
//   /mutate-v1-pod                       Pod CREATE: allocator injection
//   /mutate-apps-v1-deployment           Deployment CREATE/UPDATE: the gate
//   /mutate-apps-v1-statefulset          StatefulSet CREATE/UPDATE: the hold
//   /mutate-apps-v1-daemonset            DaemonSet CREATE/UPDATE: the hold
//   /validate-apps-v1-deployment         Deployment UPDATE: no manual unpause
//   /validate-apps-v1-statefulset        StatefulSet UPDATE: no manual lifting of a hold
//   /validate-apps-v1-daemonset          DaemonSet UPDATE: no manual lifting of a hold
//   /validate-allocguard-io-v1alpha1-allocatorpolicy   overlapping policies
//   /validate-allocguard-io-v1alpha1-replaycanary      unreadable canaries
//
// Every webhook fails open (failurePolicy Ignore) so that an operator outage
// never stops Pods from starting; drift is reported afterwards instead.

#include <memory>
#include <string>
#include <vector>

#include "operator/admission/admission_handlers.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/manager/manager_config.h"
#include "operator/manager/runnable.h"
#include "operator/manager/webhook_certificates.h"
#include "operator/manager/webhook_server.h"
#include "operator/metrics/registry.h"

namespace allocguard::manager {

// All must outlive the WebhookServing; only metrics and events may be null.
struct WebhookServingDeps {
  kube::Client* client = nullptr;
  kube::Store* policies = nullptr;
  kube::Store* canaries = nullptr;
  kube::Store* deployments = nullptr;  // slim (api::SlimDeployment)
  kube::EventRecorder* events = nullptr;
  metrics::Registry* metrics = nullptr;
  Clock* clock = nullptr;
  kube::Store* statefulsets = nullptr;  // slim (api::SlimStatefulSet)
  kube::Store* daemonsets = nullptr;    // slim (api::SlimDeployment)
};

// The flags that make an injected guard log as this operator does; none with
// the defaults, so a default install's injected pods stay as they were.
std::vector<std::string> GuardLogFlags(const ManagerOptions& options);

class WebhookServing final : public Runnable {
 public:
  WebhookServing(ManagerOptions options, WebhookServingDeps deps);
  ~WebhookServing() override;  // stops

  std::string name() const override { return "webhook server"; }
  // Learns the operator's identity, loads or creates the certificate, binds
  // the TLS port and starts serving; in URL mode then writes the webhook
  // configurations (only once they can be answered).
  Status Start(kube::Canceller* cancel) override;
  void Stop() override;

  // Tick, Ready, StalledFor and port may be called from other threads once
  // Start returned (the manager starts the upkeep and the probe server after
  // this runnable).

  // Rotation and caBundle upkeep, and in URL mode the configurations;
  // called every 30 s. Errors are logged.
  void Tick();
  // See WebhookServer::Ready; false before Start.
  bool Ready(std::string* why) const;
  // See WebhookServer::StalledFor; zero before Start.
  Clock::Duration StalledFor(Clock::TimePoint now) const;
  int port() const;

 private:
  std::string LearnOwnUsername() const;
  Status WriteConfigurations();

  const ManagerOptions options_;
  const WebhookServingDeps deps_;
  std::unique_ptr<WebhookCertificates> certificates_;
  std::unique_ptr<admission::AdmissionHandlers> handlers_;  // referred to by server_'s routes
  std::unique_ptr<WebhookServer> server_;
};

}  // namespace allocguard::manager
