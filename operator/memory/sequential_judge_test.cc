#include "operator/memory/sequential_judge.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "operator/memory/floor_trace_generator.h"
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
  // The default judge's large-steps rule decides the same climb on its fifth
  // floor under either plan: the cap no longer matters for it.
  for (int max_minutes : {10, 12}) {
    std::vector<MinuteFloor> five;
    for (int m = 1; m <= 5; ++m) {
      five.push_back({.minute = m, .floor_bytes = mib[m - 1] * kBytesPerMiB, .samples = 30});
    }
    const FloorJudgement j = NewDefaultJudge({.max_minutes = max_minutes})->Judge(five, false);
    EXPECT_EQ(j.decision, FloorDecision::kRatchet) << max_minutes << ": " << j.explanation;
    EXPECT_GT(j.slope_low_gib_per_h, 0.5);
    five.pop_back();
    EXPECT_EQ(NewDefaultJudge({.max_minutes = max_minutes})->Judge(five, false).decision,
              FloorDecision::kContinue);
  }
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
  EXPECT_EQ(j.ratchet_rule, FloorJudgement::Rule::kLateGrowth);
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

std::vector<MinuteFloor> FloorsMiB(std::initializer_list<double> mib) {
  std::vector<MinuteFloor> out;
  int m = 1;
  for (double v : mib)
    out.push_back({.minute = m++, .floor_bytes = v * kBytesPerMiB, .samples = 30});
  return out;
}

// The large-steps rule's budget: a quarter of the 1 % false-Ratchet budget,
// split evenly over its looks at 4..8 floors (0.25 % / 5 = 0.05 % each); the
// whole-run test keeps 1 - 0.2 (late growth) - 0.25 = 55 % of it, and still
// spends exactly that over all its looks.
TEST(LargeStepRuleTest, BudgetIsAQuarterOfTheFalseRatchetRateOverFourToEightFloors) {
  const JudgeOptions options = StepJudgeOptions({});
  EXPECT_EQ(BudgetForLook(options, 3).steps, 0);
  for (int n = 4; n <= 8; ++n) EXPECT_DOUBLE_EQ(BudgetForLook(options, n).steps, 0.0005) << n;
  EXPECT_EQ(BudgetForLook(options, 9).steps, 0);
  std::vector<double> info;
  std::vector<double> ratchet;
  for (int n = 3; n <= 14; ++n) {
    info.push_back(n * (n * n - 1) / 12.0);
    ratchet.push_back(BudgetForLook(options, n).ratchet);
  }
  EXPECT_NEAR(CrossingProbability(info, ratchet), 0.0055, 1e-6);
}

// The rule's boundary by hand at four floors: 300 + S m MiB with the pattern
// +20 -20 -20 +20 (which leaves the whole-run slope at S). Left out in turn,
// the floors give slopes S - 20 (minute 4 out), S - 20/7, S + 20/7 and S + 20;
// the worst-case sd of a three-floor slope under noise up to 64 MiB is largest
// for consecutive minutes, 64 / sqrt(2) = 45.254834 MiB/min (r = 0), against
// 0.4696 x 64 for minutes 1,3,4 or 1,2,4. At the look's level 0.0005 (z =
// 3.290527) the bound is S - 20 - 148.912 MiB/min, left out minute 4: above
// the threshold 0.5 GiB/h = 8.533 MiB/min from S = 177.445 MiB/min.
TEST(LargeStepRuleTest, HandComputedBoundaryAtFourFloors) {
  auto climb = [](double s) {
    return FloorsMiB({300 + s + 20, 300 + 2 * s - 20, 300 + 3 * s - 20, 300 + 4 * s + 20});
  };
  const double z = 3.290527;
  for (double s : {175.0, 178.0}) {
    const StepBound b = LargeStepBound(climb(s), 64 * kBytesPerMiB, 0.9, 0.0005);
    EXPECT_NEAR(b.low / kBytesPerMiB, s - 20 - z * 64 / std::sqrt(2.0), 1e-4) << s;
    EXPECT_EQ(b.weakest_minute, 4);
  }
  const auto judge = NewDefaultJudge({});
  const FloorJudgement below = judge->Judge(climb(175), false);
  EXPECT_EQ(below.decision, FloorDecision::kContinue) << below.explanation;
  const FloorJudgement above = judge->Judge(climb(178), false);
  EXPECT_EQ(above.decision, FloorDecision::kRatchet);
  EXPECT_NE(above.explanation.find("more than floor noise up to 64 MiB can make (at least +0.53"),
            std::string::npos)
      << above.explanation;
  // Fewer than four floors never decide by this rule.
  const auto steep = climb(400);
  EXPECT_EQ(judge->Judge(std::span(steep).first(3), false).decision, FloorDecision::kContinue);
  // Nor one minute alone: level floors with minute 4 800 MiB up.
  EXPECT_EQ(judge->Judge(FloorsMiB({300, 300, 300, 1100}), false).decision,
            FloorDecision::kContinue);
}

