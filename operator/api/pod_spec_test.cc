#include "operator/api/pod_spec.h"

#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;

TEST(PodSpecTest, ReadsWhatInjectionDecidesBy) {
  json pod = json::parse(R"({
    "metadata": {"generateName": "web-7d9f-", "labels": {"app": "web"}},
    "spec": {
      "shareProcessNamespace": false, "hostNetwork": true,
      "securityContext": {"runAsUser": 1000, "runAsGroup": 3000},
      "volumes": [{"name": "data", "emptyDir": {}}],
      "initContainers": [{"name": "setup"}],
      "containers": [{
        "name": "app",
        "env": [{"name": "LD_PRELOAD", "value": "/x.so"},
                {"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "terminationMessagePolicy": "File",
        "resources": {"limits": {"memory": "512Mi"}},
        "securityContext": {"runAsUser": 2000}}]}})");
  std::vector<std::string> problems;
  Pod p = ParsePod(pod, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(p.has_spec);
  EXPECT_EQ(p.DisplayName(), "web-7d9f-*");
  EXPECT_EQ(p.metadata.labels.at("app"), "web");
  EXPECT_EQ(p.spec.share_process_namespace, false);
  EXPECT_TRUE(p.spec.host_network);
  EXPECT_EQ(p.spec.security_context.run_as_user, 1000);
  EXPECT_EQ(p.spec.security_context.run_as_group, 3000);
  EXPECT_EQ(p.spec.volume_names, std::vector<std::string>{"data"});
  ASSERT_EQ(p.spec.init_containers.size(), 1u);
  ASSERT_EQ(p.spec.containers.size(), 1u);
  const Container* app = p.spec.FindContainer("app");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->Env("LD_PRELOAD")->value, "/x.so");
  EXPECT_FALSE(app->Env("LD_PRELOAD")->has_value_from);
  EXPECT_TRUE(app->Env("FROM")->has_value_from);
  EXPECT_FALSE(app->Env("FROM")->value.has_value());
  EXPECT_EQ(app->Env("MISSING"), nullptr);
  EXPECT_EQ(app->volume_mounts, (std::vector<VolumeMount>{{"data", "/data"}}));
  EXPECT_EQ(app->termination_message_policy, "File");
  EXPECT_EQ(app->memory_limit, "512Mi");
  EXPECT_EQ(app->security_context.run_as_user, 2000);
  EXPECT_FALSE(p.spec.containers_malformed || p.spec.init_containers_malformed ||
               p.spec.volumes_malformed);
}

TEST(PodSpecTest, WrongTypesReadAsAbsentAndAreNamed) {
  json pod = json::parse(R"({
    "metadata": {"name": "web"},
    "spec": {
      "shareProcessNamespace": "no", "volumes": {"name": "data"},
      "initContainers": [3],
      "containers": [{"name": 7, "env": [{"name": "A", "value": 1}],
                      "resources": {"limits": {"memory": 512}},
                      "securityContext": {"runAsUser": "root"}}]}})");
  std::vector<std::string> problems;
  Pod p;
  ASSERT_NO_THROW(p = ParsePod(pod, &problems));
  EXPECT_EQ(p.DisplayName(), "web");
  EXPECT_FALSE(p.spec.share_process_namespace.has_value());
  EXPECT_TRUE(p.spec.volumes_malformed);
  EXPECT_TRUE(p.spec.init_containers_malformed);
  EXPECT_FALSE(p.spec.containers_malformed);
  ASSERT_EQ(p.spec.containers.size(), 1u);
  EXPECT_EQ(p.spec.containers[0].name, "");
  EXPECT_FALSE(p.spec.containers[0].env[0].value.has_value());
  EXPECT_EQ(p.spec.containers[0].memory_limit, "");
  EXPECT_FALSE(p.spec.containers[0].security_context.run_as_user.has_value());
  auto named = [&](const std::string& prefix) {
    for (const std::string& problem : problems) {
      if (problem.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(named("spec.shareProcessNamespace: must be a boolean"));
  EXPECT_TRUE(named("spec.volumes: must be a list"));
  EXPECT_TRUE(named("spec.initContainers[0]: must be an object"));
  EXPECT_TRUE(named("spec.containers[0].name: must be a string"));
  EXPECT_TRUE(named("spec.containers[0].env[0].value: must be a string"));
  EXPECT_TRUE(named("spec.containers[0].resources.limits.memory: must be a string"));
  EXPECT_TRUE(named("spec.containers[0].securityContext.runAsUser: must be an integer"));
}

TEST(PodSpecTest, NonObjectsNeverThrow) {
  for (const json& garbage : {json(), json(5), json("pod"), json::array({1}), json{{"spec", "x"}},
                              json{{"metadata", 1}, {"spec", {{"containers", 2}}}}}) {
    std::vector<std::string> problems;
    Pod p;
    ASSERT_NO_THROW(p = ParsePod(garbage, &problems)) << garbage.dump();
    EXPECT_EQ(p.DisplayName(), "(unnamed pod)");
  }
  EXPECT_FALSE(ParsePod(json{{"spec", "x"}}).has_spec);
  EXPECT_TRUE(ParsePod(json{{"spec", {{"containers", 2}}}}).spec.containers_malformed);
}

}  // namespace
}  // namespace allocguard::api
