#include "operator/api/policy_status.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace allocguard::api {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;

json FullStatus() {
  return {{"observedGeneration", 3},
          {"conditions",
           {{{"type", "Ready"},
             {"status", "True"},
             {"reason", "Accepted"},
             {"message", "m"},
             {"observedGeneration", 3},
             {"lastTransitionTime", "2026-11-29T10:00:00Z"}}}},
          {"governedCount", 1},
          {"governed", {{{"kind", "Deployment"}, {"name", "web"}, {"namespace", "shop"}}}},
          {"lastVerdict",
           {{"workload", "web"},
            {"templateHash", "h"},
            {"canary", "web-h"},
            {"verdict", "Flat"},
            {"floorSlope", "+0.00 GiB/h"},
            {"flatVariant", ""},
            {"explanation", "flat"},
            {"time", "2026-11-29T10:00:00Z"}}},
          {"verdicts",
           {{{"workload", "web"},
             {"templateHash", "h"},
             {"canary", "web-h"},
             {"verdict", "Flat"},
             {"floorSlope", "+0.00 GiB/h"},
             {"flatVariant", ""},
             {"explanation", "flat"},
             {"time", "2026-11-29T10:00:00Z"}}}},
          {"injectionDrift", {{{"pod", "web-1"}, {"reason", "r"}}}},
          {"injectionSuspended",
           {{{"workload", "Deployment/web"},
             {"podTemplateHash", "7d"},
             {"templateHash", "t"},
             {"policyGeneration", 3},
             {"pod", "web-7d-a"},
             {"container", "app"},
             {"reason", "LoaderError"},
             {"message", "m"},
             {"since", "2026-11-29T10:00:00Z"}}}}};
}

TEST(AllocatorPolicyStatusTest, RoundTrips) {
  std::vector<std::string> problems;
  const AllocatorPolicyStatus status = ParseAllocatorPolicyStatus(FullStatus(), &problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(status.observed_generation, 3);
  ASSERT_TRUE(status.last_verdict.has_value());
  EXPECT_EQ(status.last_verdict->verdict, Verdict::kFlat);
  EXPECT_EQ(AllocatorPolicyStatusToJson(status), FullStatus());
}

TEST(AllocatorPolicyStatusTest, AnUnknownVerdictIsKeptAsWritten) {
  json s = FullStatus();
  s["verdicts"][0]["verdict"] = "Wobbly";
  const AllocatorPolicyStatus status = ParseAllocatorPolicyStatus(s);
  EXPECT_EQ(status.verdicts[0].verdict, Verdict::kFailed);
  EXPECT_EQ(AllocatorPolicyStatusToJson(status)["verdicts"][0]["verdict"], "Wobbly");
}

// The CRD refuses an empty or malformed date-time, and with it the whole
// status write: the writer leaves such a member out.
TEST(AllocatorPolicyStatusTest, NeverWritesAnInvalidDateTime) {
  AllocatorPolicyStatus status;
  PolicyVerdict no_time;
  no_time.canary = "web-h1";
  no_time.verdict = Verdict::kFlat;
  PolicyVerdict bad_time = no_time;
  bad_time.time = "yesterday";
  status.verdicts = {no_time, bad_time};
  status.last_verdict = no_time;
  InjectionSuspendedStatus suspended;
  suspended.workload = "Deployment/web";
  suspended.since = "";
  status.injection_suspended = {suspended};
  const json written = AllocatorPolicyStatusToJson(status);
  for (const json& v : written["verdicts"]) EXPECT_FALSE(v.contains("time")) << v;
  EXPECT_FALSE(written["lastVerdict"].contains("time"));
  EXPECT_FALSE(written["injectionSuspended"][0].contains("since"));
  EXPECT_FALSE(written["injectionSuspended"][0].contains("policyGeneration"));
}

TEST(AllocatorPolicyStatusTest, GovernedListsEveryGatedKindAndLeavesOutWhatTheCrdRefuses) {
  json s = FullStatus();
  s["governed"] = {{{"kind", "StatefulSet"}, {"name", "db"}, {"namespace", "shop"}},
                   {{"kind", "DaemonSet"}, {"name", "agent"}, {"namespace", "shop"}},
                   {{"kind", "CronJob"}, {"name", "nightly"}, {"namespace", "shop"}},
                   {{"kind", "Deployment"}, {"name", ""}, {"namespace", "shop"}}};
  std::vector<std::string> problems;
  const AllocatorPolicyStatus status = ParseAllocatorPolicyStatus(s, &problems);
  ASSERT_EQ(status.governed.size(), 2u);
  EXPECT_EQ(status.governed[0].kind, WorkloadKind::kStatefulSet);
  EXPECT_EQ(status.governed[1].kind, WorkloadKind::kDaemonSet);
  EXPECT_THAT(problems, Contains(HasSubstr("status.governed[2].kind: must be Deployment, "
                                           "StatefulSet or DaemonSet, got \"CronJob\"")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.governed[3].name: must not be empty")));
  const json written = AllocatorPolicyStatusToJson(status);
  EXPECT_EQ(written["governed"][0],
            json({{"kind", "StatefulSet"}, {"name", "db"}, {"namespace", "shop"}}));
  EXPECT_EQ(written["governed"][1]["kind"], "DaemonSet");
}

TEST(AllocatorPolicyStatusTest, HostileStatusNeverThrowsAndNamesTheField) {
  json s = FullStatus();
  s["governedCount"] = "one";
  s["verdicts"][0]["verdict"] = 7;
  s["injectionSuspended"] = {"Deployment/web"};
  s["injectionDrift"] = "none";
  std::vector<std::string> problems;
  AllocatorPolicyStatus status;
  EXPECT_NO_THROW(status = ParseAllocatorPolicyStatus(s, &problems));
  EXPECT_FALSE(status.governed_count.has_value());
  EXPECT_FALSE(status.verdicts[0].verdict.has_value());
  EXPECT_TRUE(status.injection_suspended.empty());
  EXPECT_THAT(problems, Contains(HasSubstr("status.governedCount")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.verdicts[0].verdict")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.injectionSuspended[0]")));
  EXPECT_THAT(problems, Contains(HasSubstr("status.injectionDrift")));
  for (const json& hostile : {json(), json(1), json::array(), json("status")}) {
    EXPECT_NO_THROW(ParseAllocatorPolicyStatus(hostile, &problems)) << hostile;
  }
  EXPECT_NO_THROW(PolicyStatusOf(json{{"status", 5}}, &problems));
}

}  // namespace
}  // namespace allocguard::api