// The demo's glibc variant as issue 17 recorded it (MiB, minutes 1..7,
// +16.9 GiB/h): today's judge had not decided it by minute 7 (at minute 5 its
// interval was about -150 to +180 GiB/h). The default judge decides it on the
// floor of minute 5: least squares 288.2 MiB/min (+16.89 GiB/h); with any one
// minute left out the weakest bound is minute 5's: slope 213.2 MiB/min less
// 3.290527 x 29.654 (worst-case sd of four consecutive floors at 64 MiB) =
// 115.62 MiB/min = +6.77 GiB/h, far above 0.5 GiB/h. The upper end reported
// is the five floors' slope plus 3.290527 x their worst-case sd: with
// deviations -2..2 the variance is 64^2 (10 + 2 (4r - r^2 - 4r^3 - 4r^4)) /
// 100, largest on the grid at r = 0.4 (12.1632): sd 22.3205, so 288.2 +
// 73.446 = 361.646 MiB/min = +21.19 GiB/h, at 1 - 2 x 0.0005 = 99.9 %.
TEST(LargeStepRuleTest, TheDemosGlibcClimbIsARatchetByMinuteFive) {
  const auto floors = FloorsMiB({1404, 1537, 1584, 2099, 2564, 2659, 3012});
  const auto judge = NewDefaultJudge({});
  for (size_t n = 1; n <= 4; ++n) {
    EXPECT_EQ(judge->Judge(std::span(floors).first(n), false).decision, FloorDecision::kContinue)
        << n;
  }
  const FloorJudgement j = judge->Judge(std::span(floors).first(5), false);
  ASSERT_EQ(j.decision, FloorDecision::kRatchet) << j.explanation;
  EXPECT_NEAR(j.slope_gib_per_h, 16.887, 0.001);
  EXPECT_EQ(j.ratchet_rule, FloorJudgement::Rule::kLargeSteps);
  // The interval reported is the rule's, not the estimated-noise one (about
  // -149 to +183 GiB/h here), so it does not straddle zero beside a Ratchet.
  EXPECT_NEAR(j.slope_low_gib_per_h, 115.623 * 60 / 1024, 0.001);
  EXPECT_NEAR(j.slope_high_gib_per_h, 361.646 * 60 / 1024, 0.001);
  EXPECT_DOUBLE_EQ(j.confidence, 0.999);
  EXPECT_NE(j.explanation.find("at least +6.77 GiB/h with any one minute left out"),
            std::string::npos)
      << j.explanation;
  const auto today = NewSequentialJudge({});
  for (size_t n = 1; n <= floors.size(); ++n) {
    EXPECT_EQ(today->Judge(std::span(floors).first(n), false).decision, FloorDecision::kContinue)
        << n;
  }
}

