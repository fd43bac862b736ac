#include "operator/memory/group_sequential.h"

#include <gtest/gtest.h>

#include <vector>

namespace allocguard::memory {
namespace {

TEST(GroupSequentialTest, OneLookUsesTheWholeBudget) {
  const std::vector<double> info = {7};
  const auto levels = SpendingNominalLevels(info, 0.01, 2);
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_NEAR(levels[0], 0.01, 1e-9);
}

TEST(GroupSequentialTest, TwoLooksMatchTheBivariateNormalByHand) {
  // Information 1 and 2, alpha 0.05 spent linearly (rho 1): 0.025 at t = 0.5,
  // so c1 = 1.959964. corr(Z1, Z2) = sqrt(1/2); c2 solves
  // P(Z1 < 1.959964, Z2 >= c2) = 0.025, i.e. the integral over z1 < c1 of
  // phi(z1) * Q((c2 - 0.7071 z1) / 0.7071), computed independently by a
  // 200 000-point trapezoid rule: c2 = 1.807072, P(Z > c2) = 0.035376.
  // Bonferroni would give each look 0.025; the correlation buys 41 % more at
  // the second.
  const std::vector<double> info = {1, 2};
  const auto levels = SpendingNominalLevels(info, 0.05, 1);
  ASSERT_EQ(levels.size(), 2u);
  EXPECT_NEAR(levels[0], 0.025, 1e-9);
  EXPECT_NEAR(levels[1], 0.035376, 2e-5);
  EXPECT_NEAR(CrossingProbability(info, levels), 0.05, 1e-5);
}

TEST(GroupSequentialTest, TwelveLooksOfTheJudgeSpendExactlyTheBudget) {
  std::vector<double> info;
  for (double n = 3; n <= 14; ++n) info.push_back(n * (n * n - 1) / 12);
  for (double rho : {1.0, 1.5, 3.0}) {
    const auto levels = SpendingNominalLevels(info, 0.008, rho);
    EXPECT_NEAR(CrossingProbability(info, levels), 0.008, 1e-6) << rho;
    double bonferroni = 0;
    for (double p : levels) bonferroni += p;
    // The looks are correlated, so the nominal levels add up to more than the
    // budget: that is what Bonferroni gave away.
    EXPECT_GT(bonferroni, 0.008 * 1.2) << rho;
    // Power spending with rho > 0 spends something at every look, more when
    // rho is small.
    EXPECT_GT(levels[0], 0);
  }
  EXPECT_GT(SpendingNominalLevels(info, 0.008, 1)[0], SpendingNominalLevels(info, 0.008, 3)[0]);
  EXPECT_LT(SpendingNominalLevels(info, 0.008, 1)[11], SpendingNominalLevels(info, 0.008, 3)[11]);
}

TEST(GroupSequentialTest, PowerSpendingIsAlphaTimesTToTheRho) {
  EXPECT_DOUBLE_EQ(PowerSpending(0.01, 0.5, 2), 0.0025);
  EXPECT_DOUBLE_EQ(PowerSpending(0.01, 1, 2), 0.01);
  EXPECT_DOUBLE_EQ(PowerSpending(0.01, 0, 2), 0);
}

}  // namespace
}  // namespace allocguard::memory
