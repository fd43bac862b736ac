#pragma once

// Growth that starts mid-run. A floor that is level for the first minutes and
// then climbs has a whole-run slope diluted by the level part, so the whole-run
// interval may not clear the threshold although the floor now ratchets. This
// check scans every possible start of the climb (a change point in the slope)
// and fits the floors from that start on; it is the likelihood-ratio scan that
// a CUSUM of slope residuals approximates, with the multiple starts paid for by
// dividing the error budget among them (Bonferroni).

#include <span>

#include "operator/memory/memory_sample.h"
#include "operator/memory/slope_interval.h"

namespace allocguard::memory {

struct LateGrowth {
  bool found = false;    // some tail's lower bound is above the threshold
  int start_minute = 0;  // first minute of the strongest rising tail
  int candidates = 0;    // starts examined; the budget was divided among them
  SlopeInterval tail;    // fit over the floors from start_minute on
};

// Examines starts from the second floor on (the whole run is the caller's own
// test) that leave at least min_segment floors, each at one-sided level
// alpha / candidates, and returns the tail with the highest lower bound.
// Slopes in bytes per minute. REQUIRES: min_segment >= 3, 0 < alpha < 0.5.
LateGrowth FindLateGrowth(std::span<const MinuteFloor> floors, double threshold_bytes_per_minute,
                          double alpha, int min_segment,
                          SlopeNoise noise = SlopeNoise::kQuadraticResiduals);

// The same scan with every start judged on all the floors, not on its tail
// alone: a broken line y = a + b t + c max(0, t - start), level-continuous at
// the start, is fitted to the whole run, and the tail's slope b + c gets its
// variance from the residuals of that fit (n - 3 degrees of freedom) with
// their lag-1 correlation (bias-corrected as FitSlopeInterval does, clamped
// to [0, 0.9]) taken into the exact AR(1) variance of b + c. A tail of 5-8
// floors estimates its own noise from 2-5 degrees of freedom and cannot see
// slow wander in it; the floors before the start can. The floors must be
// consecutive minutes. tail.slope, low, high, std_error, dof and
// lag1_autocorrelation describe b + c; tail.n is the tail's floors.
LateGrowth FindHingeGrowth(std::span<const MinuteFloor> floors, double threshold_bytes_per_minute,
                           double alpha, int min_segment);

}  // namespace allocguard::memory
