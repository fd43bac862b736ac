#include "operator/memory/distributions.h"

#include <gtest/gtest.h>

#include <cmath>

namespace allocguard::memory {
namespace {

TEST(DistributionsTest, NormalTail) {
  EXPECT_DOUBLE_EQ(NormalUpperTail(0), 0.5);
  EXPECT_NEAR(NormalUpperTail(1.959963985), 0.025, 1e-9);
  EXPECT_NEAR(NormalUpperTail(-2.326347874), 0.99, 1e-9);
}

TEST(DistributionsTest, StudentTailHasClosedFormsAtOneAndTwoDegrees) {
  // dof 1 is the Cauchy distribution: P(T > 1) = 1/2 - atan(1)/pi = 1/4.
  EXPECT_NEAR(StudentTUpperTail(1, 1), 0.25, 1e-12);
  // dof 2: P(T > t) = 1/2 - t / (2 sqrt(t^2 + 2)); t = 2: 1/2 - 1/sqrt(6) = 0.0917517.
  EXPECT_NEAR(StudentTUpperTail(2, 2), 0.5 - 1 / std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(StudentTUpperTail(-2, 2), 0.5 + 1 / std::sqrt(6.0), 1e-12);
}

TEST(DistributionsTest, StudentQuantileMatchesTables) {
  // Two-sided 95% with 2 dof, one-sided 95% with 5 dof, 99% with 10, 95% with 1.
  EXPECT_NEAR(StudentTUpperQuantile(0.025, 2), 4.302652730, 1e-8);
  EXPECT_NEAR(StudentTUpperQuantile(0.05, 5), 2.015048373, 1e-8);
  EXPECT_NEAR(StudentTUpperQuantile(0.01, 10), 2.763769458, 1e-8);
  EXPECT_NEAR(StudentTUpperQuantile(0.025, 1), 12.70620474, 1e-6);
  EXPECT_NEAR(StudentTUpperQuantile(0.975, 2), -4.302652730, 1e-8);
}

TEST(DistributionsTest, StudentQuantileInvertsTheTailForFractionalDof) {
  // Effective sample sizes are rarely whole numbers.
  for (double dof : {1.3, 3.7, 11.25}) {
    for (double p : {0.0004, 0.01, 0.2}) {
      EXPECT_NEAR(StudentTUpperTail(StudentTUpperQuantile(p, dof), dof), p, p * 1e-6);
    }
  }
  // More degrees of freedom, thinner tails, smaller quantile.
  EXPECT_GT(StudentTUpperQuantile(0.01, 3.5), StudentTUpperQuantile(0.01, 4));
  EXPECT_LT(StudentTUpperQuantile(0.01, 3.5), StudentTUpperQuantile(0.01, 3));
}

}  // namespace
}  // namespace allocguard::memory
