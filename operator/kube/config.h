#pragma once

// Where the API server is and how to authenticate to it: from a kubeconfig
// (kubectl's rules) or from inside a pod.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "operator/common/status.h"
#include "operator/net/http.h"

namespace allocguard::kube {

// users[].user.exec of a kubeconfig: a credential plugin.
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or v1beta1
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string interactive_mode;  // Never | IfAvailable | Always
  bool provide_cluster_info = false;
  std::string install_hint;
};

// Everything needed to talk to one API server as one user.
struct RestConfig {
  std::string server;  // "https://host:port", IPv6 hosts bracketed
  net::TlsOptions tls;
  std::string token;       // static bearer token
  std::string token_file;  // bearer token re-read as it rotates
  std::optional<ExecConfig> exec;
  std::string ca_pem_for_exec;  // the cluster CA, for provideClusterInfo
  std::string namespace_ = "default";
};

// ---- kubeconfig ------------------------------------------------------------

struct KubeconfigCluster {
  std::string server;
  std::string certificate_authority;       // file, absolute after parsing
  std::string certificate_authority_data;  // PEM (decoded from base64)
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string proxy_url;
};

struct KubeconfigUser {
  std::string client_certificate;  // files, absolute after parsing
  std::string client_key;
  std::string client_certificate_data;  // PEM (decoded)
  std::string client_key_data;
  std::string token;
  std::string token_file;
  std::optional<ExecConfig> exec;
  bool has_auth_provider = false;  // legacy; rejected when used
  std::string auth_provider_name;
};

struct KubeconfigContext {
  std::string cluster;
  std::string user;
  std::string namespace_;
};

// One kubeconfig file, or several merged.
struct Kubeconfig {
  std::string current_context;
  std::map<std::string, KubeconfigCluster> clusters;
  std::map<std::string, KubeconfigUser> users;
  std::map<std::string, KubeconfigContext> contexts;
};

// Parses one kubeconfig. Relative file paths inside it resolve against dir
// (the directory of the file it came from). Errors name the entry at fault.
Result<Kubeconfig> ParseKubeconfig(const std::string& yaml_text, const std::string& dir);

// Merges files in KUBECONFIG order: for each cluster, user and context name,
// and for current-context, the first file that sets it wins.
Kubeconfig MergeKubeconfigs(const std::vector<Kubeconfig>& files);

// Resolves a context ("" = current-context) to a RestConfig. Rejects the legacy
// auth-provider and proxy-url (unsupported) with errors that say so.
Result<RestConfig> ResolveKubeconfig(const Kubeconfig& config, const std::string& context);

struct KubeconfigSource {
  std::string explicit_path;   // --kubeconfig; wins over everything
  std::string kubeconfig_env;  // $KUBECONFIG: ':'-separated, merged
  std::string home;            // $HOME, for ~/.kube/config
  std::string context;         // --context; "" = current-context
};

// kubectl's loading rules: --kubeconfig, else $KUBECONFIG (missing files
// skipped), else ~/.kube/config.
Result<RestConfig> LoadKubeconfig(const KubeconfigSource& source);
// LoadKubeconfig with $KUBECONFIG and $HOME from the environment.
Result<RestConfig> LoadKubeconfigFromEnvironment(const std::string& explicit_path,
                                                 const std::string& context);

// ---- in-cluster ------------------------------------------------------------

struct InClusterSource {
  std::string service_host;   // $KUBERNETES_SERVICE_HOST
  std::string service_port;   // $KUBERNETES_SERVICE_PORT
  std::string pod_namespace;  // $POD_NAMESPACE, wins over the namespace file
  std::string secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// The service-account identity of a pod: token file (re-read as it rotates),
// CA, namespace. Wraps IPv6 hosts in brackets.
Result<RestConfig> InClusterConfig(const InClusterSource& source);
Result<RestConfig> InClusterConfigFromEnvironment();

}  // namespace allocguard::kube
