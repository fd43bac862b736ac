#pragma once

// The operator process: what `allocguard operator` runs.
//
//   - informers on AllocatorPolicies, ReplayCanaries, Deployments, Pods and
//     allocguard's canary Jobs (cluster-wide or one namespace);
//   - the admission webhooks over TLS, served by every replica (they read
//     the informer caches and need no leadership);
//   - the reconcilers (policy, canary, rollout, drift), run only by the
//     replica that holds the leader lease, so two replicas never both start
//     a canary; losing the lease ends the process, as controller-runtime's
//     managers do, and the Deployment restarts it as a follower;
//   - /healthz and /readyz on the health probe address, /metrics on the
//     metrics address.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "operator/common/status.h"
#include "operator/kube/cancel.h"

namespace allocguard::manager {

struct ManagerOptions {
  std::string kubeconfig;  // "" : in-cluster, else kubectl's loading rules
  std::string context;
  std::string watch_namespace;  // "" : all namespaces
  std::string operator_namespace = "allocguard-system";
  std::string pod_name;  // this replica, for the lease identity and events

  bool leader_elect = false;
  std::string leader_election_id = "allocguard-operator";

  // host:port; ":8081" binds every address; port 0 picks a free one (the
  // bound addresses are logged and written to bound_addresses_file).
  std::string health_probe_bind_address = ":8081";
  std::string metrics_bind_address = ":8080";
  std::string webhook_bind_address = ":9443";
  std::string bound_addresses_file;  // optional: "health=..\nmetrics=..\nwebhook=..\n"

  // Webhook certificates: files from cert-manager (tls.crt, tls.key, ca.crt)
  // when webhook_cert_dir is set, else a self-managed CA and serving
  // certificate kept in the Secret webhook_secret_name.
  std::string webhook_cert_dir;
  std::string webhook_secret_name = "allocguard-webhook-tls";
  std::string webhook_service_name = "allocguard-webhook";
  std::vector<std::string> webhook_extra_sans;  // DNS names or IPs, e.g. 127.0.0.1
  // The webhook configurations whose caBundle the operator keeps current.
  std::string mutating_webhook_config = "allocguard";
  std::string validating_webhook_config = "allocguard";
  // When set, the operator writes its webhook configurations itself, with
  // clientConfig.url = webhook_url + path (a local operator, tests); else
  // the chart creates them with a service reference and only caBundle is
  // kept.
  std::string webhook_url;

  // The image of the injected init container, guard sidecar and replay
  // driver.
  std::string image = "allocguard:dev";
  // --log-level and --log-format (log.h); the guard sidecars the webhook
  // injects log the same way.
  std::string log_level = "info";
  std::string log_format = "text";

  int workers = 2;  // per reconciler

  // Canaries whose Jobs run at the same time, cluster-wide; more wait in
  // phase Pending. Bounds what a burst of new templates (a bulk import, a
  // GitOps sync of many Deployments) asks of the cluster.
  int max_concurrent_canaries = 4;
  // Of those, at most this many in one namespace (0: no limit).
  int max_concurrent_canaries_per_namespace = 2;
};

// Parses "host:port" (":8081" -> "0.0.0.0", 8081). Port 0 is allowed.
Result<std::pair<std::string, int>> ParseBindAddress(const std::string& address);

// Runs the operator until cancel fires (OK) or leadership is lost
// (kUnavailable). Configuration and start-up errors return at once.
Status RunManager(const ManagerOptions& options, kube::Canceller* cancel);

}  // namespace allocguard::manager
