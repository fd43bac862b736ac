#include "operator/memory/distributions.h"

#include <cmath>

namespace allocguard::memory {
namespace {

// Continued fraction of the incomplete beta function, evaluated by the modified
// Lentz method (converges quickly for x < (a + 1) / (a + b + 2)).
double BetaContinuedFraction(double x, double a, double b) {
  constexpr double kTiny = 1e-300;
  constexpr double kEpsilon = 1e-15;
  const double qab = a + b;
  const double qap = a + 1;
  const double qam = a - 1;
  double c = 1;
  double d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEpsilon) break;
  }
  return h;
}

}  // namespace

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

double RegularizedIncompleteBeta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(x, a, b) / a;
  return 1 - front * BetaContinuedFraction(1 - x, b, a) / b;
}

double StudentTUpperTail(double t, double dof) {
  // P(|T| > |t|) = I_{dof/(dof+t^2)}(dof/2, 1/2).
  const double two_sided = RegularizedIncompleteBeta(dof / (dof + t * t), dof / 2, 0.5);
  return t >= 0 ? two_sided / 2 : 1 - two_sided / 2;
}

double StudentTUpperQuantile(double upper_tail, double dof) {
  if (upper_tail > 0.5) return -StudentTUpperQuantile(1 - upper_tail, dof);
  if (upper_tail == 0.5) return 0;
  // Bracket, then bisect on the monotone tail probability: robust for every
  // dof > 0, and cheap enough (about 60 evaluations) for the judge's few calls.
  double lo = 0;
  double hi = 1;
  while (StudentTUpperTail(hi, dof) > upper_tail && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    if (StudentTUpperTail(mid, dof) > upper_tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (lo + hi) / 2;
}

double NormalUpperQuantile(double upper_tail) {
  // Bisection on the monotone tail: exact to the tail's own accuracy.
  double lo = -40;
  double hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = (lo + hi) / 2;
    (NormalUpperTail(mid) > upper_tail ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace allocguard::memory
