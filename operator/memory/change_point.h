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

}  // namespace allocguard::memory
