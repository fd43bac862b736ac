#include "operator/memory/slope_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "operator/memory/distributions.h"

namespace allocguard::memory {

SlopeInterval FitSlopeInterval(std::span<const MinuteFloor> floors, double one_sided_alpha) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  SlopeInterval iv;
  iv.n = static_cast<int>(floors.size());
  iv.low = -kInf;
  iv.high = kInf;
  if (iv.n < 2) {
    if (iv.n == 1) iv.intercept = floors[0].floor_bytes;
    return iv;
  }
  double mean_x = 0, mean_y = 0;
  for (const MinuteFloor& f : floors) {
    mean_x += f.minute;
    mean_y += f.floor_bytes;
  }
  mean_x /= iv.n;
  mean_y /= iv.n;
  double sxx = 0, sxy = 0;
  for (const MinuteFloor& f : floors) {
    sxx += (f.minute - mean_x) * (f.minute - mean_x);
    sxy += (f.minute - mean_x) * (f.floor_bytes - mean_y);
  }
  if (sxx == 0) {
    iv.intercept = mean_y;
    return iv;
  }
  iv.slope = sxy / sxx;
  iv.intercept = mean_y - iv.slope * mean_x;
  if (iv.n < 3) return iv;

  std::vector<double> residuals;
  residuals.reserve(floors.size());
  double sse = 0;
  for (const MinuteFloor& f : floors) {
    const double r = f.floor_bytes - (iv.intercept + iv.slope * f.minute);
    residuals.push_back(r);
    sse += r * r;
  }
  double lag1 = 0;
  for (size_t i = 0; i + 1 < residuals.size(); ++i) lag1 += residuals[i] * residuals[i + 1];
  iv.lag1_autocorrelation = sse > 0 ? lag1 / sse : 0;
  // The lag-1 autocorrelation of least-squares residuals is biased low in short
  // series: by about (2 + 6 rho) / n for AR(1) noise with a fitted trend (by
  // simulation; -0.14 on average for independent noise at n = 14). Undo that
  // bias before using it, and take no credit for negative correlation.
  const double r = iv.lag1_autocorrelation;
  const double r1 = std::clamp(r + (2 + 6 * std::max(r, 0.0)) / iv.n, 0.0, 0.9);
  // Correlated floors carry less information than independent ones: the
  // slope's variance grows by n / n_eff. Santer et al. also cut the degrees of
  // freedom to n_eff - 2; on the evaluation corpus that cost much of the power
  // for a ratchet at twice the threshold and did not make the AR(1) classes
  // valid either (docs/verdicts.md), so the t quantile keeps n - 2.
  iv.effective_n = iv.n * (1 - r1) / (1 + r1);
  iv.dof = iv.n - 2;
  iv.std_error = std::sqrt(sse / iv.dof / sxx * iv.n / iv.effective_n);
  iv.t_quantile = StudentTUpperQuantile(one_sided_alpha, iv.dof);
  iv.low = iv.slope - iv.t_quantile * iv.std_error;
  iv.high = iv.slope + iv.t_quantile * iv.std_error;
  iv.valid = true;
  return iv;
}

double TheilSenSlope(std::span<const MinuteFloor> floors) {
  std::vector<double> slopes;
  slopes.reserve(floors.size() * floors.size() / 2);
  for (size_t i = 0; i < floors.size(); ++i) {
    for (size_t j = i + 1; j < floors.size(); ++j) {
      const int dx = floors[j].minute - floors[i].minute;
      if (dx != 0) slopes.push_back((floors[j].floor_bytes - floors[i].floor_bytes) / dx);
    }
  }
  if (slopes.empty()) return 0;
  const size_t mid = slopes.size() / 2;
  std::nth_element(slopes.begin(), slopes.begin() + mid, slopes.end());
  if (slopes.size() % 2 == 1) return slopes[mid];
  const double upper = slopes[mid];
  const double lower = *std::max_element(slopes.begin(), slopes.begin() + mid);
  return (lower + upper) / 2;
}

}  // namespace allocguard::memory
