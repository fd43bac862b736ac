#include "operator/api/canary_status.h"

#include <gtest/gtest.h>

#include <cmath>

namespace allocguard::api {
namespace {

using nlohmann::json;

// A status as the operator writes it once both variants ran.
json FullStatus() {
  return json::parse(R"({
    "observedGeneration": 3,
    "phase": "Completed",
    "verdict": "AllocatorRetention",
    "explanation": "candidate ratchets; jemalloc is flat",
    "floorSlope": "+2.40 GiB/h",
    "flatVariant": "jemalloc",
    "startTime": "2026-11-29T10:00:00Z",
    "completionTime": "2026-11-29T10:30:00Z",
    "arenaLimit": {"source": "ArenaMaxEnv", "value": 512, "productionCPUs": 64},
    "conditions": [
      {"type": "Ready", "status": "True", "reason": "AllocatorRetention", "message": "m",
       "observedGeneration": 3, "lastTransitionTime": "2026-11-29T10:30:00Z"}
    ],
    "variants": [
      {"name": "candidate", "allocator": "glibc", "job": "web-abc-candidate",
       "phase": "Completed", "verdict": "Ratchet", "floorsMiB": [300, 310.5, 320],
       "floorSlopeGiBPerHour": 2.4, "slopeLowGiBPerHour": 2.3, "slopeHighGiBPerHour": 2.5,
       "peakMiB": 1000, "recommendedLimitMiB": 1250, "requests": 1234, "errors": 0, "late": 2,
       "floorLevelMiB": 310.5, "cpuSeconds": 64.2, "p99Milliseconds": 41.5,
       "message": "Ratchet", "measurementKey": "k1", "seed": 2,
       "books": {"reading": "Retention", "inUseFloorsMiB": [250, 250.5, 250],
                 "retainedFloorsMiB": [50, 90, 130], "inUseSlopeGiBPerHour": 0.01,
                 "retainedSlopeGiBPerHour": 2.34},
       "earlierRuns": [{"job": "web-abc-candidate", "seed": 1, "verdict": "Inconclusive",
                        "floorsMiB": [300, 301], "floorSlopeGiBPerHour": 0.3,
                        "slopeLowGiBPerHour": -0.2, "slopeHighGiBPerHour": 0.8,
                        "requests": 900, "late": 1, "message": "undecided"}]},
      {"name": "jemalloc", "allocator": "jemalloc", "phase": "Completed", "verdict": "Flat",
       "oomKilled": true, "oomMinute": 7, "startFailure": "app: loader", "reusedFrom": "web-def",
       "measurementKey": "k2"}
    ],
    "recommendation": {
      "current": "candidate", "recommended": "jemalloc",
      "message": "Switch from candidate to jemalloc: Flat, floor -50 %",
      "policySnippet": "allocator:\n  name: jemalloc\n",
      "ranked": [
        {"rank": 1, "variant": "jemalloc", "allocator": "jemalloc", "verdict": "Flat",
         "floorMiB": 155.2, "cpuMsPerRequest": 0.21, "p99Milliseconds": 40,
         "floorChangePercent": -50, "cpuChangePercent": 18.5, "p99ChangePercent": -3.6,
         "costs": "floor -50 %, CPU +19 %, p99 -4 %"},
        {"rank": 2, "variant": "candidate", "allocator": "glibc", "verdict": "Ratchet",
         "floorMiB": 310.5, "cpuMsPerRequest": 0.17, "p99Milliseconds": 41.5}
      ]
    }
  })");
}

TEST(ReplayCanaryStatusTest, ReadsEveryFieldAndWritesItBackUnchanged) {
  std::vector<std::string> problems;
  const ReplayCanaryStatus s = ParseReplayCanaryStatus(FullStatus(), &problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(s.observed_generation, 3);
  EXPECT_EQ(s.phase, CanaryPhase::kCompleted);
  EXPECT_EQ(s.verdict, Verdict::kAllocatorRetention);
  EXPECT_EQ(s.flat_variant, "jemalloc");
  ASSERT_TRUE(s.arena_limit.has_value());
  EXPECT_EQ(s.arena_limit->value, 512);
  ASSERT_EQ(s.conditions.size(), 1u);
  EXPECT_EQ(s.conditions[0].observed_generation, 3);
  ASSERT_EQ(s.variants.size(), 2u);
  EXPECT_EQ(s.variants[0].floors_mib, (std::vector<double>{300, 310.5, 320}));
  EXPECT_EQ(s.variants[0].requests, 1234);
  EXPECT_EQ(s.variants[0].seed, 2);
  ASSERT_EQ(s.variants[0].earlier_runs.size(), 1u);
  EXPECT_EQ(s.variants[0].earlier_runs[0].verdict, Verdict::kInconclusive);
  EXPECT_EQ(s.variants[0].earlier_runs[0].slope_high_gib_per_hour, 0.8);
  ASSERT_TRUE(s.variants[0].books.has_value());
  EXPECT_EQ(s.variants[0].books->reading, BooksReading::kRetention);
  EXPECT_EQ(s.variants[0].books->retained_floors_mib, (std::vector<double>{50, 90, 130}));
  EXPECT_EQ(s.variants[0].books->retained_slope_gib_per_hour, 2.34);
  EXPECT_FALSE(s.variants[1].books.has_value());
  EXPECT_EQ(s.variants[1].verdict, Verdict::kFlat);
  EXPECT_TRUE(s.variants[1].oom_killed);
  EXPECT_EQ(s.FindVariant("jemalloc")->reused_from, "web-def");
  EXPECT_EQ(s.FindVariant("tcmalloc"), nullptr);
  EXPECT_EQ(s.variants[0].cpu_seconds, 64.2);
  EXPECT_EQ(s.variants[0].p99_ms, 41.5);
  EXPECT_EQ(s.variants[0].floor_level_mib, 310.5);
  ASSERT_TRUE(s.recommendation.has_value());
  EXPECT_EQ(s.recommendation->recommended, "jemalloc");
  ASSERT_EQ(s.recommendation->ranked.size(), 2u);
  EXPECT_EQ(s.recommendation->ranked[0].verdict, Verdict::kFlat);
  EXPECT_EQ(s.recommendation->ranked[0].floor_change_percent, -50);
  EXPECT_EQ(s.recommendation->ranked[1].costs, "");
  EXPECT_EQ(ReplayCanaryStatusToJson(s), FullStatus());
  EXPECT_EQ(ParseReplayCanaryStatus(ReplayCanaryStatusToJson(s)), s);
}

// A recommendation row that is not an object, or a verdict allocguard does
// not write, is reported with its path; the rest still reads.
TEST(ReplayCanaryStatusTest, ARecommendationOfTheWrongShapeIsNamed) {
  json status = FullStatus();
  status["recommendation"]["ranked"][0]["verdict"] = "Great";
  status["recommendation"]["ranked"][1]["floorMiB"] = "big";
  status["recommendation"]["ranked"].push_back(7);
  std::vector<std::string> problems;
  const ReplayCanaryStatus s = ParseReplayCanaryStatus(status, &problems);
  ASSERT_TRUE(s.recommendation.has_value());
  ASSERT_EQ(s.recommendation->ranked.size(), 2u);
  EXPECT_EQ(s.recommendation->ranked[0].verdict, Verdict::kFailed);
  EXPECT_EQ(s.recommendation->ranked[0].unknown_verdict, "Great");
  EXPECT_FALSE(s.recommendation->ranked[1].floor_mib.has_value());
  std::string all;
  for (const std::string& p : problems) all += p + "\n";
  EXPECT_NE(all.find("status.recommendation.ranked[0].verdict"), std::string::npos) << all;
  EXPECT_NE(all.find("status.recommendation.ranked[1].floorMiB"), std::string::npos) << all;
  EXPECT_NE(all.find("status.recommendation.ranked[2]"), std::string::npos) << all;
  status["recommendation"] = "switch";
  problems.clear();
  EXPECT_FALSE(ParseReplayCanaryStatus(status, &problems).recommendation.has_value());
  EXPECT_FALSE(problems.empty());
}

// A reading allocguard does not write (an edited status) is reported, read
// as no reading, and written back as it was; a books member of the wrong
// type is reported and read as absent.
TEST(ReplayCanaryStatusTest, BooksAllocguardDoesNotWriteAreNamed) {
  json status = FullStatus();
  status["variants"][0]["books"]["reading"] = "Retaining";
  status["variants"][0]["books"]["inUseSlopeGiBPerHour"] = "up";
  status["variants"][1]["books"] = 7;
  std::vector<std::string> problems;
  const ReplayCanaryStatus s = ParseReplayCanaryStatus(status, &problems);
  ASSERT_TRUE(s.variants[0].books.has_value());
  EXPECT_FALSE(s.variants[0].books->reading.has_value());
  EXPECT_EQ(s.variants[0].books->unknown_reading, "Retaining");
  EXPECT_FALSE(s.variants[0].books->in_use_slope_gib_per_hour.has_value());
  EXPECT_FALSE(s.variants[1].books.has_value());
  std::string all;
  for (const std::string& p : problems) all += p + "\n";
  EXPECT_NE(all.find("status.variants[0].books.reading: \"Retaining\" is not a reading"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("status.variants[0].books.inUseSlopeGiBPerHour"), std::string::npos) << all;
  EXPECT_NE(all.find("status.variants[1].books"), std::string::npos) << all;
  EXPECT_EQ(ReplayCanaryStatusToJson(s)["variants"][0]["books"]["reading"], "Retaining");
}

TEST(ReplayCanaryStatusTest, NullAndEmptyAreANewCanary) {
  EXPECT_EQ(ParseReplayCanaryStatus(nullptr), ReplayCanaryStatus{});
  EXPECT_EQ(ParseReplayCanaryStatus(json::object()), ReplayCanaryStatus{});
  EXPECT_EQ(ReplayCanaryStatusToJson(ReplayCanaryStatus{}), json::object());
  EXPECT_EQ(CanaryStatusOf(json{{"metadata", {{"name", "c"}}}}), ReplayCanaryStatus{});
}

// Whoever wrote the status, a field of another type never throws and is
// named with its path; the rest of the status is still read.
TEST(ReplayCanaryStatusTest, FieldsOfOtherTypesAreNamedAndReadAsAbsent) {
  const json bad = json::parse(R"({
    "phase": 7, "verdict": {"a": 1}, "explanation": "kept", "queuePosition": "2",
    "arenaLimit": "ArenaMaxEnv", "conditions": [5, {"type": "Ready", "status": true}],
    "variants": [
      "candidate",
      {"name": "candidate", "phase": "Completed", "verdict": "Flat",
       "floorsMiB": [1, "two", 3], "requests": 1.5, "oomKilled": "yes",
       "earlierRuns": [3, {"seed": "one", "verdict": "Maybe", "message": "kept"}]}
    ]
  })");
  std::vector<std::string> problems;
  ReplayCanaryStatus s;
  ASSERT_NO_THROW(s = ParseReplayCanaryStatus(bad, &problems));
  EXPECT_EQ(s.phase, std::nullopt);
  EXPECT_EQ(s.verdict, std::nullopt);
  EXPECT_EQ(s.explanation, "kept");
  EXPECT_EQ(s.queue_position, std::nullopt);
  EXPECT_FALSE(s.arena_limit.has_value());
  ASSERT_EQ(s.conditions.size(), 1u);
  EXPECT_EQ(s.conditions[0].status, "");
  ASSERT_EQ(s.variants.size(), 1u);
  EXPECT_EQ(s.variants[0].verdict, Verdict::kFlat);
  EXPECT_EQ(s.variants[0].floors_mib, (std::vector<double>{1, 3}));
  EXPECT_EQ(s.variants[0].requests, std::nullopt);
  EXPECT_FALSE(s.variants[0].oom_killed);
  ASSERT_EQ(s.variants[0].earlier_runs.size(), 1u);
  EXPECT_EQ(s.variants[0].earlier_runs[0].verdict, Verdict::kFailed);
  EXPECT_EQ(s.variants[0].earlier_runs[0].unknown_verdict, "Maybe");
  EXPECT_EQ(s.variants[0].earlier_runs[0].message, "kept");
  EXPECT_EQ(s.variants[0].earlier_runs[0].seed, std::nullopt);
  const std::vector<std::string> expected = {
      "status.phase: must be a string, got 7",
      "status.verdict: must be a string, got {\"a\":1}",
      "status.queuePosition: must be an integer, got \"2\"",
      "status.arenaLimit: must be an object, got \"ArenaMaxEnv\"",
      "status.conditions[0]: must be an object, got 5",
      "status.conditions[1].status: must be a string, got true",
      "status.variants[0]: must be an object, got \"candidate\"",
      "status.variants[1].floorsMiB[1]: must be a finite number, got \"two\"",
      "status.variants[1].requests: must be an integer, got 1.5",
      "status.variants[1].oomKilled: must be a boolean, got \"yes\"",
      "status.variants[1].earlierRuns[0]: must be an object, got 3",
      // NOLINTBEGIN(bugprone-suspicious-missing-comma): one message over two lines
      "status.variants[1].earlierRuns[1].verdict: \"Maybe\" is not a verdict allocguard "
      "writes; read as Failed",
      // NOLINTEND(bugprone-suspicious-missing-comma)
      "status.variants[1].earlierRuns[1].seed: must be an integer, got \"one\"",
  };
  EXPECT_EQ(problems, expected);
}

TEST(ReplayCanaryStatusTest, NoVerdictEmptyOrMalformedReadsAsNone) {
  std::vector<std::string> problems;
  EXPECT_EQ(ParseReplayCanaryStatus(json::object(), &problems).verdict, std::nullopt);
  EXPECT_EQ(ParseReplayCanaryStatus(json{{"verdict", ""}}, &problems).verdict, std::nullopt);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(ParseReplayCanaryStatus(json{{"verdict", 1}}, &problems).verdict, std::nullopt);
  EXPECT_EQ(ParseReplayCanaryStatus(json("Flat"), &problems).verdict, std::nullopt);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "status.verdict: must be a string, got 1");
  EXPECT_EQ(ParseReplayCanaryStatus(json{{"verdict", "Flat"}}).verdict, Verdict::kFlat);
  EXPECT_EQ(ParseReplayCanaryStatus(json{{"verdict", "AllocatorRetention"}}).verdict,
            Verdict::kAllocatorRetention);
}

TEST(ReplayCanaryStatusTest, AVerdictAllocguardDoesNotWriteReadsAsFailedAndIsKept) {
  std::vector<std::string> problems;
  const ReplayCanaryStatus s =
      ParseReplayCanaryStatus(json{{"phase", "Completed"},
                                   {"verdict", "Great"},
                                   {"variants", {{{"name", "candidate"}, {"verdict", "flat"}}}}},
                              &problems);
  EXPECT_EQ(s.verdict, Verdict::kFailed) << "it can only hold";
  EXPECT_EQ(s.unknown_verdict, "Great");
  EXPECT_EQ(s.variants[0].verdict, Verdict::kFailed);
  EXPECT_EQ(s.variants[0].unknown_verdict, "flat");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0],
            "status.verdict: \"Great\" is not a verdict allocguard writes; read as Failed");
  EXPECT_EQ(ReplayCanaryStatusToJson(s)["verdict"], "Great") << "written back as it was";
  EXPECT_EQ(RecordedVerdictName(s.verdict, s.unknown_verdict), "Great");
  EXPECT_EQ(RecordedVerdictName(Verdict::kFlat, ""), "Flat");
  EXPECT_EQ(RecordedVerdictName(std::nullopt, ""), "");
}

