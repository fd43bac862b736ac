#include "operator/manager/canary_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json Canary(const std::string& verdict, const std::string& start = "2026-11-30T01:00:00Z",
            const std::string& end = "2026-11-30T01:12:30Z") {
  json c = {{"metadata", {{"name", "c"}, {"creationTimestamp", "2026-11-30T00:59:00Z"}}},
            {"status", {{"phase", "Running"}, {"startTime", start}}}};
  if (!verdict.empty()) {
    c["status"]["verdict"] = verdict;
    c["status"]["completionTime"] = end;
  }
  return c;
}

TEST(VerdictReachedTest, OnlyTheUpdateThatBringsTheVerdictCounts) {
  auto reached = VerdictReached(Canary(""), Canary("Ratchet"));
  ASSERT_TRUE(reached.has_value());
  EXPECT_EQ(reached->verdict, "Ratchet");
  ASSERT_TRUE(reached->duration_seconds.has_value());
  EXPECT_DOUBLE_EQ(*reached->duration_seconds, 750);  // 12 min 30 s

  EXPECT_FALSE(VerdictReached(Canary("Ratchet"), Canary("Ratchet")).has_value());
  EXPECT_FALSE(VerdictReached(Canary(""), Canary("")).has_value());
  // First seen already judged (the informer's initial list): not counted.
  EXPECT_FALSE(VerdictReached(json(), Canary("Flat")).has_value());
}

TEST(VerdictReachedTest, DurationFallsBackToCreationAndUnknownVerdictsAreOther) {
  json after = Canary("SomethingNew");
  after["status"].erase("startTime");
  auto reached = VerdictReached(Canary(""), after);
  ASSERT_TRUE(reached.has_value());
  EXPECT_EQ(reached->verdict, "Other");
  EXPECT_DOUBLE_EQ(*reached->duration_seconds, 810);  // from creation, 00:59:00

  json no_end = Canary("Failed");
  no_end["status"].erase("completionTime");
  reached = VerdictReached(Canary(""), no_end);
  ASSERT_TRUE(reached.has_value());
  EXPECT_FALSE(reached->duration_seconds.has_value());
}

TEST(CanaryMetricsTest, RendersVerdictsFromZeroAndCountsTransitions) {
  metrics::Registry registry;
  CanaryMetrics canaries(registry);
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_canary_verdicts_total{verdict=\"Flat\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("allocguard_canary_verdicts_total{verdict=\"Ratchet\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("allocguard_canary_duration_seconds_count")));

  canaries.OnUpdate(Canary(""), Canary("Flat"));
  canaries.OnUpdate(Canary("Flat"), Canary("Flat"));  // a later status write
  text = registry.Render();
  EXPECT_THAT(text, HasSubstr("allocguard_canary_verdicts_total{verdict=\"Flat\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("allocguard_canary_verdicts_total{verdict=\"Ratchet\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("allocguard_canary_duration_seconds_count{verdict=\"Flat\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("allocguard_canary_duration_seconds_sum{verdict=\"Flat\"} 750\n"));
  EXPECT_THAT(
      text, HasSubstr("allocguard_canary_duration_seconds_bucket{verdict=\"Flat\",le=\"960\"} 1"));
  EXPECT_THAT(
      text, HasSubstr("allocguard_canary_duration_seconds_bucket{verdict=\"Flat\",le=\"480\"} 0"));
}

}  // namespace
}  // namespace allocguard::manager
