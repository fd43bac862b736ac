#include "operator/memory/trend_tests.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "operator/memory/distributions.h"
#include "operator/memory/slope_interval.h"

namespace allocguard::memory {

MannKendallResult MannKendallTest(std::span<const MinuteFloor> floors,
                                  double null_slope_bytes_per_minute) {
  MannKendallResult r;
  r.n = static_cast<int>(floors.size());
  if (r.n < 3) return r;
  std::vector<MinuteFloor> series(floors.begin(), floors.end());
  for (MinuteFloor& f : series) f.floor_bytes -= null_slope_bytes_per_minute * f.minute;

  for (int i = 0; i < r.n; ++i) {
    for (int j = i + 1; j < r.n; ++j) {
      const double d = series[j].floor_bytes - series[i].floor_bytes;
      r.s += (d > 0) - (d < 0);
    }
  }
  const double n = r.n;
  r.variance = n * (n - 1) * (2 * n + 5);
  std::vector<double> sorted;
  sorted.reserve(series.size());
  for (const MinuteFloor& f : series) sorted.push_back(f.floor_bytes);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    const auto t = static_cast<double>(j - i);
    r.variance -= t * (t - 1) * (2 * t + 5);
    i = j;
  }
  r.variance /= 18;

  // Lag-1 autocorrelation of the series after removing its Theil–Sen trend.
  const double sen = TheilSenSlope(series);
  std::vector<double> detrended;
  double mean = 0;
  for (const MinuteFloor& f : series) {
    detrended.push_back(f.floor_bytes - sen * f.minute);
    mean += detrended.back();
  }
  mean /= n;
  double c0 = 0;
  double c1 = 0;
  for (size_t i = 0; i < detrended.size(); ++i) {
    c0 += (detrended[i] - mean) * (detrended[i] - mean);
    if (i + 1 < detrended.size()) c1 += (detrended[i] - mean) * (detrended[i + 1] - mean);
  }
  r.detrended_lag1 = c0 > 0 ? c1 / c0 : 0;
  const double r1 = std::clamp(r.detrended_lag1, 0.0, 0.99);
  double power = 1;
  for (int k = 1; k < r.n; ++k) {
    power *= r1;
    r.correction_factor += 2 * (1 - k / n) * power;
  }

  if (r.variance <= 0) return r;  // every floor equal: no evidence either way
  const double sd = std::sqrt(r.variance * r.correction_factor);
  if (r.s > 0) r.z = (r.s - 1) / sd;
  if (r.s < 0) r.z = (r.s + 1) / sd;
  r.p_increasing = NormalUpperTail(r.z);
  r.p_decreasing = NormalUpperTail(-r.z);
  return r;
}

}  // namespace allocguard::memory