TEST(ReplayCanaryStatusTest, CanaryPhaseOfReadsOnlyThePhaseTheSameWay) {
  EXPECT_EQ(CanaryPhaseOf(json{{"status", {{"phase", "Running"}}}}), CanaryPhase::kRunning);
  EXPECT_EQ(CanaryPhaseOf(json{{"status", {{"phase", "running"}}}}), std::nullopt);
  EXPECT_EQ(CanaryPhaseOf(json{{"status", {{"phase", 3}}}}), std::nullopt);
  EXPECT_EQ(CanaryPhaseOf(json{{"status", "Running"}}), std::nullopt);
  EXPECT_EQ(CanaryPhaseOf(json::object()), std::nullopt);
  EXPECT_EQ(CanaryPhaseOf(json{{"status", FullStatus()}}),
            CanaryStatusOf(json{{"status", FullStatus()}}).phase);
}

TEST(ReplayCanaryStatusTest, APhaseAllocguardDoesNotWriteIsNotStarted) {
  std::vector<std::string> problems;
  EXPECT_EQ(ParseReplayCanaryStatus(json{{"phase", "running"}}, &problems).phase, std::nullopt);
  EXPECT_EQ(problems,
            std::vector<std::string>{"status.phase: \"running\" is not a phase allocguard writes"});
}

