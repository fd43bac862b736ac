#include "operator/memory/trend_tests.h"

#include <gtest/gtest.h>

#include <vector>

namespace allocguard::memory {
namespace {

std::vector<MinuteFloor> Floors(std::initializer_list<double> values) {
  std::vector<MinuteFloor> out;
  int m = 1;
  for (double v : values) out.push_back({.minute = m++, .floor_bytes = v, .samples = 30});
  return out;
}

TEST(MannKendallTest, HandComputedSmallTable) {
  // 1 3 2 5 4. Signs of later-minus-earlier: from 1: + + + + (4); from 3: - + + (1);
  // from 2: + + (2); from 5: - (-1). S = 6. Var = 5*4*15/18 = 16.6667.
  // Theil–Sen 0.875 (median of -1 -1 1/3 1/2 3/4 1 1 4/3 2 3); detrended
  // 0.125 1.25 -0.625 1.5 -0.375 has lag-1 -0.838 < 0: no correction (factor 1).
  // z = (6 - 1) / sqrt(16.6667) = 1.224745; p = P(Z >= 1.224745) = 0.110336.
  MannKendallResult r = MannKendallTest(Floors({1, 3, 2, 5, 4}));
  EXPECT_EQ(r.s, 6);
  EXPECT_NEAR(r.variance, 300.0 / 18, 1e-12);
  EXPECT_NEAR(r.detrended_lag1, -0.837607, 1e-6);
  EXPECT_DOUBLE_EQ(r.correction_factor, 1);
  EXPECT_NEAR(r.z, 1.224745, 1e-6);
  EXPECT_NEAR(r.p_increasing, 0.110336, 1e-6);
  EXPECT_NEAR(r.p_decreasing, 1 - 0.110336, 1e-6);
}

TEST(MannKendallTest, TiesReduceTheVariance) {
  // 1 1 2: S = 0 + 1 + 1 = 2. One tie group of 2:
  // Var = (3*2*11 - 2*1*9) / 18 = 48/18 = 2.6667.
  MannKendallResult r = MannKendallTest(Floors({1, 1, 2}));
  EXPECT_EQ(r.s, 2);
  EXPECT_NEAR(r.variance, 48.0 / 18, 1e-12);
}

TEST(MannKendallTest, AutocorrelationInflatesTheVariance) {
  // 0 1 2 3 3 2 1 0 0 1 2 3 (a slow wave, no trend). S = 6 (ties count 0).
  // Four tie groups of 3: Var = (12*11*29 - 4*3*2*11) / 18 = 3564/18 = 198.
  // Theil–Sen slope 0; deviations from the mean 1.5 have c0 = 15, c1 = 8.25:
  // r1 = 0.55. Yue–Wang factor 1 + 2 sum_{k=1}^{11} (1 - k/12) 0.55^k = 2.992116.
  // z = (6 - 1) / sqrt(198 * 2.992116) = 0.205423, p = 0.418621.
  MannKendallResult r = MannKendallTest(Floors({0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3}));
  EXPECT_EQ(r.s, 6);
  EXPECT_NEAR(r.variance, 198, 1e-9);
  EXPECT_NEAR(r.detrended_lag1, 0.55, 1e-12);
  EXPECT_NEAR(r.correction_factor, 2.992116, 1e-6);
  EXPECT_NEAR(r.z, 0.205423, 1e-6);
  EXPECT_NEAR(r.p_increasing, 0.418621, 1e-6);
}

TEST(MannKendallTest, NullSlopeTestsForARiseSteeperThanIt) {
  // Rising exactly 10 per minute with a wobble of ±1: a clear trend against 0,
  // none against a null slope of 10.
  auto floors = Floors({10, 21, 30, 41, 50, 61, 70, 81});
  EXPECT_LT(MannKendallTest(floors, 0).p_increasing, 0.001);
  EXPECT_GT(MannKendallTest(floors, 10).p_increasing, 0.2);
  EXPECT_LT(MannKendallTest(floors, 20).p_decreasing, 0.001);
}

TEST(MannKendallTest, OneOutlierMovesSByAtMostTwiceNMinusOne) {
  auto level = Floors({5, 3, 6, 4, 5, 3, 6, 4});
  auto spiked = level;
  spiked.back().floor_bytes = 1e12;  // a huge last minute
  const double ds = MannKendallTest(spiked).s - MannKendallTest(level).s;
  EXPECT_LE(ds, 2 * 7);
  EXPECT_GT(MannKendallTest(spiked).p_increasing, 0.05);  // still no trend
}

TEST(MannKendallTest, TooFewOrAllEqualFloorsGiveNoEvidence) {
  EXPECT_EQ(MannKendallTest(Floors({1, 2})).p_increasing, 1);
  MannKendallResult same = MannKendallTest(Floors({7, 7, 7, 7}));
  EXPECT_EQ(same.s, 0);
  EXPECT_EQ(same.p_increasing, 1);
  EXPECT_EQ(same.p_decreasing, 1);
}

}  // namespace
}  // namespace allocguard::memory