// A recorded kind of ratchet issue 17 reports Inconclusive: +19 GiB/h over
// five floors, decelerating, in a run planned for five floors. Around a
// straight line (below six floors there is no quadratic) the curve leaves
// residuals -128 68 124 60 -124 MiB, which today's judge reads as noise:
// its interval reaches below zero. The default judge's weakest left-out
// bound is minute 1's: 260 MiB/min less 3.290527 x 29.654 = +9.52 GiB/h.
TEST(LargeStepRuleTest, AFiveFloorDeceleratingClimbIsNotInconclusive) {
  const auto floors = FloorsMiB({1000, 1520, 1900, 2160, 2300});
  for (int max_minutes : {6, 15}) {
    const JudgeOptions options{.max_minutes = max_minutes};
    const FloorJudgement today = NewSequentialJudge(options)->Judge(floors, true);
    EXPECT_EQ(today.decision, FloorDecision::kInconclusive) << today.explanation;
    EXPECT_LT(today.slope_low_gib_per_h, 0);
    const FloorJudgement j = NewDefaultJudge(options)->Judge(floors, true);
    EXPECT_EQ(j.decision, FloorDecision::kRatchet) << j.explanation;
    EXPECT_NEAR(j.slope_gib_per_h, 18.984, 0.001);
  }
  EXPECT_NE(NewDefaultJudge({})->Judge(floors, true).explanation.find("at least +9.52 GiB/h"),
            std::string::npos);
}

// Issue 17's wander class: true slope +0.22 GiB/h (below the 0.5 threshold),
// AR(1) floor noise of sd 30 MiB and lag-1 correlation 0.8, runs planned for
// 15 minutes that may go on to 30. When this was written, of 400 traces
// today's judge with the same plan called 8 Ratchet, the default judge 5, and
// the default judge without the wander check 7 (of 2000: 43, 25 and 35).
// The check accounts for about half of the drop, the smaller share of the
// budget the whole-run test keeps for the rest; neither reaches the 1 %
// budget (docs/verdicts.md). Runs called Ratchet at 7 floors or fewer,
// before the check starts, or by the late-growth scan, which it does not
// cover, still can be.
TEST(DifferenceCheckTest, SlowWanderIsCalledRatchetLessOftenThanByTodaysJudge) {
  const JudgeOptions plan{.max_minutes = 30, .planned_minutes = 15};
  const auto today = NewSequentialJudge(plan);
  const auto judge = NewDefaultJudge(plan);
  JudgeOptions unchecked = StepJudgeOptions(plan);
  unchecked.ratchet_checks_differences = false;
  const auto without_check = NewSequentialJudge(unchecked);
  constexpr int kTraces = 400;
  int today_ratchets = 0;
  int unchecked_ratchets = 0;
  int ratchets = 0;
  for (int seed = 0; seed < kTraces; ++seed) {
    const auto floors = GenerateFloorTrace(
        {.slope_gib_per_h = 0.22, .noise_sd_mib = 30, .noise_ar1 = 0.8, .minutes = 30}, seed);
    today_ratchets += ReplayJudge(*today, floors).judgement.decision == FloorDecision::kRatchet;
    ratchets += ReplayJudge(*judge, floors).judgement.decision == FloorDecision::kRatchet;
    unchecked_ratchets +=
        ReplayJudge(*without_check, floors).judgement.decision == FloorDecision::kRatchet;
  }
  EXPECT_LT(ratchets, unchecked_ratchets);
  EXPECT_LE(unchecked_ratchets, today_ratchets);
  EXPECT_LT(ratchets, today_ratchets);
  EXPECT_LE(ratchets, kTraces * 2 / 100);
}

// The late-growth scan's rank gate (JudgeOptions::late_growth_trend_p, 0.01
// in the default judge). Mann–Kendall on n floors in order, with the
// continuity correction: S = n (n - 1) / 2, Var S = n (n - 1) (2n + 5) / 18,
// p = 1 - Phi((S - 1) / sqrt(Var S)). Five floors: S = 10, Var S = 50/3,
// z = 2.204541, p = 0.013743 (no five floors pass 0.01, however steep);
// six: S = 15, Var S = 85/3, z = 2.630146, p = 0.004267.
std::vector<MinuteFloor> LevelThenClimb(int last_level_minute, double climb_mib_per_minute,
                                        int count) {
  static const double kPattern[] = {0.6, -1.1, 0.3,  1.2, -0.7, -0.2, 1.0,  -1.3,
                                    0.4, 0.9,  -0.8, 0.1, -0.5, 1.1,  -0.9, 0.2};
  std::vector<MinuteFloor> out;
  for (int m = 1; m <= count; ++m) {
    const double rise = m > last_level_minute ? climb_mib_per_minute * (m - last_level_minute) : 0;
    out.push_back(
        {.minute = m, .floor_bytes = (300 + 10 * kPattern[m % 16] + rise) * kBytesPerMiB});
  }
  return out;
}