// The CRD refuses "" for a date-time and NaN for a number, and a refused
// field loses the whole status write: such values are never written.
TEST(ReplayCanaryStatusTest, WritesNoEmptyTimeAndNoNonFiniteNumber) {
  ReplayCanaryStatus s;
  s.phase = CanaryPhase::kCompleted;
  s.verdict = Verdict::kInconclusive;
  VariantStatus v;
  v.name = "candidate";
  v.floor_slope_gib_per_hour = std::nan("");
  v.peak_mib = INFINITY;
  v.floors_mib = {1, std::nan(""), 2};
  s.variants.push_back(v);
  const json out = ReplayCanaryStatusToJson(s);
  EXPECT_FALSE(out.contains("completionTime"));
  EXPECT_FALSE(out.contains("startTime"));
  EXPECT_FALSE(out["variants"][0].contains("floorSlopeGiBPerHour"));
  EXPECT_FALSE(out["variants"][0].contains("peakMiB"));
  EXPECT_EQ(out["variants"][0]["floorsMiB"], json({1.0, 2.0}));
  EXPECT_EQ(out, json::parse(out.dump())) << "every number is finite";
}

TEST(SetConditionTest, KeepsTheTransitionTimeWhileTheStatusHolds) {
  std::vector<Condition> conditions;
  SetCondition(conditions, "Ready", "False", "Running", "running variant candidate", 1, "t1");
  SetCondition(conditions, "Ready", "False", "Running", "running variant jemalloc", 2, "t2");
  ASSERT_EQ(conditions.size(), 1u);
  EXPECT_EQ(conditions[0].last_transition_time, "t1");
  EXPECT_EQ(conditions[0].message, "running variant jemalloc");
  EXPECT_EQ(conditions[0].observed_generation, 2);
  SetCondition(conditions, "Ready", "True", "Flat", "the verdict is in", 2, "t3");
  EXPECT_EQ(conditions[0].last_transition_time, "t3");
  SetCondition(conditions, "Stalled", "False", "Completed", "", 2, "t3");
  ASSERT_EQ(conditions.size(), 2u);
  EXPECT_EQ(FindCondition(conditions, "Stalled")->reason, "Completed");
  EXPECT_EQ(FindCondition(conditions, "Reconciling"), nullptr);
  const json written = ConditionsToJson(conditions);
  EXPECT_EQ(written[1]["message"], "") << "metav1.Condition requires a message";
  EXPECT_EQ(ParseConditions(written, "conditions"), conditions);
}

}  // namespace
}  // namespace allocguard::api
