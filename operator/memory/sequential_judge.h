#pragma once

// The sequential floor judge (NewSequentialJudge in floor_judge.h).
//
// It looks after every floor from options.min_floors floors to the planned
// end of the run and fits the floor slope with an autocorrelation-adjusted
// interval (slope_interval.h). A false verdict at any look is a false verdict
// of the run, so each look gets its own share of the error budget and the
// shares add up to the budget (Bonferroni over the planned looks; a weighted
// split, fixed in advance, that keeps options.final_look_share for the last
// look). At each look, in this order:
//   - Ratchet when the lower bound of the whole-run slope is above the
//     threshold, the Theil–Sen slope is above it and Mann–Kendall finds a
//     trend steeper than it (p < robust_trend_p), so one outlier minute
//     cannot decide;
//   - Ratchet when the floors from some later minute on rise the same way
//     (change_point.h), paid from options.late_growth_share of the budget;
//   - Flat when the whole-run interval at the Flat budget lies within
//     ±threshold and so does Theil–Sen;
//   - Continue otherwise, and Inconclusive at the last planned look or when
//     the run ends.
// Thread-safe: the judge keeps no state between calls.

#include "operator/memory/floor_judge.h"

namespace allocguard::memory {

// One look's share of the budget, as one-sided levels.
struct LookBudget {
  double ratchet = 0;      // lower bound of the whole-run slope
  double late_growth = 0;  // divided among the late-growth scan's starts
  double flat = 0;         // each side of the Flat interval
};

// Planned looks: one per floor count from min_floors to
// max_minutes - warmup_minutes; at least 1.
int PlannedLooks(const JudgeOptions& options);

// The budget of the look at `floors` floors; zero outside the plan.
LookBudget BudgetForLook(const JudgeOptions& options, int floors);

}  // namespace allocguard::memory
