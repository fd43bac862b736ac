#pragma once

// The operator's configuration: the options `allocguard operator` takes as
// flags (operator/cli/operator_command.cc, the chart's deployment.yaml), and
// their checked, resolved form the wiring (manager.cc) uses. Nothing here
// starts anything.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "operator/common/status.h"
#include "operator/kube/config.h"
#include "operator/kube/leader_election.h"

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
  // A review answered this slowly or slower (parse, decision, encoding) is
  // logged with where its time went and counted in
  // allocguard_webhook_slow_requests_total; zero: none is.
  std::chrono::milliseconds webhook_slow_request{100};

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

// ManagerOptions checked and resolved.
struct ManagerConfig {
  ManagerOptions options;
  kube::RestConfig rest;
  std::pair<std::string, int> health_probe_address;
  std::pair<std::string, int> metrics_address;
  // Set when options.leader_elect: the Lease and this replica's identity
  // (pod name or host name, and a random suffix); no callbacks.
  kube::LeaderElectionConfig leader_election;
};

// Loads the kubeconfig (in-cluster when neither --kubeconfig nor $KUBECONFIG
// is given; errors say "kubeconfig: ..."), then parses the bind addresses.
Result<ManagerConfig> LoadManagerConfig(const ManagerOptions& options);

}  // namespace allocguard::manager
