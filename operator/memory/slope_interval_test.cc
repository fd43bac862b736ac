#include "operator/memory/slope_interval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace allocguard::memory {
namespace {

std::vector<MinuteFloor> FloorsMiB(std::initializer_list<double> mib, int first_minute = 1) {
  std::vector<MinuteFloor> out;
  int m = first_minute;
  for (double v : mib)
    out.push_back({.minute = m++, .floor_bytes = v * kBytesPerMiB, .samples = 30});
  return out;
}

TEST(FitSlopeIntervalTest, HandComputedWithoutCorrelation) {
  // Floors 100, 110, 130, 140 MiB at minutes 1..4 (as in floor_judge_test):
  // slope 14 MiB/min, residuals 1, -3, 3, -1, SSE 20, Sxx 5.
  // lag-1: (1*-3 + -3*3 + 3*-1) / 20 = -15/20 = -0.75; bias-corrected
  // -0.75 + 2/4 = -0.25, clamped to 0, so n_eff = n = 4.
  // se = sqrt(20 / (4-2) / 5 * 4/4) = sqrt(2) MiB/min; t(2 dof, 2.5%) = 4.302653;
  // interval 14 -/+ 4.302653 * 1.414214 = 14 -/+ 6.084870 = [7.915130, 20.084870] MiB/min.
  SlopeInterval iv = FitSlopeInterval(FloorsMiB({100, 110, 130, 140}), 0.025);
  ASSERT_TRUE(iv.valid);
  EXPECT_DOUBLE_EQ(iv.slope / kBytesPerMiB, 14);
  EXPECT_DOUBLE_EQ(iv.lag1_autocorrelation, -0.75);
  EXPECT_DOUBLE_EQ(iv.effective_n, 4);
  EXPECT_DOUBLE_EQ(iv.dof, 2);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(iv.t_quantile, 4.302653, 1e-6);
  EXPECT_NEAR(iv.low / kBytesPerMiB, 7.915130, 1e-5);
  EXPECT_NEAR(iv.high / kBytesPerMiB, 20.084870, 1e-5);
}

TEST(FitSlopeIntervalTest, HandComputedWithPositiveCorrelationWidensTheInterval) {
  // Floors (10 MiB units) 1 1 -1 -1 1 1 1 1 -1 -1 1 1 at minutes 1..12: symmetric
  // about the middle, so the least-squares slope is 0.
  // With 12 >= 6 floors the noise is estimated around a quadratic. In centred
  // x = minute - 6.5 (Sx = Sx^3 = 0, Sx^2 = 143, Sx^4 = 3038.75, Sy = 4,
  // Sx^2 y = 69) the normal equations 12a + 143c = 4, 143a + 3038.75c = 69
  // give c = 256 / 16016 = 0.0159840 and a = (4 - 143c) / 12 = 0.142857.
  // Residuals y - a - c x^2: 0.373626 0.533467 -1.338661 -1.242757 0.821179
  // 0.853147, mirrored. SSE = 10.325674; lag-1 sum / SSE: r = 0.231037.
  // Bias-corrected for a 3-parameter fit: r1 = r + (3 + 6r) / 12 = 0.596556;
  // n_eff = 12 (1 - r1) / (1 + r1) = 3.032360.
  // se^2 = SSE / (12 - 3) / 143 * 12 / n_eff: se = 0.178185; t(10 dof, 2.5%) =
  // 2.228139 gives the half-width 0.397020 (x 10 MiB/min).
  SlopeInterval iv =
      FitSlopeInterval(FloorsMiB({10, 10, -10, -10, 10, 10, 10, 10, -10, -10, 10, 10}), 0.025);
  ASSERT_TRUE(iv.valid);
  EXPECT_NEAR(iv.slope, 0, 1e-6);
  EXPECT_NEAR(iv.lag1_autocorrelation, 0.231037, 1e-6);
  EXPECT_NEAR(iv.effective_n, 3.032360, 1e-5);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 1.78185, 1e-4);
  EXPECT_NEAR(iv.high / kBytesPerMiB, 3.97020, 1e-3);
  EXPECT_NEAR(iv.low / kBytesPerMiB, -3.97020, 1e-3);
  // Taken as independent, the same residuals give se = 10 sqrt(SSE / 9 / 143)
  // MiB/min; the correlation made the interval sqrt(12 / 3.032360) = 1.98930x wider.
  EXPECT_NEAR(iv.std_error / kBytesPerMiB / (10 * std::sqrt(10.325674 / 9 / 143)), 1.98930, 1e-4);
}

