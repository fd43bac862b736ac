#include "operator/manager/rollout_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/names.h"

namespace allocguard::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json Deployment(const std::string& ns, const std::string& name, const json& held) {
  json d = {{"metadata", {{"namespace", ns}, {"name", name}, {"resourceVersion", "1"}}}};
  if (!held.is_null()) d["metadata"]["annotations"][api::kHeldCandidateAnnotation] = held;
  return d;
}

TEST(HeldRolloutsTest, OneSeriesPerHeldWorkloadWhateverElseTheCacheHolds) {
  kube::Store store;
  AddHeldIndex(store);
  store.Upsert(Deployment("team-b", "api", "7d9f8c"));
  store.Upsert(Deployment("team-a", "db", "5b6c7d"));
  store.Upsert(Deployment("team-a", "web", nullptr));  // not held
  store.Upsert(Deployment("team-a", "odd", 42));       // a number is not a hold
  store.Upsert(Deployment("team-a", "empty", ""));     // an empty annotation is not one
  metrics::Registry registry;
  AddHeldRolloutMetrics(registry, "Deployment", store);

  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE allocguard_rollout_held gauge\n"
                              "allocguard_rollout_held{workload_namespace=\"team-a\","
                              "workload_kind=\"Deployment\",workload_name=\"db\"} 1\n"
                              "allocguard_rollout_held{workload_namespace=\"team-b\","
                              "workload_kind=\"Deployment\",workload_name=\"api\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("\"web\"")));
  EXPECT_THAT(text, Not(HasSubstr("\"odd\"")));
  EXPECT_THAT(text, Not(HasSubstr("\"empty\"")));

  // A released hold's series is gone at the next scrape.
  store.Upsert(Deployment("team-a", "db", nullptr));
  store.Upsert(Deployment("team-b", "api", nullptr));
  EXPECT_THAT(registry.Render(), Not(HasSubstr("allocguard_rollout_held{")));
}

TEST(HeldRolloutsTest, ObjectsWithoutANameOrOfAnotherShapeAreLeftOut) {
  const json nameless = {{"metadata", {{"annotations", {{api::kHeldCandidateAnnotation, "x"}}}}}};
  const json not_an_object = json::array({1, 2});
  const json metadata_string = {{"metadata", "held"}};
  EXPECT_TRUE(
      HeldRollouts("Deployment", {nameless, not_an_object, metadata_string}).samples.empty());
}

}  // namespace
}  // namespace allocguard::manager
