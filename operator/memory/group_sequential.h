#pragma once

// Group-sequential boundaries: how much of an error budget each planned look
// may use when the statistics at the looks are correlated.
//
// The sequential judge tests the floor slope after every minute. The slope
// estimates at successive looks share most of their floors, so they are
// strongly correlated, and splitting the budget as if every look were a
// separate chance to err (Bonferroni) wastes much of it. For least-squares
// estimates on nested data the standardized statistics Z_1, ..., Z_K at looks
// with information I_1 < ... < I_K (information = 1 / variance of the
// estimate) have the "canonical" joint distribution of Jennison & Turnbull
// (2000, ch. 3): Z_k = S_k / sqrt(I_k) with S a Gaussian process of
// independent increments, Var(S_k) = I_k, so corr(Z_j, Z_k) = sqrt(I_j / I_k).
//
// An alpha-spending function (Lan & DeMets 1983) fixes, in advance, how much
// of the one-sided budget alpha is used by each information fraction
// t_k = I_k / I_K; the boundary c_k of look k is then chosen so that
//   P(Z_1 < c_1, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = spend(t_k) - spend(t_{k-1})
// under the null hypothesis, which makes the chance of any false crossing
// exactly spend(1) = alpha. This file computes those boundaries by the
// recursive numerical integration of Armitage, McPherson & Rowe (1969).
// Pure functions; deterministic.

#include <span>
#include <vector>

namespace allocguard::memory {

// Power-family spending (Kim & DeMets 1987): alpha * t^rho for t in [0, 1].
// rho = 1 spends evenly in information (close to Pocock's constant
// boundaries); rho = 3 keeps most of the budget for the end (close to
// O'Brien–Fleming).
double PowerSpending(double alpha, double information_fraction, double rho);

// One-sided nominal levels p_k = P(Z > c_k) of the boundaries for looks at the
// given information levels (strictly increasing, positive) with power-family
// spending of alpha. A look whose spending increment is zero gets level 0.
// REQUIRES: 0 < alpha < 0.5, rho > 0.
std::vector<double> SpendingNominalLevels(std::span<const double> information, double alpha,
                                          double rho);

// The same for any spending plan: cumulative[k] is the budget spent by look k
// (non-decreasing, below 0.5). A look that spends nothing new gets level 0.
std::vector<double> NominalLevelsForSpending(std::span<const double> information,
                                             std::span<const double> cumulative);

// P(the process crosses at some look) for boundaries given as nominal levels,
// under the null hypothesis; equals alpha for the levels above (a check).
double CrossingProbability(std::span<const double> information,
                           std::span<const double> nominal_levels);

}  // namespace allocguard::memory
