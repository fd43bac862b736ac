#include "operator/api/object_meta.h"

#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;

TEST(ObjectMetaTest, ReadsEveryMember) {
  json object = json::parse(R"({"metadata": {
      "name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
      "generation": 3, "creationTimestamp": "2026-12-01T10:00:00Z",
      "deletionTimestamp": "2026-12-01T11:00:00Z",
      "labels": {"app": "web"}, "annotations": {"a": "1", "empty": ""},
      "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r-1",
         "controller": true}]}})");
  std::vector<std::string> problems;
  ObjectMeta meta = ParseObjectMeta(object, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(meta.name, "web");
  EXPECT_EQ(meta.namespace_name, "shop");
  EXPECT_EQ(meta.Key(), "shop/web");
  EXPECT_EQ(meta.uid, "u-1");
  EXPECT_EQ(meta.resource_version, "42");
  EXPECT_EQ(meta.generation, 3);
  EXPECT_TRUE(meta.Terminating());
  EXPECT_EQ(meta.labels.at("app"), "web");
  EXPECT_EQ(meta.Annotation("a"), "1");
  EXPECT_TRUE(meta.HasAnnotation("empty"));
  EXPECT_FALSE(meta.HasAnnotation("missing"));
  ASSERT_NE(meta.ControllerRef(), nullptr);
  EXPECT_EQ(meta.ControllerRef()->name, "web-1");
  EXPECT_EQ(ParseObjectMeta(json{{"metadata", ObjectMetaToJson(meta)}}), meta);
}

TEST(ObjectMetaTest, WrongTypesReadAsAbsentAndAreNamed) {
  json object = json::parse(R"({"metadata": {
      "name": 7, "generation": "3", "labels": {"app": 1, "tier": "db"},
      "annotations": [], "ownerReferences": [5, {"kind": "Deployment", "controller": "yes"}]}})");
  std::vector<std::string> problems;
  ObjectMeta meta = ParseObjectMeta(object, &problems);
  EXPECT_EQ(meta.name, "");
  EXPECT_EQ(meta.generation, 0);
  EXPECT_EQ(meta.labels, (std::map<std::string, std::string>{{"tier", "db"}}));
  EXPECT_TRUE(meta.annotations.empty());
  ASSERT_EQ(meta.owner_references.size(), 1u);
  EXPECT_FALSE(meta.owner_references[0].controller);
  EXPECT_EQ(meta.ControllerRef(), nullptr);
  EXPECT_EQ(problems, (std::vector<std::string>{
                          "metadata.name: must be a string, got 7",
                          "metadata.generation: must be an integer, got \"3\"",
                          "metadata.labels.app: must be a string, got 1",
                          "metadata.annotations: must be an object, got []",
                          "metadata.ownerReferences[0]: must be an object, got 5",
                          "metadata.ownerReferences[1].controller: must be a boolean, got \"yes\"",
                      }));
}

TEST(ObjectMetaTest, AnObjectWithoutUsableMetadataIsEmpty) {
  std::vector<std::string> problems;
  EXPECT_EQ(ParseObjectMeta(json(), &problems), ObjectMeta{});
  EXPECT_EQ(ParseObjectMeta(json::array(), &problems), ObjectMeta{});
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(ParseObjectMeta(json{{"metadata", "x"}}, &problems), ObjectMeta{});
  EXPECT_EQ(problems, std::vector<std::string>{"metadata: must be an object, got \"x\""});
}

}  // namespace
}  // namespace allocguard::api