// Growth of 30 MiB a minute (+1.76 GiB/h) from minute 7 on a floor level
// within ±13 MiB before it. The broken-line scan finds it on the floor of
// minute 11, five floors into the climb; the rank gate lets it decide on
// the sixth, one minute later than a gate at 0.05 would.
TEST(LateGrowthTrendGateTest, GrowthFromMinuteSevenIsARatchetOnItsSixthFloor) {
  const JudgeOptions plan{.max_minutes = 30, .planned_minutes = 15};
  const auto floors = LevelThenClimb(6, 30, 14);
  const auto judge = NewDefaultJudge(plan);
  for (size_t n = 1; n <= 11; ++n) {
    EXPECT_EQ(judge->Judge(std::span(floors).first(n), false).decision, FloorDecision::kContinue)
        << n;
  }
  const FloorJudgement j = judge->Judge(std::span(floors).first(12), false);
  ASSERT_EQ(j.decision, FloorDecision::kRatchet) << j.explanation;
  EXPECT_EQ(j.ratchet_rule, FloorJudgement::Rule::kLateGrowth);
  EXPECT_EQ(j.growth_start_minute, 7);
  EXPECT_NEAR(j.trend_p_value, 0.004267, 1e-6);

  JudgeOptions lenient = StepJudgeOptions(plan);
  lenient.late_growth_trend_p = 0.05;
  const FloorJudgement early =
      NewSequentialJudge(lenient)->Judge(std::span(floors).first(11), false);
  ASSERT_EQ(early.decision, FloorDecision::kRatchet) << early.explanation;
  EXPECT_EQ(early.ratchet_rule, FloorJudgement::Rule::kLateGrowth);
  EXPECT_NEAR(early.trend_p_value, 0.013743, 1e-6);
}

// One swing of slow wander: a level floor swaying ±60 MiB over 12 minutes
// (with a ±3 MiB ripple). Minutes 7-11 rise in order, and the broken-line
// scan reads them as growth since minute 7 (+1.44 GiB/h, interval +0.77 to
// +2.11 GiB/h at 99.99 %: the whole run's residuals do not show the wander
// as correlated). A rank gate at 0.05 lets that decide; the default
// judge's does not, and calls the same eleven floors Flat.
TEST(LateGrowthTrendGateTest, OneSwingOfWanderIsNotALateGrowthRatchet) {
  const JudgeOptions plan{.max_minutes = 30, .planned_minutes = 15};
  std::vector<MinuteFloor> floors;
  for (int m = 1; m <= 29; ++m) {
    const double mib = 300 + 60 * std::sin(6.2832 * m / 12 + 1.57) + 3 * std::sin(2.7 * m);
    floors.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB});
  }
  const RunOutcome outcome = ReplayJudge(*NewDefaultJudge(plan), floors);
  EXPECT_EQ(outcome.judgement.decision, FloorDecision::kFlat) << outcome.judgement.explanation;
  EXPECT_EQ(outcome.judgement.minutes_used, 11);

  JudgeOptions lenient = StepJudgeOptions(plan);
  lenient.late_growth_trend_p = 0.05;
  const RunOutcome before = ReplayJudge(*NewSequentialJudge(lenient), floors);
  EXPECT_EQ(before.judgement.decision, FloorDecision::kRatchet) << before.judgement.explanation;
  EXPECT_EQ(before.judgement.ratchet_rule, FloorJudgement::Rule::kLateGrowth);
  EXPECT_EQ(before.judgement.growth_start_minute, 7);
  EXPECT_EQ(before.judgement.minutes_used, 11);
}

TEST(DefaultJudgeTest, IsTheSequentialJudge) {
  EXPECT_EQ(NewDefaultJudge({.max_slope_gib_per_h = 0.5})->Judge(Trace(0, 1), true).method,
            "sequential");
}

}  // namespace
}  // namespace allocguard::memory