TEST(FitSlopeIntervalTest, DeceleratingRatchetIsNotMistakenForCorrelatedNoise) {
  // Floors of a real glibc run with 512 arenas (MiB, minutes 1..9): the floor
  // rose 1515 MiB in 8 minutes, fast at first and slower as arenas filled.
  // Around a straight line that curve leaves residuals with lag-1 correlation
  // 0.40, which the bias correction would take to 0.89 and an interval 4x
  // wider; around a quadratic the residual correlation is 0.27.
  auto floors = FloorsMiB({1343.0, 1491.9, 1568.9, 1965.0, 2453.9, 2622.8, 2770.2, 2831.4, 2858.0});
  SlopeInterval iv = FitSlopeInterval(floors, 0.004);
  ASSERT_TRUE(iv.valid);
  EXPECT_NEAR(iv.lag1_autocorrelation, 0.27, 0.01);
  EXPECT_GT(BytesPerMinuteToGiBPerHour(iv.low), 0.5);  // clearly above the threshold
}

TEST(FitSlopeIntervalTest, NoIntervalFromTwoFloors) {
  SlopeInterval iv = FitSlopeInterval(FloorsMiB({100, 200}), 0.025);
  EXPECT_FALSE(iv.valid);
  EXPECT_DOUBLE_EQ(iv.slope / kBytesPerMiB, 100);
  EXPECT_TRUE(std::isinf(iv.low) && iv.low < 0);
  EXPECT_TRUE(std::isinf(iv.high) && iv.high > 0);
}

TEST(FitSlopeIntervalTest, SmallerAlphaGivesAWiderInterval) {
  auto floors = FloorsMiB({100, 112, 119, 135, 139, 151});
  SlopeInterval wide = FitSlopeInterval(floors, 0.0005);
  SlopeInterval narrow = FitSlopeInterval(floors, 0.05);
  EXPECT_LT(wide.low, narrow.low);
  EXPECT_GT(wide.high, narrow.high);
  EXPECT_DOUBLE_EQ(wide.slope, narrow.slope);
}

TEST(TheilSenSlopeTest, OneOutlierMinuteDoesNotMoveIt) {
  // 100 110 120 130 and a 500 MiB last minute. Pairwise slopes: six pairs among
  // the first four give 10; pairs with minute 5: 100, 130, 190, 370.
  // Sorted: 10 x6, 100, 130, 190, 370; median (10 values) = (10 + 10) / 2 = 10.
  // Least squares is dragged to 82 MiB/min: Sxy = 820, Sxx = 10.
  auto floors = FloorsMiB({100, 110, 120, 130, 500});
  EXPECT_DOUBLE_EQ(TheilSenSlope(floors) / kBytesPerMiB, 10);
  EXPECT_DOUBLE_EQ(FitSlopeInterval(floors, 0.025).slope / kBytesPerMiB, 82);
}

TEST(TheilSenSlopeTest, OddNumberOfPairsAndGaps) {
  // Floors 100, 120, 130 MiB at minutes 1, 2, 4 (minute 3 missing):
  // (120-100)/1 = 20, (130-100)/3 = 10, (130-120)/2 = 5: median 10.
  std::vector<MinuteFloor> floors = {{.minute = 1, .floor_bytes = 100 * kBytesPerMiB},
                                     {.minute = 2, .floor_bytes = 120 * kBytesPerMiB},
                                     {.minute = 4, .floor_bytes = 130 * kBytesPerMiB}};
  EXPECT_DOUBLE_EQ(TheilSenSlope(floors) / kBytesPerMiB, 10);
  EXPECT_EQ(TheilSenSlope(std::span<const MinuteFloor>(floors).first(1)), 0);
}

TEST(SlopeUnitsTest, GiBPerHourRoundTrip) {
  // 0.5 GiB/h = 512 MiB / 60 min = 8.5333 MiB/min.
  EXPECT_NEAR(GiBPerHourToBytesPerMinute(0.5) / kBytesPerMiB, 512.0 / 60, 1e-12);
  EXPECT_DOUBLE_EQ(BytesPerMinuteToGiBPerHour(GiBPerHourToBytesPerMinute(2.5)), 2.5);
}

}  // namespace
}  // namespace allocguard::memory
