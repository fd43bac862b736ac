#include "operator/manager/manager_config.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

namespace allocguard::manager {
namespace {

std::string Identity(const ManagerOptions& options) {
  std::string base = options.pod_name;
  if (base.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    base = host;
  }
  std::random_device rd;
  return base + "_" + std::to_string(rd() % 1000000);
}

}  // namespace

Result<std::pair<std::string, int>> ParseBindAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("bind address \"" + address + "\" must be host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  const std::string port_text = address.substr(colon + 1);
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("bind address \"" + address + "\": port must be 0..65535");
  }
  return std::make_pair(host, port);
}

Result<ManagerConfig> LoadManagerConfig(const ManagerOptions& options) {
  ManagerConfig config;
  config.options = options;
  Result<kube::RestConfig> rest =
      options.kubeconfig.empty() && std::getenv("KUBECONFIG") == nullptr
          ? kube::InClusterConfigFromEnvironment()
          : kube::LoadKubeconfigFromEnvironment(options.kubeconfig, options.context);
  if (!rest.ok()) return Status(rest.status().code(), "kubeconfig: " + rest.status().message());
  config.rest = std::move(rest).value();
  AG_ASSIGN_OR_RETURN(config.health_probe_address,
                      ParseBindAddress(options.health_probe_bind_address));
  AG_ASSIGN_OR_RETURN(config.metrics_address, ParseBindAddress(options.metrics_bind_address));
  if (options.leader_elect) {
    config.leader_election.lease_namespace = options.operator_namespace;
    config.leader_election.lease_name = options.leader_election_id;
    config.leader_election.identity = Identity(options);
  }
  return config;
}

}  // namespace allocguard::manager
