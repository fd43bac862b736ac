#include "operator/manager/manager_config.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::manager {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseBindAddressTest, AcceptsHostPortAndWildcards) {
  EXPECT_EQ(*ParseBindAddress(":8081"), std::make_pair(std::string("0.0.0.0"), 8081));
  EXPECT_EQ(*ParseBindAddress("127.0.0.1:0"), std::make_pair(std::string("127.0.0.1"), 0));
  EXPECT_EQ(*ParseBindAddress("[::]:9443"), std::make_pair(std::string("::"), 9443));
}

TEST(ParseBindAddressTest, RejectsWhatIsNotHostPort) {
  for (const char* bad : {"8081", ":x", ":65536", ":-1", ":80a", ""}) {
    auto r = ParseBindAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(LoadManagerConfigTest, AKubeconfigErrorSaysKubeconfig) {
  ManagerOptions options;
  options.kubeconfig = "/nonexistent/kubeconfig";
  auto config = LoadManagerConfig(options);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), StartsWith("kubeconfig: "));
}

TEST(LoadManagerConfigTest, ResolvesAddressesAndTheLease) {
  const std::string path = ::testing::TempDir() + "/manager_config_test.kubeconfig";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
      "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
      "users: [{name: u, user: {token: t}}]\n"
      "contexts: [{name: c, context: {cluster: k, user: u}}]\n",
      f);
  std::fclose(f);
  ManagerOptions options;
  options.kubeconfig = path;
  options.leader_elect = true;
  options.pod_name = "allocguard-0";
  options.health_probe_bind_address = "127.0.0.1:0";
  auto config = LoadManagerConfig(options);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->health_probe_address, std::make_pair(std::string("127.0.0.1"), 0));
  EXPECT_EQ(config->metrics_address, std::make_pair(std::string("0.0.0.0"), 8080));
  EXPECT_EQ(config->leader_election.lease_namespace, "allocguard-system");
  EXPECT_EQ(config->leader_election.lease_name, "allocguard-operator");
  EXPECT_THAT(config->leader_election.identity, StartsWith("allocguard-0_"));

  options.metrics_bind_address = "nope";
  auto bad = LoadManagerConfig(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"nope\" must be host:port"));
}

}  // namespace
}  // namespace allocguard::manager
