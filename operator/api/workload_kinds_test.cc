#include "operator/api/workload_kinds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::StartsWith;

json Template(const std::string& image) {
  return {{"metadata", {{"labels", {{"app", "db"}}}}},
          {"spec", {{"containers", {{{"name", "db"}, {"image", image}}}}}}};
}

TEST(StatefulSetTest, ReadsReplicasStrategyAndTemplate) {
  json s = {{"metadata", {{"name", "db"}, {"namespace", "data"}, {"annotations", {{"a", "1"}}}}},
            {"spec",
             {{"replicas", 3},
              {"updateStrategy",
               {{"type", "RollingUpdate"},
                {"rollingUpdate", {{"partition", 2}, {"maxUnavailable", "50%"}}}}},
              {"template", Template("pg:16")}}}};
  std::vector<std::string> problems;
  StatefulSet parsed = ParseStatefulSet(s, &problems);
  EXPECT_THAT(problems, ElementsAre());
  EXPECT_TRUE(parsed.present);
  EXPECT_EQ(parsed.metadata.Key(), "data/db");
  EXPECT_EQ(parsed.metadata.Annotation("a"), "1");
  EXPECT_EQ(parsed.replicas, 3);
  EXPECT_EQ(parsed.update_strategy.type, UpdateStrategyType::kRollingUpdate);
  EXPECT_TRUE(parsed.update_strategy.type_written);
  EXPECT_EQ(parsed.update_strategy.partition, 2);
  EXPECT_EQ(parsed.update_strategy.max_unavailable.percent, "50%");
  EXPECT_EQ(parsed.update_strategy.max_unavailable.ToJson(), "50%");
  EXPECT_EQ(parsed.update_strategy.as_written, s["spec"]["updateStrategy"]);
  EXPECT_EQ(parsed.pod_template.hash, PodTemplateHash(Template("pg:16")));
  EXPECT_EQ(parsed.pod_template.metadata.labels.at("app"), "db");
}

TEST(StatefulSetTest, DefaultsAreTheApiServers) {
  StatefulSet parsed = ParseStatefulSet({{"spec", {{"template", Template("pg:16")}}}});
  EXPECT_FALSE(parsed.replicas.has_value());
  EXPECT_EQ(parsed.ReplicasOrDefault(), 1);
  EXPECT_EQ(parsed.update_strategy.type, UpdateStrategyType::kRollingUpdate);
  EXPECT_FALSE(parsed.update_strategy.type_written);
  EXPECT_FALSE(parsed.update_strategy.partition.has_value());
  EXPECT_FALSE(parsed.update_strategy.max_unavailable.Present());
  EXPECT_TRUE(parsed.update_strategy.as_written.is_null());
  json on_delete = {{"spec", {{"updateStrategy", {{"type", "OnDelete"}}}}}};
  EXPECT_EQ(ParseStatefulSet(on_delete).update_strategy.type, UpdateStrategyType::kOnDelete);
}

TEST(StatefulSetTest, WrongTypesReadAsAbsentAndAreNamedByPath) {
  json s = {{"spec",
             {{"replicas", "3"},
              {"updateStrategy",
               {{"type", "Sideways"},
                {"rollingUpdate", {{"partition", "2"}, {"maxUnavailable", "half"}}}}},
              {"template", 5}}}};
  std::vector<std::string> problems;
  StatefulSet parsed;
  ASSERT_NO_THROW(parsed = ParseStatefulSet(s, &problems));
  EXPECT_FALSE(parsed.replicas.has_value());
  EXPECT_FALSE(parsed.update_strategy.type_written);
  EXPECT_FALSE(parsed.update_strategy.partition.has_value());
  EXPECT_FALSE(parsed.update_strategy.max_unavailable.Present());
  EXPECT_THAT(problems,
              ElementsAre(StartsWith("spec.updateStrategy.type: must be RollingUpdate or OnDelete"),
                          StartsWith("spec.updateStrategy.rollingUpdate.maxUnavailable: must be an "
                                     "integer or a percentage"),
                          StartsWith("spec.updateStrategy.rollingUpdate.partition: must be an "
                                     "integer, got \"2\""),
                          StartsWith("spec.template: must be an object"),
                          StartsWith("spec.replicas: must be an integer")));
}

TEST(StatefulSetTest, NegativeCountsAndNonObjectsAreReported) {
  std::vector<std::string> problems;
  ParseStatefulSet(
      {{"spec", {{"replicas", -1}, {"updateStrategy", {{"rollingUpdate", {{"partition", -2}}}}}}}},
      &problems);
  EXPECT_THAT(problems,
              ElementsAre(StartsWith("spec.updateStrategy.rollingUpdate.partition: must not be "
                                     "negative"),
                          StartsWith("spec.replicas: must not be negative")));
  problems.clear();
  StatefulSet parsed = ParseStatefulSet({{"spec", {{"updateStrategy", "OnDelete"}}}}, &problems);
  EXPECT_EQ(parsed.update_strategy.type, UpdateStrategyType::kRollingUpdate);
  EXPECT_THAT(problems, ElementsAre(StartsWith("spec.updateStrategy: must be an object")));
  problems.clear();
  ParseStatefulSet({{"spec", {{"updateStrategy", {{"rollingUpdate", 1}}}}}}, &problems);
  EXPECT_THAT(problems,
              ElementsAre(StartsWith("spec.updateStrategy.rollingUpdate: must be an object")));
}

