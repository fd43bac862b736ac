#include "operator/memory/sequential_judge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "operator/memory/group_sequential.h"
#include "operator/memory/slope_interval.h"
#include "operator/memory/verdict_evaluation.h"

namespace allocguard::memory {
namespace {

// Floors at minutes 1..count: 300 MiB + slope, plus a fixed wobble pattern
// (sd ≈ amplitude) so the tests see noise without a random generator.
std::vector<MinuteFloor> Trace(double slope_gib_per_h, double wobble_mib, int count = 14) {
  static const double kPattern[] = {0.6, -1.1, 0.3,  1.2, -0.7, -0.2, 1.0,  -1.3,
                                    0.4, 0.9,  -0.8, 0.1, -0.5, 1.1,  -0.9, 0.2};
  std::vector<MinuteFloor> out;
  for (int m = 1; m <= count; ++m) {
    const double mib = 300 + slope_gib_per_h * 1024 / 60 * m + wobble_mib * kPattern[m % 16];
    out.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB, .samples = 30});
  }
  return out;
}

TEST(LookBudgetTest, BoundariesSpendExactlyTheBudgetOverCorrelatedLooks) {
  JudgeOptions options;  // threshold 0.5, min 3 floors, 15 minutes, 1 warm-up
  // Looks at 3..14 floors: 12, with slope information Sxx = n (n^2 - 1) / 12.
  EXPECT_EQ(PlannedLooks(options), 12);
  const std::vector<LookBudget> plan = PlanLookBudgets(options);
  ASSERT_EQ(plan.size(), 12u);
  std::vector<double> info;
  std::vector<double> ratchet;
  std::vector<double> flat;
  double late = 0;
  for (int n = 3; n <= 14; ++n) {
    info.push_back(n * (n * n - 1) / 12.0);
    ratchet.push_back(plan[n - 3].ratchet);
    flat.push_back(plan[n - 3].flat);
    late += plan[n - 3].late_growth;
    EXPECT_EQ(BudgetForLook(options, n).ratchet, plan[n - 3].ratchet);
  }
  // The chance of a false crossing at any look is the budget itself: 80 % of
  // the false-Ratchet rate for the whole-run test, the false-Flat rate for each
  // side of the Flat test; the late-growth scan's increments add up to its 20 %.
  EXPECT_NEAR(CrossingProbability(info, ratchet), 0.008, 1e-6);
  EXPECT_NEAR(CrossingProbability(info, flat), 0.05, 1e-5);
  EXPECT_NEAR(late, 0.002, 1e-12);
  // Power spending alpha t^1.25: the first look (t = 2 / 227.5) gets
  // 0.008 * (2 / 227.5)^1.25 = 2.17e-5; the last look more than its spending
  // increment 0.008 * (1 - 0.8^1.25) = 0.00196, because the looks before it
  // were correlated with it.
  EXPECT_NEAR(plan[0].ratchet, 0.008 * std::pow(2 / 227.5, 1.25), 1e-9);
  EXPECT_GT(plan[11].ratchet, 0.008 * (1 - std::pow(0.8, 1.25)));
  EXPECT_EQ(BudgetForLook(options, 2).ratchet, 0);   // before the plan
  EXPECT_EQ(BudgetForLook(options, 15).ratchet, 0);  // past it
}

TEST(LookBudgetTest, AnExtendedPlanSpendsMostOfTheBudgetByThePlannedEnd) {
  JudgeOptions options{.max_minutes = 30, .planned_minutes = 15, .extension_share = 0.25};
  // Looks at 3..29 floors; the planned end is at 14 floors, look index 11.
  EXPECT_EQ(PlannedLooks(options), 27);
  EXPECT_EQ(PlannedEndFloors(options), 14);
  const std::vector<LookBudget> plan = PlanLookBudgets(options);
  ASSERT_EQ(plan.size(), 27u);
  std::vector<double> info;
  std::vector<double> ratchet;
  std::vector<double> planned_info;
  std::vector<double> planned_ratchet;
  double late = 0;
  double late_by_plan = 0;
  for (int n = 3; n <= 29; ++n) {
    info.push_back(n * (n * n - 1) / 12.0);
    ratchet.push_back(plan[n - 3].ratchet);
    late += plan[n - 3].late_growth;
    if (n <= 14) {
      planned_info.push_back(info.back());
      planned_ratchet.push_back(plan[n - 3].ratchet);
      late_by_plan += plan[n - 3].late_growth;
    }
  }
  // The whole budget over every look to 30 minutes; three quarters of it by
  // the planned 15 (0.8 % whole-run share x 0.75 = 0.6 %).
  EXPECT_NEAR(CrossingProbability(info, ratchet), 0.008, 1e-6);
  EXPECT_NEAR(CrossingProbability(planned_info, planned_ratchet), 0.006, 1e-6);
  EXPECT_NEAR(late, 0.002, 1e-12);
  EXPECT_NEAR(late_by_plan, 0.0015, 1e-12);
  // With no extension the plan is the plain one of a 15-minute run.
  JudgeOptions plain;
  JudgeOptions same{.max_minutes = 15, .planned_minutes = 15};
  EXPECT_EQ(PlanLookBudgets(plain)[11].ratchet, PlanLookBudgets(same)[11].ratchet);
}

