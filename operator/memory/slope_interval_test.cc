#include "operator/memory/slope_interval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "operator/memory/floor_judge.h"
#include "operator/memory/floor_trace_generator.h"

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

// The difference-based noise estimate (SlopeNoise::kDifferences) by hand.
// Floors alternating -5, +5 MiB at minutes 1..8: the one-minute differences
// +10 -10 +10 -10 +10 -10 +10 are symmetric about their middle, so their line
// is flat at their mean 10/7; their spread is (4 (60/7)^2 + 3 (80/7)^2) / (7 - 2)
// = 33600 / 245 = 137.142857. The two-minute differences are all 0, so
// r = 0 / 137.14 - 1 = -1, clamped to 0, and s^2 = 137.142857 / 2 = 68.571429.
// The slope's variance is s^2 / Sxx = 68.571429 / 42: se 1.277753 MiB/min.
TEST(DifferenceNoiseTest, HandComputedAlternatingFloors) {
  auto floors = FloorsMiB({-5, 5, -5, 5, -5, 5, -5, 5});
  SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_NEAR(iv.slope / kBytesPerMiB, 20.0 / 42, 1e-12);  // Sxy 20, Sxx 42
  EXPECT_DOUBLE_EQ(iv.lag1_autocorrelation, 0);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 1.277753, 1e-6);
  EXPECT_DOUBLE_EQ(iv.dof, 6);
  EXPECT_NEAR(iv.low, iv.slope - iv.t_quantile * iv.std_error, 1e-6);
}

// A curved climb adds nothing to the estimate: each difference series is
// taken around its own line, and a quadratic's differences are linear. The
// same alternation on a decelerating climb 100 m - 5 m^2 gives the same noise.
TEST(DifferenceNoiseTest, ADeceleratingClimbDoesNotInflateTheNoise) {
  std::vector<MinuteFloor> floors;
  for (int m = 1; m <= 8; ++m) {
    const double mib = 1000 + 100 * m - 5 * m * m + (m % 2 ? -5 : 5);
    floors.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB, .samples = 30});
  }
  SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_DOUBLE_EQ(iv.lag1_autocorrelation, 0);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 1.277753, 1e-6);
  // The climb's slope: 100 - 5 * sum (m - 4.5) m^2 / 42 = 100 - 5 * 378 / 42 = 55.
  EXPECT_NEAR(iv.slope / kBytesPerMiB, 55 + 20.0 / 42, 1e-9);
}

// Slow wander: floors (MiB above 300) 0 10 20 30 20 10 0 -10 0 10 20 at
// minutes 1..11, no trend in truth. The one-minute differences
// 10 10 10 -10 -10 -10 -10 10 10 10 are symmetric (flat line at their mean 2):
// spread (6 * 8^2 + 4 * 12^2) / 8 = 120. The two-minute differences
// 20 20 0 -20 -20 -20 0 20 20 are too (mean 20/9): spread
// (4 (160/9)^2 + 2 (20/9)^2 + 3 (200/9)^2) / 7 = 223200 / 567 = 393.650794.
// r = 393.65 / 120 - 1 = 2.28, clamped to 0.9: the floors wander as far as
// the model allows. s^2 = 120 / (2 (1 - 0.9)) = 600 MiB^2. The slope (Sxy =
// -60, Sxx = 110: -0.545455 MiB/min) then has variance
// s^2 sum_ab (a-6)(b-6) 0.9^|a-b| / Sxx^2 = 600 * 180.670858 / 12100 =
// 8.958886: se 2.993140 MiB/min, 1.28 times the sqrt(600 / 110) = 2.335497
// of the same noise taken as independent.
TEST(DifferenceNoiseTest, HandComputedWanderIsSeenAsCorrelated) {
  auto floors = FloorsMiB({300, 310, 320, 330, 320, 310, 300, 290, 300, 310, 320});
  SlopeInterval diff = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(diff.valid);
  EXPECT_NEAR(diff.slope / kBytesPerMiB, -60.0 / 110, 1e-9);
  EXPECT_EQ(diff.outlier_minute, 0);
  EXPECT_DOUBLE_EQ(diff.lag1_autocorrelation, 0.9);
  EXPECT_NEAR(diff.std_error / kBytesPerMiB, 2.993140, 1e-6);
  EXPECT_NEAR(diff.std_error / kBytesPerMiB / std::sqrt(600.0 / 110), 1.281586, 1e-6);
}

