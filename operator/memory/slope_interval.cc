#include "operator/memory/slope_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "operator/memory/distributions.h"
#include "operator/memory/floor_judge.h"

namespace allocguard::memory {

namespace {

std::vector<double> LinearResiduals(std::span<const MinuteFloor> floors, const SlopeInterval& iv) {
  std::vector<double> out;
  out.reserve(floors.size());
  for (const MinuteFloor& f : floors) {
    out.push_back(f.floor_bytes - (iv.intercept + iv.slope * f.minute));
  }
  return out;
}

// Residuals of the least-squares fit y = a + b x + c x^2, solved from the
// normal equations on centred x (well conditioned for minute indices).
std::vector<double> QuadraticResiduals(std::span<const MinuteFloor> floors) {
  const double n = static_cast<double>(floors.size());
  double mx = 0;
  for (const MinuteFloor& f : floors) mx += f.minute;
  mx /= n;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0, t0 = 0, t1 = 0, t2 = 0;
  for (const MinuteFloor& f : floors) {
    const double x = f.minute - mx, y = f.floor_bytes;
    s1 += x;
    s2 += x * x;
    s3 += x * x * x;
    s4 += x * x * x * x;
    t0 += y;
    t1 += x * y;
    t2 += x * x * y;
  }
  // Solve [[n s1 s2] [s1 s2 s3] [s2 s3 s4]] (a b c) = (t0 t1 t2) by Cramer's rule.
  auto det3 = [](double a, double b, double c, double d, double e, double f, double g, double h,
                 double i) {
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
  };
  const double d = det3(n, s1, s2, s1, s2, s3, s2, s3, s4);
  std::vector<double> out;
  out.reserve(floors.size());
  if (std::fabs(d) < 1e-12) return out;
  const double a = det3(t0, s1, s2, t1, s2, s3, t2, s3, s4) / d;
  const double b = det3(n, t0, s2, s1, t1, s3, s2, t2, s4) / d;
  const double c = det3(n, s1, t0, s1, s2, t1, s2, s3, t2) / d;
  for (const MinuteFloor& f : floors) {
    const double x = f.minute - mx;
    out.push_back(f.floor_bytes - (a + b * x + c * x * x));
  }
  return out;
}

}  // namespace

SlopeInterval FitSlopeInterval(std::span<const MinuteFloor> floors, double one_sided_alpha) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  SlopeInterval iv;
  iv.n = static_cast<int>(floors.size());
  iv.low = -kInf;
  iv.high = kInf;
  const SlopeFit fit = FitFloorSlope(floors);
  iv.slope = fit.slope_bytes_per_minute;
  iv.intercept = fit.intercept_bytes;
  const double sxx = fit.sxx;
  if (iv.n < 2 || sxx == 0) return iv;
  if (iv.n < 3) return iv;

  // The noise (its size and its lag-1 autocorrelation) is estimated from the
  // residuals of a quadratic fit when there are enough floors. Ratchets
  // decelerate as the allocator's arenas fill: around a straight line such a
  // curve leaves residuals that look strongly autocorrelated, and the interval
  // would widen exactly when the growth is largest. A quadratic absorbs smooth
  // curvature and leaves the noise; with linear growth and AR(1) noise it
  // estimates the same noise, at the cost of one degree of freedom.
  const bool quadratic = iv.n >= kQuadraticNoiseMinFloors;
  const int params = quadratic ? 3 : 2;
  std::vector<double> residuals =
      quadratic ? QuadraticResiduals(floors) : LinearResiduals(floors, iv);
  double sse = 0;
  for (double r : residuals) sse += r * r;
  double lag1 = 0;
  for (size_t i = 0; i + 1 < residuals.size(); ++i) lag1 += residuals[i] * residuals[i + 1];
  iv.lag1_autocorrelation = sse > 0 ? lag1 / sse : 0;
  // The lag-1 autocorrelation of fitted residuals is biased low in short
  // series: by about (p + 6 rho) / n for AR(1) noise around a fit with p
  // parameters (by simulation for p = 2; -0.14 on average for independent noise
  // at n = 14). Undo that bias before using it, and take no credit for negative
  // correlation.
  const double r = iv.lag1_autocorrelation;
  const double r1 = std::clamp(r + (params + 6 * std::max(r, 0.0)) / iv.n, 0.0, 0.9);
  // Correlated floors carry less information than independent ones: the
  // slope's variance grows by n / n_eff. Santer et al. also cut the degrees of
  // freedom to n_eff - 2; on the evaluation corpus that cost much of the power
  // for a ratchet at twice the threshold and did not make the AR(1) classes
  // valid either (docs/verdicts.md), so the t quantile keeps n - 2.
  iv.effective_n = iv.n * (1 - r1) / (1 + r1);
  iv.dof = iv.n - 2;
  iv.std_error = std::sqrt(sse / (iv.n - params) / sxx * iv.n / iv.effective_n);
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