// A floor too noisy for a verdict in 15 minutes: the planned end is no
// longer the end, the judge says it runs on, and decides later.
TEST(SequentialJudgeTest, UndecidedAtThePlannedEndRunsOnInsteadOfInconclusive) {
  const auto floors = Trace(0, 80, 29);
  const auto planned_only = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  const auto extended =
      NewSequentialJudge({.max_slope_gib_per_h = 0.5, .max_minutes = 30, .planned_minutes = 15});
  const std::span<const MinuteFloor> first14(floors.data(), 14);
  EXPECT_EQ(planned_only->Judge(first14, false).decision, FloorDecision::kInconclusive);
  const FloorJudgement at_plan = extended->Judge(first14, false);
  EXPECT_EQ(at_plan.decision, FloorDecision::kContinue);
  EXPECT_TRUE(at_plan.past_planned_end);
  const RunOutcome o = ReplayJudge(*extended, floors);
  EXPECT_EQ(o.judgement.decision, FloorDecision::kFlat) << o.judgement.explanation;
  EXPECT_GT(o.minutes_elapsed, 15);
  EXPECT_LE(o.minutes_elapsed, 30);
}

// MoreFloorsNeeded by hand: 8 floors, slope +0.10, interval +-0.80 GiB/h;
// Flat needs a half-width below 0.50 - 0.10 = 0.40, i.e. (0.80 / 0.40)^(2/3)
// = 1.587 times the floors: 12.7, so 5 more.
TEST(MoreFloorsNeededTest, ScalesTheIntervalAsMinutesToTheMinusOneAndAHalf) {
  FloorJudgement j;
  j.minutes_used = 8;
  j.slope_gib_per_h = 0.10;
  j.slope_low_gib_per_h = -0.70;
  j.slope_high_gib_per_h = 0.90;
  j.confidence = 0.99;
  EXPECT_EQ(MoreFloorsNeeded(j, 0.5), 5);
  // A climb: room to the threshold 2.5 - 0.5 = 2.0 against a half-width of
  // 0.8: already narrow enough.
  j.slope_gib_per_h = 2.5;
  j.slope_low_gib_per_h = 1.7;
  j.slope_high_gib_per_h = 3.3;
  EXPECT_EQ(MoreFloorsNeeded(j, 0.5), 0);
  // At the threshold no number of minutes can be promised; nor without an interval.
  j.slope_gib_per_h = 0.51;
  EXPECT_FALSE(MoreFloorsNeeded(j, 0.5).has_value());
  j.slope_gib_per_h = 0.1;
  j.confidence = 0;
  EXPECT_FALSE(MoreFloorsNeeded(j, 0.5).has_value());
}