// One outlier minute. The alternating floors -5 +5 at minutes 1..9 with
// minute 5 held 300 MiB high: -5 5 -5 5 295 5 -5 5 -5. The one-minute
// differences 10 -10 10 290 -290 -10 10 -10 stand out at minute 5's two
// neighbours in opposite directions, so minute 5 is left out. The
// differences that do not touch it, +10 -10 +10 -10 +10 -10 at positions
// 0 1 2 5 6 7 (mean 0, positions' mean 3.5, Sxx 41.5, Sxy -50, line slope
// -100/83), leave residuals 480 -1080 680 -680 1080 -480 (/83): spread
// 2 (480^2 + 1080^2 + 680^2) / 83^2 / (6 - 2) = 11200/83 = 134.939759. The
// two-minute differences that do not touch it are all 0, so r = -1, clamped
// to 0, and s^2 = 5600/83. The other floors' slope is 0 (minutes 1-4 and
// 6-9, Sxy 0, Sxx 60), its variance 5600/83/60 = 280/249: se 1.060423
// MiB/min with 8 - 2 dof. Without leaving it out the same estimate is
// 19.51 MiB/min (one-minute spread 27675 MiB^2), eighteen times as wide,
// and the slope 300 (5 - 5) / 60 = 0 only because the minute is central.
TEST(DifferenceNoiseTest, HandComputedOneOutlierMinuteIsLeftOut) {
  auto floors = FloorsMiB({-5, 5, -5, 5, 295, 5, -5, 5, -5});
  SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_EQ(iv.outlier_minute, 5);
  EXPECT_NEAR(iv.slope / kBytesPerMiB, 0, 1e-12);
  EXPECT_DOUBLE_EQ(iv.lag1_autocorrelation, 0);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, std::sqrt(280.0 / 249), 1e-9);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 1.060423, 1e-6);
  EXPECT_DOUBLE_EQ(iv.dof, 6);
  // The clean floors (nothing left out) give nearly the same: 8000/63 spread,
  // se sqrt(8000/63 / 2 / 60) = 1.028689 MiB/min.
  SlopeInterval clean = FitSlopeInterval(FloorsMiB({-5, 5, -5, 5, -5, 5, -5, 5, -5}), 0.025,
                                         SlopeNoise::kDifferences);
  EXPECT_EQ(clean.outlier_minute, 0);
  EXPECT_NEAR(clean.std_error / kBytesPerMiB, 1.028689, 1e-6);
}

// Near the end of a run, the minute left out also leaves the slope: with
// minute 8 held 300 MiB high the least-squares slope of all nine floors is
// 300 (8 - 5) / 60 = +15 MiB/min above the truth; the interval's slope is the
// other eight floors'.
TEST(DifferenceNoiseTest, AnOutlierMinuteNearTheEndDoesNotMoveTheSlope) {
  auto floors = FloorsMiB({-5, 5, -5, 5, -5, 5, -5, 305, -5});
  SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_EQ(iv.outlier_minute, 8);
  // Minutes 1-7 and 9 (mean 37/8, Sxx 399/8) with -5 5 -5 5 -5 5 -5 -5: Sxy
  // -75/4, slope -50/133 MiB/min.
  const SlopeFit all = FitFloorSlope(floors);
  EXPECT_NEAR(all.slope_bytes_per_minute / kBytesPerMiB, 15, 1e-9);
  EXPECT_NEAR(iv.slope / kBytesPerMiB, -50.0 / 133, 1e-9);
}

