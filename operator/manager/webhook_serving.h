#pragma once

// The admission webhooks of one operator replica: the TLS server, its
// certificate (self-managed or cert-manager's files), the webhook
// configurations' caBundle, and the handlers that turn admission requests
// into the pure decisions of operator/admission (admission_handlers.h).
//
// Paths:
//   /mutate-v1-pod                       Pod CREATE: allocator injection
//   /mutate-apps-v1-deployment           Deployment CREATE/UPDATE: the gate
//   /validate-apps-v1-deployment         Deployment UPDATE: no manual unpause
//   /validate-allocguard-io-v1alpha1-allocatorpolicy   overlapping policies
//
// Every webhook fails open (failurePolicy Ignore) so that an operator outage
// never stops Pods from starting; drift is reported afterwards instead.

#include <memory>
#include <string>

#include "operator/common/clock.h"
#include "operator/common/status.h"
#include "operator/kube/client.h"
#include "operator/kube/event_recorder.h"
#include "operator/kube/informer.h"
#include "operator/manager/admission_handlers.h"
#include "operator/manager/manager.h"
#include "operator/metrics/registry.h"

namespace allocguard::manager {

struct WebhookServingDeps {
  kube::Client* client = nullptr;
  kube::Store* policies = nullptr;
  kube::Store* canaries = nullptr;
  kube::Store* deployments = nullptr;  // slim (controllers::SlimDeployment)
  kube::EventRecorder* events = nullptr;
  metrics::Registry* metrics = nullptr;
  Clock* clock = nullptr;
};

class WebhookServing {
 public:
  virtual ~WebhookServing() = default;
  // Loads or creates the certificate, binds the TLS port and starts serving;
  // in URL mode also writes the webhook configurations.
  static Result<std::unique_ptr<WebhookServing>> Start(const ManagerOptions& options,
                                                       const WebhookServingDeps& deps);
  // Rotation and caBundle upkeep; called every 30 s.
  virtual void Tick() = 0;
  // Serving, with a certificate, and the server answered a request to its
  // own port through TLS within a second (SelfProbe; cached for 2 s).
  virtual bool Ready(std::string* why) const = 0;
  // How long the TLS server's event loop has gone without a turn (it turns
  // at least once a second), for liveness.
  virtual Clock::Duration StalledFor(Clock::TimePoint now) const = 0;
  virtual int port() const = 0;
  virtual void Stop() = 0;
};

}  // namespace allocguard::manager