TEST(SequentialJudgeTest, ClearRatchetIsCalledEarlyWithItsNumbers) {
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  RunOutcome o = ReplayJudge(*judge, Trace(2.5, 10));
  EXPECT_EQ(o.judgement.decision, FloorDecision::kRatchet);
  EXPECT_LE(o.minutes_elapsed, 8);  // not the full 15
  EXPECT_EQ(o.judgement.method, "sequential");
  EXPECT_EQ(o.judgement.minutes_used, o.minutes_elapsed - 1);
  EXPECT_GT(o.judgement.slope_low_gib_per_h, 0.5);
  EXPECT_LT(o.judgement.slope_low_gib_per_h, o.judgement.slope_gib_per_h);
  EXPECT_GT(o.judgement.slope_high_gib_per_h, o.judgement.slope_gib_per_h);
  EXPECT_NEAR(o.judgement.theil_sen_gib_per_h, 2.5, 0.5);
  EXPECT_LT(o.judgement.trend_p_value, 0.05);
  EXPECT_NE(o.judgement.explanation.find("floor rises +2."), std::string::npos)
      << o.judgement.explanation;
  EXPECT_NE(o.judgement.explanation.find("% interval"), std::string::npos);
  EXPECT_NE(o.judgement.explanation.find("minutes"), std::string::npos);
}

// The demo workload's glibc climb as a fresh-machine e2e run recorded it
// (docs/e2e.md, "Canary durations"): steep for five minutes, then level.
// With a 10-minute plan the last look is at nine floors, where the
// levelling leaves the interval's lower end just under the threshold; with
// the e2e policy's 12-minute plan the tenth floor of a plateau decides it.
TEST(SequentialJudgeTest, TheDemosLevellingClimbNeedsALookPastNineFloors) {
  const double mib[] = {1256,   1423.1, 1515.2, 1965,   2584.6,
                        2685.3, 2762.7, 2791.9, 2806.5, 2809.5};  // the tenth: the plateau, +3 MiB
  auto judge_at = [&](int max_minutes, int count) {
    JudgeOptions options;
    options.max_minutes = max_minutes;
    std::vector<MinuteFloor> floors;
    for (int m = 1; m <= count; ++m) {
      floors.push_back({.minute = m, .floor_bytes = mib[m - 1] * kBytesPerMiB, .samples = 30});
    }
    return NewSequentialJudge(options)->Judge(floors, false);
  };
  FloorJudgement ten_minute_plan = judge_at(10, 9);
  EXPECT_EQ(ten_minute_plan.decision, FloorDecision::kInconclusive);
  EXPECT_GT(ten_minute_plan.slope_gib_per_h, 13.0);
  EXPECT_LT(ten_minute_plan.slope_low_gib_per_h, 0.5);
  EXPECT_EQ(judge_at(12, 9).decision, FloorDecision::kContinue) << "not the last look any more";
  FloorJudgement twelve_minute_plan = judge_at(12, 10);
  EXPECT_EQ(twelve_minute_plan.decision, FloorDecision::kRatchet);
  EXPECT_GT(twelve_minute_plan.slope_low_gib_per_h, 0.5);
}

TEST(SequentialJudgeTest, LevelFloorIsFlatBeforeTheEnd) {
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  RunOutcome o = ReplayJudge(*judge, Trace(0, 10));
  EXPECT_EQ(o.judgement.decision, FloorDecision::kFlat);
  EXPECT_LT(o.minutes_elapsed, 15);
  EXPECT_GT(o.judgement.slope_low_gib_per_h, -0.5);
  EXPECT_LT(o.judgement.slope_high_gib_per_h, 0.5);
  EXPECT_NE(o.judgement.explanation.find("is within ±0.50 GiB/h over"), std::string::npos)
      << o.judgement.explanation;
}

TEST(SequentialJudgeTest, NoisySlopeAtTheThresholdIsInconclusiveNotRatchet) {
  // The seed's rule calls this Ratchet half the time; here the interval
  // straddles the threshold for the whole run.
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  auto floors = Trace(0.55, 50);
  RunOutcome o = ReplayJudge(*judge, floors);
  EXPECT_EQ(o.judgement.decision, FloorDecision::kInconclusive);
  EXPECT_EQ(o.minutes_elapsed, 15);
  EXPECT_NE(o.judgement.explanation.find("neither clearly above 0.50 GiB/h nor clearly within"),
            std::string::npos)
      << o.judgement.explanation;
  EXPECT_EQ(NewFixedDurationJudge({.max_slope_gib_per_h = 0.5})->Judge(floors, true).decision,
            FloorDecision::kRatchet);
}

