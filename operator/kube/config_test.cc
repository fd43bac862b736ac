#include "operator/kube/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "operator/kube/credentials.h"

namespace allocguard::kube {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kube-config-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& content, bool executable = false) {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << content;
    if (executable) chmod(p.c_str(), 0755);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const char* kFirst = R"(
apiVersion: v1
kind: Config
current-context: first
clusters:
- name: shared
  cluster: {server: "https://first.example:6443", certificate-authority: ca/first.crt}
users:
- name: shared
  user: {token: first-token}
contexts:
- name: first
  context: {cluster: shared, user: shared, namespace: team-a}
)";

const char* kSecond = R"(
current-context: second
clusters:
- name: shared
  cluster: {server: "https://second.example:6443"}
- name: only-second
  cluster:
    server: "https://[fd00::1]:443"
    certificate-authority-data: LS0tLS1CRUdJTi0tLS0tCg==
    tls-server-name: api.internal
users:
- name: cert-user
  user: {client-certificate: certs/c.crt, client-key: /abs/c.key}
contexts:
- name: second
  context: {cluster: only-second, user: cert-user}
)";

TEST(KubeconfigTest, FirstFileToSetAValueWins) {
  auto a = ParseKubeconfig(kFirst, "/home/u/.kube");
  auto b = ParseKubeconfig(kSecond, "/etc/k8s");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Kubeconfig merged = MergeKubeconfigs({*a, *b});
  EXPECT_EQ(merged.current_context, "first");
  EXPECT_EQ(merged.clusters.at("shared").server, "https://first.example:6443");
  EXPECT_EQ(merged.clusters.count("only-second"), 1u);

  auto rc = ResolveKubeconfig(merged, "");
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->server, "https://first.example:6443");
  EXPECT_EQ(rc->token, "first-token");
  EXPECT_EQ(rc->namespace_, "team-a");
  // Relative paths resolve against the directory of the file that set them.
  EXPECT_EQ(rc->tls.ca_file, "/home/u/.kube/ca/first.crt");

  Kubeconfig reversed = MergeKubeconfigs({*b, *a});
  EXPECT_EQ(reversed.current_context, "second");
  EXPECT_EQ(reversed.clusters.at("shared").server, "https://second.example:6443");
}

TEST(KubeconfigTest, ContextOverrideDataFieldsAndTlsServerName) {
  auto b = ParseKubeconfig(kSecond, "/etc/k8s");
  ASSERT_TRUE(b.ok());
  auto rc = ResolveKubeconfig(*b, "second");
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->server, "https://[fd00::1]:443");
  EXPECT_EQ(rc->tls.ca_pem, "-----BEGIN-----\n");
  EXPECT_EQ(rc->tls.server_name, "api.internal");
  EXPECT_EQ(rc->tls.client_cert_file, "/etc/k8s/certs/c.crt");
  EXPECT_EQ(rc->tls.client_key_file, "/abs/c.key");
  EXPECT_EQ(rc->namespace_, "default");
  auto missing = ResolveKubeconfig(*b, "nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("\"nope\""), std::string::npos);
}

TEST(KubeconfigTest, RejectsLegacyAuthProviderClearly) {
  auto k = ParseKubeconfig(R"(
current-context: c
clusters: [{name: x, cluster: {server: "https://x"}}]
users: [{name: u, user: {auth-provider: {name: gcp, config: {}}}}]
contexts: [{name: c, context: {cluster: x, user: u}}]
)",
                           "/");
  ASSERT_TRUE(k.ok());
  auto rc = ResolveKubeconfig(*k, "");
  ASSERT_FALSE(rc.ok());
  EXPECT_NE(rc.status().message().find("legacy auth-provider \"gcp\""), std::string::npos);
  EXPECT_NE(rc.status().message().find("exec credential plugin"), std::string::npos);
}

TEST(KubeconfigTest, MalformedYamlIsAnErrorNotAnException) {
  auto k = ParseKubeconfig("clusters: [unclosed", "/");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
  auto bad64 = ParseKubeconfig(R"(
clusters: [{name: x, cluster: {server: "https://x", certificate-authority-data: "%%%"}}]
)",
                               "/");
  ASSERT_FALSE(bad64.ok());
  EXPECT_NE(bad64.status().message().find("not base64"), std::string::npos);
}

TEST(KubeconfigTest, LoadingRulesMergeTheKubeconfigListAndSkipMissingFiles) {
  TempDir dir;
  std::string a = dir.Write("a", kFirst);
  std::string b = dir.Write("b", kSecond);
  auto rc = LoadKubeconfig({"", dir.path() + "/missing:" + b + ":" + a, "", ""});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->server, "https://[fd00::1]:443");  // b's current-context wins
  auto explicit_missing = LoadKubeconfig({dir.path() + "/missing", b, "", ""});
  EXPECT_EQ(explicit_missing.status().code(), StatusCode::kNotFound);
}

