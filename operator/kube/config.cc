#include "operator/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "operator/common/base64.h"

namespace allocguard::kube {

namespace {

std::string ResolvePath(const std::string& path, const std::string& dir) {
  if (path.empty() || path.front() == '/' || dir.empty()) return path;
  return (std::filesystem::path(dir) / path).lexically_normal().string();
}

std::string Str(const YAML::Node& n, const char* key) {
  YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

bool Bool(const YAML::Node& n, const char* key) {
  YAML::Node v = n[key];
  return v && v.IsScalar() && v.as<bool>();
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<ExecConfig> ParseExec(const YAML::Node& n) {
  ExecConfig e;
  e.api_version = Str(n, "apiVersion");
  e.command = Str(n, "command");
  if (e.command.empty()) return InvalidArgument("exec.command is empty");
  if (YAML::Node args = n["args"]; args && args.IsSequence()) {
    for (const auto& a : args) e.args.push_back(a.as<std::string>());
  }
  if (YAML::Node env = n["env"]; env && env.IsSequence()) {
    for (const auto& v : env) e.env.emplace_back(Str(v, "name"), Str(v, "value"));
  }
  e.interactive_mode = Str(n, "interactiveMode");
  e.provide_cluster_info = Bool(n, "provideClusterInfo");
  e.install_hint = Str(n, "installHint");
  if (e.api_version != "client.authentication.k8s.io/v1" &&
      e.api_version != "client.authentication.k8s.io/v1beta1") {
    return InvalidArgument("exec.apiVersion \"" + e.api_version +
                           "\" is not client.authentication.k8s.io/v1 or v1beta1");
  }
  return e;
}

Result<Kubeconfig> ParseKubeconfigNode(const YAML::Node& root, const std::string& dir) {
  Kubeconfig out;
  if (!root || root.IsNull()) return out;
  if (!root.IsMap()) return InvalidArgument("top level is not a mapping");
  out.current_context = Str(root, "current-context");
  for (const auto& item : root["clusters"]) {
    std::string name = Str(item, "name");
    YAML::Node c = item["cluster"];
    if (name.empty() || !c) return InvalidArgument("a clusters[] entry lacks name or cluster");
    KubeconfigCluster k;
    k.server = Str(c, "server");
    k.certificate_authority = ResolvePath(Str(c, "certificate-authority"), dir);
    if (std::string d = Str(c, "certificate-authority-data"); !d.empty()) {
      auto pem = DecodeBase64(d);
      if (!pem.ok())
        return InvalidArgument("cluster \"" + name +
                               "\": certificate-authority-data is not base64");
      k.certificate_authority_data = *pem;
    }
    k.insecure_skip_tls_verify = Bool(c, "insecure-skip-tls-verify");
    k.tls_server_name = Str(c, "tls-server-name");
    k.proxy_url = Str(c, "proxy-url");
    out.clusters.emplace(name, std::move(k));
  }
  for (const auto& item : root["users"]) {
    std::string name = Str(item, "name");
    YAML::Node u = item["user"];
    if (name.empty()) return InvalidArgument("a users[] entry lacks a name");
    KubeconfigUser k;
    if (u && u.IsMap()) {
      k.client_certificate = ResolvePath(Str(u, "client-certificate"), dir);
      k.client_key = ResolvePath(Str(u, "client-key"), dir);
      for (auto [field, target] : {std::pair{"client-certificate-data", &k.client_certificate_data},
                                   std::pair{"client-key-data", &k.client_key_data}}) {
        if (std::string d = Str(u, field); !d.empty()) {
          auto pem = DecodeBase64(d);
          if (!pem.ok())
            return InvalidArgument("user \"" + name + "\": " + field + " is not base64");
          *target = *pem;
        }
      }
      k.token = Str(u, "token");
      k.token_file = ResolvePath(Str(u, "tokenFile"), dir);
      if (YAML::Node e = u["exec"]; e && e.IsMap()) {
        auto exec = ParseExec(e);
        if (!exec.ok()) return exec.status().WithContext("user \"" + name + "\"");
        // A relative command with a slash resolves against the file's dir.
        if (exec->command.find('/') != std::string::npos) {
          exec->command = ResolvePath(exec->command, dir);
        }
        k.exec = *exec;
      }
      if (YAML::Node a = u["auth-provider"]; a && a.IsMap()) {
        k.has_auth_provider = true;
        k.auth_provider_name = Str(a, "name");
      }
    }
    out.users.emplace(name, std::move(k));
  }
  for (const auto& item : root["contexts"]) {
    std::string name = Str(item, "name");
    YAML::Node c = item["context"];
    if (name.empty() || !c) return InvalidArgument("a contexts[] entry lacks name or context");
    out.contexts.emplace(name,
                         KubeconfigContext{Str(c, "cluster"), Str(c, "user"), Str(c, "namespace")});
  }
  return out;
}

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

Result<Kubeconfig> ParseKubeconfig(const std::string& yaml_text, const std::string& dir) {
  try {
    return ParseKubeconfigNode(YAML::Load(yaml_text), dir);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("not a valid kubeconfig: ") + e.what());
  }
}

Kubeconfig MergeKubeconfigs(const std::vector<Kubeconfig>& files) {
  Kubeconfig out;
  for (const auto& f : files) {
    if (out.current_context.empty()) out.current_context = f.current_context;
    for (const auto& [k, v] : f.clusters) out.clusters.emplace(k, v);  // emplace keeps the first
    for (const auto& [k, v] : f.users) out.users.emplace(k, v);
    for (const auto& [k, v] : f.contexts) out.contexts.emplace(k, v);
  }
  return out;
}

Result<RestConfig> ResolveKubeconfig(const Kubeconfig& config, const std::string& context) {
  std::string name = context.empty() ? config.current_context : context;
  if (name.empty()) return InvalidArgument("kubeconfig has no current-context and none was given");
  auto ctx = config.contexts.find(name);
  if (ctx == config.contexts.end()) return NotFound("kubeconfig has no context \"" + name + "\"");
  auto cl = config.clusters.find(ctx->second.cluster);
  if (cl == config.clusters.end()) {
    return NotFound("context \"" + name + "\" names cluster \"" + ctx->second.cluster +
                    "\", which the kubeconfig does not define");
  }
  const KubeconfigCluster& c = cl->second;
  if (c.server.empty())
    return InvalidArgument("cluster \"" + ctx->second.cluster + "\" has no server");
  if (!c.proxy_url.empty()) {
    return InvalidArgument("cluster \"" + ctx->second.cluster +
                           "\" uses proxy-url, which allocguard does not support");
  }
  RestConfig rc;
  rc.server = c.server;
  rc.tls.ca_file = c.certificate_authority;
  rc.tls.ca_pem = c.certificate_authority_data;
  rc.tls.insecure_skip_verify = c.insecure_skip_tls_verify;
  rc.tls.server_name = c.tls_server_name;
  rc.ca_pem_for_exec = c.certificate_authority_data;
  if (rc.ca_pem_for_exec.empty() && !c.certificate_authority.empty()) {
    auto pem = ReadFile(c.certificate_authority);
    if (pem.ok()) rc.ca_pem_for_exec = *pem;
  }
  if (!ctx->second.user.empty()) {
    auto us = config.users.find(ctx->second.user);
    if (us == config.users.end()) {
      return NotFound("context \"" + name + "\" names user \"" + ctx->second.user +
                      "\", which the kubeconfig does not define");
    }
    const KubeconfigUser& u = us->second;
    if (u.has_auth_provider) {
      return InvalidArgument("user \"" + ctx->second.user + "\" uses the legacy auth-provider \"" +
                             u.auth_provider_name +
                             "\", which allocguard does not support; use an exec credential "
                             "plugin instead (see kubectl's client-go credential plugins)");
    }
    rc.tls.client_cert_file = u.client_certificate;
    rc.tls.client_key_file = u.client_key;
    rc.tls.client_cert_pem = u.client_certificate_data;
    rc.tls.client_key_pem = u.client_key_data;
    rc.token = u.token;
    rc.token_file = u.token_file;
    rc.exec = u.exec;
  }
  if (!ctx->second.namespace_.empty()) rc.namespace_ = ctx->second.namespace_;
  return rc;
}

Result<RestConfig> LoadKubeconfig(const KubeconfigSource& source) {
  std::vector<std::string> paths;
  bool must_exist = false;
  if (!source.explicit_path.empty()) {
    paths.push_back(source.explicit_path);
    must_exist = true;
  } else if (!source.kubeconfig_env.empty()) {
    std::stringstream ss(source.kubeconfig_env);
    for (std::string p; std::getline(ss, p, ':');) {
      if (!p.empty()) paths.push_back(p);
    }
  } else if (!source.home.empty()) {
    paths.push_back(source.home + "/.kube/config");
  }
  std::vector<Kubeconfig> files;
  for (const auto& p : paths) {
    auto text = ReadFile(p);
    if (!text.ok()) {
      if (must_exist) return text.status();
      continue;  // kubectl skips missing files in $KUBECONFIG
    }
    auto parsed = ParseKubeconfig(*text, std::filesystem::path(p).parent_path().string());
    if (!parsed.ok()) return parsed.status().WithContext(p);
    files.push_back(std::move(*parsed));
  }
  if (files.empty())
    return NotFound("no kubeconfig found (tried --kubeconfig, $KUBECONFIG, ~/.kube/config)");
  return ResolveKubeconfig(MergeKubeconfigs(files), source.context);
}

Result<RestConfig> LoadKubeconfigFromEnvironment(const std::string& explicit_path,
                                                 const std::string& context) {
  return LoadKubeconfig({explicit_path, Getenv("KUBECONFIG"), Getenv("HOME"), context});
}

Result<RestConfig> InClusterConfig(const InClusterSource& source) {
  if (source.service_host.empty() || source.service_port.empty()) {
    return FailedPrecondition(
        "not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set");
  }
  RestConfig rc;
  std::string host = source.service_host;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  rc.server = "https://" + host + ":" + source.service_port;
  rc.token_file = source.secrets_dir + "/token";
  if (!std::filesystem::exists(rc.token_file)) {
    return NotFound("service-account token " + rc.token_file + " does not exist");
  }
  rc.tls.ca_file = source.secrets_dir + "/ca.crt";
  if (!std::filesystem::exists(rc.tls.ca_file)) {
    return NotFound("service-account CA " + rc.tls.ca_file + " does not exist");
  }
  if (!source.pod_namespace.empty()) {
    rc.namespace_ = source.pod_namespace;
  } else if (auto ns = ReadFile(source.secrets_dir + "/namespace"); ns.ok()) {
    std::string n = *ns;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
    if (!n.empty()) rc.namespace_ = n;
  }
  return rc;
}

Result<RestConfig> InClusterConfigFromEnvironment() {
  InClusterSource s;
  s.service_host = Getenv("KUBERNETES_SERVICE_HOST");
  s.service_port = Getenv("KUBERNETES_SERVICE_PORT");
  s.pod_namespace = Getenv("POD_NAMESPACE");
  return InClusterConfig(s);
}

}  // namespace allocguard::kube
