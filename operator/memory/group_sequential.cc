#include "operator/memory/group_sequential.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "operator/memory/distributions.h"

namespace allocguard::memory {
namespace {

constexpr int kGridPoints = 240;  // per look
constexpr double kGridSds = 9;    // the grid starts this many sds below zero

// P(Z >= z) and its inverse, from the distributions module.
double UpperTail(double z) { return NormalUpperTail(z); }

double UpperQuantile(double p) {
  // Bisection on the monotone tail: robust for the tiny levels used here.
  double lo = -40;
  double hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (UpperTail(mid) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The sub-density of S_k on the continuation region (S_j below its boundary at
// every look so far), on a uniform grid with trapezoid weights folded in.
struct Density {
  std::vector<double> s;       // grid points
  std::vector<double> weight;  // density * trapezoid weight
};

Density FirstDensity(double info, double bound) {
  Density d;
  const double sd = std::sqrt(info);
  const double lo = -kGridSds * sd;
  const double hi = std::max(bound, lo + sd * 1e-6);
  const double h = (hi - lo) / (kGridPoints - 1);
  for (int i = 0; i < kGridPoints; ++i) {
    const double s = lo + h * i;
    const double z = s / sd;
    const double trapezoid = (i == 0 || i == kGridPoints - 1) ? h / 2 : h;
    d.s.push_back(s);
    d.weight.push_back(std::exp(-z * z / 2) / (sd * std::sqrt(2 * M_PI)) * trapezoid);
  }
  return d;
}

// Beyond this many standard deviations a Gaussian term is below 1e-87 of its
// peak: far under anything a boundary's level depends on.
constexpr double kKernelSds = 20;

// P(S_k >= bound and continued so far) given the previous sub-density, and
// its derivative in bound (for Newton steps).
struct Exceedance {
  double p = 0;
  double dp_dbound = 0;
};

Exceedance ExceedWithSlope(const Density& prev, double increment_var, double bound) {
  const double sd = std::sqrt(increment_var);
  const double norm = 1 / (sd * std::sqrt(2 * M_PI));
  Exceedance e;
  for (size_t j = 0; j < prev.s.size(); ++j) {
    const double z = (bound - prev.s[j]) / sd;
    if (z > 38) continue;  // the tail underflows to 0 there
    e.p += prev.weight[j] * UpperTail(z);
    if (z > -kKernelSds) e.dp_dbound -= prev.weight[j] * norm * std::exp(-z * z / 2);
  }
  return e;
}

double Exceed(const Density& prev, double increment_var, double bound) {
  return ExceedWithSlope(prev, increment_var, bound).p;
}

// The boundary c (in Z units, bound = c * sd) at which the exceedance equals
// target: Newton steps on log P, which is nearly straight in c, kept inside a
// bisection bracket so a poor step cannot escape. Converges in a handful of
// steps from a guess near the root; 100 bisection halvings bound the worst case.
double BoundaryFor(const Density& prev, double increment_var, double sd, double target,
                   double guess) {
  double lo = -10;
  double hi = 40;
  double c = std::clamp(guess, lo, hi);
  const double log_target = std::log(target);
  for (int i = 0; i < 100 && hi - lo > 1e-12; ++i) {
    const Exceedance e = ExceedWithSlope(prev, increment_var, c * sd);
    (e.p > target ? lo : hi) = c;
    double next = (lo + hi) / 2;
    if (e.p > 0 && e.dp_dbound < 0) {
      const double newton = c - (std::log(e.p) - log_target) / (e.dp_dbound * sd / e.p);
      if (newton > lo && newton < hi) next = newton;
    }
    if (std::fabs(next - c) < 1e-12) return next;
    c = next;
  }
  return (lo + hi) / 2;
}

Density NextDensity(const Density& prev, double info, double increment_var, double bound) {
  Density d;
  const double sd_total = std::sqrt(info);
  const double lo = -kGridSds * sd_total;
  const double hi = std::max(bound, lo + sd_total * 1e-6);
  const double h = (hi - lo) / (kGridPoints - 1);
  const double inc_sd = std::sqrt(increment_var);
  const double norm = 1 / (inc_sd * std::sqrt(2 * M_PI));
  for (int i = 0; i < kGridPoints; ++i) {
    const double s = lo + h * i;
    // Only the previous grid points within kKernelSds of s contribute; the
    // grid is sorted, so they are one run of it.
    double f = 0;
    const auto first = std::lower_bound(prev.s.begin(), prev.s.end(), s - kKernelSds * inc_sd);
    for (size_t j = first - prev.s.begin(); j < prev.s.size(); ++j) {
      const double z = (s - prev.s[j]) / inc_sd;
      if (z < -kKernelSds) break;
      f += prev.weight[j] * std::exp(-z * z / 2);
    }
    const double trapezoid = (i == 0 || i == kGridPoints - 1) ? h / 2 : h;
    d.s.push_back(s);
    d.weight.push_back(f * norm * trapezoid);
  }
  return d;
}

// Walks the looks with the given boundaries (in Z units; +inf for none),
// calling at_look(k, prev, increment_var) before look k's boundary is used so
// a caller may choose it. Returns the total crossing probability.
template <typename ChooseBound>
double Walk(std::span<const double> information, ChooseBound choose) {
  double total = 0;
  Density prev;
  for (size_t k = 0; k < information.size(); ++k) {
    const double info = information[k];
    const double increment_var = k == 0 ? info : info - information[k - 1];
    const double c = choose(k, prev, increment_var);
    const double bound = std::isinf(c) ? kGridSds * 4 * std::sqrt(info) : c * std::sqrt(info);
    if (k == 0) {
      total += std::isinf(c) ? 0 : UpperTail(c);
      prev = FirstDensity(info, bound);
    } else {
      total += std::isinf(c) ? 0 : Exceed(prev, increment_var, bound);
      prev = NextDensity(prev, info, increment_var, bound);
    }
  }
  return total;
}

}  // namespace

double PowerSpending(double alpha, double information_fraction, double rho) {
  return alpha * std::pow(std::clamp(information_fraction, 0.0, 1.0), rho);
}

std::vector<double> SpendingNominalLevels(std::span<const double> information, double alpha,
                                          double rho) {
  std::vector<double> cumulative;
  cumulative.reserve(information.size());
  for (double info : information) {
    cumulative.push_back(PowerSpending(alpha, info / information.back(), rho));
  }
  return NominalLevelsForSpending(information, cumulative);
}

std::vector<double> NominalLevelsForSpending(std::span<const double> information,
                                             std::span<const double> cumulative) {
  std::vector<double> levels(information.size(), 0);
  if (information.empty()) return levels;
  Walk(information, [&](size_t k, const Density& prev, double increment_var) {
    const double target = cumulative[k] - (k == 0 ? 0 : cumulative[k - 1]);
    if (target <= 0) return std::numeric_limits<double>::infinity();
    // Without the earlier looks the boundary would be the plain quantile;
    // they lower it only a little, so the quantile is a close first guess.
    const double unconditional = UpperQuantile(target);
    const double c =
        k == 0 ? unconditional
               : BoundaryFor(prev, increment_var, std::sqrt(information[k]), target, unconditional);
    levels[k] = UpperTail(c);
    return c;
  });
  return levels;
}

double CrossingProbability(std::span<const double> information,
                           std::span<const double> nominal_levels) {
  return Walk(information, [&](size_t k, const Density&, double) {
    return nominal_levels[k] > 0 ? UpperQuantile(nominal_levels[k])
                                 : std::numeric_limits<double>::infinity();
  });
}

}  // namespace allocguard::memory
