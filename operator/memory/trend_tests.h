#pragma once

// Mann–Kendall trend test on the floors, corrected for autocorrelation.
//
// The statistic S counts, over every pair of floors, +1 when the later floor
// is higher and -1 when it is lower. It looks only at order, so one outlier
// minute changes S by at most 2 (n - 1) whatever its size. Positively
// autocorrelated floors make S vary more than it would for independent ones;
// the variance is inflated by the Yue–Wang (2004) correction factor
// 1 + 2 sum_{k=1}^{n-1} (1 - k/n) r1^k, where r1 is the lag-1 autocorrelation
// of the floors after removing their Theil–Sen trend (AR(1) assumed; negative
// r1 is not taken as extra evidence).

#include <span>

#include "operator/memory/memory_sample.h"

namespace allocguard::memory {

struct MannKendallResult {
  int n = 0;
  double s = 0;
  double variance = 0;           // of S under no trend, with the tie correction
  double detrended_lag1 = 0;     // as estimated
  double correction_factor = 1;  // applied to variance
  double z = 0;                  // continuity-corrected (S -/+ 1) / sqrt(variance * factor)
  double p_increasing = 1;       // one-sided: P(Z >= z) under no trend
  double p_decreasing = 1;       // one-sided: P(Z <= z) under no trend
};

// Tests the series floor_bytes - null_slope * minute (bytes per minute), so a
// small p_increasing says the floor rises faster than null_slope. Normal
// approximation; with fewer than 3 floors the result has p = 1 both ways.
MannKendallResult MannKendallTest(std::span<const MinuteFloor> floors,
                                  double null_slope_bytes_per_minute = 0);

}  // namespace allocguard::memory