// A jump at the first or last minute moves one difference only: it cannot be
// told from a step, or from growth that has just started, and stays in.
TEST(DifferenceNoiseTest, AJumpAtTheLastMinuteIsNotLeftOut) {
  SlopeInterval iv = FitSlopeInterval(FloorsMiB({-5, 5, -5, 5, -5, 5, -5, 5, 295}), 0.025,
                                      SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_EQ(iv.outlier_minute, 0);
  EXPECT_GT(iv.std_error / kBytesPerMiB, 5);
}

// The same outlier on a decelerating climb 1000 + 100 m - 5 m^2: the
// differences that do not touch minute 5 are the alternation's plus a line,
// which their own line absorbs, so the noise is the flat case's (se
// 1.060423 MiB/min); the slope is the climb's over the other floors.
TEST(DifferenceNoiseTest, AnOutlierMinuteOnACurvedClimbIsLeftOutToo) {
  std::vector<MinuteFloor> floors;
  for (int m = 1; m <= 9; ++m) {
    const double mib = 1000 + 100 * m - 5 * m * m + (m % 2 ? -5 : 5) + (m == 5 ? 300 : 0);
    floors.push_back({.minute = m, .floor_bytes = mib * kBytesPerMiB, .samples = 30});
  }
  SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences);
  ASSERT_TRUE(iv.valid);
  EXPECT_EQ(iv.outlier_minute, 5);
  EXPECT_DOUBLE_EQ(iv.lag1_autocorrelation, 0);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 1.060423, 1e-6);
  // 100 - 5 * sum over minutes 1-4, 6-9 of (m - 5) m^2 / 60 = 100 - 5 * 600 / 60 = 50.
  EXPECT_NEAR(iv.slope / kBytesPerMiB, 50, 1e-9);
}

// How often the screen leaves a minute out: rarely on Gaussian floors
// without an outlier, almost always when one interior minute is 300 MiB high
// in noise of sd 25 MiB (12 sd). When written, of 2000 traces: 34 (15-minute
// runs) and 20 (30-minute runs) under independent noise, 25 and 6 under
// AR(1) 0.5, 18 and 1 under AR(1) 0.9; with the outlier 1939 and 1995.
TEST(DifferenceNoiseTest, TheScreenLeavesOutOutliersNotOrdinaryNoise) {
  constexpr int kTraces = 2000;
  struct Case {
    double sd, ar1, outlier;
    int minutes;
  };
  for (const Case c :
       {Case{25, 0, 0, 15}, Case{25, 0, 0, 30}, Case{50, 0.5, 0, 15}, Case{50, 0.5, 0, 30},
        Case{30, 0.9, 0, 15}, Case{30, 0.9, 0, 30}, Case{25, 0, 300, 15}, Case{25, 0, 300, 30}}) {
    int left_out = 0;
    for (int seed = 0; seed < kTraces; ++seed) {
      TraceSpec spec{.noise_sd_mib = c.sd, .noise_ar1 = c.ar1, .minutes = c.minutes};
      if (c.outlier > 0) {
        spec.outlier_mib = c.outlier;
        spec.outlier_minute = 2 + seed % (c.minutes - 3);  // interior: 2 .. minutes - 2
      }
      const auto floors = GenerateFloorTrace(spec, static_cast<uint64_t>(seed));
      left_out += FitSlopeInterval(floors, 0.025, SlopeNoise::kDifferences).outlier_minute != 0;
    }
    if (c.outlier > 0) {
      EXPECT_GE(left_out, kTraces * 95 / 100) << c.minutes;
    } else {
      EXPECT_LE(left_out, kTraces * 25 / 1000) << c.sd << " " << c.ar1 << " " << c.minutes;
    }
  }
}

