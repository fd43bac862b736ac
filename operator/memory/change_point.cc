#include "operator/memory/change_point.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "operator/memory/distributions.h"

namespace allocguard::memory {

LateGrowth FindLateGrowth(std::span<const MinuteFloor> floors, double threshold_bytes_per_minute,
                          double alpha, int min_segment, SlopeNoise noise) {
  LateGrowth result;
  const int n = static_cast<int>(floors.size());
  const int last_start = n - min_segment;  // index of the last start examined
  if (last_start < 1) return result;
  result.candidates = last_start;
  const double per_start_alpha = alpha / result.candidates;
  bool have_best = false;
  for (int i = 1; i <= last_start; ++i) {
    SlopeInterval tail = FitSlopeInterval(floors.subspan(i), per_start_alpha, noise);
    if (!tail.valid) continue;
    if (!have_best || tail.low > result.tail.low) {
      result.tail = tail;
      result.start_minute = floors[i].minute;
      have_best = true;
    }
  }
  result.found = have_best && result.tail.low > threshold_bytes_per_minute;
  return result;
}

namespace {

// Inverse of a symmetric positive definite 3x3 matrix; false when singular.
bool Invert3(const std::array<double, 9>& m, std::array<double, 9>* out) {
  const double c00 = m[4] * m[8] - m[5] * m[7];
  const double c01 = m[5] * m[6] - m[3] * m[8];
  const double c02 = m[3] * m[7] - m[4] * m[6];
  const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
  if (!(std::fabs(det) > 1e-9)) return false;
  *out = {c00 / det, (m[2] * m[7] - m[1] * m[8]) / det, (m[1] * m[5] - m[2] * m[4]) / det,
          c01 / det, (m[0] * m[8] - m[2] * m[6]) / det, (m[2] * m[3] - m[0] * m[5]) / det,
          c02 / det, (m[1] * m[6] - m[0] * m[7]) / det, (m[0] * m[4] - m[1] * m[3]) / det};
  return true;
}

}  // namespace

LateGrowth FindHingeGrowth(std::span<const MinuteFloor> floors, double threshold_bytes_per_minute,
                           double alpha, int min_segment) {
  LateGrowth result;
  const int n = static_cast<int>(floors.size());
  const int last_start = n - min_segment;
  // A bend at the first floor is the whole-run line: starts from the third.
  if (last_start < 2) return result;
  for (int i = 1; i < n; ++i) {
    if (floors[i].minute != floors[i - 1].minute + 1) return result;
  }
  result.candidates = last_start - 1;
  const double per_start_alpha = alpha / result.candidates;
  const double t_quantile = StudentTUpperQuantile(per_start_alpha, n - 3);
  const double mid = (floors.front().minute + floors.back().minute) / 2.0;
  std::vector<double> w(static_cast<size_t>(n));
  std::vector<double> rho_power(static_cast<size_t>(n));
  bool have_best = false;
  for (int s = 2; s <= last_start; ++s) {
    const double bend = floors[s].minute - 1;  // the tail's first rise ends at floors[s]
    // Normal equations of (1, t, h) with t centred and h = max(0, t - bend).
    std::array<double, 9> xtx{};
    std::array<double, 3> xty{};
    for (const MinuteFloor& f : floors) {
      const double x[3] = {1, f.minute - mid, std::max(0.0, f.minute - bend)};
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < 3; ++b) xtx[a * 3 + b] += x[a] * x[b];
        xty[a] += x[a] * f.floor_bytes;
      }
    }
    std::array<double, 9> inv{};
    if (!Invert3(xtx, &inv)) continue;
    double beta[3] = {0, 0, 0};
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) beta[a] += inv[a * 3 + b] * xty[b];
    }
    // L = (0, 1, 1): the tail's slope b + c, and its weights on each floor.
    const double l[3] = {inv[3] + inv[6], inv[4] + inv[7], inv[5] + inv[8]};
    double sse = 0;
    double lag1 = 0;
    double previous = 0;
    for (int k = 0; k < n; ++k) {
      const MinuteFloor& f = floors[k];
      const double x[3] = {1, f.minute - mid, std::max(0.0, f.minute - bend)};
      const double e = f.floor_bytes - (beta[0] + beta[1] * x[1] + beta[2] * x[2]);
      sse += e * e;
      if (k > 0) lag1 += previous * e;
      previous = e;
      w[k] = l[0] * x[0] + l[1] * x[1] + l[2] * x[2];
    }
    const double r = sse > 0 ? lag1 / sse : 0;
    const double rho = std::clamp(r + (3 + 6 * std::max(r, 0.0)) / n, 0.0, 0.9);
    rho_power[0] = 1;
    for (int k = 1; k < n; ++k) rho_power[k] = rho_power[k - 1] * rho;
    double quad = 0;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) quad += w[a] * w[b] * rho_power[std::abs(a - b)];
    }
    SlopeInterval tail;
    tail.n = n - s;
    tail.slope = beta[1] + beta[2];
    tail.intercept = beta[0] + beta[1] * (bend - mid) - tail.slope * bend;
    tail.lag1_autocorrelation = r;
    tail.dof = n - 3;
    tail.std_error = std::sqrt(sse / (n - 3) * quad);
    tail.effective_n = tail.n;
    tail.t_quantile = t_quantile;
    tail.low = tail.slope - t_quantile * tail.std_error;
    tail.high = tail.slope + t_quantile * tail.std_error;
    tail.valid = true;
    if (!have_best || tail.low > result.tail.low) {
      result.tail = tail;
      result.start_minute = floors[s].minute;
      have_best = true;
    }
  }
  result.found = have_best && result.tail.low > threshold_bytes_per_minute;
  return result;
}

}  // namespace allocguard::memory