TEST(StatefulSetTest, NullIsAbsentAndNothingThrows) {
  EXPECT_FALSE(ParseStatefulSet(json()).present);
  for (const json& garbage : {json(5), json("s"), json::array(), json{{"spec", 1}},
                              json{{"spec", {{"updateStrategy", json::array()}}}}}) {
    std::vector<std::string> problems;
    ASSERT_NO_THROW(ParseStatefulSet(garbage, &problems)) << garbage.dump();
    EXPECT_TRUE(ParseStatefulSet(garbage).present);
  }
}

TEST(StatefulSetTest, ReadsClaimNamesAndSizesAndTheSlimCacheKeepsThem) {
  json s = {{"metadata", {{"name", "db"}, {"namespace", "data"}}},
            {"spec",
             {{"template", Template("pg:16")},
              {"volumeClaimTemplates",
               {{{"metadata", {{"name", "pgdata"}}},
                 {"spec",
                  {{"accessModes", {"ReadWriteOnce"}},
                   {"storageClassName", "fast"},
                   {"resources", {{"requests", {{"storage", "20Gi"}}}}}}}},
                {{"metadata", {{"name", "wal"}}}, {"spec", json::object()}},
                {{"metadata", {{"name", "odd"}}},
                 {"spec", {{"resources", {{"requests", {{"storage", 5}}}}}}}},
                {{"spec", json::object()}}}}}}};
  std::vector<std::string> problems;
  StatefulSet parsed = ParseStatefulSet(s, &problems);
  EXPECT_THAT(parsed.volume_claim_templates,
              ElementsAre(VolumeClaimTemplate{"pgdata", int64_t{20} << 30},
                          VolumeClaimTemplate{"wal", std::nullopt},
                          VolumeClaimTemplate{"odd", std::nullopt}));
  EXPECT_THAT(problems,
              ElementsAre(StartsWith("spec.volumeClaimTemplates[2].spec.resources.requests."
                                     "storage: must be a quantity")));

  json slim = s;
  SlimStatefulSet(slim);
  EXPECT_FALSE(slim["spec"].contains("template") && slim["spec"]["template"].contains("spec"))
      << "the template's spec is dropped";
  EXPECT_EQ(ParseStatefulSet(slim).volume_claim_templates, parsed.volume_claim_templates);
  EXPECT_FALSE(slim.dump().find("storageClassName") != std::string::npos);
  for (json garbage :
       {json(), json(3), json{{"spec", 1}}, json{{"spec", {{"volumeClaimTemplates", "x"}}}}}) {
    EXPECT_NO_THROW(SlimStatefulSet(garbage));
  }
}

TEST(DaemonSetTest, ReadsRollingUpdateSettings) {
  json d = {{"metadata", {{"name", "shipper"}, {"namespace", "logs"}}},
            {"spec",
             {{"updateStrategy",
               {{"type", "RollingUpdate"},
                {"rollingUpdate", {{"maxUnavailable", 0}, {"maxSurge", "10%"}}}}},
              {"template", Template("vector:1")}}}};
  std::vector<std::string> problems;
  DaemonSet parsed = ParseDaemonSet(d, &problems);
  EXPECT_THAT(problems, ElementsAre());
  EXPECT_EQ(parsed.metadata.Key(), "logs/shipper");
  EXPECT_EQ(parsed.update_strategy.max_unavailable.count, 0);
  EXPECT_TRUE(parsed.update_strategy.max_unavailable.Present());
  EXPECT_EQ(parsed.update_strategy.max_surge.percent, "10%");
  EXPECT_FALSE(parsed.update_strategy.partition.has_value());
  EXPECT_EQ(parsed.pod_template.hash, PodTemplateHash(Template("vector:1")));
}

TEST(DaemonSetTest, WrongTypesReadAsAbsentAndAreNamedByPath) {
  json d = {{"spec",
             {{"updateStrategy",
               {{"type", 7}, {"rollingUpdate", {{"maxUnavailable", true}, {"maxSurge", "5"}}}}},
              {"template", {{"metadata", {{"labels", {{"app", 1}}}}}}}}}};
  std::vector<std::string> problems;
  DaemonSet parsed;
  ASSERT_NO_THROW(parsed = ParseDaemonSet(d, &problems));
  EXPECT_FALSE(parsed.update_strategy.max_unavailable.Present());
  EXPECT_FALSE(parsed.update_strategy.max_surge.Present());
  EXPECT_THAT(
      problems,
      ElementsAre(
          StartsWith("spec.updateStrategy.type: must be a string"),
          StartsWith("spec.updateStrategy.rollingUpdate.maxUnavailable: must be an integer or a "
                     "percentage"),
          StartsWith("spec.updateStrategy.rollingUpdate.maxSurge: must be an integer or a "
                     "percentage"),
          StartsWith("spec.template.metadata.labels.app: must be a string")));
  EXPECT_FALSE(ParseDaemonSet(json()).present);
  ASSERT_NO_THROW(ParseDaemonSet(json::array()));
}

}  // namespace
}  // namespace allocguard::api