// The ceiling of the large-steps rule by hand. Three floors at minutes 1..3
// under AR(1) noise: the slope is (y3 - y1) / 2, variance s^2 (1 - r^2) / 2,
// largest at r = 0. Four floors: s^2 (5 + 2.5 r - 3 r^2 - 4.5 r^3) / 25, whose
// largest value on the 0.05 grid is at r = 0.25: 5.3671875 / 25 s^2.
// The whole-run estimate with the screen: minute 5 of the alternating floors
// held 300 MiB high is left out, and the other eight, at x = m - 5 = -4 -3 -2
// -1 1 2 3 4 with values -5 5 -5 5 5 -5 5 -5, are fitted by a quadratic. The
// values are even in x, so the slope is 0 and the quadratic a + c x^2 solves
// [8 60; 60 708] (a c) = (0 -100): a = 6000/2064, c = -800/2064. Residuals
// -1.705426 5.581395 -6.356589 2.480620 (mirrored), SSE = 200 - 100 * 800/2064
// = 161.240310; lag-1 -0.715564, + 3/8 for the bias, clamped to 0; se =
// sqrt(161.240310 / (8 - 3) / 60) = 0.733122 MiB/min with 6 degrees of
// freedom.
TEST(ScreenedQuadraticNoiseTest, HandComputedOneOutlierMinuteIsLeftOut) {
  const auto floors = FloorsMiB({-5, 5, -5, 5, 295, 5, -5, 5, -5});
  const SlopeInterval iv = FitSlopeInterval(floors, 0.025, SlopeNoise::kScreenedQuadraticResiduals);
  ASSERT_TRUE(iv.valid);
  EXPECT_EQ(iv.outlier_minute, 5);
  EXPECT_NEAR(iv.slope / kBytesPerMiB, 0, 1e-9);
  EXPECT_NEAR(iv.lag1_autocorrelation, -0.715564, 1e-6);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, std::sqrt((200 - 100 * 800.0 / 2064) / 5 / 60), 1e-9);
  EXPECT_NEAR(iv.std_error / kBytesPerMiB, 0.733122, 1e-6);
  EXPECT_DOUBLE_EQ(iv.dof, 6);
  // Without the screen the minute inflates the residuals: the interval is
  // more than ten times as wide.
  const SlopeInterval plain = FitSlopeInterval(floors, 0.025);
  EXPECT_EQ(plain.outlier_minute, 0);
  EXPECT_GT(plain.std_error, 10 * iv.std_error);
}

// Below kOutlierScreenMinFloors floors, or with nothing that stands out, the
// screened estimate is the plain one.
TEST(ScreenedQuadraticNoiseTest, NoOutlierOrTooFewFloorsChangesNothing) {
  for (const auto& floors :
       {FloorsMiB({-5, 5, -5, 5, -5, 5, -5, 5, -5}), FloorsMiB({-5, 5, -5, 295, 5, -5, 5})}) {
    const SlopeInterval screened =
        FitSlopeInterval(floors, 0.025, SlopeNoise::kScreenedQuadraticResiduals);
    const SlopeInterval plain = FitSlopeInterval(floors, 0.025);
    EXPECT_EQ(screened.outlier_minute, 0);
    EXPECT_DOUBLE_EQ(screened.std_error, plain.std_error);
    EXPECT_DOUBLE_EQ(screened.slope, plain.slope);
    EXPECT_DOUBLE_EQ(screened.dof, plain.dof);
  }
}

TEST(WorstCaseSlopeVarianceTest, HandComputedShortRuns) {
  const double s = 64 * kBytesPerMiB;
  auto three = FloorsMiB({0, 0, 0});
  EXPECT_NEAR(Ar1SlopeVariance(three, s, 0.5), s * s * 0.75 / 2, 1e-6 * s * s);
  EXPECT_NEAR(WorstCaseSlopeVariance(three, s, 0.9), s * s / 2, 1e-9 * s * s);
  auto four = FloorsMiB({0, 0, 0, 0});
  EXPECT_NEAR(WorstCaseSlopeVariance(four, s, 0.9), s * s * 5.3671875 / 25, 1e-9 * s * s);
  EXPECT_NEAR(WorstCaseSlopeVariance(four, s, 0.9), Ar1SlopeVariance(four, s, 0.25), 1e-9 * s * s);
  // With the correlation capped at 0.2 the grid's last point is the worst.
  EXPECT_NEAR(WorstCaseSlopeVariance(four, s, 0.2), s * s * (5 + 0.5 - 0.12 - 0.036) / 25,
              1e-9 * s * s);
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
