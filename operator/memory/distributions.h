#pragma once

// The few distribution functions the verdict statistics need: normal and
// Student t tail probabilities and the t quantile, for real (non-integer)
// degrees of freedom, since an effective sample size is rarely a whole number.
// Pure functions; accurate to about 1e-10 in the ranges used here.

namespace allocguard::memory {

// P(Z > z) for a standard normal Z.
double NormalUpperTail(double z);

// The z with P(Z > z) = upper_tail. REQUIRES: 0 < upper_tail < 1.
double NormalUpperQuantile(double upper_tail);

// P(T > t) for Student's t with dof degrees of freedom. REQUIRES: dof > 0.
double StudentTUpperTail(double t, double dof);

// The t with P(T > t) = upper_tail. REQUIRES: 0 < upper_tail < 1, dof > 0.
double StudentTUpperQuantile(double upper_tail, double dof);

// Regularized incomplete beta function I_x(a, b). REQUIRES: a, b > 0, 0 <= x <= 1.
double RegularizedIncompleteBeta(double x, double a, double b);

}  // namespace allocguard::memory