TEST(InClusterConfigTest, BracketsIpv6AndReadsTheServiceAccountFiles) {
  TempDir dir;
  dir.Write("token", "tok\n");
  dir.Write("ca.crt", "pem");
  dir.Write("namespace", "ops\n");
  auto rc = InClusterConfig({"fd00:10:96::1", "443", "", dir.path()});
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->server, "https://[fd00:10:96::1]:443");
  EXPECT_EQ(rc->token_file, dir.path() + "/token");
  EXPECT_EQ(rc->tls.ca_file, dir.path() + "/ca.crt");
  EXPECT_EQ(rc->namespace_, "ops");
  EXPECT_EQ(InClusterConfig({"10.0.0.1", "443", "from-env", dir.path()})->namespace_, "from-env");
  EXPECT_EQ(InClusterConfig({"", "", "", dir.path()}).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(FileTokenSourceTest, RereadsAfterAMinuteAndOnForcedRefresh) {
  TempDir dir;
  std::string path = dir.Write("token", "one\n");
  FakeClock clock;
  FileTokenSource tokens(path, &clock);
  EXPECT_EQ(*tokens.Token(false), "one");
  dir.Write("token", "two\n");
  EXPECT_EQ(*tokens.Token(false), "one");  // cached
  EXPECT_EQ(*tokens.Token(true), "two");   // after a 401
  dir.Write("token", "three\n");
  clock.Advance(std::chrono::seconds(61));
  EXPECT_EQ(*tokens.Token(false), "three");
  std::filesystem::remove(path);
  clock.Advance(std::chrono::seconds(61));
  EXPECT_EQ(*tokens.Token(false), "three");  // a vanished file keeps the last token
}

TEST(ExecTokenSourceTest, RunsThePluginAndCachesUntilExpiry) {
  TempDir dir;
  std::string counter = dir.path() + "/runs";
  std::string plugin = dir.Write("plugin.sh", R"(#!/bin/sh
echo run >> ")" + counter + R"("
case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) exit 3 ;; esac
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
  "status":{"token":"'"$PLUGIN_TOKEN"'","expirationTimestamp":"2099-01-01T00:00:00Z"}}'
)",
                                 true);
  ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.command = plugin;
  exec.env = {{"PLUGIN_TOKEN", "from-plugin"}};
  FakeClock clock;
  ExecTokenSource tokens(exec, "https://x", "", &clock);
  auto t = tokens.Token(false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "from-plugin");
  EXPECT_EQ(*tokens.Token(false), "from-plugin");
  EXPECT_EQ(tokens.runs_for_test(), 1);
  EXPECT_EQ(*tokens.Token(true), "from-plugin");
  EXPECT_EQ(tokens.runs_for_test(), 2);
}

TEST(ExecTokenSourceTest, ClusterInfoCarriesTheServerAndTheCaAsBase64) {
  TempDir dir;
  // The plugin answers only when KUBERNETES_EXEC_INFO names the server and
  // the CA, base64 with its padding ("PEM-X" is 5 bytes: one '=').
  std::string plugin = dir.Write("plugin.sh", R"(#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in *'"server":"https://x"'*) ;; *) exit 3 ;; esac
case "$KUBERNETES_EXEC_INFO" in *'"certificate-authority-data":"UEVNLVg="'*) ;; *) exit 4 ;; esac
echo '{"kind":"ExecCredential","status":{"token":"with-cluster-info"}}'
)",
                                 true);
  ExecConfig exec;
  exec.api_version = "client.authentication.k8s.io/v1";
  exec.command = plugin;
  exec.provide_cluster_info = true;
  FakeClock clock;
  ExecTokenSource tokens(exec, "https://x", "PEM-X", &clock);
  auto t = tokens.Token(false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "with-cluster-info");
}

TEST(ExecTokenSourceTest, ExpiredCredentialRunsThePluginAgain) {
  TempDir dir;
  std::string plugin = dir.Write("plugin.sh", R"(#!/bin/sh
echo '{"kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"1970-01-01T02:00:00Z"}}'
)",
                                 true);
  ExecConfig exec{"client.authentication.k8s.io/v1beta1", plugin, {}, {}, "", false, ""};
  FakeClock clock;  // its wall clock starts at 1970-01-01T01:00:00Z
  ExecTokenSource tokens(exec, "https://x", "", &clock);
  ASSERT_TRUE(tokens.Token(false).ok());
  ASSERT_TRUE(tokens.Token(false).ok());
  EXPECT_EQ(tokens.runs_for_test(), 1);
  clock.Advance(std::chrono::hours(1));
  ASSERT_TRUE(tokens.Token(false).ok());
  EXPECT_EQ(tokens.runs_for_test(), 2);
}

TEST(ExecTokenSourceTest, HangingOrFailingPluginsGiveClearErrors) {
  TempDir dir;
  std::string hang = dir.Write("hang.sh", "#!/bin/sh\nexec sleep 30\n", true);
  FakeClock clock;
  ExecTokenSource slow({"client.authentication.k8s.io/v1", hang, {}, {}, "", false, ""}, "", "",
                       &clock, std::chrono::milliseconds(200));
  auto t = slow.Token(false);
  EXPECT_EQ(t.status().code(), StatusCode::kDeadlineExceeded);

  ExecTokenSource missing({"client.authentication.k8s.io/v1",
                           dir.path() + "/nope",
                           {},
                           {},
                           "",
                           false,
                           "install it with apt"},
                          "", "", &clock);
  auto m = missing.Token(false);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("install it with apt"), std::string::npos);

  std::string garbage = dir.Write("garbage.sh", "#!/bin/sh\necho not json\n", true);
  ExecTokenSource bad({"client.authentication.k8s.io/v1", garbage, {}, {}, "", false, ""}, "", "",
                      &clock);
  EXPECT_EQ(bad.Token(false).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace allocguard::kube