TEST(SequentialJudgeTest, OneOutlierMinuteCannotDecide) {
  // Level floors with the last minute 800 MiB high: least squares sees
  // 800 * 6.5 / 227.5 = 22.9 MiB/min = +1.34 GiB/h, but the outlier widens the
  // interval as much as it moves the slope.
  auto floors = Trace(0, 5);
  floors.back().floor_bytes += 800 * kBytesPerMiB;
  EXPECT_GT(FitSlopeInterval(floors, 0.004).slope, GiBPerHourToBytesPerMinute(1));
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  FloorJudgement j = judge->Judge(floors, /*final=*/true);
  EXPECT_NE(j.decision, FloorDecision::kRatchet) << j.explanation;
  EXPECT_EQ(NewFixedDurationJudge({.max_slope_gib_per_h = 0.5})->Judge(floors, true).decision,
            FloorDecision::kRatchet);
}

TEST(SequentialJudgeTest, LateGrowthCheckCatchesWhatTheWholeRunFitDilutes) {
  // Level to minute 9, then +4 GiB/h for five minutes, on a wobble whose
  // whole-run fit does not clear the threshold with the robust gates.
  auto floors = Trace(0, 5);
  for (MinuteFloor& f : floors) {
    if (f.minute > 9) f.floor_bytes += GiBPerHourToBytesPerMinute(4) * (f.minute - 9);
  }
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  FloorJudgement j = judge->Judge(floors, /*final=*/true);
  EXPECT_EQ(j.decision, FloorDecision::kRatchet) << j.explanation;
  EXPECT_GE(j.growth_start_minute, 9) << j.explanation;
  EXPECT_NEAR(j.slope_gib_per_h, 4, 1);
}

TEST(SequentialJudgeTest, FallingFloorIsStillSettling) {
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  RunOutcome o = ReplayJudge(*judge, Trace(-3, 5));
  EXPECT_EQ(o.judgement.decision, FloorDecision::kInconclusive);
  EXPECT_NE(o.judgement.explanation.find("still settling"), std::string::npos)
      << o.judgement.explanation;
}

TEST(SequentialJudgeTest, TooFewFloorsAtTheEndIsInconclusive) {
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5, .min_floors = 3});
  auto floors = Trace(5, 1, 2);
  EXPECT_EQ(judge->Judge(floors, false).decision, FloorDecision::kContinue);
  FloorJudgement j = judge->Judge(floors, true);
  EXPECT_EQ(j.decision, FloorDecision::kInconclusive);
  EXPECT_EQ(j.explanation, "only 2 minute floors (need 3)");
}

TEST(SequentialJudgeTest, ALookPastThePlanSpendsNoBudget) {
  // A 10-minute plan asked about 12 floors of a clear ratchet: the budget is
  // spent, so it says so instead of deciding.
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5, .max_minutes = 10});
  auto floors = Trace(0.8, 40, 12);
  EXPECT_EQ(judge->Judge(floors, false).decision, FloorDecision::kContinue);
  FloorJudgement j = judge->Judge(floors, true);
  EXPECT_EQ(j.decision, FloorDecision::kInconclusive);
  EXPECT_NE(j.explanation.find("past the 10 minutes"), std::string::npos) << j.explanation;
}

TEST(SequentialJudgeTest, FinalCallOnTheSameFloorsAgreesWithTheLastLook) {
  // The engine asks once more with final == true over the floors it already
  // showed; that is the same look, not a new one, so the answer cannot change.
  auto judge = NewSequentialJudge({.max_slope_gib_per_h = 0.5});
  auto floors = Trace(2.5, 10, 7);
  FloorJudgement look = judge->Judge(floors, false);
  FloorJudgement end = judge->Judge(floors, true);
  ASSERT_EQ(look.decision, FloorDecision::kRatchet) << look.explanation;
  EXPECT_EQ(end.decision, FloorDecision::kRatchet);
  EXPECT_EQ(look.explanation, end.explanation);
  // Undecided at 4 floors: Continue during the run, Inconclusive at its end.
  auto short_run = Trace(2.5, 10, 4);
  EXPECT_EQ(judge->Judge(short_run, false).decision, FloorDecision::kContinue);
  EXPECT_EQ(judge->Judge(short_run, true).decision, FloorDecision::kInconclusive);
}

TEST(DefaultJudgeTest, IsTheSequentialJudge) {
  EXPECT_EQ(NewDefaultJudge({.max_slope_gib_per_h = 0.5})->Judge(Trace(0, 1), true).method,
            "sequential");
}

}  // namespace
}  // namespace allocguard::memory
