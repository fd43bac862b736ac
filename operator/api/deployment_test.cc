#include "operator/api/deployment.h"

#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;

json Template(const std::string& image) {
  return {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", {{{"name", "app"}, {"image", image}}}}}}};
}

TEST(DeploymentTest, ReadsMetadataPauseReplicasAndTemplate) {
  json d = {{"metadata", {{"name", "web"}, {"namespace", "shop"}, {"annotations", {{"a", "1"}}}}},
            {"spec", {{"paused", true}, {"replicas", 3}, {"template", Template("v1")}}}};
  std::vector<std::string> problems;
  Deployment parsed = ParseDeployment(d, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_TRUE(parsed.present);
  EXPECT_EQ(parsed.metadata.Key(), "shop/web");
  EXPECT_TRUE(parsed.paused);
  EXPECT_EQ(parsed.replicas, 3);
  EXPECT_EQ(parsed.pod_template.metadata.labels.at("app"), "web");
  EXPECT_EQ(parsed.pod_template.hash, PodTemplateHash(Template("v1")));
  EXPECT_EQ(parsed.pod_template.hash.size(), 16u);
}

TEST(DeploymentTest, TemplateHashKeysOnSpecLabelsAndOwnAnnotations) {
  json a = Template("v1");
  json restarted = a;
  restarted["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "now";
  EXPECT_EQ(PodTemplateHash(a), PodTemplateHash(restarted));
  json libc = a;
  libc["metadata"]["annotations"]["allocguard.io/libc"] = "musl";
  EXPECT_NE(PodTemplateHash(a), PodTemplateHash(libc));
  EXPECT_NE(PodTemplateHash(a), PodTemplateHash(Template("v2")));
  json unlabelled = a;
  unlabelled["metadata"].erase("labels");
  json empty_labels = unlabelled;
  empty_labels["metadata"]["labels"] = json::object();
  EXPECT_EQ(PodTemplateHash(unlabelled), PodTemplateHash(empty_labels));
}

// What a canary measures: not the labels (its Pods carry their own), but
// the spec and allocguard's annotations.
TEST(DeploymentTest, MeasuredTemplateHashLeavesOutTheLabelsOnly) {
  json a = Template("v1");
  json relabelled = a;
  relabelled["metadata"]["labels"] = {{"app", "web-b"}, {"instance", "b"}};
  EXPECT_NE(PodTemplateHash(a), PodTemplateHash(relabelled));
  EXPECT_EQ(MeasuredTemplateHash(a), MeasuredTemplateHash(relabelled));
  EXPECT_NE(MeasuredTemplateHash(a), MeasuredTemplateHash(Template("v2")));
  json libc = a;
  libc["metadata"]["annotations"]["allocguard.io/libc"] = "musl";
  EXPECT_NE(MeasuredTemplateHash(a), MeasuredTemplateHash(libc));
  EXPECT_EQ(MeasuredTemplateHash(a).size(), 16u);
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// A fixed vector, which e2e/chaos.py's Python digests (chaos_test.py) must
// give too: the node tier's watcher matches canaries to templates with them.
TEST(DeploymentTest, TemplateDigestsOfAFixedTemplate) {
  const json t = json::parse(R"({"metadata": {"labels": {"app": "web"},
      "annotations": {"allocguard.io/libc": "glibc", "other": "x"}},
      "spec": {"containers": [{"name": "server", "image": "web:1",
                               "resources": {"limits": {"memory": "512Mi"}}}]}})");
  EXPECT_EQ(PodTemplateHash(t), "37b5d289a2006b03");
  EXPECT_EQ(MeasuredTemplateHash(t), "d08d37e06af2048f");
}

TEST(DeploymentTest, WrongTypesReadAsAbsentAndAreNamed) {
  json d = {{"metadata", {{"name", "web"}}},
            {"spec", {{"paused", "yes"}, {"replicas", "3"}, {"template", 5}}}};
  std::vector<std::string> problems;
  Deployment parsed;
  ASSERT_NO_THROW(parsed = ParseDeployment(d, &problems));
  EXPECT_FALSE(parsed.paused);
  EXPECT_FALSE(parsed.replicas.has_value());
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0].rfind("spec.paused: must be a boolean", 0), 0u) << problems[0];
  EXPECT_EQ(problems[1].rfind("spec.replicas: must be an integer", 0), 0u) << problems[1];
  EXPECT_EQ(problems[2].rfind("spec.template: must be an object", 0), 0u) << problems[2];
  std::vector<std::string> labels;
  json bad_labels = {{"spec", {{"template", {{"metadata", {{"labels", {{"app", 1}}}}}}}}}};
  ParseDeployment(bad_labels, &labels);
  ASSERT_EQ(labels.size(), 1u);
  EXPECT_EQ(labels[0].rfind("spec.template.metadata.labels.app: must be a string", 0), 0u)
      << labels[0];
}

TEST(DeploymentTest, NullIsAbsentAndNothingThrows) {
  EXPECT_FALSE(ParseDeployment(json()).present);
  for (const json& garbage : {json(5), json("d"), json::array(), json{{"spec", 1}}}) {
    ASSERT_NO_THROW(ParseDeployment(garbage)) << garbage.dump();
    EXPECT_TRUE(ParseDeployment(garbage).present);
  }
}

}  // namespace
}  // namespace allocguard::api
