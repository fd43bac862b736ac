#pragma once

// The sequential floor judge (NewSequentialJudge in floor_judge.h).
//
// It looks after every floor from options.min_floors floors to the planned
// end of the run and fits the floor slope with an autocorrelation-adjusted
// interval (slope_interval.h). A false verdict at any look is a false verdict
// of the run, so the error budgets are spread over the planned looks by
// alpha spending with boundaries that account for the correlation between
// looks (group_sequential.h): the slope after n floors shares n - 1 of them
// with the previous look. The boundaries are computed for the information of
// the slope at each look (Sxx = n (n^2 - 1) / 12 for consecutive minutes) and
// applied to the t statistic at the look's nominal level, the usual way of
// carrying known-variance boundaries over to an estimated variance
// (Jennison & Turnbull 2000, section 11.4). At each look, in this order:
//   - Ratchet when the lower bound of the whole-run slope is above the
//     threshold, the Theil–Sen slope is above it and Mann–Kendall finds a
//     trend steeper than it (p < robust_trend_p), so one outlier minute
//     cannot decide;
//   - Ratchet by the large-steps rule (JudgeOptions::noise_ceiling_mib),
//     early in the run, when the climb is beyond any noise under the ceiling
//     with every single floor left out, and the rank trend agrees;
//   - Ratchet when the floors from some later minute on rise the same way
//     (change_point.h), paid from options.late_growth_share of the budget;
//   - Flat when the whole-run interval at the Flat budget lies within
//     ±threshold and so does Theil–Sen;
//   - Continue otherwise, and Inconclusive at the last planned look or when
//     the run ends.
// Thread-safe: the judge keeps no state between calls.

#include <span>
#include <vector>

#include "operator/memory/floor_judge.h"

namespace allocguard::memory {

// One look's share of the budget, as one-sided levels.
struct LookBudget {
  double ratchet = 0;      // lower bound of the whole-run slope
  double late_growth = 0;  // divided among the late-growth scan's starts
  double flat = 0;         // each side of the Flat interval
  double steps = 0;        // the large-steps rule (0 outside its looks)
};

// The large-steps rule of JudgeOptions::noise_ceiling_mib at one look: the
// least-squares slope of the floors with each floor left out in turn, less
// z times its standard deviation under the worst noise the ceiling allows
// (WorstCaseSlopeVariance), z the one-sided normal quantile of alpha. The
// smallest of these lower bounds, in bytes per minute; -inf with fewer than
// four floors. A Ratchet needs it above the threshold. Its upper companion
// is the slope of all the floors plus z times its worst-case standard
// deviation: under noise within the ceiling, [low, high] covers the true
// slope with probability at least 1 - 2 alpha.
struct StepBound {
  double low = 0;          // the smallest lower bound over the floors left out
  double high = 0;         // the upper bound of the slope of all the floors
  int weakest_minute = 0;  // the minute whose leaving out gave low
};
StepBound LargeStepBound(std::span<const MinuteFloor> floors, double ceiling_sd_bytes,
                         double ceiling_ar1, double alpha);

// Planned looks: one per floor count from min_floors to
// max_minutes - warmup_minutes; at least 1.
int PlannedLooks(const JudgeOptions& options);

// The budget of the look at `floors` floors; zero outside the plan. The
// whole-run Ratchet and each side of the Flat test use nominal levels of
// power-family spending boundaries; the late-growth scan, whose statistic is
// a maximum over starts, gets the spending increment of its share
// (Bonferroni over looks, valid whatever their correlation).
LookBudget BudgetForLook(const JudgeOptions& options, int floors);

// All planned looks' budgets, for floors = min_floors .. the last planned look.
std::vector<LookBudget> PlanLookBudgets(const JudgeOptions& options);

// The planned run length in minutes: options.planned_minutes, or max_minutes
// when that is 0 or larger.
int PlannedMinutes(const JudgeOptions& options);

// Floors at the planned end of the run (PlannedMinutes less the warm-up).
int PlannedEndFloors(const JudgeOptions& options);

// The budget spent by each look: power-family spending of
// alpha * (1 - extension_share) over the information up to planned_look, then
// of alpha * extension_share over the information the looks after it add, up
// to the last. With planned_look at the last look the whole alpha is spent by
// it, as a plain power-family plan.
std::vector<double> CumulativeSpending(std::span<const double> information, int planned_look,
                                       double alpha, double extension_share, double rho);

}  // namespace allocguard::memory
